"""Map domain errors (``service.errors``) to HTTP responses ``{"detail": ...}``.

Every class of ``service.errors`` has a deliberate status here (a test checks that none is
missing): request errors are 4xx; errors about the service's own state (a resource not loaded,
a configuration or data file it cannot use, an internal step that failed with a domain error)
are 503 with a message that says what to fix. The one 500 is :class:`InternalError`, a broken
invariant (a bug): its message is logged at error level with the request id, and the client
gets a generic message and that request id (``{"detail": ..., "request_id": ...}``) to quote.
"""

from __future__ import annotations

import logging

from asgi_correlation_id import correlation_id
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from service.errors import (
    ClirError,
    ConfigurationError,
    ConflictError,
    DataFormatError,
    InputTooLargeError,
    InternalError,
    InvalidInputError,
    JobCancelled,
    MissingExtraError,
    MissingResourceError,
    NotFoundError,
    NotReadyError,
    OutOfFilesError,
    OverloadedError,
    QueueFullError,
)

log = logging.getLogger(__name__)

# Most specific first: the first matching class decides the status.
STATUS_BY_ERROR: tuple[tuple[type[ClirError], int], ...] = (
    (InternalError, 500),  # a bug: logged with the request id, generic message to the client
    (InputTooLargeError, 413),
    (InvalidInputError, 422),
    (NotFoundError, 404),
    (ConflictError, 409),
    (JobCancelled, 409),  # the job was cancelled: the state changed under the request
    (QueueFullError, 429),  # the admission queue is full, with Retry-After
    (OverloadedError, 503),  # with Retry-After (service.api.limits)
    (OutOfFilesError, 503),  # the process's limit of open files (ulimit -n): the operator's fix
    (NotReadyError, 503),
    (MissingResourceError, 503),
    (MissingExtraError, 501),  # this install lacks the optional extra the feature needs
    (ConfigurationError, 503),  # the service is configured so that it cannot answer this
    (DataFormatError, 503),  # a file the service reads (weights, index, bundle) is malformed
    (ClirError, 503),  # any other domain failure of the service (job store, training shard)
)


def status_for(exc: ClirError) -> int:
    """The HTTP status of a domain error (the table covers every ClirError)."""
    return next(code for cls, code in STATUS_BY_ERROR if isinstance(exc, cls))


def internal_error_response(exc: InternalError) -> JSONResponse:
    """Log ``exc`` at error level with the request id; answer 500 without its message."""
    request_id = correlation_id.get()
    log.error("internal error: %s", exc, exc_info=exc, extra={"request_id": request_id})
    return JSONResponse(
        {
            "detail": "internal error: the service logged the details under request id "
            f"{request_id}; please report it with that id",
            "request_id": request_id,
        },
        status_code=500,
    )


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ClirError)
    async def _clir_error(_request: Request, exc: ClirError) -> JSONResponse:
        if isinstance(exc, InternalError):
            return internal_error_response(exc)
        return JSONResponse({"detail": str(exc)}, status_code=status_for(exc))
