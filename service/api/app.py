"""App factory. The lifespan loads every configured resource once and keeps it on
``app.state``; ``/readyz`` reports what is loaded and what is missing. The routers (one per
resource, under ``/v1``) read it through :mod:`service.api.deps`; ``/metrics`` exposes the
counters of :mod:`service.api.metrics`."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse

from service import __version__
from service.api import admin, documents, search, suggest, translate
from service.api import page as web_page
from service.api.errors import install_error_handlers
from service.api.limits import install_limits
from service.api.metrics import Gauges, Metrics, MetricsMiddleware, SharedMetrics
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
        stop_publishing = threading.Event()
        if shared is not None:
            threading.Thread(
                target=_publish_every, args=(stop_publishing, 1.0), daemon=True,
                name="metrics-publisher",
            ).start()  # fmt: skip
        try:
            resources = load_resources(settings)
            if settings.warm_up:
                await asyncio.to_thread(warm_up, app.state.service, resources, settings)
            app.state.resources = resources
            yield
        finally:
            stop_publishing.set()
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
    shared = SharedMetrics(settings.metrics_dir) if settings.metrics_dir is not None else None

    def gauges() -> Gauges:
        cache = app.state.service.cache
        return {
            "clir_query_cache_entries": ("Decoded queries in the cache.", float(len(cache))),
            "clir_query_cache_capacity": ("Capacity of the query cache.", float(cache.size)),
            "clir_query_cache_bytes": (
                "Approximate memory held by the query cache.",
                float(cache.bytes),
            ),
        }

    def _publish_every(stop: threading.Event, seconds: float) -> None:
        assert shared is not None
        while True:
            try:
                shared.publish(metrics, gauges())
            except OSError as exc:  # a full or vanished directory must not stop the service
                log.warning("could not publish metrics to %s: %s", shared.directory, exc)
            if stop.wait(seconds):
                return

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
    def prometheus_metrics() -> PlainTextResponse:
        """Request counts and latencies, decode times and cache hits (Prometheus text format),
        summed over the API processes when there are several."""
        current = gauges()
        text = None
        if shared is not None:
            try:
                shared.publish(metrics, current)
                total, summed, processes = shared.collect()
                summed["clir_api_processes"] = ("API processes summed here.", float(processes))
                text = total.render(summed)
            except (OSError, ValueError, KeyError) as exc:
                log.warning("could not sum the processes' metrics: %s", exc)
        if text is None:
            text = metrics.render(current)
        return PlainTextResponse(
            text + admin.job_gauges(app),
            media_type="text/plain; version=0.0.4; charset=utf-8",
        )

    return app
