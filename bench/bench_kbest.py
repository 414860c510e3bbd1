"""Unique k-best extraction (Huang & Chiang 2005, Algorithm 3): the compiled kernel
(``service/forest/kbest/kernel.py``, the default engine of ``unique_kbest``) against the Python
reference (``engine="reference"``), alternating in one process on the same forests.

On 20 German dev queries of ``tr/de-en`` (``queries.dev.tsv``, second column, through
``service.text.preprocess``; lines of 2–40 tokens spread over the file), decoded with the demo
bundle ``models/demo-de-en`` (compiled decoder: array-backed forests, every measurement on a
freshly decoded forest so that no edge object is left over from another run), per sentence and
k = 5, 10, 100, 1000:

- **same work**: ``unique_kbest(..., max_derivations=100·k)`` with each engine — identical
  output (checked: trees, scores, strings, features), so the time ratio is the speed of the
  search alone (set-up, Viterbi pass and building the derivation records included);
- **budget**: ``unique_kbest`` with its default time budget (``UNIQUE_KBEST_TIME_BUDGET_S``)
  with each engine — time, distinct strings delivered, how often fewer than k came back (and
  whether the budget ran out or the forest had no more strings), how many derivations of the
  goal each examined, edge objects made. The shorter list must be a prefix of the longer.

Python first on even sentences, compiled first on odd; this shared 2-core machine is noisy,
so ratios are per sentence, summarised by their median. The figures of the previous version
(the object-based extractor with its cap of 100·k derivations against the array-based Python
one) are kept in ``bench/results/kbest_before.json``.

Writes ``bench/results/kbest.json`` (``--out``). Run: ``nice .venv/bin/python -m bench kbest``
(about 5 minutes; ``kbest-demo``: three sentences).
"""

from __future__ import annotations

import json
import math
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Annotated, Any

from bench.common import DATA, RESULTS_DIR, ROOT, Help, bundle_signature, write_result
from service.forest.hypergraph import Derivation, Hypergraph
from service.forest.inference import fast_viterbi, inside
from service.forest.kbest import UNIQUE_KBEST_TIME_BUDGET_S, LazyKBest, unique_kbest
from service.forest.kbest import compiled as kbest_compiled
from service.forest.semiring import COUNTING
from service.mt.bundle import load_bundle
from service.text import preprocess

OUT = RESULTS_DIR / "kbest.json"
SENTENCES = 20
KS = (5, 10, 100, 1000)
ENGINES = ("reference", "compiled")


def _sentences(n: int) -> list[list[str]]:
    lines = (DATA / "tr" / "de-en" / "queries.dev.tsv").read_text(encoding="utf-8").splitlines()
    toks = [preprocess(line.split("\t", 1)[-1], "de") for line in lines]
    eligible = [t for t in toks if 2 <= len(t) <= 40]
    step = len(eligible) / n
    return [eligible[int(i * step)] for i in range(n)]


def _made(hg: Hypergraph) -> int:
    """Edge objects made so far on an array-backed forest (all of them on a built one)."""
    items = getattr(hg.edges, "_items", None)
    return hg.num_edges if items is None else sum(x is not None for x in items)


class _Examined:
    """Derivations of the goal examined in the last run of each engine: the compiled one's read
    from its state after each call of the kernel (one Python call per chunk), the reference's
    from the ranks it asks :meth:`LazyKBest.entry` for (one wrapper call per derivation, ~1 %
    of the reference's time per derivation)."""

    def __init__(self) -> None:
        self.compiled = self.reference = 0
        step = kbest_compiled.Extraction.step
        entry = LazyKBest.entry

        def counted_step(ex: kbest_compiled.Extraction, limit: int) -> int:
            status = step(ex, limit)
            self.compiled = ex.examined
            return status

        def counted_entry(kb: LazyKBest, j: int, node: int | None = None) -> Any:
            if node is None:
                self.reference = j + 1
            return entry(kb, j, node)

        setattr(kbest_compiled.Extraction, "step", counted_step)  # noqa: B010
        setattr(LazyKBest, "entry", counted_entry)  # noqa: B010


def _record(ds: list[Derivation]) -> list[tuple[Any, ...]]:
    return [(d.tree, d.score, d.tokens, d.features) for d in ds]


def _timed(fn: Callable[[], list[Derivation]]) -> tuple[float, list[Derivation]]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def _median(xs: list[float], digits: int = 2) -> float:
    return round(statistics.median(xs), digits)


@dataclass(frozen=True)
class Params:
    sentences: Annotated[int, Help("dev sentences of tr/de-en")] = SENTENCES
    ks: Annotated[tuple[int, ...], Help("list sizes k")] = KS
    out: Annotated[Path, Help("JSON output")] = OUT


def run(p: Params) -> None:
    n, ks = p.sentences, p.ks
    bundle = load_bundle(ROOT / "models" / "demo-de-en")
    dec = bundle.decoder()
    weights = dec.weights
    sentences = _sentences(n)
    examined = _Examined()
    first = dec.forest(sentences[0]).hypergraph
    fast_viterbi(first, weights)  # numba kernels loaded outside the timings
    for engine in ENGINES:
        unique_kbest(first, weights, 2, engine=engine)  # type: ignore[arg-type]
    rows: list[dict[str, Any]] = []
    for i, toks in enumerate(sentences):
        forest = dec.forest(toks).hypergraph
        count = inside(forest, weights, COUNTING)[forest.goal]
        row: dict[str, Any] = {
            "tokens": len(toks),
            "nodes": forest.num_nodes,
            "edges": forest.num_edges,
            "log10_derivations": round(math.log10(count), 1) if count > 0 else None,
        }
        order = ENGINES if i % 2 == 0 else ENGINES[::-1]
        for k in ks:
            cell: dict[str, Any] = {}
            same: dict[str, list[Derivation]] = {}
            budget: dict[str, list[Derivation]] = {}
            for mode in ("same_work", "budget"):
                for engine in order:
                    hg = dec.forest(toks).hypergraph  # fresh: no edge object made yet
                    limit = 100 * k if mode == "same_work" else None
                    t, out = _timed(
                        partial(unique_kbest, hg, weights, k, limit, engine=engine)  # type: ignore[arg-type]
                    )
                    name = "py" if engine == "reference" else "c"
                    cell[f"{mode}_{name}_ms"] = round(1000 * t, 2)
                    cell[f"{mode}_{name}_strings"] = len(out)
                    cell[f"{mode}_{name}_edge_objects"] = _made(hg)
                    (same if mode == "same_work" else budget)[engine] = out
                    if mode == "budget":
                        cell[f"budget_{name}_examined"] = getattr(examined, engine)
                    if mode == "budget":
                        # fewer than k strings: did time run out, or the strings?
                        cell[f"budget_{name}_hit"] = (
                            len(out) < k and t >= UNIQUE_KBEST_TIME_BUDGET_S
                        )
            assert _record(same["reference"]) == _record(same["compiled"]), (toks, k)
            py, c = budget["reference"], budget["compiled"]
            m = min(len(py), len(c))  # the shorter list is a prefix of the longer
            assert _record(py)[:m] == _record(c)[:m], (toks, k)
            cell["same_work_speedup"] = round(cell["same_work_py_ms"] / cell["same_work_c_ms"], 2)
            row[f"k{k}"] = cell
        rows.append(row)
        print(json.dumps(row), file=sys.stderr)

    summary: dict[str, Any] = {}
    for k in ks:
        col = [r[f"k{k}"] for r in rows]
        s: dict[str, Any] = {
            "same_work_py_ms_median": _median([c["same_work_py_ms"] for c in col]),
            "same_work_c_ms_median": _median([c["same_work_c_ms"] for c in col]),
            "same_work_speedup_median": _median([c["same_work_speedup"] for c in col]),
            "same_work_speedup_min": min(c["same_work_speedup"] for c in col),
            "same_work_speedup_max": max(c["same_work_speedup"] for c in col),
            "same_work_fewer_than_k": sum(c["same_work_py_strings"] < k for c in col),
            "same_work_strings_total": sum(c["same_work_py_strings"] for c in col),
        }
        for name in ("py", "c"):
            s[f"budget_{name}_ms_median"] = _median([c[f"budget_{name}_ms"] for c in col])
            s[f"budget_{name}_ms_max"] = max(c[f"budget_{name}_ms"] for c in col)
            s[f"budget_{name}_fewer_than_k"] = sum(c[f"budget_{name}_strings"] < k for c in col)
            s[f"budget_{name}_fewer_than_k_budget_hit"] = sum(c[f"budget_{name}_hit"] for c in col)
            s[f"budget_{name}_strings_total"] = sum(c[f"budget_{name}_strings"] for c in col)
            s[f"budget_{name}_edge_objects_median"] = statistics.median(
                c[f"budget_{name}_edge_objects"] for c in col
            )
        for name in ("py", "c"):
            s[f"budget_{name}_examined_median"] = statistics.median(
                c[f"budget_{name}_examined"] for c in col
            )
            s[f"budget_{name}_examined_max"] = max(c[f"budget_{name}_examined"] for c in col)
        summary[f"k{k}"] = s
    results = {
        "model": "demo-de-en",
        "decoder": "compiled (array-backed forests)",
        "sentences": len(sentences),
        "time_budget_s": UNIQUE_KBEST_TIME_BUDGET_S,
        "edges_median": statistics.median(r["edges"] for r in rows),
        "summary": summary,
        "sentences_detail": rows,
    }
    write_result(p.out, results, p, signatures={"bundle": bundle_signature(bundle)})
    for key, s in summary.items():
        print(key, json.dumps(s))


if __name__ == "__main__":
    from bench.cli import main_for

    main_for("kbest")
