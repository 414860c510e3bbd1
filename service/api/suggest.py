"""``POST /v1/suggest``: reference sentences for translators (translation retrieval, 002).

The sentence is decoded once (through the query cache) and its N best translations retrieve
English sentences of the pool, scored by ``Σ_t Pr(t|s)·Pr(d|t)`` (TR paper, Algorithms 1 and 2,
:mod:`service.retrieval.tr`), the first of them reread by the dense encoder
(:mod:`service.search.suggestions`); every suggestion lists the translations that found it.
"""

from __future__ import annotations

import math
import time

from fastapi import APIRouter

from service.api.deps import DocumentIndex, PoolIndexDep, ResourcesDep, ServiceDep
from service.api.documents import find_page
from service.api.schemas import (
    FoundBy,
    PoolTranslation,
    Suggestion,
    SuggestRequest,
    SuggestResponse,
)
from service.api.serving import QueryService
from service.mt.bundle import ModelBundle
from service.retrieval.explain import explanation_json
from service.search.suggestions import (
    pool_vectors,
    rank_suggestions,
    suggestion_reader_from_settings,
)

router = APIRouter(prefix="/v1", tags=["suggest"])


def run_suggest(
    req: SuggestRequest,
    service: QueryService,
    bundle: ModelBundle,
    pool: DocumentIndex,
    docs: DocumentIndex | None = None,
) -> SuggestResponse:
    t0 = time.perf_counter()
    decoded = service.decode(bundle, req.query, search=False)  # the sentence as asked
    params = {**service.method_params("tr"), "nbest": req.nbest, "levenshtein": req.levenshtein}
    scorer = service.scorer("tr", pool, bundle, **params)
    reader = suggestion_reader_from_settings(service.settings, req.dense)
    t1 = time.perf_counter()
    ranking, cosines = rank_suggestions(
        scorer, decoded.query, req.k, reader, lambda d: pool.doc(d).text, explain=True,
        lock=decoded.lock, stored=None if reader is None else pool_vectors(pool),
    )  # fmt: skip
    results = []
    for hit, cosine in zip(ranking.hits, cosines, strict=True):
        page = find_page(docs, hit.doc_id)  # where a translator reads it in context
        found_by = (explanation_json(hit.explanation) or {}).get("found_by", [])
        results.append(
            Suggestion(
                id=hit.doc_id,
                text=pool.doc(hit.docno).text,
                score=hit.score,
                dense=None if math.isnan(cosine) else cosine,
                found_by=[FoundBy(**f) for f in found_by],
                page_id=None if page is None else page.id,
                page_title=None if page is None else page.title,
            )
        )
    t2 = time.perf_counter()
    return SuggestResponse(
        results=results,
        translations=[PoolTranslation(**t) for t in ranking.info.get("translations", [])],
        signature=ranking.signature,
        dense="off" if reader is None else "on",
        **decoded.response_fields(t0, t1, t2),
    )


@router.post("/suggest", response_model=SuggestResponse)
def suggest(
    req: SuggestRequest, service: ServiceDep, resources: ResourcesDep, pool: PoolIndexDep
) -> SuggestResponse:
    """English reference sentences from the pool for a sentence to translate."""
    service.check_text(req.query, "query")
    bundle = service.bundle(resources.models, req.lang)
    docs = resources.doc_index
    result: SuggestResponse = service.run(
        lambda: run_suggest(req, service, bundle, pool, docs), kind="suggest"
    )
    return result
