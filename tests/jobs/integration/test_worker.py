"""The worker: running tasks to their outcome, cancellation, shutdown, the SIGKILLed worker: the
tests that start processes, Ray or a browser, read the shared data or run long (the integration
tier, tests/README.md); the rest are in :mod:`tests.jobs.test_worker`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import pytest

from service.core.settings import Settings
from service.jobs.store import INTERRUPTED, SHUTDOWN, JobStore
from service.jobs.worker import (
    EmbeddedWorker,
    worker_env,
)
from service.mt.bundle import load_bundle
from tests.jobs.test_worker import ROOT, spawn, wait_for, weights_state


@pytest.mark.slow
def test_sigkilled_worker_leaves_weights_and_the_job_fails_after_restart(
    settings: Settings,
    store: JobStore,
    bundle_copy: Path,
    procs: list[subprocess.Popen[bytes]],
) -> None:
    before = weights_state(bundle_copy)
    params: dict[str, Any] = {"steps": 400, "seconds": 0.02, "model": str(bundle_copy)}
    params["activate"] = True
    job = store.submit("selftest", params, model=str(bundle_copy))
    worker = spawn(settings)
    procs.append(worker)
    wait_for(lambda: store.get(job.id).progress > 0)
    os.kill(worker.pid, signal.SIGKILL)
    worker.wait()
    assert store.get(job.id).state == "running"  # nobody has noticed yet
    restarted = spawn(settings, "--once")
    procs.append(restarted)
    assert restarted.wait(timeout=60) == 0
    got = store.get(job.id)
    assert (got.state, got.error, got.weights_version) == ("failed", INTERRUPTED, None)
    assert weights_state(bundle_copy) == before  # no new version, ACTIVE untouched
    bundle = load_bundle(bundle_copy, state_root=settings.weights_state_dir)
    assert bundle.active_weights().version == before[0].strip()


@pytest.mark.slow
def test_sigterm_stops_the_worker_after_the_current_step(
    settings: Settings, store: JobStore, procs: list[subprocess.Popen[bytes]]
) -> None:
    job = store.submit("selftest", {"steps": 400, "seconds": 0.02})
    worker = spawn(settings)
    procs.append(worker)
    wait_for(lambda: store.get(job.id).progress > 0)
    worker.terminate()
    assert worker.wait(timeout=30) == 0
    got = store.get(job.id)
    assert (got.state, got.error) == ("failed", SHUTDOWN)
    assert got.progress < 1


@pytest.mark.slow
def test_embedded_worker_runs_jobs_restarts_after_a_kill_and_stops(
    settings: Settings, store: JobStore
) -> None:
    embedded = EmbeddedWorker(settings, check_s=0.1)
    embedded.start()
    try:
        quick = store.submit("selftest", {"steps": 2, "seconds": 0})
        wait_for(lambda: store.get(quick.id).state == "succeeded")
        long = store.submit("selftest", {"steps": 400, "seconds": 0.02})
        wait_for(lambda: store.get(long.id).progress > 0)
        assert embedded.proc is not None
        first_pid = embedded.proc.pid
        os.kill(first_pid, signal.SIGKILL)
        wait_for(lambda: store.get(long.id).state == "failed")
        assert store.get(long.id).error == INTERRUPTED
        assert embedded.restarts == 1 and embedded.proc.pid != first_pid
        again = store.submit("selftest", {"steps": 1, "seconds": 0})
        wait_for(lambda: store.get(again.id).state == "succeeded")
    finally:
        code = embedded.stop()
    assert code == 0
    assert embedded.proc is not None and embedded.proc.poll() == 0


@pytest.mark.process  # starts a process
@pytest.mark.parametrize("log_format", ["json", "text"])
def test_the_worker_writes_its_lines_in_the_servers_log_format(
    settings: Settings, store: JobStore, log_format: Literal["json", "text"]
) -> None:
    job = store.submit("selftest", {"steps": 1, "seconds": 0.0})
    settings = settings.model_copy(update={"log_format": log_format})
    run = subprocess.run(
        [sys.executable, "-m", "service.jobs.worker", "--once"],
        env=worker_env(settings), cwd=ROOT, stdin=subprocess.DEVNULL, capture_output=True,
        timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr.decode()
    assert store.get(job.id).state == "succeeded"
    lines = run.stderr.decode().splitlines()
    assert any(job.id in line for line in lines), lines
    for line in lines:
        if log_format == "json":
            record = json.loads(line)  # every line is one JSON object
            assert {"level", "logger", "message", "time"} <= set(record)
        else:
            assert not line.startswith("{") and line.split()[0].rstrip(":") in {"INFO", "WARNING"}


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for p in started:
        if p.poll() is None:
            p.kill()
        p.wait()
