"""Experiment: does the dense reader help translator suggestions (issue 40, item 5)?

Translation retrieval (the TR paper's Algorithm 1 with the product's defaults: the 5-best
translations, ``Pr(d|t) = cos·E`` with E over characters, M = 1000) ranks pool sentences; the
question is whether the dense reader — the 1-best translation embedded as an E5 query, each
candidate sentence as an E5 passage — reorders its head for the better. The pool's 448,695
sentences have no vectors (embedding them takes hours here), so the dense reader reads only
each query's first ``--head`` sentences of TR's ranking: a reranking, measured on what it can
change (the reference in the head) and reported as p@1 and MRR on the whole query set.

Variants of the head's order: TR's own (the reference), the dense similarity alone, and
``s · dense^λ`` (a product, as the TR paper combines its factors) and ``(1-a)·ŝ + a·dense``
(min-max normalised TR score mixed linearly) over a grid. λ / a are chosen on the first half of
the queries by p@1 (ties: MRR) and reported on the second half, with the paired randomization
test against TR's order on the same half.

Uses the decoded lists and the cosine candidates that ``exp_tr_levenshtein`` caches in
``/tmp/tr_lev_<src>.pkl`` and ``/tmp/tr_lev_<src>_cands.pkl`` (made when missing by running
it). Run: ``PYTHONPATH=. .venv/bin/python bench/exp_tr_dense.py de`` → writes
``bench/results/tr_dense.json`` (one entry per pair).
"""

from __future__ import annotations

import argparse
import pickle
import sys
import time
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import DATA, RESULTS_DIR, ROOT, write_result
from bench.exp_tr_levenshtein import Cands, Variant, score_variant
from service.data import load_qrels
from service.dense.encoders import get_encoder
from service.evaluation import evaluate, randomization_test
from service.index.inverted import load_index
from service.retrieval.base import Hit, Ranking
from service.search.suggestions import (
    SentenceVectors,
    SuggestionReader,
    SuggestionRerank,
    rerank_head,
)

PRODUCT = Variant("N5 cos·E chars", view="chars")
LAMBDAS = (0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0)
MIXES = (0.2, 0.3, 0.5, 0.7, 0.8, 0.9)
METRICS = ("p@1", "mrr")


class _Unpickler(pickle.Unpickler):
    """The candidates cache, written by ``exp_tr_levenshtein`` run as ``__main__``."""

    def find_class(self, module: str, name: str) -> Any:
        if module == "__main__" and name == "Cands":
            return Cands
        return super().find_class(module, name)


def _order(docs: list[int], key: np.ndarray) -> list[int]:
    return [docs[i] for i in sorted(range(len(docs)), key=lambda i: (-key[i], docs[i]))]


def _product_key(docs: list[int], scores: np.ndarray, cos: np.ndarray, power: float) -> Any:
    """A key that orders the head as the product's :func:`rerank_head` does."""
    ranking = Ranking("q", [Hit(d, str(d), float(s)) for d, s in zip(docs, scores, strict=True)],
                      "tr")  # fmt: skip
    out, _ = rerank_head(ranking, cos.tolist(), SuggestionRerank(len(docs), power), len(docs))
    rank = {h.docno: i for i, h in enumerate(out.hits)}
    return np.asarray([-rank[d] for d in docs], dtype=np.float64)


def _cost(reader: SuggestionReader, lists: dict[str, Any], heads: dict[str, list[int]],
          pool: Any, n: int = 50) -> dict[str, float]:  # fmt: skip
    """Milliseconds the reread adds to a suggestion, its sentences' vectors not kept (the
    cache cleared before each): the first ``n`` queries."""
    times = []
    for q in list(lists)[:n]:
        reader.vectors = SentenceVectors(reader.encoder)
        hits = [Hit(d, pool.doc_id(d), 1.0 / (i + 1)) for i, d in enumerate(heads[q])]
        ranking = Ranking(q, hits, "tr")
        t0 = time.perf_counter()
        reader.rerank(ranking, " ".join(lists[q][5][0][0]), lambda d: pool.doc(d).text, 10)
        times.append((time.perf_counter() - t0) * 1000)
    return {"p50": round(float(np.percentile(times, 50)), 1),
            "p90": round(float(np.percentile(times, 90)), 1)}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("src", choices=["de", "zh"])
    ap.add_argument("--limit", type=int, default=500)
    ap.add_argument("--head", type=int, default=20, help="TR's first N sentences reread")
    ap.add_argument("--out", type=Path, default=RESULTS_DIR / "tr_dense.json")
    args = ap.parse_args()
    data = pickle.loads(Path(f"/tmp/tr_lev_{args.src}.pkl").read_bytes())
    with Path(f"/tmp/tr_lev_{args.src}_cands.pkl").open("rb") as f:
        cands = _Unpickler(f).load()
    pool = load_index(ROOT / "indexes" / "pool")
    qrels_all = load_qrels(DATA / "tr" / f"{args.src}-en" / "qrels.dev.txt")
    lists = {q: t for q, t in islice(data["lists"].items(), args.limit) if q in qrels_all}
    qrels = {q: qrels_all[q] for q in lists}
    encoder = get_encoder()
    heads: dict[str, list[int]] = {}
    tr_scores: dict[str, np.ndarray] = {}
    for qid, by_n in lists.items():
        scores = score_variant(PRODUCT, by_n[5], cands)
        top = sorted(scores.items(), key=lambda ds: (-ds[1], ds[0]))[: args.head]
        heads[qid] = [d for d, _ in top]
        tr_scores[qid] = np.asarray([s for _, s in top])
    t0 = time.perf_counter()
    sentences = sorted({d for h in heads.values() for d in h})
    vectors = dict(
        zip(sentences, encoder.encode_passages([pool.doc(d).text for d in sentences]), strict=True)
    )
    queries = encoder.encode_queries([" ".join(lists[q][5][0][0]) for q in lists])
    embed_s = time.perf_counter() - t0
    print(f"embedded {len(sentences)} sentences and {len(lists)} queries in {embed_s:.0f} s",
          file=sys.stderr)  # fmt: skip
    dense = {
        q: np.asarray([float(vectors[d] @ v) for d in heads[q]])
        for q, v in zip(lists, queries, strict=True)
    }

    def run(key: Any) -> dict[str, dict[str, float]]:
        out = {}
        for q in lists:
            order = _order(heads[q], key(q))
            out[q] = {pool.doc_id(d): float(len(order) - i) for i, d in enumerate(order)}
        return out

    def norm(x: np.ndarray) -> np.ndarray:
        span = x.max() - x.min() if len(x) else 0.0
        return (x - x.min()) / span if span > 0 else np.zeros_like(x)

    variants: dict[str, Any] = {"TR (product)": lambda q: tr_scores[q], "dense alone": dense.get}
    for lam in LAMBDAS:  # the product's reread (service.search.suggestions.rerank_head)
        variants[f"TR·dense^{lam}"] = lambda q, lam=lam: _product_key(
            heads[q], tr_scores[q], dense[q], lam
        )
    for a in MIXES:
        variants[f"mix a={a}"] = lambda q, a=a: (1 - a) * norm(tr_scores[q]) + a * norm(dense[q])
    per_query = {}
    for name, key in variants.items():
        res = evaluate(run(key), qrels, METRICS, depth=None)
        per_query[name] = {m: res.per_query[m] for m in METRICS}
    qids = list(lists)
    tune, test = qids[: len(qids) // 2], qids[len(qids) // 2 :]

    def mean(name: str, m: str, part: list[str]) -> float:
        return sum(per_query[name][m].get(q, 0.0) for q in part) / len(part)

    table = {
        name: {
            "tune": {m: round(mean(name, m, tune), 4) for m in METRICS},
            "test": {m: round(mean(name, m, test), 4) for m in METRICS},
            "all": {m: round(mean(name, m, qids), 4) for m in METRICS},
        }
        for name in variants
    }
    chosen = {}
    for family in ("TR·dense^", "mix a="):
        names = [n for n in variants if n.startswith(family)]
        best = max(names, key=lambda n: (mean(n, "p@1", tune), mean(n, "mrr", tune)))
        chosen[family] = {
            "chosen_on_first_half": best,
            "test": table[best]["test"],
            "reference_test": table["TR (product)"]["test"],
            "p_vs_reference_test": {
                m: round(
                    randomization_test(
                        {q: per_query[best][m].get(q, 0.0) for q in test},
                        {q: per_query["TR (product)"][m].get(q, 0.0) for q in test},
                    ),
                    4,
                )
                for m in METRICS
            },
        }
    cost = _cost(SuggestionReader(encoder, SuggestionRerank()), lists, heads, pool)
    in_head = sum(any(pool.doc_id(d) in qrels[q] for d in heads[q]) for q in qids) / len(qids)
    entry = {
        "queries": len(qids), "head": args.head, "weights": data["weights"],
        "reference_in_head": round(in_head, 4), "embed_seconds": round(embed_s, 1),
        "sentences_embedded": len(sentences), "variants": table, "chosen": chosen,
        "encoder": encoder.signature(), "reread_ms_cold": cost,
    }  # fmt: skip
    for name, row in table.items():
        print(f"{name:16s} {row}", file=sys.stderr)
    print(chosen, file=sys.stderr)
    write_result(args.out, entry, {k: str(v) for k, v in vars(args).items()},
                 key=f"{args.src}-en")  # fmt: skip


if __name__ == "__main__":
    main()
