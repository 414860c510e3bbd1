"""App factory. The lifespan loads every configured resource once and keeps it on
``app.state``. The routers (one per resource, under ``/v1``) read it through
:mod:`service.api.deps`; the operations router (:mod:`service.api.ops`) serves ``/healthz``,
``/readyz`` (what is loaded and what is missing) and ``/metrics`` (the series of
:mod:`service.api.telemetry`); every request is logged by :mod:`service.api.logs` and
carries an ``X-Request-ID``. The OpenAPI pages (``/docs``, ``/redoc``) load Swagger UI and ReDoc
from files the app serves (``fastapi-offline``), not from a CDN, so they work offline."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi_offline import FastAPIOffline

from service import __version__
from service.api import admin, collection, documents, ops, search, suggest, translate
from service.api import page as web_page
from service.api.admission import reserve_threads
from service.api.asgi import route_patterns
from service.api.errors import install_error_handlers
from service.api.limits import install_limits
from service.api.logs import install_request_logging
from service.api.resources import load_resources
from service.api.serving import QueryService
from service.api.telemetry import Metrics, MetricsMiddleware
from service.api.warmup import warm_up
from service.core.processes import raise_open_files_limit
from service.core.settings import Settings, get_settings
from service.jobs.worker import EmbeddedWorker

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
            reserve_threads(settings)
            log.info("open files limit: %d", raise_open_files_limit())
            resources = load_resources(settings)
            if settings.warm_up:
                await asyncio.to_thread(warm_up, app.state.service, resources, settings)
            app.state.resources = resources
            yield
        finally:
            if worker is not None:
                await asyncio.to_thread(worker.stop)
            # the app may outlive its lifespan (FastAPI caches its endpoints, and so the app):
            # what was loaded is released here, not when the app is collected
            app.state.resources = None
            await asyncio.to_thread(app.state.service.close)

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

    ops.cache_gauges(app)
    install_error_handlers(app)
    install_limits(app, settings)  # before metrics, so that metrics counts their answers
    app.add_middleware(MetricsMiddleware, metrics=metrics, after=lambda: ops.cache_gauges(app))
    install_request_logging(app)  # outermost: refusals are logged and carry a request id
    routers = [m.router for m in (search, translate, suggest, documents, admin)] + [
        collection.router,  # /v1/admin/documents, /v1/admin/collection
        web_page.router,  # the web page at / and /static/*
        ops.router,  # /healthz, /readyz, /metrics
    ]
    for router in routers:
        app.include_router(router)
    # the templates a request refused before routing is logged and counted under
    app.state.route_templates = route_patterns(r for router in routers for r in router.routes)
    return app
