"""Operations endpoints, outside ``/v1``: liveness (``/healthz``), readiness (``/readyz``: what
is loaded and what is missing) and the Prometheus series (``/metrics``). They read the app's
state (settings, metrics, query service, resources) that :func:`service.api.app.create_app`
sets up."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse

from service.api import admin
from service.api.resources import Resources
from service.api.serving import QueryService
from service.api.telemetry import CONTENT_TYPE, Metrics
from service.collection import Collection
from service.core.settings import Settings

router = APIRouter(tags=["ops"])


def cache_gauges(app: FastAPI) -> None:
    """Set the gauges of the app's metrics from its query service: the result cache, the
    admission queue."""
    metrics: Metrics = app.state.metrics
    service = app.state.service
    cache = service.cache
    metrics.set_cache(len(cache), cache.size, cache.bytes)
    metrics.set_admission(service.admission.queued, service.admission.running)


@router.get("/healthz")
def healthz() -> dict[str, str]:
    """Liveness: the process is up."""
    return {"status": "ok"}


@router.get("/readyz")
def readyz(request: Request) -> JSONResponse:
    """Readiness: 200 when a model and an index are loaded, else 503 with what is missing."""
    settings: Settings = request.app.state.settings
    resources: Resources | None = getattr(request.app.state, "resources", None)
    page: dict[str, Any] = {"max_query_chars": settings.max_query_chars}  # inputs' maxlength
    if resources is None:
        body: dict[str, Any] = {"ready": False, "detail": "still loading", "missing": []}
        return JSONResponse(body | page, status_code=503)
    # the page's feedback switch: offered wherever documents are searched, and its default
    offered = resources.doc_index is not None
    page["feedback"] = {"offered": offered, "default": offered and settings.feedback}
    body = resources.status() | page
    if resources.doc_index is not None and resources.models:
        # the dense reader: on where the index has vectors (else searches are lexical only)
        service: QueryService = request.app.state.service
        bundle = next(iter(resources.models.values()))
        dense = service.pipeline(resources.doc_index, bundle).dense_status()
        body["dense"] = dense | {"default": bool(dense["available"]) and settings.dense}
    if (coll := resources.doc_index) is not None:
        body["collection"] = collection_status(coll, request.app.state.service)
        ray = request.app.state.service.searchers.ray_state()
        if ray is not None:  # the Ray backend: not ready while its cluster is out of reach
            body["ray"] = ray
            if ray["error"]:
                body["ready"] = False
                body["detail"] = f"{ray['error']} (searches are answered in the API process)"
    return JSONResponse(body, status_code=200 if body["ready"] else 503)


def collection_status(
    coll: Collection, service: QueryService, workers: bool = True
) -> dict[str, Any]:
    """The collection's commit and shards; with the Ray backend, whether each shard is up,
    how many of its copies are and on which node each runs (a shard with no copy up is
    searched in the API process: it degrades answers, it does not make the service
    unready)."""
    coll.refresh()
    snap = coll.snapshot
    shards: list[dict[str, Any]] = [
        {"shard": i, "segments": len(views), "n_docs": sum(v.n_live for v in views)}
        for i, views in enumerate(snap.shards)
    ]
    for worker in service.searchers.shard_status() if workers else ():
        shards[int(worker["shard"])].update(
            up=worker["up"],
            copies_up=worker.get("copies_up", 0),
            copies=[
                {k: c.get(k) for k in ("copy", "node", "up", "state", "error")}
                for c in worker.get("copies", [])
            ],
            error=worker.get("error"),
        )
    return {
        "generation": snap.generation,
        "n_docs": snap.n_docs,
        "writable": not coll.built_whole,  # an index built whole takes no documents
        "shards": shards,
    }


@router.get("/metrics", response_class=PlainTextResponse)
def prometheus_metrics(request: Request) -> PlainTextResponse:
    """Request counts and latencies, decode times, cache hits and process figures
    (Prometheus text format), summed over the API processes when there are several."""
    app: FastAPI = request.app
    cache_gauges(app)
    metrics: Metrics = app.state.metrics
    resources: Resources | None = getattr(app.state, "resources", None)
    coll = resources.doc_index if resources is not None else None
    if coll is not None:
        status = collection_status(coll, app.state.service, workers=False)
        shards = status["shards"]
        metrics.set_shard_docs([int(s["n_docs"]) for s in shards])
    return PlainTextResponse(metrics.render() + admin.job_gauges(app), media_type=CONTENT_TYPE)
