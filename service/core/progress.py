"""How a long task reports progress and learns that it should stop.

:class:`JobContext` is the one interface a task sees of the job that runs it — progress
reports, per-epoch metrics and the cancellation flag — whoever runs it: the job worker
(:class:`service.jobs.context.StoreJobContext`, written through to the job store), the command
line (:class:`ConsoleContext`, a progress bar on stderr), a test or a foreground run
(:class:`RecordingContext`). :class:`ScaledContext` maps a phase of a task into part of the
bar. The learning-to-rank task (:mod:`service.ltr.task`) and its trainer report through it.
"""

from __future__ import annotations

import sys
from typing import Protocol


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


class ConsoleContext:
    """A :class:`JobContext` for a command (``clir train-ltr``): a tqdm progress bar on stderr
    and one line per epoch; Ctrl-C interrupts the command."""

    def __init__(self, enabled: bool = True) -> None:
        from tqdm import tqdm

        self._file = sys.stderr
        self._write = tqdm.write
        self.bar = tqdm(total=1000, unit="‰", file=sys.stderr, disable=not enabled, leave=True,
                        bar_format="{l_bar}{bar}| {elapsed}<{remaining}")  # fmt: skip

    def progress(self, fraction: float, message: str) -> None:
        self.bar.set_description_str(message[:60])
        self.bar.update(max(0, round(1000 * fraction) - self.bar.n))

    def epoch_metrics(self, epoch: int, metrics: dict[str, float]) -> None:
        shown = " ".join(f"{k}={v:.4f}" for k, v in metrics.items())
        self._write(f"epoch {epoch}: {shown}", file=self._file)

    def cancelled(self) -> bool:
        return False

    def close(self) -> None:
        self.bar.close()
