"""What a background task sees of its job: progress reports, per-epoch metrics and the
cancellation flag that the worker honours.

:class:`JobContext` is the one interface of a job as a task sees it, used by the
learning-to-rank task (``service.ltr.task.run_job(params, ctx)``) and its trainer as well.
:class:`StoreJobContext` is the worker's
implementation: progress and metrics are written through to the :class:`~service.jobs.store.
JobStore`; ``cancelled()`` reads the job's ``cancel_requested`` flag at most every
``check_interval_s`` seconds (a task may poll it in a tight loop) and is also true once the
worker itself was asked to shut down. :class:`RecordingContext` keeps everything in memory, for
running a task in the foreground or in tests.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from service.jobs.store import JobStore


class JobContext(Protocol):
    """The job as seen by the task that runs it."""

    def progress(self, fraction: float, message: str) -> None:
        """Report progress: ``fraction`` in [0, 1] and a short text."""
        ...

    def epoch_metrics(self, epoch: int, metrics: dict[str, float]) -> None:
        """Record the (dev) metrics measured after ``epoch``."""
        ...

    def cancelled(self) -> bool:
        """True once cancellation was requested; the task then raises ``JobCancelled``."""
        ...


class StoreJobContext:
    """A :class:`JobContext` backed by the job store (one per running job)."""

    def __init__(
        self,
        store: JobStore,
        job_id: str,
        *,
        shutdown: threading.Event | None = None,
        check_interval_s: float = 0.5,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.job_id = job_id
        self.shutdown = shutdown or threading.Event()
        self.check_interval_s = check_interval_s
        self._clock = clock
        self._last_check: float | None = None
        self._cancelled = False

    def progress(self, fraction: float, message: str) -> None:
        self.store.progress(self.job_id, fraction, message)

    def epoch_metrics(self, epoch: int, metrics: dict[str, float]) -> None:
        self.store.add_epoch_metrics(self.job_id, epoch, metrics)

    def cancelled(self) -> bool:
        if self._cancelled or self.shutdown.is_set():
            return True
        now = self._clock()
        if self._last_check is None or now - self._last_check >= self.check_interval_s:
            self._last_check = now
            self._cancelled = self.store.cancel_requested(self.job_id)
        return self._cancelled


class ScaledContext:
    """A :class:`JobContext` that reports ``ctx``'s progress scaled into ``[0, top]``: for a
    phase of a task that has more to do after it."""

    def __init__(self, ctx: JobContext, top: float) -> None:
        self.ctx = ctx
        self.top = top

    def progress(self, fraction: float, message: str) -> None:
        self.ctx.progress(self.top * fraction, message)

    def epoch_metrics(self, epoch: int, metrics: dict[str, float]) -> None:
        self.ctx.epoch_metrics(epoch, metrics)

    def cancelled(self) -> bool:
        return bool(self.ctx.cancelled())


class RecordingContext:
    """A :class:`JobContext` that records in memory (foreground runs, tests)."""

    def __init__(self, cancel_after: int | None = None) -> None:
        self.reports: list[tuple[float, str]] = []
        self.epochs: list[tuple[int, dict[str, float]]] = []
        self.cancel_after = cancel_after  # cancelled() is true after this many progress reports

    def progress(self, fraction: float, message: str) -> None:
        self.reports.append((fraction, message))

    def epoch_metrics(self, epoch: int, metrics: dict[str, float]) -> None:
        self.epochs.append((epoch, dict(metrics)))

    def cancelled(self) -> bool:
        return self.cancel_after is not None and len(self.reports) >= self.cancel_after
