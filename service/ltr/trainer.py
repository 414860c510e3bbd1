"""The learning-to-rank epoch loop: parameter mixing, dev evaluation, early stopping
(Hieber & Riezler 2015, §4).

Every epoch each shard trains one pass from the mixed weights and the results are averaged
(iterative parameter mixing, McDonald et al. 2010; with one shard this is plain training).
After the epoch the mixed output weights rank the pre-decoded dev queries by BOW-FD at depth
1000 and MAP, NDCG@1000 and PRES are reported through the job context. Regularisation is early
stopping on dev MAP (Hieber & Riezler 2015, §4): training stops after ``patience`` epochs without a
new best, and the best epoch's weights are kept — epoch 0, the starting weights, included, so a run
that never beats them returns them unchanged.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from service.core.progress import JobContext
from service.errors import JobCancelled
from service.ltr.backends import Backend
from service.ltr.examples import DevSet
from service.ltr.shard import ShardEpoch, ShardSpec, mix


class NullContext:
    """A context that records nothing and is never cancelled."""

    def progress(self, fraction: float, message: str) -> None:
        return None

    def epoch_metrics(self, epoch: int, metrics: dict[str, float]) -> None:
        return None

    def cancelled(self) -> bool:
        return False


class Reporter:
    """Throttles progress reports to the context (at most every ``interval`` seconds, plus
    every report that completes a phase) and turns cancellation into ``JobCancelled``."""

    def __init__(self, ctx: JobContext, interval: float = 0.5) -> None:
        self.ctx = ctx
        self.interval = interval
        self._last = -1e9
        self._fraction = 0.0  # reported fractions never decrease (phases may overlap)
        self.span = (0.0, 1.0)  # the part of the bar the current phase fills (:meth:`within`)

    def progress(self, fraction: float, message: str, force: bool = False) -> None:
        now = time.monotonic()
        if force or now - self._last >= self.interval:
            self._last = now
            self._fraction = max(self._fraction, min(1.0, max(0.0, fraction)))
            self.ctx.progress(self._fraction, message)

    def within(self, fraction: float, message: str, force: bool = False) -> None:
        """Report ``fraction`` of the current phase (its :attr:`span` of the bar)."""
        lo, hi = self.span
        self.progress(lo + (hi - lo) * fraction, message, force)

    def cancelled(self) -> bool:
        return bool(self.ctx.cancelled())

    def check(self) -> None:
        if self.ctx.cancelled():
            raise JobCancelled("learning to rank was cancelled")


BUILD_SHARE = 0.3  # share of the progress bar for decoding the training and dev queries


@dataclass
class EpochRecord:
    epoch: int
    metrics: dict[str, float]
    loss: float
    seconds: float


@dataclass
class TrainOutcome:
    """The result of a run: the best weights and how they were found."""

    weights: dict[str, float]
    best_epoch: int
    best_metrics: dict[str, float]
    baseline: dict[str, float]
    history: list[EpochRecord]
    shard_stats: list[dict[str, Any]]
    epoch_weights: list[dict[str, float]] = field(default_factory=list)

    @property
    def epochs_run(self) -> int:
        return len(self.history)

    @property
    def train_queries(self) -> int:
        return sum(int(s.get("queries", 0)) for s in self.shard_stats)


class _ProgressTable:
    """Sums the (done, total) of several shards into one fraction."""

    def __init__(self, shards: int) -> None:
        self.done = [0] * shards
        self.total = [0] * shards

    def update(self, shard: int, done: int, total: int) -> float:
        self.done[shard], self.total[shard] = done, total
        t = sum(self.total)
        return sum(self.done) / t if t else 0.0


def _build(
    backend: Backend,
    specs: Sequence[ShardSpec],
    build_dev: Callable[[Reporter], DevSet],
    rep: Reporter,
    dev_share: float,
) -> tuple[DevSet, list[dict[str, Any]]]:
    """Launch the shards and build the dev set, meanwhile when the backend builds in the
    background (else after): the dev set and the shards' statistics."""
    table = _ProgressTable(len(specs))
    in_background = backend.builds_in_background  # the dev set first, while workers build
    dev_span = (0.0, dev_share) if in_background else (1.0 - dev_share, 1.0)
    train_span = (dev_share, 1.0) if in_background else (0.0, 1.0 - dev_share)

    def build_progress(shard: int, done: int, total: int) -> None:
        frac = table.update(shard, done, total)
        lo, hi = train_span
        rep.progress(BUILD_SHARE * (lo + (hi - lo) * frac),
                     f"decoding training queries ({frac:.0%})")  # fmt: skip

    rep.progress(0.0, f"starting {len(specs)} shard(s) on backend {backend.name}", force=True)
    backend.launch(specs)
    rep.span = (BUILD_SHARE * dev_span[0], BUILD_SHARE * dev_span[1])
    if in_background:
        dev = build_dev(rep)
        stats = backend.built(build_progress, rep.cancelled)
    else:
        stats = backend.built(build_progress, rep.cancelled)
        dev = build_dev(rep)
    return dev, stats


def train(
    backend: Backend,
    specs: Sequence[ShardSpec],
    start: Mapping[str, float],
    *,
    build_dev: Callable[[Reporter], DevSet],
    epochs: int,
    patience: int,
    ctx: JobContext | None = None,
    keep_epoch_weights: bool = False,
    dev_share: float = 0.2,
) -> TrainOutcome:
    """Build the shards (and, meanwhile, the dev set), then run up to ``epochs`` epochs.
    ``dev_share``: the part of the building phase's bar the dev set's decoding fills (its
    share of the queries decoded: the dev set often outnumbers the training queries);
    ``build_dev`` reports through :meth:`Reporter.within`."""
    rep = Reporter(ctx or NullContext())
    dev, stats = _build(backend, specs, build_dev, rep, min(1.0, max(0.0, dev_share)))
    rep.span = (0.0, 1.0)
    rep.check()
    rep.progress(BUILD_SHARE, "evaluating the starting weights on dev", force=True)
    baseline, _ = dev.evaluate(start, rep.check)
    weights = dict(start)
    best_weights, best_epoch, best_metrics = dict(start), 0, baseline
    history: list[EpochRecord] = []
    kept: list[dict[str, float]] = []
    for epoch in range(1, epochs + 1):
        t0 = time.perf_counter()
        table = _ProgressTable(len(specs))

        def epoch_progress(
            shard: int, done: int, total: int, _e: int = epoch, _t: _ProgressTable = table
        ) -> None:
            frac = _t.update(shard, done, total)
            overall = BUILD_SHARE + (1 - BUILD_SHARE) * ((_e - 1) + 0.9 * frac) / epochs
            rep.progress(overall, f"epoch {_e}/{epochs}: {frac:.0%} of the training queries")

        results: list[ShardEpoch] = backend.epoch(weights, epoch_progress, rep.cancelled)
        rep.check()
        weights = mix([r.weights for r in results], weights)
        output = mix([r.output for r in results], weights)
        if keep_epoch_weights:
            kept.append(dict(output))
        rep.progress(
            BUILD_SHARE + (1 - BUILD_SHARE) * (epoch - 0.1) / epochs,
            f"epoch {epoch}/{epochs}: evaluating on dev",
            force=True,
        )
        metrics, _ = dev.evaluate(output, rep.check)
        loss = sum(r.loss for r in results)
        record = EpochRecord(epoch, metrics, loss, time.perf_counter() - t0)
        history.append(record)
        report = {k: float(v) for k, v in metrics.items() if k != "seconds"}
        report["train_loss"] = loss
        report["seconds"] = record.seconds
        (ctx or NullContext()).epoch_metrics(epoch, report)
        if metrics["map"] > best_metrics["map"]:
            best_weights, best_epoch, best_metrics = dict(output), epoch, metrics
        elif epoch - best_epoch >= patience:
            break
    rep.progress(1.0, f"done: best dev MAP {best_metrics['map']:.4f} at epoch {best_epoch}", True)
    return TrainOutcome(
        weights=best_weights,
        best_epoch=best_epoch,
        best_metrics=best_metrics,
        baseline=baseline,
        history=history,
        shard_stats=stats,
        epoch_weights=kept,
    )
