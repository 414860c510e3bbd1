"""The worker: running tasks to their outcome, cancellation, shutdown, the SIGKILLed worker
whose job is failed as interrupted after a restart, and the API's embedded worker."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import pytest

from service.core.progress import RecordingContext
from service.core.settings import Settings
from service.errors import InvalidInputError, JobCancelled
from service.jobs.context import StoreJobContext
from service.jobs.store import INTERRUPTED, SHUTDOWN, Job, JobStore
from service.jobs.tasks import TASKS, resolve_task, selftest
from service.jobs.worker import (
    execute,
    run_worker,
    settings_from_env,
    worker_env,
)

ROOT = Path(__file__).resolve().parents[2]


def wait_for(pred: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            pytest.fail(f"condition not reached in {timeout} s")
        time.sleep(0.02)


def claim(store: JobStore) -> Job:
    job = store.claim_next(os.getpid())
    assert job is not None
    return job


# --- tasks and contexts -------------------------------------------------------------------------


def test_registry_names_module_functions() -> None:
    assert TASKS["ltr"] == "service.jobs.tasks:ltr"
    assert resolve_task("selftest") is selftest
    with pytest.raises(InvalidInputError, match="known kinds: ltr, selftest"):
        resolve_task("bogus")


def test_selftest_reports_every_step(settings: Settings) -> None:
    ctx = RecordingContext()
    out = selftest({"steps": 4, "seconds": 0}, ctx, settings)
    assert ctx.reports == [
        (0.25, "step 1/4"),
        (0.5, "step 2/4"),
        (0.75, "step 3/4"),
        (1.0, "step 4/4"),
    ]
    assert [e for e, _ in ctx.epochs] == [1, 2, 3, 4]
    assert out == {"version": None, "model": None, "metrics": {"steps": 4.0}}


def test_selftest_stops_when_cancelled(settings: Settings) -> None:
    ctx = RecordingContext(cancel_after=2)
    with pytest.raises(JobCancelled, match="before step 3 of 5"):
        selftest({"steps": 5, "seconds": 0}, ctx, settings)
    assert len(ctx.reports) == 2


def test_selftest_rejects_unknown_parameters(settings: Settings) -> None:
    with pytest.raises(InvalidInputError, match="invalid selftest parameters"):
        selftest({"stepz": 3}, RecordingContext(), settings)


def test_store_context_reads_the_cancel_flag_at_most_once_per_interval(store: JobStore) -> None:
    job = store.submit("selftest", {})
    claim(store)
    reads = 0
    original = store.cancel_requested

    def counting(job_id: str) -> bool:
        nonlocal reads
        reads += 1
        return original(job_id)

    store.cancel_requested = counting  # type: ignore[method-assign]
    now = [100.0]
    ctx = StoreJobContext(store, job.id, check_interval_s=1.0, clock=lambda: now[0])
    assert not ctx.cancelled() and reads == 1
    store.request_cancel(job.id)
    now[0] = 100.5
    assert not ctx.cancelled() and reads == 1  # within the interval: not read again
    now[0] = 101.0
    assert ctx.cancelled() and reads == 2
    now[0] = 200.0
    assert ctx.cancelled() and reads == 2  # once true, stays true without reading


def test_store_context_is_cancelled_on_shutdown(store: JobStore) -> None:
    job = store.submit("selftest", {})
    claim(store)
    shutdown = threading.Event()
    ctx = StoreJobContext(store, job.id, shutdown=shutdown, check_interval_s=0)
    assert not ctx.cancelled()
    shutdown.set()
    assert ctx.cancelled()


# --- outcomes --------------------------------------------------------------------------------


def test_success_records_result_progress_and_epochs(settings: Settings, store: JobStore) -> None:
    job = store.submit("selftest", {"steps": 2, "seconds": 0})
    assert execute(store, claim(store), settings) == "succeeded"
    got = store.get(job.id)
    assert (got.state, got.progress, got.message) == ("succeeded", 1.0, "done")
    assert got.result == {"version": None, "model": None, "metrics": {"steps": 2.0}}
    assert [(e.epoch, e.metrics) for e in got.epochs] == [(1, {"step": 1.0}), (2, {"step": 2.0})]


def test_an_exception_fails_the_job_with_one_line(settings: Settings, store: JobStore) -> None:
    job = store.submit("selftest", {"steps": 3, "seconds": 0, "fail_at": 2})
    assert execute(store, claim(store), settings) == "failed"
    got = store.get(job.id)
    assert got.error == "RuntimeError: selftest failed at step 2 as asked"
    assert got.progress == pytest.approx(1 / 3)  # step 1 of 3 was reported before it failed
    assert got.result is None


def test_unknown_kind_fails_the_job(settings: Settings, store: JobStore) -> None:
    job = store.submit("bogus", {})
    assert execute(store, claim(store), settings) == "failed"
    error = store.get(job.id).error
    assert error is not None and error.startswith("InvalidInputError: unknown job kind 'bogus'")


def test_cancelling_a_running_job(settings: Settings, store: JobStore) -> None:
    job = store.submit("selftest", {"steps": 1000, "seconds": 0.01})
    claimed = claim(store)
    outcome: list[str] = []
    run = partial(execute, store, claimed, settings, check_interval_s=0)
    t = threading.Thread(target=lambda: outcome.append(run()))
    t.start()
    wait_for(lambda: store.get(job.id).progress > 0)
    store.request_cancel(job.id)
    t.join(timeout=30)
    assert outcome == ["cancelled"]
    got = store.get(job.id)
    assert got.state == "cancelled" and got.message.startswith("selftest cancelled before step")
    assert got.progress < 1


def test_shutdown_fails_the_running_job_as_interrupted(settings: Settings, store: JobStore) -> None:
    job = store.submit("selftest", {"steps": 1000, "seconds": 0.01})
    claimed = claim(store)
    shutdown = threading.Event()
    outcome: list[str] = []
    run = partial(execute, store, claimed, settings, shutdown=shutdown)
    t = threading.Thread(target=lambda: outcome.append(run()))
    t.start()
    wait_for(lambda: store.get(job.id).progress > 0)
    shutdown.set()
    t.join(timeout=30)
    assert outcome == ["failed"]
    assert store.get(job.id).error == SHUTDOWN


def test_run_worker_once(settings: Settings, store: JobStore) -> None:
    assert run_worker(settings, once=True) == 0  # nothing queued
    a = store.submit("selftest", {"steps": 1, "seconds": 0})
    b = store.submit("selftest", {"steps": 1, "seconds": 0})
    assert run_worker(settings, once=True) == 1
    assert (store.get(a.id).state, store.get(b.id).state) == ("succeeded", "queued")


def test_starting_worker_fails_jobs_left_running(settings: Settings, store: JobStore) -> None:
    job = store.submit("selftest", {})
    store.claim_next(os.getpid() + 10_000_000)  # a pid that cannot exist
    run_worker(settings, once=True)
    got = store.get(job.id)
    assert (got.state, got.error) == ("failed", INTERRUPTED)


# --- real worker processes ---------------------------------------------------------------------


def spawn(settings: Settings, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "service.jobs.worker", *args],
        env=worker_env(settings),
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def weights_state(bundle: Path) -> tuple[str, list[str], dict[str, bytes]]:
    wdir = bundle / "weights"
    files = sorted(p.name for p in wdir.iterdir())
    return (wdir / "ACTIVE").read_text(), files, {f: (wdir / f).read_bytes() for f in files}


def test_worker_env_carries_the_settings_but_not_the_admin_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLIR_ADMIN_TOKEN", "env-secret-token")
    settings = Settings(
        job_store=tmp_path / "j.sqlite3", admin_token="init-secret-token", nbest_tr=10
    )
    env = worker_env(settings)
    assert not any("secret-token" in v for v in env.values())
    assert [k for k in env if k.startswith("CLIR_")] == ["CLIR_WORKER_SETTINGS"]
    monkeypatch.setenv("CLIR_WORKER_SETTINGS", env["CLIR_WORKER_SETTINGS"])
    child = settings_from_env()
    assert child.admin_token is None
    assert (child.job_store, child.nbest_tr) == (tmp_path / "j.sqlite3", 10)
    assert child.weights_state_dir == settings.weights_state_dir  # what its tasks are handed
