"""The SQLite job store: transitions, one job per model, cancellation, interrupted jobs,
id validation, a corrupt file, and a writer SIGKILLed mid-transaction (WAL)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from service.errors import (
    ConflictError,
    DataFormatError,
    InvalidInputError,
    NotFoundError,
)
from service.jobs.store import JobStore

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def store(tmp_path: Path) -> JobStore:
    return JobStore(tmp_path / "sub" / "jobs.sqlite3")


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_creates_directory_schema_and_wal(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "jobs.sqlite3"
    JobStore(path)
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    assert {"jobs", "job_metrics"} <= tables


def test_submit_get_list_and_counts(store: JobStore) -> None:
    a = store.submit("selftest", {"steps": 2}, model=None)
    b = store.submit("ltr", {"lang": "de"}, model="models/de-en")
    assert a.state == "queued" and a.progress == 0.0 and a.params == {"steps": 2}
    assert len(a.id) == 32 and a.id != b.id
    got = store.get(b.id)
    assert (got.kind, got.model, got.params) == ("ltr", "models/de-en", {"lang": "de"})
    assert [j.id for j in store.list()] == [b.id, a.id]  # newest first
    assert [j.id for j in store.list(limit=1)] == [b.id]
    assert [j.id for j in store.list(kind="selftest")] == [a.id]
    assert store.list(state="running") == []
    assert store.counts() == {
        "queued": 2,
        "running": 0,
        "succeeded": 0,
        "failed": 0,
        "cancelled": 0,
    }


@pytest.mark.parametrize("bad", ["bogus", ""])
def test_list_rejects_unknown_state(store: JobStore, bad: str) -> None:
    with pytest.raises(InvalidInputError, match="valid states: queued"):
        store.list(state=bad)


@pytest.mark.parametrize("limit", [0, 1001])
def test_list_rejects_bad_limit(store: JobStore, limit: int) -> None:
    with pytest.raises(InvalidInputError, match="limit"):
        store.list(limit=limit)


@pytest.mark.parametrize("job_id", ["../../etc/passwd", "ABC", "0" * 31, "g" * 32, "0" * 33])
def test_malformed_ids_are_invalid(store: JobStore, job_id: str) -> None:
    with pytest.raises(InvalidInputError, match="32 lower-case hex"):
        store.get(job_id)
    with pytest.raises(InvalidInputError):
        store.request_cancel(job_id)


def test_unknown_id_is_not_found(store: JobStore) -> None:
    with pytest.raises(NotFoundError, match=r"0{32} does not exist"):
        store.get("0" * 32)


def test_one_active_job_per_model_and_kind(store: JobStore) -> None:
    first = store.submit("ltr", {}, model="models/de-en")
    with pytest.raises(ConflictError, match=f"already has a queued ltr job {first.id}"):
        store.submit("ltr", {}, model="models/de-en")
    store.submit("ltr", {}, model="models/zh-en")  # another model
    store.submit("selftest", {}, model="models/de-en")  # another kind
    store.submit("selftest", {})  # no model: no limit
    store.submit("selftest", {})
    claimed = store.claim_next(os.getpid())
    assert claimed is not None and claimed.id == first.id
    with pytest.raises(ConflictError, match="already has a running ltr job"):
        store.submit("ltr", {}, model="models/de-en")
    assert store.finish(first.id, {"version": "v1", "metrics": {}})
    assert store.submit("ltr", {}, model="models/de-en").state == "queued"


def test_claim_takes_the_oldest_and_returns_none_when_empty(store: JobStore) -> None:
    assert store.claim_next(1) is None
    a = store.submit("selftest", {})
    b = store.submit("selftest", {})
    first = store.claim_next(4242)
    assert first is not None and first.id == a.id
    assert first.state == "running" and first.worker_pid == 4242 and first.started_at
    second = store.claim_next(4242)
    assert second is not None and second.id == b.id
    assert store.claim_next(4242) is None


def test_concurrent_claims_never_share_a_job(store: JobStore) -> None:
    submitted = {store.submit("selftest", {"i": i}).id for i in range(24)}
    claimed: list[str] = []
    lock = threading.Lock()

    def claimer() -> None:
        while (job := store.claim_next(os.getpid())) is not None:
            with lock:
                claimed.append(job.id)

    threads = [threading.Thread(target=claimer) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(claimed) == sorted(submitted)


def test_progress_metrics_and_success(store: JobStore) -> None:
    job = store.submit("ltr", {}, model="m")
    store.progress(job.id, 0.5, "ignored: not running yet")
    assert store.get(job.id).progress == 0.0
    store.claim_next(1)
    store.progress(job.id, 0.25, "epoch 1/4")
    store.add_epoch_metrics(job.id, 1, {"map": 0.3, "ndcg": 0.5})
    store.add_epoch_metrics(job.id, 2, {"map": 0.25})
    store.add_epoch_metrics(job.id, 2, {"map": 0.35})  # a repeated epoch replaces
    got = store.get(job.id)
    assert (got.progress, got.message) == (0.25, "epoch 1/4")
    assert [(e.epoch, e.metrics) for e in got.epochs] == [
        (1, {"map": 0.3, "ndcg": 0.5}),
        (2, {"map": 0.35}),
    ]
    assert store.finish(job.id, {"version": "v7", "model": "m", "metrics": {"map": 0.35}})
    done = store.get(job.id)
    assert (done.state, done.progress, done.weights_version) == ("succeeded", 1.0, "v7")
    assert done.result == {"version": "v7", "model": "m", "metrics": {"map": 0.35}}
    assert done.finished_at is not None and done.finished
    assert not store.fail(job.id, "too late")  # only a running job can end
    assert store.get(job.id).state == "succeeded"


@pytest.mark.parametrize("fraction", [-0.1, 1.5, float("nan")])
def test_progress_outside_0_1_is_refused(store: JobStore, fraction: float) -> None:
    job = store.submit("selftest", {})
    with pytest.raises(InvalidInputError, match=r"in \[0, 1\]"):
        store.progress(job.id, fraction, "x")


@pytest.mark.parametrize("value", [float("nan"), float("inf"), "high", True])
def test_bad_epoch_metric_is_refused(store: JobStore, value: object) -> None:
    job = store.submit("selftest", {})
    with pytest.raises(InvalidInputError, match="metric 'map' of epoch 3"):
        store.add_epoch_metrics(job.id, 3, {"map": value})  # type: ignore[dict-item]


def test_unserialisable_params_are_refused(store: JobStore) -> None:
    with pytest.raises(InvalidInputError, match="parameters cannot be stored as JSON"):
        store.submit("selftest", {"x": float("nan")})
    assert store.list() == []


def test_fail_records_the_error(store: JobStore) -> None:
    job = store.submit("selftest", {})
    store.claim_next(1)
    assert store.fail(job.id, "ValueError: bad qrels line 3")
    got = store.get(job.id)
    assert (got.state, got.error) == ("failed", "ValueError: bad qrels line 3")


def test_cancel_queued_running_and_finished(store: JobStore) -> None:
    queued = store.submit("selftest", {})
    running = store.submit("selftest", {})
    store.submit("selftest", {})
    store.request_cancel(queued.id)
    got = store.get(queued.id)
    assert (got.state, got.cancel_requested) == ("cancelled", True)
    assert got.finished_at is not None
    claimed = store.claim_next(1)  # the cancelled job is skipped
    assert claimed is not None and claimed.id == running.id
    assert not store.cancel_requested(running.id)
    after = store.request_cancel(running.id)
    assert (after.state, after.cancel_requested) == ("running", True)
    assert store.cancel_requested(running.id)
    assert store.mark_cancelled(running.id, "stopped at step 2")
    assert store.get(running.id).state == "cancelled"
    with pytest.raises(ConflictError, match="already cancelled"):
        store.request_cancel(running.id)
    with pytest.raises(NotFoundError):
        store.request_cancel("f" * 32)


def test_corrupt_file_is_named(tmp_path: Path) -> None:
    path = tmp_path / "jobs.sqlite3"
    path.write_bytes(b"this is not a database, just some bytes " * 100)
    with pytest.raises(DataFormatError, match=r"jobs\.sqlite3: not a usable SQLite job store"):
        JobStore(path)
