"""Request hardening at the HTTP edge.

* :class:`BodyGuardMiddleware` (plain ASGI) refuses a request body over ``max_body_bytes`` with
  413 before the app sees it: at once when ``Content-Length`` says so, otherwise by counting the
  streamed chunks (chunked bodies have no ``Content-Length``). A body within the limit is
  buffered (it is small) and replayed to the app. A ``POST``/``PUT``/``PATCH`` body that is not
  declared as JSON is refused with 415, and one that is not UTF-8 with 422, naming what was
  expected (FastAPI would answer 422 "Input should be a valid dictionary" and 400 "There was an
  error parsing the body").
* Every error has one shape, ``{"detail": "<one readable sentence>"}``; a request validation
  error adds ``errors``, FastAPI's list of field errors (``loc``, ``msg``, ``type``), made
  safe to encode (a lone surrogate echoed back in ``input`` used to crash the encoder with a
  500), and its ``detail`` names each field and what was wrong; errors about the body as a
  whole (malformed JSON, an empty body, a JSON value that is not an object) say what was
  expected. The ``input`` an error echoes is cut to a short prefix (:data:`ECHO_CHARS`) with
  its length in ``input_length``: a 10 MB text is never sent back.
* :class:`~service.errors.OverloadedError` (a request that cannot finish within its time
  budget, see :mod:`service.api.admission`) becomes 503 with ``Retry-After``,
  :class:`~service.errors.QueueFullError` (the queue is full) 429 with ``Retry-After``.
* CORS is off unless ``cors_origins`` is set; then exactly those origins may call the API.
* The OpenAPI document lists the error answers every operation can give (``{"detail": ...}``),
  so clients and schema-driven tests (schemathesis) see them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import validation_error_definition
from fastapi.responses import JSONResponse
from starlette.middleware.cors import CORSMiddleware

from service.api.errors import status_for
from service.api.telemetry import ASGIApp, Message, Receive, Scope, Send
from service.core.settings import Settings
from service.errors import OverloadedError

BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
QUEUED_PATHS = frozenset({"/v1/search", "/v1/translate", "/v1/suggest"})  # admission queue
JSON_EXAMPLE = '{"query": "das haus ist groß", "lang": "de"}'
# the example a body error quotes, by path (default: a query's, as search, translate, suggest)
JSON_EXAMPLES = {
    "/v1/admin/documents": '{"documents": [{"id": "d1", "title": "A title", "text": "The text"}]}',
    "/v1/admin/train": '{"lang": "de", "epochs": 5}',
    "/v1/admin/selftest": '{"steps": 3, "seconds": 0.1}',
}


def json_example(path: str) -> str:
    """A body the endpoint at ``path`` takes, for error messages."""
    return JSON_EXAMPLES.get(path, JSON_EXAMPLE)


def is_json_content_type(value: str) -> bool:
    """``application/json`` or ``application/<anything>+json``, parameters ignored."""
    media = value.split(";", 1)[0].strip().lower()
    return media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    )


async def _reply(send: Send, status: int, detail: str) -> None:
    body = JSONResponse({"detail": detail}).body
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class BodyGuardMiddleware:
    """Size limit (413), JSON content type (415) and UTF-8 (422) of request bodies."""

    def __init__(
        self, app: ASGIApp, max_body_bytes: int, larger: Mapping[str, tuple[int, str]] = {}
    ) -> None:
        """``larger``: path → (limit, setting name) of routes that take larger bodies."""
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.larger = dict(larger)

    def too_large(self, size: int | None, limit: int, setting: str) -> str:
        got = f"has {size} bytes" if size is not None else f"exceeds {limit} bytes"
        return (
            f"the request body {got}; at most {limit} bytes are accepted "
            f"(send a shorter request; the limit is the setting {setting})"
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        limit, setting = self.larger.get(
            str(scope.get("path", "")), (self.max_body_bytes, "CLIR_MAX_BODY_BYTES")
        )
        declared = headers.get("content-length")
        if declared is not None:
            if not declared.strip().isdigit():
                await _reply(send, 400, f"the Content-Length header {declared!r} is not a number")
                return
            if int(declared) > limit:
                await _reply(send, 413, self.too_large(int(declared), limit, setting))
                return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return
            chunk = bytes(message.get("body", b""))
            size += len(chunk)
            if size > limit:
                await _reply(send, 413, self.too_large(None, limit, setting))
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        if body and scope.get("method", "") in BODY_METHODS:
            detail = self.body_problem(headers.get("content-type"), body, scope.get("path", ""))
            if detail is not None:
                status, text = detail
                await _reply(send, status, text)
                return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    @staticmethod
    def body_problem(
        content_type: str | None, body: bytes, path: str = ""
    ) -> tuple[int, str] | None:
        """(status, detail) when a request body is not UTF-8 JSON, else None."""
        example = json_example(path)
        expected = f"send the body as JSON with Content-Type: application/json, e.g. {example}"
        if content_type is None:
            return 415, f"the request has a body but no Content-Type header; {expected}"
        if not is_json_content_type(content_type):
            return 415, f"unsupported Content-Type {content_type!r}; {expected}"
        try:
            body.decode("utf-8")
        except UnicodeDecodeError as exc:
            return 422, (
                f"the request body is not valid UTF-8 (byte 0x{body[exc.start]:02x} at offset "
                f"{exc.start}); JSON must be encoded as UTF-8"
            )
        return None


# --- error answers ------------------------------------------------------------------------------


def _safe_text(value: str) -> str:
    """``value`` with lone surrogates (unencodable as UTF-8) replaced by U+FFFD."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "".join("\ufffd" if "\ud800" <= ch <= "\udfff" else ch for ch in value)
    return value


def json_safe(value: Any) -> Any:
    """A JSON-compatible value (from :func:`jsonable_encoder`) that encodes as UTF-8."""
    if isinstance(value, str):
        return _safe_text(value)
    if isinstance(value, list):
        return [json_safe(v) for v in value]
    if isinstance(value, dict):
        return {_safe_text(str(k)): json_safe(v) for k, v in value.items()}
    return value


def _kind(value: Any) -> str:
    names = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number")


def body_error_detail(exc: RequestValidationError, path: str = "") -> str | None:
    """One sentence for an error about the whole body (not JSON, empty, not an object) sent
    to ``path``."""
    example = json_example(path)
    errors = exc.errors()
    if len(errors) != 1:
        return None
    err = errors[0]
    loc = tuple(err.get("loc", ()))
    if err.get("type") == "json_invalid":
        doc = exc.body if isinstance(exc.body, str) else ""
        pos = loc[1] if len(loc) > 1 and isinstance(loc[1], int) else 0
        line = doc.count("\n", 0, pos) + 1
        column = pos - (doc.rfind("\n", 0, pos) + 1) + 1
        reason = (err.get("ctx") or {}).get("error", "JSON decode error")
        return (
            f"the request body is not valid JSON: {reason} at line {line}, column {column}; "
            f"send a JSON object such as {example}"
        )
    if loc == ("body",) and err.get("type") == "missing":
        return f"the request body is empty; send a JSON object such as {example}"
    if loc == ("body",) and err.get("type") == "model_attributes_type":
        return (
            f"the request body is {_kind(err.get('input'))}, not a JSON object; "
            f"send a JSON object such as {example}"
        )
    return None


_LOCATIONS = frozenset({"body", "query", "path", "header", "cookie"})


def field_name(loc: Any) -> str:
    """A field error's location as a client writes it: ``docs[0].id``, ``k``."""
    parts = list(loc or ())
    if len(parts) > 1 and parts[0] in _LOCATIONS:  # where it was sent: body, query string…
        parts = parts[1:]
    parts = parts or ["request"]
    out = ""
    for x in parts:
        out += f"[{x}]" if isinstance(x, int) else (f".{x}" if out else str(x))
    return out


def field_errors_sentence(errors: list[dict[str, Any]]) -> str:
    """One sentence naming each field and what was wrong with it (and the value given, when
    short): ``k: Input should be less than or equal to 1000 (got 10000)``."""
    parts = []
    for err in errors:
        text = f"{field_name(err.get('loc'))}: {err.get('msg', 'invalid')}"
        given = err.get("input")
        scalar = isinstance(given, bool | int | float)
        short = scalar or (isinstance(given, str) and len(given) <= 40)
        if short and err.get("type") != "missing":
            text += f" (got {given!r})"
        parts.append(text)
    return "; ".join(parts) or "the request is not valid"


ECHO_CHARS = 80  # characters of an invalid input echoed in a validation error


def short_echo(error: dict[str, Any]) -> dict[str, Any]:
    """``error`` with its ``input`` cut to :data:`ECHO_CHARS` characters (a string as its
    prefix and "…", an array or object as the prefix of its JSON) and ``input_length`` (its
    characters, or of its JSON) when it was longer."""
    if "input" not in error:
        return error
    given = error["input"]
    text = given if isinstance(given, str) else None
    if isinstance(given, list | dict):
        text = json.dumps(given, ensure_ascii=False)
    if text is None or len(text) <= ECHO_CHARS:
        return error
    return {**error, "input": text[:ECHO_CHARS] + "…", "input_length": len(text)}


async def validation_error_handler(request: Request, exc: Exception) -> JSONResponse:
    """422 ``{"detail": <sentence>, "errors": [<field errors>]}``: one sentence for body-level
    errors, else the field errors' sentence; the list for programs either way (each echoed
    input cut short, :func:`short_echo`)."""
    assert isinstance(exc, RequestValidationError)
    errors = [short_echo(e) for e in json_safe(jsonable_encoder(exc.errors()))]
    sentence = body_error_detail(exc, request.url.path) or field_errors_sentence(errors)
    return JSONResponse({"detail": _safe_text(sentence), "errors": errors}, status_code=422)


async def overloaded_handler(_request: Request, exc: Exception) -> JSONResponse:
    """503 (429 when the queue is full) with ``Retry-After`` (whole seconds, at least 1)."""
    assert isinstance(exc, OverloadedError)
    retry = max(1, math.ceil(exc.retry_after))
    return JSONResponse(
        {"detail": str(exc)}, status_code=status_for(exc), headers={"Retry-After": str(retry)}
    )


# --- OpenAPI --------------------------------------------------------------------------------------

ERROR_SCHEMA = {
    "title": "ErrorDetail",
    "type": "object",
    "required": ["detail"],
    "properties": {
        "detail": {"title": "Detail", "type": "string", "description": "What went wrong."},
        "errors": {
            "title": "Errors",
            "type": "array",
            "description": "Validation errors only: each field error (loc, msg, type).",
            "items": {"$ref": "#/components/schemas/ValidationError"},
        },
        "request_id": {
            "title": "Request Id",
            "type": "string",
            "description": "500 only: the id the service logged the error under.",
        },
    },
}
ERROR_TEXT = {
    400: "Malformed request headers.",
    401: "Missing bearer token.",
    403: "Wrong bearer token, or admin is disabled.",
    404: "No such id.",
    409: "Conflicts with the current state.",
    413: "Request body or text over the configured limit.",
    415: "The request body is not declared as JSON.",
    429: "Too many requests queued (CLIR_QUEUE_SIZE), with Retry-After.",
    503: "Not ready (resource not loaded) or busy (then with Retry-After).",
}


def _error_response(code: int) -> dict[str, Any]:
    ref = {"$ref": "#/components/schemas/ErrorDetail"}
    response: dict[str, Any] = {
        "description": ERROR_TEXT[code],
        "content": {"application/json": {"schema": ref}},
    }
    if code in (429, 503):
        response["headers"] = {
            "Retry-After": {
                "description": "Seconds to wait before retrying (when busy).",
                "schema": {"type": "integer"},
            }
        }
    return response


def document_error_responses(schema: dict[str, Any]) -> dict[str, Any]:
    """Add the ``{"detail": ...}`` answers to every ``/v1`` operation of ``schema`` (in place);
    422 is the same shape, with the field errors in ``errors``."""
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    components.setdefault("ErrorDetail", ERROR_SCHEMA)
    components.pop("HTTPValidationError", None)  # FastAPI's list form: never answered
    components.setdefault("ValidationError", validation_error_definition)
    for path, item in schema.get("paths", {}).items():
        if not path.startswith("/v1/"):
            continue
        for method, op in item.items():
            if method.lower() not in {"get", "post", "put", "patch", "delete"}:
                continue
            responses = op.setdefault("responses", {})
            codes = [503]
            if op.get("requestBody"):
                codes += [400, 413, 415]
            if "{" in path:
                codes.append(404)
            if path in QUEUED_PATHS:
                codes.append(429)
            if path.startswith("/v1/admin/"):
                codes += [401, 403, 404, 409]
            for code in sorted(set(codes)):
                responses.setdefault(str(code), _error_response(code))
            if "422" in responses or op.get("requestBody"):
                responses["422"] = {
                    "description": "Invalid input: the sentence says what; a validation "
                    "error lists the fields in errors.",
                    "content": {
                        "application/json": {"schema": {"$ref": "#/components/schemas/ErrorDetail"}}
                    },
                }
    return schema


def _documented_openapi(app: FastAPI) -> Callable[[], dict[str, Any]]:
    original = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = document_error_responses(original())
        return app.openapi_schema

    return openapi


# --- wiring ------------------------------------------------------------------------------------


def install_limits(app: FastAPI, settings: Settings) -> None:
    """Body guard, CORS (only when configured), error handlers and documented errors.

    Call before other middleware is added so that those (metrics) wrap these and count their
    answers; CORS wraps the body guard so that its 413/415 carry the CORS headers."""
    larger = {
        "/v1/admin/documents": (settings.max_documents_body_bytes, "CLIR_MAX_DOCUMENTS_BODY_BYTES")
    }
    app.add_middleware(BodyGuardMiddleware, max_body_bytes=settings.max_body_bytes, larger=larger)
    if settings.cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.cors_origins,
            allow_methods=["GET", "POST", "DELETE"],
            allow_headers=["Authorization", "Content-Type", "X-Request-ID"],
            expose_headers=["X-Request-ID", "Retry-After"],  # readable by the calling page
            max_age=600,
        )
    app.add_exception_handler(RequestValidationError, validation_error_handler)
    app.add_exception_handler(OverloadedError, overloaded_handler)
    app.openapi = _documented_openapi(app)  # type: ignore[method-assign]
