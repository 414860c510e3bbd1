"""Unique k-best extraction (Huang & Chiang 2005, Algorithm 3): array-based and time-bounded
against the previous object-based extractor with its cap of 100·k derivations.

On ~20 German dev queries of ``tr/de-en`` (``queries.dev.tsv``, second column, through
``service.text.preprocess``; lines of 2–40 tokens spread over the file), decoded with the demo
bundle ``models/demo-de-en``, per sentence and k:

- **old**: the previous ``unique_kbest`` (``tests/mt/test_kbest.py: old_unique_kbest``, kept
  verbatim there), which examines at most 100·k derivations;
- **new, same work**: ``unique_kbest(..., max_derivations=100·k)`` — the same derivations and
  output (checked), so the time ratio is the speed of the extractor alone;
- **new**: ``unique_kbest`` with its default time budget
  (``UNIQUE_KBEST_TIME_BUDGET_S``) — time and the number of distinct strings delivered.

Old and new alternate in one process (old first on even sentences, new first on odd), as this
shared 2-core machine is noisy; ratios are per sentence, summarised by their median. The
reference engine's forests have all their edge objects already; with the compiled engine (if it
imports) every measurement gets a freshly decoded array-backed forest, whose edge objects are
made on first access, and the number made is recorded too. For k = 5, 10, 100, 1000 it counts
the sentences on which fewer than k strings come back (old cap vs new budget) and, for the
new, whether the budget ran out or the forest had no more strings.

Writes ``bench/results/kbest.json``. Run: ``nice .venv/bin/python -m bench.bench_kbest``
(about 3–5 minutes).
"""

from __future__ import annotations

import json
import math
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from bench.common import DATA, RESULTS_DIR, ROOT
from service.mt.bundle import load_bundle
from service.mt.decoder import DecoderConfig
from service.mt.hypergraph import Derivation, Hypergraph
from service.mt.inference import fast_viterbi, inside
from service.mt.kbest import UNIQUE_KBEST_TIME_BUDGET_S, unique_kbest
from service.mt.semiring import COUNTING
from service.text import preprocess
from tests.mt.test_kbest import old_unique_kbest

OUT = RESULTS_DIR / "kbest.json"
SENTENCES = 20
KS_REFERENCE = (5, 10, 100, 1000)
KS_COMPILED = (5, 100, 1000)


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


def _timed(fn: Callable[[], list[Derivation]]) -> tuple[float, list[Derivation]]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def _extract(
    name: str, hg: Hypergraph, weights: dict[str, float], k: int
) -> Callable[[], list[Derivation]]:
    if name == "old":
        return lambda: old_unique_kbest(hg, weights, k)
    if name == "same":
        return lambda: unique_kbest(hg, weights, k, max_derivations=100 * k)
    return lambda: unique_kbest(hg, weights, k)


def _key(ds: list[Derivation]) -> list[tuple[tuple[str, ...], float]]:
    return [(d.tokens, d.score) for d in ds]


def _run(
    engine: str, ks: tuple[int, ...], sentences: list[list[str]], bundle: Any
) -> dict[str, Any]:
    dec = bundle.decoder(DecoderConfig(engine=engine))  # type: ignore[arg-type]
    weights = dec.weights
    fresh = engine != "reference"  # array-backed: decode anew so no edge object is left over
    first = dec.forest(sentences[0]).hypergraph
    fast_viterbi(first, weights)  # numba kernels loaded outside the timings
    unique_kbest(first, weights, 2)
    rows: list[dict[str, Any]] = []
    for i, toks in enumerate(sentences):
        forest = dec.forest(toks).hypergraph
        row: dict[str, Any] = {"tokens": len(toks), "nodes": forest.num_nodes}
        row["edges"] = forest.num_edges
        if not fresh:
            count = inside(forest, weights, COUNTING)[forest.goal]
            row["log10_derivations"] = round(math.log10(count), 1) if count > 0 else None
        for k in ks:
            runs: dict[str, tuple[float, list[Derivation], int]] = {}
            order = ("old", "same", "new") if i % 2 == 0 else ("new", "same", "old")
            for name in order:
                hg = dec.forest(toks).hypergraph if fresh else forest
                t, out = _timed(_extract(name, hg, weights, k))
                runs[name] = (t, out, _made(hg))
            (t_old, old, made_old), (t_same, same, made_same) = runs["old"], runs["same"]
            t_new, new, made_new = runs["new"]
            assert _key(old) == _key(same), (toks, k)
            m = min(len(old), len(new))  # the shorter list is a prefix of the longer
            assert _key(new)[:m] == _key(old)[:m], (toks, k)
            cell: dict[str, Any] = {
                "old_ms": round(1000 * t_old, 2),
                "same_work_ms": round(1000 * t_same, 2),
                "same_work_speedup": round(t_old / t_same, 2),
                "new_ms": round(1000 * t_new, 2),
                "old_strings": len(old),
                "new_strings": len(new),
                # fewer than k strings within the budget: did time run out, or the strings?
                "new_budget_hit": len(new) < k and t_new >= UNIQUE_KBEST_TIME_BUDGET_S,
            }
            if fresh:
                cell |= {"old_edge_objects": made_old, "same_work_edge_objects": made_same}
                cell["new_edge_objects"] = made_new
            row[f"k{k}"] = cell
        rows.append(row)
        print(engine, json.dumps(row), file=sys.stderr)
    summary: dict[str, Any] = {}
    for k in ks:
        col = [r[f"k{k}"] for r in rows]
        s: dict[str, Any] = {
            "old_ms_median": round(statistics.median(c["old_ms"] for c in col), 2),
            "same_work_ms_median": round(statistics.median(c["same_work_ms"] for c in col), 2),
            "same_work_speedup_median": round(
                statistics.median(c["same_work_speedup"] for c in col), 2
            ),
            "same_work_speedup_min": min(c["same_work_speedup"] for c in col),
            "new_ms_median": round(statistics.median(c["new_ms"] for c in col), 2),
            "new_ms_max": max(c["new_ms"] for c in col),
            "old_fewer_than_k": sum(c["old_strings"] < k for c in col),
            "new_fewer_than_k": sum(c["new_strings"] < k for c in col),
            "new_fewer_than_k_budget_hit": sum(c["new_budget_hit"] for c in col),
            "old_strings_total": sum(c["old_strings"] for c in col),
            "new_strings_total": sum(c["new_strings"] for c in col),
        }
        if fresh:
            for name in ("old", "same_work", "new"):
                s[f"{name}_edge_objects_median"] = statistics.median(
                    c[f"{name}_edge_objects"] for c in col
                )
            s["edges_median"] = statistics.median(r["edges"] for r in rows)
        summary[f"k{k}"] = s
    return {"engine": engine, "summary": summary, "sentences": rows}


def main(n: int = SENTENCES) -> None:
    bundle = load_bundle(ROOT / "models" / "demo-de-en")
    sentences = _sentences(n)
    results: dict[str, Any] = {
        "model": "demo-de-en",
        "sentences": len(sentences),
        "time_budget_s": UNIQUE_KBEST_TIME_BUDGET_S,
        "runs": [_run("reference", KS_REFERENCE, sentences, bundle)],
    }
    try:
        import service.mt.compiled_decoder  # noqa: F401
    except ImportError as exc:  # the compiled engine is optional here
        results["compiled_skipped"] = str(exc)
    else:
        results["runs"].append(_run("compiled", KS_COMPILED, sentences, bundle))
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    for run in results["runs"]:
        for k, s in run["summary"].items():
            print(run["engine"], k, json.dumps(s))


if __name__ == "__main__":
    main()
