"""Experiment: relevance feedback fed back into BOW-FD's forest as extra IR weight.

The third form of pseudo-relevance feedback the feedback issue names: RM3's relevance model
P(w | R) over BOW-FD's own top documents (as :mod:`service.retrieval.feedback`), not ranked as
an English query but turned into per-term IR weights on the forest's words — term ``t`` earns
``(v + δ_t)·bm25(t, d)`` (Hieber & Riezler 2015, §3, "Decomposable Retrieval Features") with

    δ_t = v · γ · n · P_cut(t | R),

``n`` the 1-best translation's term count and P_cut RM3's cut relevance model. With
γ = (1 − λ)/λ this is RM3's own reweighting relative to the original query: RM3 gives a query
term λ/n + (1 − λ)·P(t|R) = (λ/n)·(1 + γ·n·P(t|R)). Only words the forest can produce earn
the bonus; BOW-FD then ranks again with them.

Forms measured per set, from one decode and one first ranking per query (depth 1000):
``bowfd``; ``+mix`` (the service's default feedback: the first ranking mixed with the RM3
query's BM25 ranking); ``+forest×g`` (BOW-FD again with the δ above, γ scaled by g);
``+forest+mix`` (that second BOW-FD ranking mixed with the RM3 query's ranking).

Run: ``PYTHONPATH=. .venv/bin/python bench/exp_feedback_forest.py de [--max-queries N]``;
writes ``bench/results/feedback_forest_<lang>.json``.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import replace
from typing import Any

from bench.bench_feedback import Runs, hits_of
from bench.bench_querysets import load_set
from bench.common import RESULTS_DIR, ROOT, bundle_signature, write_result
from service.evaluation import evaluate, randomization_test
from service.index.inverted import Hits, load_index
from service.mt.bundle import load_bundle
from service.mt.decoder import DecoderConfig
from service.retrieval.base import DecodedQuery, one_best
from service.retrieval.feedback import (
    FeedbackParams,
    document_weights,
    expand,
    interpolate,
    rank_expanded,
    relevance_model,
)
from service.retrieval.query import decode_query
from service.retrieval.runner import make_scorer

DEPTH = 1000
FACTORS = (0.5, 1.0, 2.0, 4.0, 8.0)
PERMUTATIONS = 10_000


def forest_weights(
    index: Any, tokens: list[str], first: Hits, params: FeedbackParams, v: float, g: float
) -> dict[str, float]:
    """The ``ir:<t>`` weights δ_t of the module docstring."""
    docnos = first.docs[: params.docs].tolist()
    if not docnos:
        return {}
    w = document_weights(first.scores[: params.docs].tolist(), params.weighting)
    rm = relevance_model(index, docnos, w)
    kept = sorted(rm.items(), key=lambda kv: (-kv[1], kv[0]))[: params.terms]
    total = math.fsum(x for _, x in kept)
    n = len([t for t in index.term_ids(tokens) if index.rsj[t] != 0])
    if total <= 0 or n == 0:
        return {}
    gamma = g * (1.0 - params.original_weight) / params.original_weight
    return {f"ir:{index.term(t)}": v * gamma * n * x / total for t, x in kept}


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
    params = FeedbackParams()
    out = RESULTS_DIR / f"feedback_forest_{args.lang}.json"
    result: dict[str, Any] = {"lang": args.lang, "weights": version,
                              "feedback": params.signature(), "sets": {}}  # fmt: skip
    for set_name in args.sets.split(","):
        queries, qrels = load_set(set_name, args.lang)
        queries = {q: t for q, t in list(queries.items())[: args.max_queries] if q in qrels}
        runs = Runs(index)
        for i, (qid, text) in enumerate(queries.items()):
            q = decode_query(decoder, text, bundle.src, qid=qid, weights_version=version)
            tokens = [t for s in one_best(q) for t in s]
            t0 = time.perf_counter()
            first = hits_of(scorer.rank(q, DEPTH))
            runs.record("bowfd", qid, first, time.perf_counter() - t0)
            t0 = time.perf_counter()
            rm3 = rank_expanded(index, expand(index, tokens, first, params), DEPTH)
            mix = interpolate(first, rm3, params.mix, DEPTH)
            runs.record("bowfd+mix", qid, mix, time.perf_counter() - t0)
            v = scorer.v_for(q.weights)
            for g in FACTORS:
                t0 = time.perf_counter()
                extra = forest_weights(index, tokens, first, params, v, g)
                weights = dict(q.weights)
                for name, x in extra.items():
                    weights[name] = weights.get(name, 0.0) + x
                q2: DecodedQuery = replace(q, weights=weights)
                second = hits_of(scorer.rank(q2, DEPTH))
                runs.record(f"bowfd+forest×{g:g}", qid, second, time.perf_counter() - t0)
                if g == 1.0:
                    both = interpolate(second, rm3, params.mix, DEPTH)
                    runs.record("bowfd+forest+mix", qid, both, time.perf_counter() - t0)
            if i % 25 == 0:
                print(f"{args.lang} {set_name}: {i}/{len(queries)}", file=sys.stderr)
        runs.n = len(queries)
        entry: dict[str, Any] = {"queries": runs.n, "configs": {}, "p": {}}
        per_query = {}
        for key, run in runs.runs.items():
            ev = evaluate(dict(run), {qq: qrels[qq] for qq in run}, ("map", "ndcg@10", "mrr"))
            per_query[key] = ev.per_query
            ms = 1000 * runs.seconds[key] / max(1, runs.n)
            entry["configs"][key] = {**ev.as_json(), "ms_per_query": ms}
        for key in per_query:
            if key != "bowfd":
                entry["p"][key] = {
                    m: randomization_test(per_query[key][m], per_query["bowfd"][m], PERMUTATIONS, 0)
                    for m in ("map", "mrr")
                }
        result["sets"][set_name] = entry
        print(f"{args.lang} {set_name} ({runs.n})", file=sys.stderr)
        for key, cfg in entry["configs"].items():
            p = entry["p"].get(key, {}).get("map")
            print(f"  {key:20} MAP {cfg['map']:.4f} nDCG@10 {cfg['ndcg@10']:.4f} "
                  f"MRR {cfg['mrr']:.4f} {'' if p is None else f'p {p:.4f}'} "
                  f"{cfg['ms_per_query']:.1f} ms", file=sys.stderr)  # fmt: skip
        write_result(out, result, vars(args), signatures={"bundle": bundle_signature(bundle),
                                                    "scorer": scorer.signature()})  # fmt: skip


if __name__ == "__main__":
    main()
