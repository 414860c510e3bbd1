"""The registry of background tasks: job kind → ``"module:function"``, imported lazily, so the
worker loads the learning-to-rank code only when it runs a training job.

Every task has the signature ``run(params: dict[str, Any], ctx: JobContext, settings:
Settings) -> dict[str, Any]`` and returns ``{"version": <new weights version or None>,
"model": ..., "metrics": {...}}``. The worker hands it its settings; the task turns them into
the explicit arguments of the library call (:func:`ltr_setup`), so nothing below reads
settings. It reports progress through ``ctx``, checks ``ctx.cancelled()`` between steps and
then raises :class:`~service.errors.JobCancelled`; any other exception fails the job.

``ltr`` runs learning to rank (:func:`service.ltr.task.train_ltr`) with the job's parameters.

``selftest`` is a built-in diagnostic: ``steps`` steps of ``seconds`` each, reporting progress
and per-step metrics and honouring cancellation. With ``model`` (a bundle directory) it ends
like a training job: it stores a copy of the active weights as a new version (``source =
"selftest"``), and activates it if ``activate`` is true. The ops check and the tests use it.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from service.core.progress import JobContext
from service.core.settings import Settings
from service.errors import InvalidInputError, JobCancelled

if TYPE_CHECKING:
    from service.ltr.task import LtrSetup

Task = Callable[[dict[str, Any], JobContext, Settings], dict[str, Any]]

TASKS: dict[str, str] = {
    "ltr": "service.jobs.tasks:ltr",
    "selftest": "service.jobs.tasks:selftest",
}


def resolve_task(kind: str) -> Task:
    """The task function of ``kind`` (its module imported now)."""
    target = TASKS.get(kind)
    if target is None:
        raise InvalidInputError(
            f"unknown job kind {kind[:40]!r}; known kinds: {', '.join(sorted(TASKS))}"
        )
    module_name, _, attr = target.partition(":")
    module = importlib.import_module(module_name)
    fn: Task = getattr(module, attr)
    return fn


class SelftestParams(BaseModel):
    """Parameters of the ``selftest`` task."""

    model_config = ConfigDict(extra="forbid")

    steps: int = Field(3, ge=1, le=10_000, description="Number of steps.")
    seconds: float = Field(0.05, ge=0, le=60, description="Seconds each step sleeps.")
    fail_at: int | None = Field(None, ge=1, description="Raise an error at this step.")
    model: Path | None = Field(None, description="Bundle to write a weights version to.")
    activate: bool = Field(False, description="Activate the written version.")


def ltr_setup(settings: Settings) -> LtrSetup:
    """What a learning-to-rank run draws on, from the service's ``settings``."""
    from service.ltr.task import LtrSetup

    return LtrSetup(
        data_dir=settings.data_dir,
        model_bundles=tuple(settings.model_bundles),
        doc_indexes=tuple(settings.doc_indexes),
        backend=settings.ltr_backend,
        pop_limit=settings.pop_limit,
        engine=settings.decoder_engine,
        weights_state_dir=settings.weights_state_dir,
        ray_address=settings.ray_address,
    )


def ltr(params: dict[str, Any], ctx: JobContext, settings: Settings) -> dict[str, Any]:
    """Learning to rank: train, store, return ``{"version", "model", "metrics"}``."""
    from service.ltr.task import train_ltr, validate_params

    return train_ltr(validate_params(params), ctx, setup=ltr_setup(settings)).to_json()


def selftest(params: dict[str, Any], ctx: JobContext, settings: Settings) -> dict[str, Any]:
    """Sleep through ``steps`` steps, reporting progress; optionally write a weights version."""
    try:
        p = SelftestParams.model_validate(params)
    except ValidationError as exc:
        raise InvalidInputError(f"invalid selftest parameters: {exc}") from exc
    for step in range(1, p.steps + 1):
        if ctx.cancelled():
            raise JobCancelled(f"selftest cancelled before step {step} of {p.steps}")
        if p.fail_at == step:
            raise RuntimeError(f"selftest failed at step {step} as asked")
        time.sleep(p.seconds)
        ctx.progress(step / p.steps, f"step {step}/{p.steps}")
        ctx.epoch_metrics(step, {"step": float(step)})
    version: str | None = None
    if p.model is not None:
        from service.mt.bundle import weights_store

        store = weights_store(p.model, settings.weights_state_dir)
        active = store.active()
        record = store.save(
            active.weights,
            source="selftest",
            metrics={"steps": float(p.steps)},
            parent=active.version,
        )
        version = record.version
        if p.activate:
            store.activate(version)
    return {
        "version": version,
        "model": None if p.model is None else str(p.model),
        "metrics": {"steps": float(p.steps)},
    }
