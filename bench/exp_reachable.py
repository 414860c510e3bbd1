"""Experiment: how much of the monolingual ceiling the query's translation forest can say.

The ceiling of the feedback issue is BM25 with the English mate's own text (its first 8 tokens
for the short sets, 50 for the paragraph sets, the English version of each question). BOW-FD
(Hieber & Riezler 2015, §3) lets every document choose among the words of the query's +LM
forest, and the rerank feedback form adds weight only to words that forest can produce, so a
word of the ceiling's query that no hyperedge of the forest yields cannot be matched by either.
This ranks, per query, the ceiling's English tokens **restricted to those whose index term the
forest yields** (order and repeats kept; "reachable ceiling"): the ceiling a method reaches
that picks, from the forest, exactly the English page's own words. Against it BOW-FD and
BOW-FD with the rerank default (``FeedbackParams()``), both at depth 1000.

Also recorded per set: the share of the ceiling query's distinct terms the forest yields, the
share of the mate's title terms (short and paragraph sets), and the same shares with the pop
limit raised from 200 to 1000 (the search's depth against the grammar's reach; short and
question sets, where decoding is cheap).

Run: ``PYTHONPATH=. .venv/bin/python bench/exp_reachable.py [de|zh ...]``; writes
``bench/results/reachable_<lang>.json``.
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Iterable
from typing import Any

from bench.bench_feedback import Runs, english_queries, hits_of
from bench.bench_querysets import english_pages, load_set
from bench.common import ROOT, write_per_language
from service.data.querysets import mate
from service.evaluation import evaluate, randomization_test
from service.index.inverted import InvertedIndex, load_index
from service.mt.bundle import load_bundle
from service.mt.decoder import DecoderConfig
from service.retrieval.base import DecodedQuery
from service.retrieval.feedback import FeedbackParams
from service.retrieval.query import decode_query
from service.retrieval.runner import make_scorer

DEPTH = 1000
METRICS = ("map", "ndcg@10", "mrr")
SETS = ("short", "question", "paragraph")
WIDE_POP = 1000


def forest_terms(index: InvertedIndex, query: DecodedQuery) -> set[str]:
    """The index terms of every English word the query's forests can produce."""
    return {t for t in map(index.analyzer.term, query.target_words()) if t is not None}


def share(terms: Iterable[str | None], reachable: set[str]) -> float:
    distinct = {t for t in terms if t is not None}
    return len(distinct & reachable) / len(distinct) if distinct else 1.0


def measure(lang: str) -> dict[str, Any]:
    bundle = load_bundle(ROOT / "models" / f"{lang}-en")
    index = load_index(ROOT / "indexes" / "docs")
    decoder = bundle.decoder(DecoderConfig(use_lm=True))
    wide = bundle.decoder(DecoderConfig(use_lm=True, pop_limit=WIDE_POP))
    version = bundle.active_weights().version
    bowfd = make_scorer("bowfd", index, bundle)
    feedback = FeedbackParams()
    pages = english_pages()
    result: dict[str, Any] = {
        "lang": lang, "weights": version, "feedback": feedback.signature(),
        "index": index.signature(), "bowfd": bowfd.signature(), "sets": {},
    }  # fmt: skip
    for set_name in SETS:
        queries, qrels = load_set(set_name, lang)
        queries = {q: t for q, t in queries.items() if q in qrels}
        english = english_queries(set_name, lang, queries, qrels)
        runs = Runs(index)
        reach: dict[str, list[float]] = {"terms": [], "title terms": []}
        if set_name != "paragraph":
            reach.update({f"terms, pop {WIDE_POP}": [], f"title terms, pop {WIDE_POP}": []})
        for i, (qid, text) in enumerate(queries.items()):
            q = decode_query(decoder, text, bundle.src, qid=qid, weights_version=version)
            yields = forest_terms(index, q)
            tokens = index.tokenize(english[qid])
            terms = [index.analyzer.term(t) for t in tokens]
            kept = [t for t, term in zip(tokens, terms, strict=True) if term in yields]
            runs.record("ceiling", qid, index.bm25_topk(tokens, DEPTH), 0.0)
            runs.record("reachable ceiling", qid, index.bm25_topk(kept, DEPTH), 0.0)
            runs.record("bowfd", qid, hits_of(bowfd.rank(q, DEPTH)), 0.0)
            runs.record("bowfd+rerank", qid, hits_of(bowfd.rank(q, DEPTH, feedback=feedback)), 0.0)
            title = [index.analyzer.term(t) for t in index.tokenize(pages[mate(qrels[qid])][0])]
            reach["terms"].append(share(terms, yields))
            reach["title terms"].append(share(title, yields))
            if set_name != "paragraph":
                more = forest_terms(index, decode_query(wide, text, bundle.src, qid=qid))
                reach[f"terms, pop {WIDE_POP}"].append(share(terms, more))
                reach[f"title terms, pop {WIDE_POP}"].append(share(title, more))
            if i % 50 == 0:
                print(f"{lang} {set_name}: query {i}/{len(queries)}", file=sys.stderr)
        if set_name == "question":  # the questions are not the pages' titles
            del reach["title terms"], reach[f"title terms, pop {WIDE_POP}"]
        ev = {k: evaluate(v, qrels, METRICS) for k, v in runs.runs.items()}
        ap = {k: e.per_query["map"] for k, e in ev.items()}
        ceiling, reachable = ev["ceiling"].means["map"], ev["reachable ceiling"].means["map"]
        entry: dict[str, Any] = {
            "queries": len(queries),
            "configs": {k: e.as_json() for k, e in ev.items()},
            "of the ceiling": {k: e.means["map"] / ceiling for k, e in ev.items()},
            "of the reachable ceiling": {k: e.means["map"] / reachable for k, e in ev.items()},
            "reach": {k: statistics.fmean(v) for k, v in reach.items()},
            "title fully reachable": sum(x == 1.0 for x in reach.get("title terms", [])),
            "p": {
                "reachable ceiling vs ceiling": randomization_test(
                    ap["reachable ceiling"], ap["ceiling"], 10_000, 0
                ),
                "bowfd+rerank vs reachable ceiling": randomization_test(
                    ap["bowfd+rerank"], ap["reachable ceiling"], 10_000, 0
                ),
            },
        }
        result["sets"][set_name] = entry
        print(f"{lang} {set_name}: ceiling {ceiling:.4f}, reachable {reachable:.4f} "
              f"({reachable / ceiling:.1%}), bowfd+rerank {ev['bowfd+rerank'].means['map']:.4f}, "
              f"reach {entry['reach']}", file=sys.stderr)  # fmt: skip
    return result


if __name__ == "__main__":
    write_per_language("reachable", measure, sys.argv[1:])
