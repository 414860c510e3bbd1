"""The SQLite job store: transitions, one job per model, cancellation, interrupted jobs,: the tests
that start processes, Ray or a browser, read the shared data or run long (the integration tier,
tests/README.md); the rest are in :mod:`tests.jobs.test_store`."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from service.core.processes import pid_alive
from service.jobs.store import INTERRUPTED, JobStore
from tests.jobs.test_store import ROOT, dead_pid


@pytest.mark.process  # starts a process
def test_mark_interrupted_fails_only_orphans(store: JobStore) -> None:
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        jobs = [store.submit("selftest", {"i": i}) for i in range(4)]
        for pid in (dead_pid(), alive.pid, os.getpid()):
            store.claim_next(pid)
        orphaned = store.mark_interrupted()
        assert sorted(orphaned) == sorted([jobs[0].id, jobs[2].id])  # dead pid, own pid
        assert store.get(jobs[0].id).error == INTERRUPTED
        assert store.get(jobs[1].id).state == "running"
        assert store.get(jobs[3].id).state == "queued"
        assert store.mark_interrupted(all_running=True) == [jobs[1].id]
        assert store.get(jobs[1].id).state == "failed"
    finally:
        alive.kill()
        alive.wait()


@pytest.mark.process  # starts a process
def test_pid_alive() -> None:
    assert pid_alive(os.getpid())
    assert not pid_alive(dead_pid())


@pytest.mark.process  # starts a process
def test_a_writer_killed_mid_transaction_loses_only_that_transaction(tmp_path: Path) -> None:
    path = tmp_path / "jobs.sqlite3"
    child = textwrap.dedent(
        f"""
        import sqlite3, sys, time
        from service.jobs.store import JobStore
        store = JobStore({str(path)!r})
        for i in range(3):
            store.submit("selftest", {{"i": i}})
        conn = sqlite3.connect({str(path)!r}, isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")
        for i in range(200):
            conn.execute(
                "INSERT INTO jobs (id, kind, params, state, created_at) "
                "VALUES (?, 'selftest', ?, 'queued', 0)",
                (f"{{i:032x}}", "x" * 5000),
            )
        print("mid-transaction", flush=True)
        time.sleep(60)
        """
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", child], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "mid-transaction"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
    store = JobStore(path, timeout_s=5)
    jobs = store.list()
    assert sorted(j.params["i"] for j in jobs) == [0, 1, 2]
    assert store.submit("selftest", {"i": 3}).state == "queued"  # the write lock is free
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
