"""A searcher who chooses one word's translation: the alternatives measured as they are used.

Oard, He & Wang 2008 (user-assisted query translation, §3) let searchers see each query term's
candidate translations and keep the right ones. Here the candidates are the forest's own
(:mod:`service.retrieval.choices`) and the searcher is simulated: for each dev query of a set
(short queries, questions), the searcher knows the page they want — the page judged most
relevant (a short query's English mate, the page it was made from) — looks at the alternatives
and clicks, at most once, an option whose words all occur in that page's title: of those, an
option the forest does not already prefer (a click on the likeliest changes least), the first
such in the query's order, else the first at all. The query is then searched again with that
pin, as the page does.

Reports, per set: MAP, nDCG@10 and MRR before and after the click over every query (a query
without a click keeps its ranking), the paired randomization test on each, how many queries
offer an alternative at all and how many get a click, the monolingual ceiling (BM25 with the
English mate's first tokens, or the question in English, as ``bench querysets``) and the share
of it reached, the cost of the alternatives (ms per query, p50/p90) and of applying a click's
pin to the forests (ms per click). Every ranking goes
through the search pipeline with the service's defaults (BOW-FD, feedback on, the dense reader
``--dense``).

Run: ``.venv/bin/python -m bench click --lang de`` (full models and ``indexes/docs``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from bench.bench_querysets import QUERYSETS, english_pages, load_set
from bench.common import RESULTS_DIR, ROOT, Help, bundle_signature, percentile, write_result
from service.collection.reader import Collection
from service.core.settings import Settings
from service.data import load_queries
from service.data.querysets import ceiling_queries
from service.errors import InvalidInputError
from service.evaluation import evaluate, randomization_test
from service.index.analysis import LONG_STOPWORDS
from service.index.inverted import load_index
from service.mt.bundle import load_bundle
from service.retrieval.choices import Alternative, Choices, alternatives
from service.retrieval.query import decode_query
from service.retrieval.runner import decoder_for
from service.search.pipeline import (
    SearchOptions,
    dense_from_settings,
    feedback_from_settings,
)
from service.search.stores import store_pipeline

METRICS = ("map", "ndcg@10", "mrr")


@dataclass(frozen=True)
class Params:
    lang: Annotated[str, Help("de or zh")] = "de"
    sets: Annotated[tuple[str, ...], Help("query sets: short, question")] = ("short", "question")
    method: Annotated[str, Help("bowfd, dt or psq")] = "bowfd"
    index: Annotated[Path, Help("the document index")] = ROOT / "indexes" / "docs"
    dense: Annotated[bool, Help("fuse the dense reader (needs the index's vectors)")] = False
    limit: Annotated[int | None, Help("the first N queries of each set")] = None
    out: Annotated[Path | None, Help("result file")] = None


def title_words(title: str) -> set[str]:
    return {w for w in "".join(c if c.isalnum() else " " for c in title.lower()).split()}


def wanted(judgments: dict[str, int]) -> str:
    """The page the searcher wants: the one judged most relevant (the first by id of ties)."""
    return min(judgments, key=lambda d: (-judgments[d], d))


def click(offered: list[Alternative], title: str) -> tuple[str, str] | None:
    """The searcher's one click: (source word, option) whose content words all occur in the
    wanted page's title; an option the forest does not prefer first, else any; None when no
    option is in the title."""
    words = title_words(title)
    fits = []
    for alt in offered:
        for rank, option in enumerate(alt.options):
            content = [w for w in option.english.lower().split() if w not in LONG_STOPWORDS]
            if content and all(w in words for w in content):
                fits.append((rank == 0, alt.source, option.english))
    if not fits:
        return None
    _, source, english = min(fits, key=lambda f: f[0])  # stable: the first not preferred
    return source, english


def run(p: Params) -> dict[str, Any]:
    out = p.out or RESULTS_DIR / f"click_{p.lang}{'_dense' if p.dense else ''}.json"
    bundle = load_bundle(ROOT / "models" / f"{p.lang}-en")
    index = load_index(p.index)
    pipe = store_pipeline(Collection.of_index(index), bundle)
    settings = Settings.model_validate({})
    feedback = feedback_from_settings(settings)
    dense = dense_from_settings(settings, on=True) if p.dense else None
    decoder = decoder_for(bundle)
    pages = english_pages()
    result: dict[str, Any] = {
        "lang": p.lang, "method": p.method, "index": str(p.index), "dense": p.dense,
        "bundle": bundle_signature(bundle), "sets": {},
    }  # fmt: skip
    for name in p.sets:
        queries, qrels = load_set(name, p.lang)
        qids = [q for q in queries if q in qrels][: p.limit]
        before: dict[str, dict[str, float]] = {}
        after: dict[str, dict[str, float]] = {}
        cost_ms: list[float] = []
        pin_ms: list[float] = []  # applying the click's pin to the forests
        offered_n = clicked_n = 0
        clicks: dict[str, str] = {}
        refused: dict[str, str] = {}  # clicks on an offered option the service refused
        for i, qid in enumerate(qids):
            decoded = decode_query(decoder, queries[qid], p.lang, qid=qid)
            t0 = time.perf_counter()
            offered = alternatives(decoded)
            cost_ms.append((time.perf_counter() - t0) * 1000)
            opts = SearchOptions(p.method, k=1000, feedback=feedback, dense=dense)
            first = pipe.search(decoded, opts)
            before[qid] = {h.doc_id: h.score for h in first.ranking.hits}
            after[qid] = before[qid]
            offered_n += bool(offered)
            chosen = click(offered, pages[wanted(qrels[qid])][0]) if offered else None
            if chosen is not None:
                clicked_n += 1
                clicks[qid] = f"{chosen[0]}={chosen[1]}"
                choices = Choices.of({chosen[0]: chosen[1]}, None)
                try:
                    again = pipe.search(decoded, SearchOptions(
                        p.method, k=1000, feedback=feedback, dense=dense, choices=choices,
                    ))  # fmt: skip
                except InvalidInputError as exc:  # the searcher would see this refusal
                    refused[qid] = str(exc)
                else:
                    after[qid] = {h.doc_id: h.score for h in again.ranking.hits}
                    pin_ms.append(again.seconds["choices"] * 1000)  # the pipeline's own time
            if i % 25 == 0:
                print(f"{p.lang} {name}: {i}/{len(qids)}, {clicked_n} clicks", flush=True)
        judged = {q: qrels[q] for q in qids}
        ev_before = evaluate(before, judged, METRICS)
        ev_after = evaluate(after, judged, METRICS)
        english: dict[str, str]
        if name == "short":
            english = ceiling_queries(qids, judged, pages)
        else:
            qs = QUERYSETS / f"lohelp-{p.lang}" / "questions.en.dev.tsv"
            english = {q: t for q, t in load_queries(qs).items() if q in judged}
        ceiling_run = {}
        for qid, text in english.items():
            hits = index.bm25_topk(index.tokenize(text), 1000)
            ceiling_run[qid] = dict(zip(map(index.doc_id, hits.docs.tolist()),
                                        hits.scores.tolist(), strict=True))  # fmt: skip
        ceiling = evaluate(ceiling_run, judged, METRICS).as_json()
        entry: dict[str, Any] = {
            "queries": len(qids),
            "offering_alternatives": offered_n,
            "clicked": clicked_n,
            "alternatives_ms": {"p50": percentile(cost_ms, 50), "p90": percentile(cost_ms, 90)},
            "pin_ms": {"p50": percentile(pin_ms, 50), "p90": percentile(pin_ms, 90)}
            if pin_ms
            else None,
            "before": ev_before.as_json(),
            "after": ev_after.as_json(),
            "ceiling": ceiling,
            "p": {
                m: randomization_test(ev_before.per_query[m], ev_after.per_query[m])
                for m in METRICS
            },
            "clicks": clicks,
            "refused": refused,
        }
        entry["share_of_ceiling_map"] = {
            k: entry[k]["map"] / ceiling["map"] if ceiling["map"] else None
            for k in ("before", "after")
        }
        result["sets"][name] = entry
        print(name, {k: v for k, v in entry.items() if k not in ("clicks", "refused")},
              len(refused), "refused", flush=True)  # fmt: skip
    write_result(out, result, p)
    print(out)
    return result
