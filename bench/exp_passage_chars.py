"""Experiment: what embedding fewer characters of each document costs the dense reader, and
what it saves (Dai & Callan 2019, §3.2: a document read by its first passage, FirstP, or by its
best passage, MaxP).

Each variant cuts every document of the demo collection (2,540 LibreOffice help pages) into
passages (title first), embeds them with the default encoder and ranks the English dev
queries (short: the pages' titles; questions; paragraphs: title and first paragraph cut to
60 words) by the dense reader alone (exact top 1000). Reported: passages, characters and
seconds to embed them (documents a second on this machine), MAP, nDCG@10 and MRR, and the
paired randomization test of MAP against the product's default (600 characters × 8, MaxP;
the index's committed vectors when they are the default encoder's).

Run: ``PYTHONPATH=. .venv/bin/python bench/exp_passage_chars.py``; writes
``bench/results/passage_chars.json``.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from bench.bench_encoder import _queries, embed_collection, rank_queries, summarise
from bench.common import RESULTS_DIR, ROOT, write_result
from service.dense.encoders import get_encoder
from service.dense.passages import PassageParams, passages
from service.dense.vectors import open_vectors
from service.index.inverted import InvertedIndex

#: (characters a passage, passages a document): FirstP at three lengths, then MaxP.
VARIANTS = ((600, 8), (300, 1), (600, 1), (1200, 1), (300, 8))


def main(argv: list[str]) -> None:
    index_path = ROOT / "indexes" / "demo"
    index = InvertedIndex.load(index_path)
    docs = [index.doc(d) for d in range(index.n_docs)]
    queries = _queries()
    enc = get_encoder()
    committed = open_vectors(index_path)
    out: dict[str, Any] = {"encoder": enc.signature(), "documents": len(docs)}
    baseline = None
    for chars, limit in VARIANTS:
        params = PassageParams(chars=chars, max_passages=limit)
        pieces = [passages(d.title, d.text, params) for d in docs]
        texts = [t for p in pieces for t in p]
        counts = np.array([len(p) for p in pieces], dtype=np.int64)
        reuse = (
            committed is not None
            and committed.encoder == enc.signature()
            and committed.params == params
        )
        if reuse:
            vectors, seconds = committed, None
        else:
            vectors, seconds = embed_collection(enc, texts, counts, params)
        scores = rank_queries(enc, vectors, index, queries)
        name = f"{chars}x{limit}"
        row: dict[str, Any] = {
            "passages": len(texts),
            "characters": int(sum(len(t) for t in texts)),
            "embed_seconds": round(seconds, 1) if seconds else None,
            "docs_per_s": round(len(docs) / seconds, 2) if seconds else None,
        }
        row |= summarise(scores, baseline, "600x8")
        baseline = baseline or scores
        out[name] = row
        print(name, row, flush=True)
    write_result(RESULTS_DIR / "passage_chars.json", out)


if __name__ == "__main__":
    main(sys.argv[1:])
