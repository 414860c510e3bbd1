"""App factory. The lifespan loads every configured resource once and keeps it on
``app.state``; ``/readyz`` reports what is loaded and what is missing. The routers (one per
resource, under ``/v1``) read it through :mod:`service.api.deps`; ``/metrics`` exposes the
counters of :mod:`service.api.metrics`."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse

from service import __version__
from service.api import admin, documents, search, suggest, translate
from service.api import page as web_page
from service.api.deps import MetricsDep, ServiceDep
from service.api.errors import install_error_handlers
from service.api.limits import install_limits
from service.api.metrics import Metrics, MetricsMiddleware
from service.api.resources import Resources, load_resources
from service.api.serving import QueryService
from service.jobs.worker import EmbeddedWorker
from service.settings import Settings, get_settings


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
            app.state.resources = load_resources(settings)
            yield
        finally:
            if worker is not None:
                await asyncio.to_thread(worker.stop)

    app = FastAPI(
        title="CLIR service",
        version=__version__,
        description="Cross-lingual search of English documents for German and Chinese queries "
        "(bag-of-words forced decoding) and reference-sentence suggestions for translators.",
        lifespan=lifespan,
    )
    metrics = Metrics()
    app.state.settings = settings
    app.state.metrics = metrics
    app.state.service = QueryService(settings, metrics)
    install_error_handlers(app)
    install_limits(app, settings)  # before metrics, so that metrics counts their answers
    app.add_middleware(MetricsMiddleware, metrics=metrics)
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
        if resources is None:
            body: dict[str, Any] = {"ready": False, "detail": "still loading", "missing": []}
            return JSONResponse(body, status_code=503)
        body = resources.status()
        return JSONResponse(body, status_code=200 if body["ready"] else 503)

    @app.get("/metrics", tags=["ops"], response_class=PlainTextResponse)
    def prometheus_metrics(metrics: MetricsDep, service: ServiceDep) -> PlainTextResponse:
        """Request counts and latencies, decode times and cache hits (Prometheus text format)."""
        gauges = {
            "clir_query_cache_entries": (
                "Decoded queries in the cache.",
                float(len(service.cache)),
            ),
            "clir_query_cache_capacity": (
                "Capacity of the query cache.",
                float(service.cache.size),
            ),
            "clir_query_cache_bytes": (
                "Approximate memory held by the query cache.",
                float(service.cache.bytes),
            ),
        }
        return PlainTextResponse(
            metrics.render(gauges) + admin.job_gauges(app),
            media_type="text/plain; version=0.0.4; charset=utf-8",
        )

    return app
