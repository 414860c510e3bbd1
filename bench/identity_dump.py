"""Identity dump for refactors that must not change a number, on the full models
(``models/{de,zh}-en``, ``indexes/docs``):

* **retrieval**: the dev queries of both pairs (all of them by default, ``--limit N`` for the
  first N), decoded (+LM) and ranked by BOW-FD, DT and PSQ at depth 1000 — the rankings behind
  the dev retrieval table of ``bench_retrieval`` —, one line per query and method with the
  document ids and the scores as ``float.hex``;
* **learning to rank** (``--ltr N``, default 20): the first N dev queries per pair turned into
  learning-to-rank examples (:func:`service.ltr.examples.build_example`, LEX on, 100
  candidates plus the judged documents) — every candidate's feature vector ``Φ(h*_d)`` under
  the starting weights and under a perturbed weight vector (every feature moved, the per-term
  IR weights included) — and their BOW-FD rankings from the compact forests
  (:meth:`~service.ltr.forest.CompactSentence.prepared`) under the perturbed weights.

Run it on two checkouts and ``cmp`` the files::

    PYTHONPATH=<checkout> .venv/bin/python bench/identity_dump.py before.txt   # in <checkout>

``results/identity_refactor.json`` records the last comparison."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from itertools import islice
from typing import Any, TextIO

import numpy as np

from service.data import load_qrels, load_queries
from service.index.inverted import load_index
from service.ltr.examples import Decoding, build_example
from service.ltr.space import FeatureSpace
from service.ltr.task import start_weights
from service.mt.bundle import load_bundle
from service.retrieval.runner import decoder_for, make_scorer, run_queries

DATA = "../shared/data/clir"
LANGS = ("de", "zh")


def _hits(docs: list[str], scores: list[float]) -> str:
    return " ".join(f"{d}:{float(s).hex()}" for d, s in zip(docs, scores, strict=True))


def dump_retrieval(out: TextIO, index: Any, lang: str, bundle: Any, limit: int | None) -> None:
    queries = dict(islice(load_queries(f"{DATA}/lohelp-{lang}/queries.dev.tsv").items(), limit))
    dec = decoder_for(bundle)
    for method in ("bowfd", "dt", "psq"):
        scorer = make_scorer(method, index, bundle)
        run = run_queries(scorer.rank, dec, queries, lang, progress=False)
        for qid in sorted(run.rankings):
            hits = run.rankings[qid].hits
            docs = [h.doc_id for h in hits]
            out.write(f"{lang}\t{method}\t{qid}\t{_hits(docs, [h.score for h in hits])}\n")
        out.write(f"{lang}\t{method}\tfailed\t{sorted(run.failed)}\n")


def _sparse_rows(phi: Any, names: list[str]) -> Iterator[str]:
    phi = phi.tocsr()
    phi.sort_indices()
    for r in range(phi.shape[0]):
        lo, hi = phi.indptr[r], phi.indptr[r + 1]
        cells = zip(phi.indices[lo:hi].tolist(), phi.data[lo:hi].tolist(), strict=True)
        yield " ".join(f"{names[c]}={float(x).hex()}" for c, x in cells)


def dump_ltr(out: TextIO, index: Any, lang: str, bundle: Any, n: int) -> None:
    queries = list(islice(load_queries(f"{DATA}/lohelp-{lang}/queries.dev.tsv").items(), n))
    qrels = load_qrels(f"{DATA}/lohelp-{lang}/qrels.dev.txt")
    start = start_weights(bundle.active_weights().weights, 1.0)
    dec = Decoding(bundle, index, start, pop_limit=200, lex=True)
    space = FeatureSpace()
    examples = [build_example(dec, space, q, t, qrels.get(q, {}), 100) for q, t in queries]
    w0 = space.vector(start)
    w1 = w0 + 0.01 * (np.arange(len(w0)) % 7 - 3)
    for (qid, _), ex in zip(queries, examples, strict=True):
        if ex is None:
            out.write(f"{lang}\tltr\t{qid}\tnone\n")
            continue
        ids = [index.doc_id(int(d)) for d in ex.docnos.tolist()]
        judged = list(zip(ids, ex.relevance.tolist(), strict=True))
        out.write(f"{lang}\tltr\t{qid}\tcandidates\t{judged}\n")
        for tag, w in (("start", w0), ("perturbed", w1)):
            for doc, row in zip(ids, _sparse_rows(ex.features(w), space.names), strict=True):
                out.write(f"{lang}\tltr\t{qid}\t{tag}\t{doc}\t{row}\n")
        preps = [s.prepared(w1, index) for s in ex.sentences]
        docs, scores, _ = dec.scorer.rank_prepared(preps, 1000, dec.scorer.v_for(space.weights(w1)))
        ranked = [index.doc_id(int(d)) for d in docs.tolist()]
        out.write(f"{lang}\tltr\t{qid}\tranking\t{_hits(ranked, scores.tolist())}\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--limit", type=int, default=None, help="first N dev queries (default: all)")
    ap.add_argument("--ltr", type=int, default=20, help="dev queries per pair for LTR examples")
    args = ap.parse_args()
    index = load_index("indexes/docs")
    with open(args.out, "w") as out:
        for lang in LANGS:
            bundle = load_bundle(f"models/{lang}-en")
            dump_retrieval(out, index, lang, bundle, args.limit)
            if args.ltr:
                dump_ltr(out, index, lang, bundle, args.ltr)


if __name__ == "__main__":
    main()
