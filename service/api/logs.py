"""Request logs: one record per HTTP request, as a JSON line or as plain text.

Every request gets a request id (``asgi-correlation-id``): the client's ``X-Request-ID`` when it
sends a sensible one (1–128 characters of letters, digits and ``._:/+=-``), a new random one
otherwise; the response echoes it in ``X-Request-ID`` and every log line written while the
request runs carries it as ``request_id``. When the request ends,
:class:`RequestLogMiddleware` writes one record to the logger ``service.requests``::

    {"level": "INFO", "logger": "service.requests", "message": "POST /v1/search 200 41.7 ms",
     "request_id": "…", "route": "/v1/search", "path": "/v1/search", "http_method": "POST",
     "status": 200, "duration_ms": 41.7, "lang": "de", "method": "bowfd", "decode_ms": 30.2,
     "rank_ms": 9.1, "cached": false, "degraded": false, "weights_version": "default",
     "time": "…"}

``route`` is the route template (``other`` when no route matched), ``method`` the retrieval
method (``tr`` for suggestions). The query fields (``lang`` … ``weights_version``) are ``null``
where they do not apply; the request's handlers fill them in through :func:`note_request`,
which writes to a per-request dict held in a context variable (handlers that run in a thread
pool see the same dict: the pool runs them in a copy of the request's context).

:func:`logging_config` is the ``logging.config.dictConfig`` that ``clir serve`` hands to
uvicorn (so every API process applies it): JSON lines (``python-json-logger``) or text, by
``CLIR_LOG_FORMAT`` — ``auto`` (the default) writes text on a terminal and JSON otherwise.
uvicorn's own access log is turned off: the request record replaces it.
"""

from __future__ import annotations

import logging
import re
import time
from contextvars import ContextVar
from typing import Any

from asgi_correlation_id import CorrelationIdMiddleware, correlation_id
from fastapi import FastAPI
from starlette.types import ASGIApp, Receive, Scope, Send

from service.api.asgi import StatusSend, route_template

REQUEST_ID_HEADER = "X-Request-ID"
REQUEST_LOGGER = "service.requests"
QUERY_FIELDS = ("lang", "method", "decode_ms", "rank_ms", "cached", "degraded", "weights_version")

_REQUEST_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/+=-]{0,127}")
_FIELDS: ContextVar[dict[str, Any] | None] = ContextVar("clir_request_fields", default=None)


def valid_request_id(value: str) -> bool:
    """True for a client's request id that may be logged and echoed as it is."""
    return _REQUEST_ID.fullmatch(value) is not None


def note_request(**fields: Any) -> None:
    """Add ``fields`` (see :data:`QUERY_FIELDS`) to the current request's log record; outside a
    request (the warm-up, the CLI) it does nothing."""
    current = _FIELDS.get()
    if current is not None:
        current.update(fields)


class RequestLogMiddleware:
    """Writes one ``service.requests`` record per HTTP request (see the module docstring)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.log = logging.getLogger(REQUEST_LOGGER)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        fields: dict[str, Any] = dict.fromkeys(QUERY_FIELDS)
        token = _FIELDS.set(fields)
        start = time.perf_counter()
        recorder = StatusSend(send)
        try:
            await self.app(scope, receive, recorder)
        finally:
            _FIELDS.reset(token)
            ms = round((time.perf_counter() - start) * 1000, 1)
            status = recorder.status
            method, path = str(scope.get("method", "")), str(scope.get("path", ""))
            for key in ("decode_ms", "rank_ms"):
                if fields[key] is not None:
                    fields[key] = round(float(fields[key]), 1)
            self.log.info(
                "%s %s %d %.1f ms",
                method,
                path,
                status,
                ms,
                extra={
                    "request_id": correlation_id.get(),
                    "route": route_template(scope),
                    "path": path,
                    "http_method": method,
                    "status": status,
                    "duration_ms": ms,
                    **fields,
                },
            )


def install_request_logging(app: FastAPI) -> None:
    """Request ids and the request record; add after every other middleware (outermost)."""
    app.add_middleware(RequestLogMiddleware)
    app.add_middleware(
        CorrelationIdMiddleware, header_name=REQUEST_ID_HEADER, validator=valid_request_id
    )


# --- formatting ---------------------------------------------------------------------------------


class RequestIdFilter(logging.Filter):
    """Adds ``request_id`` to every record written while a request runs."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "request_id", None) is None:
            rid = correlation_id.get()
            if rid is not None:
                record.request_id = rid
        return True
