"""The worker's :class:`~service.core.progress.JobContext`: what a background task sees of its job.

:class:`StoreJobContext` writes progress and metrics through to the
:class:`~service.jobs.store.JobStore`; ``cancelled()`` reads the job's ``cancel_requested`` flag
at most every ``check_interval_s`` seconds (a task may poll it in a tight loop) and is also true
once the worker itself was asked to shut down. The protocol and the contexts that need no store
(recording, scaled, console) are in :mod:`service.core.progress`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from service.jobs.store import JobStore


class StoreJobContext:
    """A :class:`~service.core.progress.JobContext` backed by the job store (one per running
    job)."""

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
