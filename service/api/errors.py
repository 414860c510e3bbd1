"""Map domain errors (``service.errors``) to HTTP responses ``{"detail": ...}``."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from service.errors import (
    ClirError,
    ConflictError,
    InputTooLargeError,
    InvalidInputError,
    MissingResourceError,
    NotBuiltError,
    NotFoundError,
    NotReadyError,
)

# Most specific first: the first matching class decides the status.
STATUS_BY_ERROR: tuple[tuple[type[ClirError], int], ...] = (
    (InputTooLargeError, 413),
    (InvalidInputError, 422),
    (NotFoundError, 404),
    (ConflictError, 409),
    (NotReadyError, 503),
    (NotBuiltError, 501),
    (MissingResourceError, 503),
)


def status_for(exc: ClirError) -> int:
    return next((code for cls, code in STATUS_BY_ERROR if isinstance(exc, cls)), 500)


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ClirError)
    async def _clir_error(_request: Request, exc: ClirError) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=status_for(exc))
