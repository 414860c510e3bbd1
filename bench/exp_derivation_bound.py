"""Experiment (#29, part 2): BOW-FD over forests pruned to the derivations within Δ of the
query's 1-best — a bound on how far below the 1-best a document's derivation may fall.

Each sentence's +LM forest keeps the hyperedges whose max-marginal (tropical outside of the
head + the edge's weight + the tails' inside; Huang 2008's forest pruning) is within Δ of the
Viterbi score; BOW-FD then ranks over the pruned forests as usual. Run:
``PYTHONPATH=. .venv/bin/python bench/exp_derivation_bound.py zh short,question 1,2,4,8``;
the figures are in ``results/derivation_bound.json`` and bench/README.md
("Pseudo-relevance feedback", the short-query gap)."""

from __future__ import annotations

import sys
import time
from dataclasses import replace
from typing import Any

from bench.bench_querysets import load_set
from service.evaluation import evaluate, randomization_test
from service.forest.hypergraph import HypergraphBuilder, prune_unreachable
from service.forest.inference import inside, outside, resolve_edge_weights
from service.forest.semiring import TROPICAL
from service.index.inverted import load_index
from service.mt.bundle import load_bundle
from service.mt.decoder import DecoderConfig, Forest
from service.retrieval.query import decode_query
from service.retrieval.runner import make_scorer

METRICS = ("map", "ndcg@10", "mrr")


def prune(forest: Forest, weights: Any, delta: float) -> Forest:
    """``forest`` with only the hyperedges whose max-marginal is within ``delta`` of the best."""
    hg = forest.hypergraph
    w = resolve_edge_weights(hg, weights)
    alpha = inside(hg, w, TROPICAL)
    beta = outside(hg, w, TROPICAL, alpha)
    threshold = alpha[hg.goal] - delta - 1e-9
    keep = [
        e
        for e in range(hg.num_edges)
        if beta[hg.edges[e].head] + w[e] + sum(alpha[t] for t in hg.edges[e].tails) >= threshold
    ]
    if len(keep) == hg.num_edges:
        return forest
    builder = HypergraphBuilder()
    for v in hg.nodes:
        builder.add_node(v.label, v.span, v.state)
    for e in keep:
        edge = hg.edges[e]
        builder.add_edge(edge.head, edge.tails, edge.target, edge.features, edge.span)
    return replace(forest, hypergraph=prune_unreachable(builder.build(hg.goal)))


def main(lang: str, sets: list[str], deltas: list[float]) -> None:
    bundle = load_bundle(f"models/{lang}-en")
    index = load_index("indexes/docs")
    decoder = bundle.decoder(DecoderConfig(use_lm=True))
    scorer = make_scorer("bowfd", index, bundle)
    version = bundle.active_weights().version
    for set_name in sets:
        queries, qrels = load_set(set_name, lang)
        queries = {q: t for q, t in queries.items() if q in qrels}
        runs: dict[float | None, dict[str, dict[str, float]]] = {d: {} for d in [None, *deltas]}
        t0 = time.time()
        for qid, text in queries.items():
            q = decode_query(decoder, text, bundle.src, qid=qid, weights_version=version)
            for d, run in runs.items():
                forests = (
                    q.forests if d is None else tuple(prune(f, q.weights, d) for f in q.forests)
                )
                ranking = scorer.rank(replace(q, forests=forests), 1000)
                run[qid] = {h.doc_id: h.score for h in ranking.hits}
        base = evaluate(runs[None], qrels, METRICS)
        shown = {k: round(v, 4) for k, v in base.as_json().items() if k in METRICS}
        print(lang, set_name, len(queries), "base", shown, f"{time.time() - t0:.0f}s")
        for d in deltas:
            ev = evaluate(runs[d], qrels, METRICS)
            p = randomization_test(ev.per_query["map"], base.per_query["map"], 10000, 0)
            figures = " ".join(f"{k} {v:.4f}" for k, v in ev.as_json().items() if k in METRICS)
            print(f"  delta {d}: {figures} p {p:.4f}")
        sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2].split(","), [float(x) for x in sys.argv[3].split(",")])
