"""Experiment: RM3's parameters for the rerank feedback forms, per query form.

The rerank form (BOW-FD ranks its first ranking's documents again, every feedback word its
forest can produce earning the extra IR weight δ_t = v·(1 − λ)/λ·n·P(t|R); Hieber & Riezler
2015, §3, per-term IR weights) was chosen with Anserini's documents and terms and the λ tuned
for the interpolate form. This scans documents × terms × λ for ``rerank`` and
``rerank+interpolate`` (mix 0.5) on every dev set, each query decoded and ranked first once:

* the first ranking, 1000 deep, through the scorer's own first pass (its prepared forests kept);
* per grid point: the relevance model of its top ``docs`` documents, the forest's second pass
  over the first ranking's 1000 documents (:meth:`Scorer._rerank`, as ``rank(feedback=...)``
  runs it with ``pool = 1000``), and that ranking mixed with the expanded query's BM25 ranking.

Run: ``PYTHONPATH=. .venv/bin/python bench/exp_feedback_rerank_grid.py de [--max-queries N]``;
writes ``bench/results/feedback_rerank_grid_<lang>.json``.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from functools import partial
from typing import Any

import numpy as np

from bench.bench_feedback import hits_of
from bench.bench_querysets import load_set
from bench.common import RESULTS_DIR, ROOT, bundle_signature, write_result
from service.evaluation import evaluate, randomization_test
from service.index.inverted import Hits, load_index
from service.mt.bundle import load_bundle
from service.mt.decoder import DecoderConfig
from service.retrieval.base import one_best
from service.retrieval.feedback import FeedbackParams, expand, interpolate, rank_expanded
from service.retrieval.query import decode_query
from service.retrieval.runner import make_scorer

DEPTH = 1000
DOCS = (5, 10, 20)
TERMS = (10, 20, 40)
WEIGHTS = (0.6, 0.7, 0.8)
METRICS = ("map", "ndcg@10", "mrr")
PERMUTATIONS = 10_000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("lang", choices=("de", "zh"))
    ap.add_argument("--sets", default="short,question,paragraph")
    ap.add_argument("--max-queries", type=int, default=None)
    args = ap.parse_args()
    bundle = load_bundle(ROOT / "models" / f"{args.lang}-en")
    index = load_index(ROOT / "indexes" / "docs")
    decoder = bundle.decoder(DecoderConfig(use_lm=True))
    version = bundle.active_weights().version
    scorer = make_scorer("bowfd", index, bundle)
    out = RESULTS_DIR / f"feedback_rerank_grid_{args.lang}.json"
    grid = list(itertools.product(DOCS, TERMS, WEIGHTS))
    result: dict[str, Any] = {"lang": args.lang, "weights": version, "depth": DEPTH,
                              "grid": {"docs": DOCS, "terms": TERMS, "weight": WEIGHTS},
                              "sets": {}}  # fmt: skip
    for set_name in args.sets.split(","):
        queries, qrels = load_set(set_name, args.lang)
        queries = {q: t for q, t in list(queries.items())[: args.max_queries] if q in qrels}
        runs: dict[str, dict[str, dict[str, float]]] = {}
        seconds: dict[str, float] = {}
        record = partial(_record, index, runs, seconds)

        for i, (qid, text) in enumerate(queries.items()):
            q = decode_query(decoder, text, bundle.src, qid=qid, weights_version=version)
            translation = [t for s in one_best(q) for t in s]
            t0 = time.perf_counter()
            first, _, _, kept = scorer._first_ranking(q, DEPTH, False)
            own = [(h.docno, h.score) for h in first]
            record("bowfd", qid, hits_of(_Ranked(first)), time.perf_counter() - t0)
            restrict = np.unique(np.asarray([d for d, _ in own], dtype=np.int32))
            for docs, terms, weight in grid:
                t0 = time.perf_counter()
                fb = FeedbackParams(docs, terms, weight, form="rerank", pool=DEPTH)
                expansion = expand(index, translation, own, fb)
                again, _ = scorer._rerank(q, kept, expansion, fb, restrict, DEPTH, False)
                second = hits_of(_Ranked(again))
                key = f"{docs},{terms},{weight:g}"
                record(f"rerank({key})", qid, second, time.perf_counter() - t0)
                t0 = time.perf_counter()
                expanded = rank_expanded(index, expansion, DEPTH)
                record(f"rerank+mix({key})", qid, interpolate(second, expanded, fb.mix, DEPTH),
                       time.perf_counter() - t0)  # fmt: skip
            if i % 25 == 0:
                print(f"{args.lang} {set_name}: {i}/{len(queries)}", file=sys.stderr)
        per_query = {}
        configs = {}
        for key, run in runs.items():
            ev = evaluate(run, {qq: qrels[qq] for qq in run}, METRICS)
            per_query[key] = ev.per_query
            configs[key] = {**ev.as_json(), "ms_per_query": 1000 * seconds[key] / len(queries)}
        p = {
            key: randomization_test(per_query[key]["map"], per_query["bowfd"]["map"],
                                    PERMUTATIONS, 0)
            for key in per_query if key != "bowfd"
        }  # fmt: skip
        result["sets"][set_name] = {"queries": len(queries), "configs": configs, "p_map": p}
        best = sorted(configs.items(), key=lambda kv: -kv[1]["map"])[:8]
        print(f"{args.lang} {set_name}: bowfd {configs['bowfd']['map']:.4f}", file=sys.stderr)
        for key, cfg in best:
            print(f"  {key:28} MAP {cfg['map']:.4f} nDCG@10 {cfg['ndcg@10']:.4f} "
                  f"MRR {cfg['mrr']:.4f} p {p.get(key, 1.0):.4f}", file=sys.stderr)  # fmt: skip
        write_result(out, result, vars(args), signatures={"bundle": bundle_signature(bundle),
                                                    "scorer": scorer.signature()})  # fmt: skip


def _record(
    index: Any,
    runs: dict[str, dict[str, dict[str, float]]],
    seconds: dict[str, float],
    key: str,
    qid: str,
    hits: Hits,
    s: float,
) -> None:
    ids = map(index.doc_id, hits.docs.tolist())
    runs.setdefault(key, {})[qid] = dict(zip(ids, hits.scores.tolist(), strict=True))
    seconds[key] = seconds.get(key, 0.0) + s


class _Ranked:
    """The hits of one pass, shaped as :func:`hits_of` reads a ranking."""

    def __init__(self, hits: list[Any]) -> None:
        self.hits = hits


if __name__ == "__main__":
    main()
