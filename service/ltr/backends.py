"""Where the shards of iterative parameter mixing run (Hieber & Riezler 2015, §4; McDonald et al.
2010).

One interface, three backends, the same :class:`~service.ltr.shard.Shard` code, and so the
same weights for the same data and seed:

* ``inline`` — the shards in this process, one after the other (tests; one shard);
* ``local`` — one persistent worker process per shard (``multiprocessing``, "spawn" context,
  ``OPENBLAS_NUM_THREADS=1``); a worker builds and keeps its shard's examples, then receives
  weights and returns weights every epoch over a pipe;
* ``ray`` — one Ray actor per shard wrapping the same class; ``ray.init(address=...)`` joins an
  existing cluster (``settings.ray_address``), otherwise a local Ray instance is started
  (``num_cpus`` = shards, no dashboard) and shut down at the end.

:meth:`Backend.launch` starts building (non-blocking where the backend allows, so the driver
can decode the dev set meanwhile), :meth:`Backend.built` waits for it, :meth:`Backend.epoch`
runs one epoch on every shard from the given weights. While waiting, the driver polls
``cancelled()`` and, once it is true, stops the workers and raises
:class:`~service.errors.JobCancelled`; a worker's error is raised in the driver as a
:class:`~service.errors.ClirError` naming the shard.
"""

from __future__ import annotations

import os
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from contextlib import contextmanager, suppress
from typing import Any, ClassVar

from service.core.extras import import_extra
from service.errors import ClirError, ConfigurationError, JobCancelled
from service.index.inverted import InvertedIndex
from service.ltr.shard import Cancelled, Shard, ShardEpoch, ShardSpec
from service.mt.bundle import ModelBundle

ShardProgress = Callable[[int, int, int], None]  # (shard, done, total)
POLL_S = 0.2


def _never() -> bool:
    return False


class Backend(ABC):
    """Runs a list of shards (see the module docstring)."""

    name: ClassVar[str] = ""
    builds_in_background: ClassVar[bool] = True  # launch() returns while the shards build

    def __init__(self) -> None:
        self.specs: list[ShardSpec] = []

    def __enter__(self) -> Backend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @abstractmethod
    def launch(self, specs: Sequence[ShardSpec]) -> None:
        """Start building the shards' examples."""

    @abstractmethod
    def built(
        self, progress: ShardProgress | None = None, cancelled: Cancelled = _never
    ) -> list[dict[str, Any]]:
        """Wait until every shard is built; their stats."""

    @abstractmethod
    def epoch(
        self,
        weights: Mapping[str, float],
        progress: ShardProgress | None = None,
        cancelled: Cancelled = _never,
    ) -> list[ShardEpoch]:
        """One epoch on every shard, each from ``weights``."""

    def close(self) -> None:  # noqa: B027 - most backends hold nothing to release
        """Release workers (idempotent)."""


class InlineBackend(Backend):
    """Shards in this process, sequentially."""

    name = "inline"
    builds_in_background = False

    def __init__(
        self,
        bundle: ModelBundle | None = None,
        index: InvertedIndex | None = None,
        shards: Sequence[Shard] | None = None,
    ) -> None:
        """``shards``: already built shards to train (their specs are then ignored)."""
        super().__init__()
        self.bundle = bundle
        self.index = index
        self.prebuilt = list(shards or [])
        self.shards: list[Shard] = []

    def launch(self, specs: Sequence[ShardSpec]) -> None:
        self.specs = list(specs)
        if self.prebuilt:
            self.shards = self.prebuilt
        else:
            self.shards = [Shard(s, self.bundle, self.index) for s in self.specs]

    def built(
        self, progress: ShardProgress | None = None, cancelled: Cancelled = _never
    ) -> list[dict[str, Any]]:
        if self.prebuilt:
            return [s.stats for s in self.shards]
        out = []
        for s in self.shards:
            cb = None if progress is None else _bind(progress, s.spec.shard)
            out.append(s.build(cb, cancelled))
        return out

    def epoch(
        self,
        weights: Mapping[str, float],
        progress: ShardProgress | None = None,
        cancelled: Cancelled = _never,
    ) -> list[ShardEpoch]:
        out = []
        for s in self.shards:
            cb = None if progress is None else _bind(progress, s.spec.shard)
            out.append(s.epoch(weights, cb, cancelled))
        return out


def _bind(progress: ShardProgress, shard: int) -> Callable[[int, int], None]:
    def cb(done: int, total: int) -> None:
        progress(shard, done, total)

    return cb


# --- local worker processes ---------------------------------------------------------------------
@contextmanager
def _single_blas_thread() -> Any:
    """Children inherit the environment at spawn: one BLAS thread per worker process."""
    old = os.environ.get("OPENBLAS_NUM_THREADS")
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("OPENBLAS_NUM_THREADS", None)
        else:
            os.environ["OPENBLAS_NUM_THREADS"] = old


def _worker_main(conn: Any) -> None:  # pragma: no cover - runs in a child process
    """A local worker: build on ``("build", spec)``, train on ``("epoch", weights)``."""
    shard: Shard | None = None
    last = 0.0

    def progress(done: int, total: int) -> None:
        nonlocal last
        now = time.monotonic()
        if done == total or now - last > 0.5:
            last = now
            conn.send(("progress", done, total))

    while True:
        try:
            msg = conn.recv()
        except EOFError:
            return
        try:
            if msg[0] == "build":
                shard = Shard(msg[1])
                conn.send(("result", shard.build(progress)))
            elif msg[0] == "epoch":
                if shard is None:
                    raise ClirError("epoch before build")
                conn.send(("result", shard.epoch(msg[1], progress)))
            else:
                return
        except Exception as exc:
            conn.send(("error", type(exc).__name__, str(exc)))


class LocalBackend(Backend):
    """One persistent worker process per shard."""

    name = "local"

    def __init__(self) -> None:
        super().__init__()
        self.procs: list[Any] = []
        self.conns: list[Any] = []

    def launch(self, specs: Sequence[ShardSpec]) -> None:
        import multiprocessing

        self.specs = list(specs)
        ctx = multiprocessing.get_context("spawn")
        with _single_blas_thread():
            for spec in self.specs:
                parent, child = ctx.Pipe()
                proc = ctx.Process(
                    target=_worker_main, args=(child,), daemon=True, name=f"ltr-shard-{spec.shard}"
                )
                proc.start()
                child.close()
                self.procs.append(proc)
                self.conns.append(parent)
        for conn, spec in zip(self.conns, self.specs, strict=True):
            conn.send(("build", spec))

    def _gather(self, progress: ShardProgress | None, cancelled: Cancelled) -> list[Any]:
        results: list[Any] = [None] * len(self.conns)
        pending = set(range(len(self.conns)))
        while pending:
            if cancelled():
                self.close()
                raise JobCancelled("learning to rank was cancelled")
            for i in sorted(pending):
                conn = self.conns[i]
                try:
                    while conn.poll(POLL_S / max(1, len(pending))):
                        msg = conn.recv()
                        if msg[0] == "progress":
                            if progress is not None:
                                progress(self.specs[i].shard, msg[1], msg[2])
                        elif msg[0] == "result":
                            results[i] = msg[1]
                            pending.discard(i)
                            break
                        else:
                            self.close()
                            raise ClirError(f"learning-to-rank shard {i} failed: {msg[2]}")
                except (EOFError, OSError):
                    code = self.procs[i].exitcode
                    self.close()
                    raise ClirError(
                        f"the worker process of learning-to-rank shard {i} died "
                        f"(exit code {code}); see its log, check memory"
                    ) from None
        return results

    def built(
        self, progress: ShardProgress | None = None, cancelled: Cancelled = _never
    ) -> list[dict[str, Any]]:
        return self._gather(progress, cancelled)

    def epoch(
        self,
        weights: Mapping[str, float],
        progress: ShardProgress | None = None,
        cancelled: Cancelled = _never,
    ) -> list[ShardEpoch]:
        for conn in self.conns:
            conn.send(("epoch", dict(weights)))
        return self._gather(progress, cancelled)

    def close(self) -> None:
        for conn in self.conns:
            with suppress(OSError, ValueError):
                conn.send(("stop",))
        for proc in self.procs:
            proc.join(timeout=2.0)
            if proc.is_alive():
                proc.terminate()
                proc.join(timeout=5.0)
        for conn in self.conns:
            conn.close()
        self.procs, self.conns = [], []


# --- Ray ------------------------------------------------------------------------------------------
class _RayShard:  # pragma: no cover - runs in a Ray worker
    """The actor class: a :class:`Shard` behind Ray's remote calls."""

    def __init__(self, spec: ShardSpec) -> None:
        self.shard = Shard(spec)

    def build(self) -> dict[str, Any]:
        return self.shard.build()

    def epoch(self, weights: dict[str, float]) -> ShardEpoch:
        return self.shard.epoch(weights)


class RayBackend(Backend):
    """One Ray actor per shard."""

    name = "ray"

    def __init__(self, address: str | None = None, num_cpus: int | None = None) -> None:
        super().__init__()
        self.address = address
        self.num_cpus = num_cpus
        self.actors: list[Any] = []
        self._pending: list[Any] = []
        self._started_ray = False
        self._ray()  # fail when the backend is chosen, not when the first shard starts

    def _ray(self) -> Any:
        """The ``ray`` module; :class:`MissingExtraError` naming the ``ray`` extra without it."""
        return import_extra("ray", "ray", "the ray training backend (CLIR_LTR_BACKEND=ray)")

    def launch(self, specs: Sequence[ShardSpec]) -> None:
        ray = self._ray()
        self.specs = list(specs)
        if not ray.is_initialized():
            env = {"env_vars": {"OPENBLAS_NUM_THREADS": "1"}}
            if self.address:
                ray.init(address=self.address, runtime_env=env, log_to_driver=False)
            else:
                ray.init(
                    num_cpus=self.num_cpus or max(1, len(self.specs)),
                    include_dashboard=False,
                    runtime_env=env,
                    log_to_driver=False,
                )
            self._started_ray = True
        actor = ray.remote(num_cpus=1)(_RayShard)
        self.actors = [
            actor.options(runtime_env={"env_vars": {"OPENBLAS_NUM_THREADS": "1"}}).remote(spec)
            for spec in self.specs
        ]
        self._pending = [a.build.remote() for a in self.actors]

    def _gather(self, refs: list[Any], cancelled: Cancelled) -> list[Any]:
        ray = self._ray()
        waiting = list(refs)
        while waiting:
            if cancelled():
                self.close()
                raise JobCancelled("learning to rank was cancelled")
            _, waiting = ray.wait(waiting, num_returns=len(waiting), timeout=POLL_S)
        try:
            return list(ray.get(refs))
        except ray.exceptions.RayError as exc:
            cause = getattr(exc, "cause", None) or exc
            self.close()
            raise ClirError(f"a learning-to-rank Ray shard failed: {cause}") from None

    def built(
        self, progress: ShardProgress | None = None, cancelled: Cancelled = _never
    ) -> list[dict[str, Any]]:
        return self._gather(self._pending, cancelled)

    def epoch(
        self,
        weights: Mapping[str, float],
        progress: ShardProgress | None = None,
        cancelled: Cancelled = _never,
    ) -> list[ShardEpoch]:
        w = dict(weights)
        return self._gather([a.epoch.remote(w) for a in self.actors], cancelled)

    def close(self) -> None:
        if not self.actors and not self._started_ray:
            return
        ray = self._ray()
        for a in self.actors:
            ray.kill(a)
        self.actors = []
        if self._started_ray:
            ray.shutdown()
            self._started_ray = False


BACKENDS: dict[str, type[Backend]] = {b.name: b for b in (InlineBackend, LocalBackend, RayBackend)}


def make_backend(
    name: str,
    *,
    bundle: ModelBundle | None = None,
    index: InvertedIndex | None = None,
    ray_address: str | None = None,
    ray_cpus: int | None = None,
) -> Backend:
    """The backend ``name`` (``inline`` shares ``bundle`` and ``index`` with the caller)."""
    if name == "inline":
        return InlineBackend(bundle, index)
    if name == "local":
        return LocalBackend()
    if name == "ray":
        return RayBackend(ray_address, ray_cpus)
    raise ConfigurationError(f"unknown backend {name!r}; choose one of {', '.join(BACKENDS)}")
