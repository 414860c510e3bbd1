"""How the service's processes write their logs: one format on stderr for the API server, its
supervisor and the job worker, chosen by ``CLIR_LOG_FORMAT`` — ``json`` (one object a line,
the record's fields as keys), ``text`` (uvicorn's terminal format followed by ``key=value``
fields) or ``auto`` (text on a terminal, JSON otherwise). The API adds request ids and the
request record (:mod:`service.api.logs`); the settings are read by each process's entry point
and passed here.
"""

from __future__ import annotations

import logging
import sys
from typing import Any, Literal, TextIO

from pythonjsonlogger.core import RESERVED_ATTRS
from pythonjsonlogger.json import JsonFormatter
from uvicorn.logging import DefaultFormatter

LogFormat = Literal["auto", "json", "text"]

# record attributes that are not fields of a log line (uvicorn adds ``color_message``)
NOT_FIELDS = frozenset([*RESERVED_ATTRS, "taskName", "color_message"])
_IN_MESSAGE = frozenset(["path", "http_method", "status", "duration_ms"])  # text: in the message


class TextFormatter(DefaultFormatter):
    """uvicorn's terminal format, followed by the record's fields as ``key=value``."""

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        extras = [
            f"{k}={v}"
            for k, v in record.__dict__.items()
            if k not in NOT_FIELDS and k not in _IN_MESSAGE and v is not None
        ]
        return " ".join([text, *extras]) if extras else text


def current_format() -> Literal["json", "text"]:
    """How this process writes the ``service`` loggers' lines (JSON when their handler's
    formatter is python-json-logger's): what a child process it starts should write too."""
    for handler in logging.getLogger("service").handlers:
        if isinstance(handler.formatter, JsonFormatter):
            return "json"
    return "text"


def resolve_format(log_format: LogFormat, stream: TextIO | None = None) -> Literal["json", "text"]:
    """``auto``: text when ``stream`` (stderr) is a terminal, JSON otherwise."""
    if log_format != "auto":
        return log_format
    stream = stream if stream is not None else sys.stderr
    isatty = getattr(stream, "isatty", None)
    return "text" if isatty is not None and isatty() else "json"


def logging_config(
    log_format: LogFormat,
    level: str = "info",
    stream: TextIO | None = None,
    *,
    request_ids: bool = True,
) -> dict[str, Any]:
    """The ``dictConfig`` of a process's logs on stderr (uvicorn's ``log_config``; the job
    worker's). ``request_ids``: add the request id of the request a line was written in (the
    API server's)."""
    fmt = resolve_format(log_format, stream)
    formatter: dict[str, Any]
    if fmt == "json":
        formatter = {
            "()": "pythonjsonlogger.json.JsonFormatter",
            "fmt": "{levelname}{name}{message}",
            "style": "{",
            "rename_fields": {"levelname": "level", "name": "logger"},
            "reserved_attrs": sorted(NOT_FIELDS),
            "timestamp": "time",
        }
    else:
        formatter = {"()": "service.core.logs.TextFormatter", "fmt": "%(levelprefix)s %(message)s"}
    handler: dict[str, Any] = {
        "class": "logging.StreamHandler",
        "formatter": fmt,
        "stream": "ext://sys.stderr",
    }
    filters: dict[str, Any] = {}
    if request_ids:
        handler["filters"] = ["request_id"]
        filters["request_id"] = {"()": "service.api.logs.RequestIdFilter"}
    lvl = level.upper()
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": filters,
        "formatters": {fmt: formatter},
        "handlers": {"default": handler},
        "loggers": {
            "uvicorn": {"handlers": ["default"], "level": lvl, "propagate": False},
            "service": {"handlers": ["default"], "level": lvl, "propagate": False},
        },
        "root": {"handlers": ["default"], "level": "WARNING"},
    }
