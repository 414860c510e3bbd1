"""App factory. The lifespan loads every configured resource once and keeps it on
``app.state``; ``/readyz`` reports what is loaded and what is missing. The routers (one per
resource, under ``/v1``) read it through :mod:`service.api.deps`; ``/metrics`` exposes the
series of :mod:`service.api.metrics`; every request is logged by :mod:`service.api.logs` and
carries an ``X-Request-ID``. The OpenAPI pages (``/docs``, ``/redoc``) load Swagger UI and ReDoc
from files the app serves (``fastapi-offline``), not from a CDN, so they work offline."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse
from fastapi_offline import FastAPIOffline

from service import __version__
from service.api import admin, documents, search, suggest, translate
from service.api import page as web_page
from service.api.errors import install_error_handlers
from service.api.limits import install_limits
from service.api.logs import install_request_logging
from service.api.metrics import CONTENT_TYPE, Metrics, MetricsMiddleware
from service.api.resources import Resources, load_resources
from service.api.serving import QueryService
from service.api.warmup import warm_up
from service.jobs.worker import EmbeddedWorker
from service.settings import Settings, get_settings

log = logging.getLogger(__name__)


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the app; ``settings`` defaults to :func:`get_settings`."""
    settings = settings or get_settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        worker = EmbeddedWorker(settings) if settings.embedded_worker else None
        app.state.worker = worker
        if worker is not None:
            worker.start()
        try:
            resources = load_resources(settings)
            if settings.warm_up:
                await asyncio.to_thread(warm_up, app.state.service, resources, settings)
            app.state.resources = resources
            yield
        finally:
            if worker is not None:
                await asyncio.to_thread(worker.stop)

    app = FastAPIOffline(
        title="CLIR service",
        version=__version__,
        description="Cross-lingual search of English documents for German and Chinese queries "
        "(bag-of-words forced decoding) and reference-sentence suggestions for translators.",
        lifespan=lifespan,
        swagger_ui_parameters={"validatorUrl": None},  # no badge fetched from the validator
    )
    metrics = Metrics()
    app.state.settings = settings
    app.state.metrics = metrics
    app.state.service = QueryService(settings, metrics)

    def cache_gauges() -> None:
        cache = app.state.service.cache
        metrics.set_cache(len(cache), cache.size, cache.bytes)

    cache_gauges()
    install_error_handlers(app)
    install_limits(app, settings)  # before metrics, so that metrics counts their answers
    app.add_middleware(MetricsMiddleware, metrics=metrics, after=cache_gauges)
    install_request_logging(app)  # outermost: refusals are logged and carry a request id
    for module in (search, translate, suggest, documents):
        app.include_router(module.router)
    app.include_router(admin.router)
    app.include_router(web_page.router)  # the web page at / and /static/*

    @app.get("/healthz", tags=["ops"])
    def healthz() -> dict[str, str]:
        """Liveness: the process is up."""
        return {"status": "ok"}

    @app.get("/readyz", tags=["ops"])
    def readyz(request: Request) -> JSONResponse:
        """Readiness: 200 when a model and an index are loaded, else 503 with what is missing."""
        resources: Resources | None = getattr(request.app.state, "resources", None)
        page = {"max_query_chars": settings.max_query_chars}  # the web page's input maxlength
        if resources is None:
            body: dict[str, Any] = {"ready": False, "detail": "still loading", "missing": []}
            return JSONResponse(body | page, status_code=503)
        body = resources.status() | page
        return JSONResponse(body, status_code=200 if body["ready"] else 503)

    @app.get("/metrics", tags=["ops"], response_class=PlainTextResponse)
    def prometheus_metrics() -> PlainTextResponse:
        """Request counts and latencies, decode times, cache hits and process figures
        (Prometheus text format), summed over the API processes when there are several."""
        cache_gauges()
        return PlainTextResponse(metrics.render() + admin.job_gauges(app), media_type=CONTENT_TYPE)

    return app
