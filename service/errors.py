"""Domain errors of the library.

Every error the library raises on purpose derives from :class:`ClirError` and carries a
message that says what went wrong and what to do. Nothing here imports the web layer; the
API maps these classes to HTTP status codes at the edge (``service.api.errors``).
"""

from __future__ import annotations

from pathlib import Path


class ClirError(Exception):
    """Base class of all domain errors."""


class ConfigurationError(ClirError):
    """A setting or an argument combination is invalid."""


class MissingExtraError(ConfigurationError):
    """A feature needs a package of an optional extra that is not installed.

    The message names the extra and the command that installs it (``service.core.extras``).
    """

    def __init__(self, feature: str, module: str, extra: str) -> None:
        self.feature = feature
        self.module = module
        self.extra = extra
        super().__init__(
            f"{feature} needs the optional '{extra}' extra (the {module!r} package is not "
            f"installed): pip install 'clir-service[{extra}]', or, in a checkout, "
            f".venv/bin/pip install -c constraints.txt -e '.[{extra}]'"
        )


class DataFormatError(ClirError):
    """A data file is malformed; names the file and, where known, the line."""

    def __init__(self, path: str | Path, line_no: int | None, reason: str) -> None:
        self.path = str(path)
        self.line_no = line_no
        self.reason = reason
        where = f"{self.path}:{line_no}" if line_no is not None else self.path
        super().__init__(f"{where}: {reason}")


class MissingResourceError(ClirError):
    """A file, model bundle or index that is needed does not exist."""


class InvalidInputError(ClirError):
    """A request or query that cannot be processed (empty, too long, bad value): the caller
    can fix it."""


class InputTooLargeError(InvalidInputError):
    """A request or query exceeds a configured size limit."""


class NotFoundError(ClirError):
    """An id (document, job, weights version) that does not exist."""


class ConflictError(ClirError):
    """The request conflicts with the current state (e.g. a job already running)."""


class NotReadyError(ClirError):
    """A resource the request needs is not loaded (no model for that language, no index)."""


class OutOfFilesError(NotReadyError):
    """The process may open no more files (its ``ulimit -n``): not a broken file, and not
    fixed by rebuilding one; raise the limit."""


class OverloadedError(NotReadyError):
    """Too many requests are in progress; the caller should retry after ``retry_after`` s."""

    def __init__(self, message: str, retry_after: float = 1.0) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class QueueFullError(OverloadedError):
    """So many requests already wait for a slot that no more may queue (429 + Retry-After)."""


class InternalError(ClirError):
    """A broken invariant of the service itself: a bug, not the caller's fault.

    Raised where the code finds a state its own guarantees rule out (e.g. a decoder forest
    without a derivation of its goal, although pass-through rules cover every word). The API
    answers 500 and logs the message with the request id; the client gets a generic message.
    """


class JobCancelled(ClirError):
    """A background task saw ``ctx.cancelled()`` and stopped (the worker marks the job)."""
