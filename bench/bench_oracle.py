"""How much room a translation method has: monolingual reference runs on the dev queries.

For each ``lohelp-<src>`` dev query the **English mate** (its relevance-3 document, the English
page at the same path) gives a perfect-translation stand-in: its first N tokens (the index's
English tokenisation; ``--words``; the German dev queries average 49.6 tokens) are sent to BM25
(k1 1.2, b 0.75, depth 1000) over the full collection. The issue's calibration: the mate's
first 60 words reach MAP 0.609 with another BM25 implementation.

This bounds what DT, PSQ and BOW-FD can gain over each other: they all translate a German
(or Chinese) text whose English original is the mate's opening. Writes
``bench/results/oracle.json`` (``--out``). Run: ``.venv/bin/python -m bench oracle``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from bench.common import DATA, RESULTS_DIR, ROOT, Help, jsonable, write_result
from service.data import load_qrels, load_queries
from service.evaluation import CLIR_METRICS, evaluate
from service.index.inverted import load_index


@dataclass(frozen=True)
class Params:
    words: Annotated[tuple[int, ...], Help("the mate's first N tokens")] = (30, 50, 60)
    index: Annotated[Path, Help("document index")] = ROOT / "indexes" / "docs"
    out: Annotated[Path, Help("JSON output")] = RESULTS_DIR / "oracle.json"


def run(args: Params) -> None:
    index = load_index(args.index)
    result: dict[str, Any] = {"index": jsonable(args.index), "depth": 1000, "runs": {}}
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
    write_result(args.out, result, args, signatures={"index": index.signature()})


if __name__ == "__main__":
    from bench.cli import main_for

    main_for("oracle")
