"""``POST /v1/translate``: n-best translations per sentence (:mod:`service.mt.translate`), the
words the forest translates in several ways, and the searcher's pins and blocks
(:mod:`service.retrieval.choices`)."""

from __future__ import annotations

import time

from fastapi import APIRouter

from service.api.deps import ResourcesDep, ServiceDep
from service.api.schemas import (
    Alternatives,
    ScoredTranslation,
    SentenceTranslations,
    TranslateRequest,
    TranslateResponse,
)
from service.api.serving import QueryService
from service.mt.bundle import ModelBundle
from service.mt.translate import forest_translations
from service.retrieval.choices import Choices, alternatives, apply_choices

router = APIRouter(prefix="/v1", tags=["translate"])


def run_translate(
    req: TranslateRequest, service: QueryService, bundle: ModelBundle
) -> TranslateResponse:
    """The n-best translations of the text's sentences, read from its forests: decoded
    through the query cache (as asked, not as a search's question rewrite), so translating
    a text again, suggesting for it or searching it decodes it once."""
    t0 = time.perf_counter()
    choices = Choices.of(req.pins, req.blocks)
    decoded = service.decode(bundle, req.query, search=False)
    t1 = time.perf_counter()
    with decoded.lock:  # a cached forest's caches are filled by one request at a time
        offered = alternatives(decoded.query)
        query = apply_choices(decoded.query, choices)
        sentences = [
            forest_translations(
                source, forest, query.weights, req.nbest, service.settings.kbest_time_budget_s
            )
            for source, forest in zip(query.sentences, query.forests, strict=True)
        ]
    t2 = time.perf_counter()
    return TranslateResponse(
        sentences=[
            SentenceTranslations(
                source=" ".join(s.source),
                nbest=[ScoredTranslation(text=d.text, score=d.score) for d in s.nbest],
            )
            for s in sentences
        ],
        alternatives=Alternatives.listed(offered, choices),
        **decoded.response_fields(t0, t1, t2),
    )


@router.post("/translate", response_model=TranslateResponse)
def translate(
    req: TranslateRequest, service: ServiceDep, resources: ResourcesDep
) -> TranslateResponse:
    """Translate text sentence by sentence into n-best English translations with scores."""
    service.check_text(req.query, "query")
    bundle = service.bundle(resources.models, req.lang)
    result: TranslateResponse = service.run(
        lambda: run_translate(req, service, bundle), kind="translate"
    )
    return result
