"""``POST /v1/search``: cross-lingual search of the English documents
(Hieber & Riezler 2015, §3, §5), through the one search pipeline
(:mod:`service.search.pipeline`: first ranking, feedback, dense reading and fusion, page);
the route parses the request, calls the pipeline and maps its outcome.

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
from typing import Any

from fastapi import APIRouter

from service.api.deps import DocIndexDep, ResourcesDep, ServiceDep, SettingsDep
from service.api.logs import note_request
from service.api.schemas import (
    Alternatives,
    Expansion,
    ExpansionTerm,
    SearchHit,
    SearchRequest,
    SearchResponse,
)
from service.api.serving import QueryService
from service.api.snippets import make_snippet
from service.api.telemetry import DEGRADED
from service.collection.docstore import Store
from service.core.settings import Settings
from service.data.origin import doc_origin
from service.errors import InvalidInputError
from service.mt.bundle import ModelBundle
from service.retrieval.base import Hit
from service.retrieval.choices import Choices
from service.retrieval.explain import explanation_json
from service.retrieval.feedback import FeedbackParams
from service.search.pipeline import (
    SearchOptions,
    SearchOutcome,
    dense_from_settings,
    feedback_from_settings,
)

router = APIRouter(prefix="/v1", tags=["search"])


def search_options(req: SearchRequest, service: QueryService, settings: Settings) -> SearchOptions:
    """The request in library terms: where it does not say, the service's defaults."""
    return SearchOptions(
        method=req.method,
        k=req.k,
        offset=req.offset,
        explain=req.explain,
        feedback=feedback_from_settings(settings, req.feedback),
        dense=dense_from_settings(settings, req.dense),
        params=service.method_params(req.method),
        choices=Choices.of(req.pins, req.blocks),
    )


def _expansion(shown: Any, feedback: FeedbackParams | None) -> Expansion | None:
    if shown is None or feedback is None:
        return None
    return Expansion(
        feedback=str(shown.get("feedback", feedback.signature())),  # what the method ran
        terms=[ExpansionTerm(term=t["term"], weight=t["weight"]) for t in shown["terms"]],
        added=list(shown["added"]),
    )


def _result(hit: Hit, out: SearchOutcome) -> SearchHit:
    """One result: the document of the outcome's snapshot, its snippet around the words
    that matched it (the explanation's, weighted, else the query's)."""
    doc = out.doc(hit.docno)
    terms = out.terms
    if hit.explanation is not None:
        terms = out.weighted(hit.explanation.matched_terms())
    return SearchHit(
        id=hit.doc_id,
        title=doc.title,
        origin=doc_origin(hit.doc_id, doc.source),
        score=hit.score,
        snippet=make_snippet(doc.text, terms),
        explanation=explanation_json(hit.explanation),
        readers=out.readers.get(hit.docno, {}),
    )


def run_search(
    req: SearchRequest,
    service: QueryService,
    bundle: ModelBundle,
    index: Store,
    settings: Settings,
) -> SearchResponse:
    """Parse, call the search pipeline, map its outcome to the response."""
    t0 = time.perf_counter()
    note_request(method=req.method)
    decoded = service.decode(bundle, req.query)
    opts = search_options(req, service, settings)
    t1 = time.perf_counter()
    pipeline = service.pipeline(index, bundle)
    with decoded.lock:  # a cached forest's caches are filled by one request at a time
        out = pipeline.search(decoded.query, opts)
        offered = out.alternatives
    service.metrics.observe_shards(out.ranking.info.get("shard_seconds", {}))
    results = [_result(hit, out) for hit in out.hits]
    t2 = time.perf_counter()
    fields = decoded.response_fields(t0, t1, t2)
    if out.failed:  # shards that did not answer: the results come from the others
        reasons = [r for r in (fields.get("degraded_reason"), "; ".join(out.failed)) if r]
        fields.update(degraded=True, degraded_reason="; ".join(reasons))
        service.metrics.inc(DEGRADED)
    return SearchResponse(
        results=results,
        total=out.total,
        total_relation=out.relation,
        total_max=out.total_max,
        translation=" ".join(" ".join(s) for s in out.translation),
        expansion=_expansion(out.ranking.info.get("expansion"), opts.feedback),
        empty_reason=out.empty_reason,
        dense=out.dense,
        alternatives=Alternatives.listed(offered, opts.choices, out.cue),
        choices=opts.choices.to_json() if opts.choices else {},
        signature=out.ranking.signature,
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
    result: SearchResponse = service.run(
        lambda: run_search(req, service, bundle, index, settings), kind=f"search/{req.method}"
    )
    return result
