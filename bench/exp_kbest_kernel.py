"""Experiment: the unique k-best kernel before and after its refactor, in one process.

The kernel of unique k-best (Huang & Chiang 2005, Algorithm 3, keeping the first derivation of
each distinct string) was rewritten to read like its algorithm — arrays passed as named tuples,
its steps as helpers numba inlines, one word walk instead of two copies — with the promise that
nothing changes: not a number, and no speed beyond noise. This script holds it to that. The old
kernel (``service/forest/kbest_kernel.py`` of 74cf2e4, from an export of that commit, ``--old``)
is loaded under another module name beside the new one (:mod:`service.forest.kbest.compiled`),
and both run the same searches on the same forests:

- forests: ``--sentences`` German dev queries of ``tr/de-en`` (``queries.dev.tsv`` through
  :func:`service.data.read_queries` and ``service.text.preprocess``; 2–40 tokens, spread over
  the file), decoded once with ``--model`` (the full ``models/de-en`` by default; array-backed
  forests of the compiled decoder);
- searches: unique k-best with k = 100 and 1000 and ``max_derivations = 100·k`` (no clock: the
  same work), each engine's ``Extraction`` (old and new take the same arguments) set up from
  the shared preparation as :func:`service.forest.kbest.compiled.extraction` does it;
- ``--rounds`` timed rounds after one untimed warm-up round (kernels loaded, edge objects made),
  old and new alternating (old first on even rounds and forests, new first on odd);
- timed: the search (the kernel's calls, with its array growth and the patterns it asks for)
  and the whole call (set-up and the derivation records included);
- checked: every run of both returns identical lists (trees, scores, strings, features), and
  equal to ``unique_kbest(..., engine="compiled")`` and, once per forest and k, to
  ``engine="reference"``.

Figures per k: the median over forests of each one's median time, the median of the per-forest
ratios new/old, and the ratio of the summed medians. Writes
``bench/results/kernel_refactor_kbest.json`` (``--out``) with the git revision. Run from the
repository: ``PYTHONPATH=. nice .venv/bin/python bench/exp_kbest_kernel.py`` (``--model``
``/work/main/models/de-en`` where the full models live elsewhere; about 10 minutes).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

# numba caches compiled kernels beside their source: keep the old kernel's cache (and the
# new one's, compiled again here) out of the export it is loaded from
os.environ.setdefault("NUMBA_CACHE_DIR", str(Path(tempfile.gettempdir()) / "exp_kbest_numba"))

from bench.common import DATA, RESULTS_DIR, ROOT, bundle_signature, write_result
from service.data import read_queries
from service.forest.hypergraph import Derivation, Hypergraph
from service.forest.inference import Weights, resolve_edge_weights, viterbi_scores
from service.forest.kbest import (
    canonical_term_ids,
    compiled,
    initial_candidates,
    target_pattern,
    unique_kbest,
)
from service.mt.bundle import load_bundle
from service.text import preprocess

OLD = Path("/tmp/before/service/forest/kbest_kernel.py")
OUT = RESULTS_DIR / "kernel_refactor_kbest.json"
KS = (100, 1000)


@dataclass(frozen=True)
class Params:
    old: Path = OLD
    model: Path = ROOT / "models" / "de-en"
    sentences: int = 50
    rounds: int = 5
    ks: tuple[int, ...] = KS
    out: Path = OUT


def load_old(path: Path) -> ModuleType:
    """The old kernel module, loaded from ``path`` as ``kbest_kernel_before`` (its imports,
    ``service.core.csr`` and ``service.forest.hypergraph``, are unchanged)."""
    spec = importlib.util.spec_from_file_location("kbest_kernel_before", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # numba's cache looks the module up by name
    spec.loader.exec_module(module)
    return module


def sentences(n: int) -> list[tuple[str, ...]]:
    """``n`` dev queries of 2–40 tokens, spread over the file."""
    queries = read_queries(DATA / "tr" / "de-en" / "queries.dev.tsv")
    toks = [tuple(preprocess(q.text, "de")) for q in queries]
    eligible = [t for t in toks if 2 <= len(t) <= 40]
    step = len(eligible) / n
    return [eligible[int(i * step)] for i in range(n)]


def records(ds: list[Derivation]) -> list[tuple[Any, ...]]:
    return [(d.tree, d.score, d.tokens, d.edges, d.features) for d in ds]


def arguments(hg: Hypergraph, weights: Weights, k: int) -> tuple[Any, ...]:
    """The arguments of an ``Extraction`` (old and new take the same) from the shared
    preparation, as :func:`service.forest.kbest.compiled.extraction` makes them."""
    a = hg.arrays()
    w = resolve_edge_weights(hg, weights)
    best, back = viterbi_scores(hg, w)
    run, run_score, ptr = initial_candidates(a, w, best, back)
    term_ptr, term_ids = a.term_ptr, canonical_term_ids(a)
    words = term_ids.tolist()

    def pattern(e: int) -> tuple[int, ...]:
        return target_pattern(hg.edges[e].target, words[term_ptr[e] : term_ptr[e + 1]])

    return (
        a.tail_ptr, a.tail_nodes, w, best, back, run, run_score, ptr, term_ptr, term_ids,
        hg.goal, k, pattern,
    )  # fmt: skip


def search(
    engine: type[Any], hg: Hypergraph, weights: Weights, k: int, limit: int
) -> tuple[float, float, list[Derivation]]:
    """A unique k-best search with ``engine`` (an ``Extraction`` class) as
    ``unique_kbest_compiled`` runs it without a clock: seconds of the search, of the whole
    call, and the list."""
    start = time.perf_counter()
    ex = engine(*arguments(hg, weights, k))
    t0 = time.perf_counter()
    ex.run(limit)
    t1 = time.perf_counter()
    scores = [score for _, _, score in ex.picked_entries()]
    out = [hg.derivation(t, s) for t, s in zip(ex.trees(), scores, strict=True)]
    return t1 - t0, time.perf_counter() - start, out


def run(p: Params) -> dict[str, Any]:
    old = load_old(p.old)
    bundle = load_bundle(p.model)
    dec = bundle.decoder()
    weights = dec.weights
    forests = [dec.forest(list(toks)).hypergraph for toks in sentences(p.sentences)]
    engines = {"old": old.Extraction, "new": compiled.Extraction}
    times: dict[tuple[int, int, str, str], list[float]] = {}
    checked = 0
    for rnd in range(p.rounds + 1):  # round 0: warm-up, checks against unique_kbest too
        for i, hg in enumerate(forests):
            for k in p.ks:
                limit = 100 * k
                order = ("old", "new") if (rnd + i) % 2 == 0 else ("new", "old")
                outs: dict[str, list[Any]] = {}
                for name in order:
                    t_search, t_call, out = search(engines[name], hg, weights, k, limit)
                    outs[name] = records(out)
                    if rnd:
                        times.setdefault((i, k, name, "search"), []).append(t_search)
                        times.setdefault((i, k, name, "call"), []).append(t_call)
                assert outs["old"] == outs["new"], (i, k)
                if rnd == 0:
                    api = unique_kbest(hg, weights, k, max_derivations=limit)
                    ref = unique_kbest(hg, weights, k, max_derivations=limit, engine="reference")
                    assert records(api) == records(ref) == outs["new"], (i, k)
                checked += 1
        print(f"round {rnd} done", file=sys.stderr)

    summary: dict[str, Any] = {}
    for k in p.ks:
        cell: dict[str, Any] = {}
        for what in ("search", "call"):
            med = {
                name: [statistics.median(times[(i, k, name, what)]) for i in range(len(forests))]
                for name in engines
            }
            ratios = [n / o for n, o in zip(med["new"], med["old"], strict=True) if o > 0]
            cell[what] = {
                "old_ms_median": round(1000 * statistics.median(med["old"]), 3),
                "new_ms_median": round(1000 * statistics.median(med["new"]), 3),
                "ratio_new_old_median": round(statistics.median(ratios), 4),
                "ratio_new_old_of_sums": round(sum(med["new"]) / sum(med["old"]), 4),
                "ratio_new_old_min": round(min(ratios), 4),
                "ratio_new_old_max": round(max(ratios), 4),
                "old_ms_total": round(1000 * sum(med["old"]), 2),
                "new_ms_total": round(1000 * sum(med["new"]), 2),
            }
        summary[f"k{k}"] = cell
    result = {
        "experiment": "unique k-best kernel before (74cf2e4 kbest_kernel.py) and after the "
        "refactor (service/forest/kbest/kernel.py), alternating in one process",
        "old_kernel": str(p.old),
        "model": str(p.model),
        "forests": len(forests),
        "forest_edges_median": statistics.median(hg.num_edges for hg in forests),
        "rounds": p.rounds,
        "max_derivations": "100·k",
        "identical_lists": checked,
        "summary": summary,
    }
    write_result(p.out, result, p, signatures={"model": bundle_signature(bundle)})
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--old", type=Path, default=OLD)
    parser.add_argument("--model", type=Path, default=Params.model)
    parser.add_argument("--sentences", type=int, default=Params.sentences)
    parser.add_argument("--rounds", type=int, default=Params.rounds)
    parser.add_argument("--ks", type=lambda s: tuple(int(x) for x in s.split(",")), default=KS)
    parser.add_argument("--out", type=Path, default=OUT)
    a = parser.parse_args(argv)
    p = Params(a.old, a.model, a.sentences, a.rounds, a.ks, a.out)
    print(run(p)["summary"])


if __name__ == "__main__":
    main()
