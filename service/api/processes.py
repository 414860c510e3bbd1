"""Several API processes behind one port (``clir serve --workers N``).

Decoding is CPU-bound Python: threads of one process share one core (the GIL), so one process
per core is what multiplies throughput. uvicorn's supervisor starts the N processes on one
listening socket (each loads the models and keeps its own query cache); this module adds what
must exist once, not once per process:

* **one job worker** — started and supervised here, in the supervisor process, and turned off
  in the API processes (``CLIR_EMBEDDED_WORKER=false``);
* **one metrics view** — a temporary directory (``CLIR_METRICS_DIR``) where every process
  publishes its counters, summed by whichever process answers ``/metrics``
  (:class:`service.api.metrics.SharedMetrics`).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

from service.jobs.worker import EmbeddedWorker
from service.settings import Settings


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


def serve(settings: Settings, *, host: str, port: int, log_level: str, workers: int) -> None:
    """Run the app in ``workers`` processes (1: in this process, as ``uvicorn.run`` does)."""
    import uvicorn

    app = "service.api.app:create_app"
    if workers <= 1:
        uvicorn.run(app, factory=True, host=host, port=port, log_level=log_level)
        return
    worker = EmbeddedWorker(settings) if settings.embedded_worker else None
    with tempfile.TemporaryDirectory(prefix="clir-metrics-") as metrics_dir:
        if worker is not None:
            worker.start()
        try:
            with _environment(CLIR_EMBEDDED_WORKER="false", CLIR_METRICS_DIR=metrics_dir):
                uvicorn.run(
                    app,
                    factory=True,
                    host=host,
                    port=port,
                    log_level=log_level,
                    workers=workers,
                    timeout_worker_healthcheck=settings.worker_healthcheck_s,
                )
        finally:
            if worker is not None:
                worker.stop()
