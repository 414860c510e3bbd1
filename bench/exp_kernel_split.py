"""Kernels split into named steps cost nothing: the three public paths whose numba kernels were
split (#42's "no function over 80 lines") — building an LM table from an ARPA file (its section
scanner and its table filler), decoding queries (the forest's edge arrays) and symmetrising
alignments — timed inside one process after a warm-up that compiles them; run once per
checkout, alternating, and the medians' ratios compared::

    for i in 1 2 3; do
      PYTHONPATH=<before> .venv/bin/python bench/exp_kernel_split.py --tag before >> F.jsonl
      .venv/bin/python bench/exp_kernel_split.py --tag after >> F.jsonl
    done

(run from a copy outside the checkout for ``before``, so that its modules are imported).
Each line: the tag and each path's median seconds over ``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path("models/demo-de-en")
DEV = Path("../shared/data/clir/lohelp-de/queries.dev.tsv")


def _median(fn: Callable[[], object], repeat: int) -> float:
    fn()  # compiles (or loads the numba cache)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _alignments(n: int, seed: int) -> tuple[object, object]:
    from service.mt.training.align import Alignments

    rng = np.random.default_rng(seed)
    src = rng.integers(5, 40, n)
    tgt = rng.integers(5, 40, n)

    def side() -> object:
        links, offs = [], [0]
        for m, t in zip(src.tolist(), tgt.tolist(), strict=True):
            cells = {(int(rng.integers(m)), int(rng.integers(t))) for _ in range(max(m, t))}
            links.extend(sorted(cells))
            offs.append(len(links))
        return Alignments(np.asarray(links, np.int32), np.asarray(offs), src, tgt)

    return side(), side()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tag", required=True)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    from service.data import load_queries
    from service.mt.bundle import load_bundle
    from service.mt.lm.cache import build_lm_table
    from service.mt.training.align import symmetrize
    from service.retrieval.query import decode_query

    out: dict[str, object] = {"tag": args.tag}
    out["lm_table"] = _median(lambda: build_lm_table(ROOT / "lm.arpa", verify=False), 3)
    decoder = load_bundle(ROOT).decoder()
    queries = list(load_queries(DEV).values())[:30]
    out["decode"] = _median(lambda: [decode_query(decoder, q, "de") for q in queries], args.repeat)
    fwd, rev = _alignments(20_000, 7)
    out["symmetrize"] = _median(lambda: symmetrize(fwd, rev), args.repeat)  # type: ignore[arg-type]
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
