"""How much room a translation method has: monolingual reference runs on the dev queries.

For each ``lohelp-<src>`` dev query the **English mate** (its relevance-3 document, the English
page at the same path) gives a perfect-translation stand-in: its first N tokens (the index's
English tokenisation; ``--words``; the German dev queries average 49.6 tokens) are sent to BM25
(k1 1.2, b 0.75, depth 1000) over the full collection. The issue's calibration: the mate's
first 60 words reach MAP 0.609 with another BM25 implementation.

This bounds what DT, PSQ and BOW-FD can gain over each other: they all translate a German
(or Chinese) text whose English original is the mate's opening. Writes
``bench/results/oracle.json``. Run: ``.venv/bin/python -m bench.bench_oracle``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from bench.common import DATA, RESULTS_DIR, ROOT
from service.data import load_qrels, load_queries
from service.evaluation import CLIR_METRICS, evaluate
from service.retrieval.runner import load_index


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--words", type=int, nargs="+", default=[30, 50, 60])
    ap.add_argument("--out", type=Path, default=RESULTS_DIR / "oracle.json")
    args = ap.parse_args()
    index = load_index(ROOT / "indexes" / "docs")
    result: dict[str, Any] = {"index": "indexes/docs", "depth": 1000, "runs": {}}
    for src in ("de", "zh"):
        qdir = DATA / "clir" / f"lohelp-{src}"
        queries = load_queries(qdir / "queries.dev.tsv")
        qrels = {q: j for q, j in load_qrels(qdir / "qrels.dev.txt").items() if q in queries}
        mates = {q: next(d for d, r in j.items() if r == 3) for q, j in qrels.items()}
        for n in args.words:
            run: dict[str, dict[str, float]] = {}
            for qid, mate in mates.items():
                tokens = index.tokenize(index.doc(mate).text)[:n]
                hits = index.bm25_topk(tokens, 1000)
                run[qid] = {
                    index.doc_id(d): float(s)
                    for d, s in zip(hits.docs.tolist(), hits.scores.tolist(), strict=True)
                }
            ev = evaluate(run, qrels, CLIR_METRICS)
            result["runs"][f"{src}/mate_first_{n}"] = {**ev.as_json(), "queries": len(run)}
            print(src, n, json.dumps(ev.as_json()))
    args.out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
