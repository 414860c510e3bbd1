"""Decoder speed (issue #4 "Speed"): decode time per sentence by sentence length (5, 10, 20,
30 words) at pop limits 50, 200 and 1000 with the full de-en model; forest sizes |V|, |E|;
time per stage (grammar lookup, CKY+ and cube pruning, Viterbi, 100-best). Sentences are
German dev sources of ``tr/de-en`` cut to the exact length.

Writes ``bench/results/decoder.json``. Run: ``.venv/bin/python -m bench.bench_decoder``.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from service.mt.bundle import load_bundle
from service.mt.decoder import DecoderConfig
from service.mt.inference import fast_viterbi
from service.mt.kbest import kbest
from service.mt.tuning.data import load_dev_pairs

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data"
OUT = ROOT / "bench" / "results" / "decoder.json"
LENGTHS = (5, 10, 20, 30)
POP_LIMITS = (50, 200, 1000)


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main(per_length: int = 10, model: str = "de-en") -> None:
    bundle = load_bundle(ROOT / "models" / model)
    weights = bundle.active_weights().weights
    src = bundle.src
    split = load_dev_pairs(DATA / "tr" / f"{src}-en", DATA / "tr" / "pool.en.tsv.gz", src,
                           heldout_share=0.0, max_words=10_000)  # fmt: skip
    sources = [p.source for p in split.tune]
    by_len = {n: [s[:n] for s in sources if len(s) >= n][:per_length] for n in LENGTHS}
    bundle.decoder(DecoderConfig(pop_limit=10)).forest(by_len[5][0])  # warm-up (numba, caches)
    results: dict[str, Any] = {"model": model, "weights": bundle.active_weights().version,
                               "per_length": per_length, "runs": []}  # fmt: skip
    for pop in POP_LIMITS:
        dec = bundle.decoder(DecoderConfig(pop_limit=pop))
        for n in LENGTHS:
            total, lookup, cube, vit, kb, nodes, edges = [], [], [], [], [], [], []
            for sent in by_len[n]:
                t0 = time.perf_counter()
                forest = dec.forest(sent)
                t1 = time.perf_counter()
                fast_viterbi(forest.hypergraph, weights)
                t2 = time.perf_counter()
                kbest(forest.hypergraph, weights, 100)
                t3 = time.perf_counter()
                total.append(t1 - t0)
                lookup.append(forest.stats.timings["lookup"])
                cube.append(forest.stats.timings["cube_pruning"])
                vit.append(t2 - t1)
                kb.append(t3 - t2)
                nodes.append(forest.stats.nodes)
                edges.append(forest.stats.edges)
            row = {
                "pop_limit": pop,
                "words": n,
                "sentences": len(total),
                "decode_ms_median": round(1000 * statistics.median(total), 1),
                "decode_ms_p90": round(1000 * _pct(total, 0.9), 1),
                "lookup_ms_median": round(1000 * statistics.median(lookup), 1),
                "cube_pruning_ms_median": round(1000 * statistics.median(cube), 1),
                "viterbi_ms_median": round(1000 * statistics.median(vit), 2),
                "kbest100_ms_median": round(1000 * statistics.median(kb), 1),
                "nodes_median": int(statistics.median(nodes)),
                "edges_median": int(statistics.median(edges)),
            }
            results["runs"].append(row)
            print(json.dumps(row), file=sys.stderr)
    OUT.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
