"""``POST /v1/translate``: n-best translations per sentence (:mod:`service.mt.translate`)."""

from __future__ import annotations

import time

from fastapi import APIRouter

from service.api.deps import ResourcesDep, ServiceDep
from service.api.logs import note_request
from service.api.schemas import (
    ScoredTranslation,
    SentenceTranslations,
    Timings,
    TranslateRequest,
    TranslateResponse,
)
from service.api.serving import QueryService
from service.mt.bundle import ModelBundle
from service.mt.translate import translate_text

router = APIRouter(prefix="/v1", tags=["translate"])


def run_translate(
    req: TranslateRequest, service: QueryService, bundle: ModelBundle
) -> TranslateResponse:
    t0 = time.perf_counter()
    config = service.decoder(bundle).config
    sentences = translate_text(bundle, req.query, nbest=req.nbest, config=config)
    ms = (time.perf_counter() - t0) * 1000
    note_request(decode_ms=ms, rank_ms=0.0, weights_version=bundle.active_weights().version)
    return TranslateResponse(
        sentences=[
            SentenceTranslations(
                source=" ".join(s.source),
                nbest=[ScoredTranslation(text=d.text, score=d.score) for d in s.nbest],
            )
            for s in sentences
        ],
        weights_version=bundle.active_weights().version,
        timings=Timings(decode_ms=ms, rank_ms=0.0, total_ms=ms),
    )


@router.post("/translate", response_model=TranslateResponse)
def translate(
    req: TranslateRequest, service: ServiceDep, resources: ResourcesDep
) -> TranslateResponse:
    """Translate text sentence by sentence into n-best English translations with scores."""
    service.check_text(req.query, "query")
    bundle = service.bundle(resources.models, req.lang)
    result: TranslateResponse = service.run(lambda: run_translate(req, service, bundle))
    return result
