"""Several API processes behind one port (``clir serve --workers N``).

Decoding is CPU-bound Python: threads of one process share one core (the GIL), so one process
per core is what multiplies throughput. uvicorn's supervisor starts the N processes on one
listening socket (each loads the models and keeps its own query cache); this module adds what
must exist once, not once per process:

* **one job worker** — started and supervised here, in the supervisor process, and turned off
  in the API processes (``CLIR_EMBEDDED_WORKER=false``);
* **one metrics view** — ``prometheus_client``'s multiprocess directory, created (or emptied of
  an earlier run's files) here before any API process starts and handed to them as
  ``PROMETHEUS_MULTIPROC_DIR`` (:mod:`service.api.telemetry`);
* **one log format** — the logging configuration of :mod:`service.core.logs`, which uvicorn
  applies in every process;
* **a dead process noticed at once** — uvicorn's supervisor pings each process and waits up to
  ``CLIR_WORKER_HEALTHCHECK_S`` for the answer (long, because a process busy decoding answers
  late); a process killed while a ping waits for it never answers, and the supervisor held
  its own end of the pipe open, so the wait ran the whole timeout — two minutes at half the
  capacity. :func:`watch_for_dead_processes` makes the wait look in every 0.2 s whether the
  process still exists.
"""

from __future__ import annotations

import glob
import os
import pickle
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from service.core.settings import Settings
from service.errors import ConfigurationError
from service.jobs.worker import EmbeddedWorker

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"  # read by prometheus_client in each API process


@contextmanager
def _environment(**values: str) -> Iterator[None]:
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@contextmanager
def metrics_directory(configured: Path | None) -> Iterator[str]:
    """The multiprocess directory for one server run: ``configured`` (created if missing, its
    metric files of an earlier run removed, as ``prometheus_client`` requires), or a new
    temporary directory removed afterwards."""
    if configured is None:
        with tempfile.TemporaryDirectory(prefix="clir-metrics-") as tmp:
            yield tmp
        return
    configured.mkdir(parents=True, exist_ok=True)
    for stale in glob.glob(os.path.join(configured, "*.db")):
        os.remove(stale)
    yield str(configured)


def _watchful_healthcheck(self: Any, timeout: float) -> bool | None:
    """uvicorn's ``Process._healthcheck`` (ping, then the startup flag, or None when no
    answer comes in ``timeout``), that gives up as soon as the process is gone."""
    try:
        self.parent_conn.send(b"ping")
        deadline = time.monotonic() + timeout
        while True:
            if self.parent_conn.poll(min(0.2, max(0.0, deadline - time.monotonic()))):
                started: bool = self.parent_conn.recv()
                return started
            if not self.process.is_alive() or time.monotonic() >= deadline:
                return None
    except (OSError, EOFError, pickle.UnpicklingError):
        return None


def watch_for_dead_processes() -> None:
    """Make uvicorn's supervisor notice a killed API process within a fraction of a second
    (see the module text); fails loudly if uvicorn no longer has the method it replaces."""
    from uvicorn.supervisors import multiprocess

    if not callable(getattr(multiprocess.Process, "_healthcheck", None)):
        raise ConfigurationError(
            "this uvicorn's supervisor has no Process._healthcheck: service.api.workers "
            "needs updating for it"
        )
    multiprocess.Process._healthcheck = _watchful_healthcheck  # type: ignore[method-assign]


def serve(settings: Settings, *, host: str, port: int, log_level: str, workers: int) -> None:
    """Run the app in ``workers`` processes (1: in this process, as ``uvicorn.run`` does)."""
    import uvicorn

    from service.core.logs import logging_config

    app = "service.api.app:create_app"
    options: dict[str, Any] = {
        "factory": True,
        "host": host,
        "port": port,
        "log_level": log_level,
        "log_config": logging_config(settings.log_format, log_level),
        "access_log": False,  # the request record of service.api.logs replaces it
    }
    if workers <= 1:
        if os.environ.get(MULTIPROC_ENV):  # multiprocess mode chosen by hand: start afresh
            with metrics_directory(Path(os.environ[MULTIPROC_ENV])):
                pass
        uvicorn.run(app, **options)
        return
    watch_for_dead_processes()
    worker = EmbeddedWorker(settings) if settings.embedded_worker else None
    configured = settings.metrics_dir
    if configured is None and os.environ.get(MULTIPROC_ENV):
        configured = Path(os.environ[MULTIPROC_ENV])
    with metrics_directory(configured) as metrics_dir:
        if worker is not None:
            worker.start()
        try:
            with _environment(CLIR_EMBEDDED_WORKER="false", **{MULTIPROC_ENV: metrics_dir}):
                uvicorn.run(
                    app,
                    workers=workers,
                    timeout_worker_healthcheck=settings.worker_healthcheck_s,
                    **options,
                )
        finally:
            if worker is not None:
                worker.stop()
