"""``POST /v1/search``: cross-lingual search of the English documents
(Hieber & Riezler 2015, §3, §5).

The query is decoded once into its +LM forests (through the cache of
:mod:`service.api.serving`), ranked by BOW-FD, DT or PSQ to depth ``offset + k``, and the page
``[offset, offset + k)`` is returned with snippets. The terms marked in a snippet are the
English terms that earned the document BM25 weight: with ``explain``, the ones the hit's
explanation lists (BOW-FD: its best derivation's matched words; DT: the 1-best's words in the
document; PSQ: the translations found in it); without, the method's query terms (DT: the
1-best translation; BOW-FD and PSQ: every target word of the forests). Only terms with a
positive RSJ weight in the index count (the others add nothing to any score).

``total`` counts the documents the method retrieved (what it would rank with no limit on
``k``; :meth:`~service.retrieval.base.Scorer.retrieved`). A ranking shorter than
``offset + k`` holds all of them. A full one is cut at ``offset + k``: DT and PSQ scored every
candidate on the way, so their count is recovered exactly (DT: the documents holding a
weighted term of the translation, the documents its BM25 pass reaches; PSQ: the candidates it
reports); BOW-FD scores documents only until no other can enter the top ``offset + k``
(Hieber & Riezler 2015, §3, with bounds), so it reports that many as a lower bound
(``total_relation`` "gte", as Elasticsearch's ``hits.total.relation``) unless its candidates
are no more than that. The terms and the count belong to the scorer
(:meth:`~service.retrieval.base.Scorer.query_terms`, ``retrieved``); an explanation reads itself
(:class:`~service.retrieval.explain.Explanation`: ``matched_terms()``, and ``to_json()``, a
result's ``explanation``), whatever the method.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from functools import partial
from typing import Any

from fastapi import APIRouter

from service.api.deps import DocIndexDep, ResourcesDep, ServiceDep, SettingsDep
from service.api.metrics import DEGRADED
from service.api.schemas import (
    Expansion,
    ExpansionTerm,
    SearchHit,
    SearchRequest,
    SearchResponse,
)
from service.api.serving import QueryService
from service.api.snippets import make_snippet
from service.collection import Collection
from service.data.origin import doc_origin
from service.errors import InvalidInputError
from service.index.analysis import LONG_STOPWORDS, is_word
from service.index.inverted import InvertedIndex
from service.mt.bundle import ModelBundle
from service.retrieval.base import one_best
from service.retrieval.explain import explanation_json
from service.retrieval.feedback import FeedbackParams
from service.settings import Settings

router = APIRouter(prefix="/v1", tags=["search"])


def weighted_terms(index: InvertedIndex, terms: Iterable[str]) -> set[str]:
    """The ``terms`` that are in the index with a positive RSJ weight."""
    out: set[str] = set()
    for t in terms:
        tid = index.term_id(t)
        if tid is not None and float(index.rsj[tid]) > 0:
            out.add(t)
    return out


def _says_something(token: str) -> bool:
    """A translated word that can say what a searcher looks for: not punctuation and not a
    common English word (:data:`~service.index.analysis.LONG_STOPWORDS`)."""
    return is_word(token) and token.lower() not in LONG_STOPWORDS


def _total_max(
    info: dict[str, Any], total: int, relation: str, index: InvertedIndex | Collection
) -> int | None:
    """An upper bound of a lower-bound total: the candidates every sentence had (documents
    sharing a weighted word with its forest; their union is no larger than their sum), at
    most the collection."""
    candidates = info.get("candidates")
    if relation != "gte" or not isinstance(candidates, list) or not candidates:
        return None
    n_docs = index.snapshot.n_docs if isinstance(index, Collection) else index.n_docs
    return max(total, min(sum(int(c) for c in candidates), n_docs))


def feedback_params(req: SearchRequest, settings: Settings) -> FeedbackParams | None:
    """RM3's parameters when the request (or, when it does not say, the service default)
    asks for feedback."""
    if req.feedback is False or (req.feedback is None and not settings.feedback):
        return None
    return FeedbackParams(
        settings.feedback_docs,
        settings.feedback_terms,
        settings.feedback_weight,
        form=settings.feedback_form,
        mix=settings.feedback_mix,
        pool=settings.feedback_pool,
    )


def _expansion(shown: Any, feedback: FeedbackParams | None) -> Expansion | None:
    if shown is None or feedback is None:
        return None
    return Expansion(
        feedback=str(shown.get("feedback", feedback.signature())),  # what the method ran
        terms=[ExpansionTerm(term=t["term"], weight=t["weight"]) for t in shown["terms"]],
        added=list(shown["added"]),
    )


def run_search(
    req: SearchRequest,
    service: QueryService,
    bundle: ModelBundle,
    index: InvertedIndex | Collection,
    settings: Settings,
) -> SearchResponse:
    t0 = time.perf_counter()
    decoded = service.decode(bundle, req.query)
    params = service.method_params(req.method)
    depth = req.offset + req.k
    feedback = feedback_params(req, settings)
    t1 = time.perf_counter()
    weighted: Callable[[Iterable[str]], set[str]]
    with decoded.lock:
        failed: list[str] = []
        if isinstance(index, Collection):
            index.refresh()  # a commit is visible to the next search
            snap = index.snapshot
            searcher = service.collection_searcher(bundle)
            first = depth if feedback is None else feedback.first_depth(depth)
            # the rerank forms explain their own ranking: the first one's would go unread
            explain = req.explain and searcher.explains_first(snap, req.method, feedback, params)
            if settings.search_backend == "ray":
                ranking, (total, relation), failed = service.ray_searcher(index, bundle).rank(
                    snap, req.method, decoded.query, first, explain=explain, params=params
                )
            else:
                ranking, (total, relation) = searcher.rank(
                    snap, req.method, decoded.query, first, explain=explain, params=params
                )
            if feedback is not None:  # the expansion and its ranking read the segments here
                # the rerank forms search again in this process, over the first ranking's
                # documents only (a few hundred: the segments are open here too)
                ranking, (total, relation) = searcher.feedback(
                    snap, req.method, decoded.query, ranking, (total, relation), depth,
                    feedback, explain=req.explain, params=params,
                )  # fmt: skip
            scorer = searcher.any_scorer(snap, req.method, params)
            service.metrics.observe_shards(ranking.info.get("shard_seconds", {}))

            def weighted(terms: Iterable[str]) -> set[str]:
                return {t for t in terms if snap.weighted(t)}

        else:
            scorer = service.scorer(req.method, index, bundle, **params)
            ranking = scorer.rank(decoded.query, depth, explain=req.explain, feedback=feedback)
            total, relation = scorer.retrieved(ranking, depth, decoded.query)
            weighted = partial(weighted_terms, index)
        translation = one_best(decoded.query)
        default_terms = weighted(scorer.query_terms(decoded.query, ranking)) if scorer else set()
    words = [w for sentence in translation for w in sentence]
    content = [w for w in words if _says_something(w)]
    hits = ranking.hits
    reason = None
    if not content:  # "wie" → "as", "?" → "?": whatever matched, it was not the query
        hits, total, relation = [], 0, "eq"
        what = "common words" if any(is_word(w) for w in words) else "punctuation"
        reason = (
            f"nothing to search for: the query translates to {what} only "
            f"({' '.join(words)!r}); add a word that says what you are looking for"
        )
    elif not hits:
        found = weighted(content)
        missing = [w for w in dict.fromkeys(content) if w not in found]
        reason = "no document matched the query"
        if missing:
            reason += f": no document holds {', '.join(missing)} (the query's translation: "
            reason += f"{' '.join(words)!r})"
    results: list[SearchHit] = []
    for hit in hits[req.offset : depth]:
        doc = index.doc(hit.docno)
        terms = default_terms
        if hit.explanation is not None:
            terms = weighted(hit.explanation.matched_terms())
        results.append(
            SearchHit(
                id=hit.doc_id,
                title=doc.title,
                origin=doc_origin(hit.doc_id, doc.source),
                score=hit.score,
                snippet=make_snippet(doc.text, terms),
                explanation=explanation_json(hit.explanation),
            )
        )
    t2 = time.perf_counter()
    fields = decoded.response_fields(t0, t1, t2)
    if failed:  # shards that did not answer: the results come from the others
        reasons = [r for r in (fields.get("degraded_reason"), "; ".join(failed)) if r]
        fields.update(degraded=True, degraded_reason="; ".join(reasons))
        service.metrics.inc(DEGRADED)
    return SearchResponse(
        results=results,
        total=total,
        total_relation=relation,
        total_max=_total_max(ranking.info, total, relation, index),
        translation=" ".join(" ".join(s) for s in translation),
        expansion=_expansion(ranking.info.get("expansion"), feedback),
        empty_reason=reason if not results else None,
        signature=ranking.signature,
        **fields,
    )


@router.post("/search", response_model=SearchResponse)
def search(
    req: SearchRequest,
    service: ServiceDep,
    resources: ResourcesDep,
    index: DocIndexDep,
    settings: SettingsDep,
) -> SearchResponse:
    """Search the English documents with a German or Chinese query."""
    service.check_text(req.query, "query")
    bundle = service.bundle(resources.models, req.lang)
    if req.k > settings.max_k or req.offset + req.k > settings.ranking_depth:
        raise InvalidInputError(
            f"k={req.k}, offset={req.offset}: k must be at most {settings.max_k} and "
            f"offset + k at most {settings.ranking_depth}"
        )
    result: SearchResponse = service.run(lambda: run_search(req, service, bundle, index, settings))
    return result
