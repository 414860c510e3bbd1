"""The job store: background jobs (admin-triggered retraining) in SQLite.

One table ``jobs`` holds a row per job (id, kind, the model it trains, its JSON parameters,
state, progress and message, error, JSON result, the weights version it produced, the
cancellation flag, the worker's pid and the created/started/finished/heartbeat times) and one
table ``job_metrics`` the metrics recorded after each epoch. States::

    queued ──claim──▶ running ──finish──▶ succeeded
      │                 ├──fail / mark_interrupted──▶ failed
      └─request_cancel─▶ cancelled ◀──(cancel requested; the task stops)──┘

Durability: the database runs in WAL mode and every change is one transaction, so a process
killed mid-write loses at most that transaction and the file still opens with every committed
job (``synchronous=NORMAL``: a power cut may lose the last commits, never corrupt the file).
``claim_next`` and ``submit``'s one-job-per-model check take the write lock up front
(``BEGIN IMMEDIATE``), so two workers never claim one job and two submissions for one model
never both pass the check. Each operation opens its own short-lived connection, so one store
object is safe to share between threads and processes never share a connection.
"""

from __future__ import annotations

import builtins
import json
import math
import os
import re
import sqlite3
import time
import uuid
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, NamedTuple, get_args

from service.core.processes import pid_alive
from service.errors import (
    ClirError,
    ConflictError,
    DataFormatError,
    InvalidInputError,
    NotFoundError,
)

JobState = Literal["queued", "running", "succeeded", "failed", "cancelled"]
JOB_STATES: tuple[JobState, ...] = get_args(JobState)
ACTIVE_STATES: tuple[JobState, ...] = ("queued", "running")
FINISHED_STATES: tuple[JobState, ...] = ("succeeded", "failed", "cancelled")

INTERRUPTED = "interrupted: the worker stopped while the job was running"
SHUTDOWN = "interrupted: worker shut down"

JOB_ID_RE = re.compile(r"^[0-9a-f]{32}$")
MAX_MESSAGE = 500
MAX_ERROR = 4000
MAX_LIMIT = 1000
SCHEMA_VERSION = 1

SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    id               TEXT PRIMARY KEY,
    kind             TEXT NOT NULL,
    model            TEXT,
    params           TEXT NOT NULL,
    state            TEXT NOT NULL
                     CHECK (state IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')),
    progress         REAL NOT NULL DEFAULT 0,
    message          TEXT NOT NULL DEFAULT '',
    error            TEXT,
    result           TEXT,
    weights_version  TEXT,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    worker_pid       INTEGER,
    created_at       REAL NOT NULL,
    started_at       REAL,
    finished_at      REAL,
    heartbeat_at     REAL
);
CREATE INDEX IF NOT EXISTS jobs_state ON jobs (state, kind, model);
CREATE TABLE IF NOT EXISTS job_metrics (
    job_id      TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    epoch       INTEGER NOT NULL,
    metrics     TEXT NOT NULL,
    recorded_at REAL NOT NULL,
    PRIMARY KEY (job_id, epoch)
);
"""


class EpochMetrics(NamedTuple):
    """The metrics a job recorded after one epoch."""

    epoch: int
    metrics: dict[str, float]
    recorded_at: float


@dataclass(frozen=True)
class Job:
    """One row of the job store (times are Unix seconds)."""

    id: str
    kind: str
    model: str | None
    params: dict[str, Any]
    state: JobState
    progress: float
    message: str
    error: str | None
    result: dict[str, Any] | None
    weights_version: str | None
    cancel_requested: bool
    worker_pid: int | None
    created_at: float
    started_at: float | None
    finished_at: float | None
    heartbeat_at: float | None
    epochs: tuple[EpochMetrics, ...] = field(default=())

    @property
    def finished(self) -> bool:
        return self.state in FINISHED_STATES


def check_job_id(job_id: str) -> str:
    """A job id is 32 lower-case hex digits (a uuid4 without dashes)."""
    if not isinstance(job_id, str) or not JOB_ID_RE.match(job_id):
        raise InvalidInputError(
            f"invalid job id {str(job_id)[:80]!r}: expected 32 lower-case hex digits"
        )
    return job_id


def _dumps(value: Any, what: str) -> str:
    try:
        return json.dumps(value, allow_nan=False, sort_keys=True)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"{what} cannot be stored as JSON: {exc}") from exc


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


class JobStore:
    """The SQLite job store at ``path`` (created, with its directory, on first use)."""

    def __init__(self, path: str | Path, *, timeout_s: float = 30.0) -> None:
        self.path = Path(path)
        self.timeout_s = timeout_s
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ClirError(
                f"cannot create the job store's directory {self.path.parent}: {exc}; "
                "set CLIR_JOB_STORE to a writable path"
            ) from exc
        with self._connect() as conn:
            version = int(conn.execute("PRAGMA user_version").fetchone()[0])
            if version > SCHEMA_VERSION:
                raise DataFormatError(
                    self.path,
                    None,
                    f"job store schema {version} is newer than this program's "
                    f"{SCHEMA_VERSION}; upgrade the service or use another CLIR_JOB_STORE",
                )
            mode = str(conn.execute("PRAGMA journal_mode=WAL").fetchone()[0])
            if mode.lower() != "wal":
                raise ClirError(f"{self.path}: cannot switch the job store to WAL mode ({mode})")
            if version < SCHEMA_VERSION:
                conn.executescript(SCHEMA)
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    # --- connections ------------------------------------------------------------------------

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        try:
            with closing(
                sqlite3.connect(self.path, timeout=self.timeout_s, isolation_level=None)
            ) as conn:
                conn.row_factory = sqlite3.Row
                conn.execute("PRAGMA foreign_keys = ON")
                conn.execute("PRAGMA synchronous = NORMAL")
                yield conn
        except sqlite3.OperationalError as exc:
            if "locked" in str(exc) or "busy" in str(exc):
                raise ConflictError(
                    f"the job store {self.path} stayed locked for {self.timeout_s:g} s; retry"
                ) from exc
            raise self._corrupt(exc) from exc
        except sqlite3.DatabaseError as exc:
            raise self._corrupt(exc) from exc

    def _corrupt(self, exc: sqlite3.Error) -> DataFormatError:
        return DataFormatError(
            self.path,
            None,
            f"not a usable SQLite job store ({exc}); move the file away (its job history is "
            "lost) or point CLIR_JOB_STORE elsewhere, then restart",
        )

    @contextmanager
    def _transaction(self, *, immediate: bool = True) -> Iterator[sqlite3.Connection]:
        with self._connect() as conn:
            conn.execute("BEGIN IMMEDIATE" if immediate else "BEGIN")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    # --- reading ------------------------------------------------------------------------------

    @staticmethod
    def _job(row: sqlite3.Row, epochs: tuple[EpochMetrics, ...] = ()) -> Job:
        return Job(
            id=row["id"],
            kind=row["kind"],
            model=row["model"],
            params=json.loads(row["params"]),
            state=row["state"],
            progress=float(row["progress"]),
            message=row["message"],
            error=row["error"],
            result=json.loads(row["result"]) if row["result"] is not None else None,
            weights_version=row["weights_version"],
            cancel_requested=bool(row["cancel_requested"]),
            worker_pid=row["worker_pid"],
            created_at=row["created_at"],
            started_at=row["started_at"],
            finished_at=row["finished_at"],
            heartbeat_at=row["heartbeat_at"],
            epochs=epochs,
        )

    @staticmethod
    def _epochs(conn: sqlite3.Connection, ids: list[str]) -> dict[str, list[EpochMetrics]]:
        out: dict[str, list[EpochMetrics]] = {i: [] for i in ids}
        if not ids:
            return out
        marks = ",".join("?" * len(ids))
        rows = conn.execute(
            f"SELECT job_id, epoch, metrics, recorded_at FROM job_metrics "
            f"WHERE job_id IN ({marks}) ORDER BY job_id, epoch",
            ids,
        )
        for r in rows:
            out[r["job_id"]].append(EpochMetrics(r["epoch"], json.loads(r["metrics"]), r[3]))
        return out

    def get(self, job_id: str) -> Job:
        """The job with its per-epoch metrics (``NotFoundError`` for an unknown id)."""
        check_job_id(job_id)
        with self._connect() as conn:
            row = conn.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone()
            if row is None:
                raise NotFoundError(f"job {job_id} does not exist")
            return self._job(row, tuple(self._epochs(conn, [job_id])[job_id]))

    def list(
        self, *, state: str | None = None, kind: str | None = None, limit: int = 50
    ) -> list[Job]:
        """Jobs, newest first, optionally of one state and kind."""
        if state is not None and state not in JOB_STATES:
            raise InvalidInputError(
                f"unknown job state {state[:40]!r}; valid states: {', '.join(JOB_STATES)}"
            )
        if not 1 <= limit <= MAX_LIMIT:
            raise InvalidInputError(f"limit must be between 1 and {MAX_LIMIT}, got {limit}")
        where: builtins.list[str] = []
        args: builtins.list[str] = []
        if state is not None:
            where.append("state = ?")
            args.append(state)
        if kind is not None:
            where.append("kind = ?")
            args.append(kind)
        sql = "SELECT * FROM jobs"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY created_at DESC, rowid DESC LIMIT ?"
        with self._connect() as conn:
            rows = conn.execute(sql, [*args, limit]).fetchall()
            epochs = self._epochs(conn, [r["id"] for r in rows])
        return [self._job(r, tuple(epochs[r["id"]])) for r in rows]

    def counts(self) -> dict[str, int]:
        """The number of jobs in each state (every state present, zeros included)."""
        with self._connect() as conn:
            rows = conn.execute("SELECT state, COUNT(*) FROM jobs GROUP BY state").fetchall()
        out: dict[str, int] = dict.fromkeys(JOB_STATES, 0)
        out.update({r[0]: int(r[1]) for r in rows})
        return out

    def cancel_requested(self, job_id: str) -> bool:
        """True if cancellation of the job was requested (or it is no longer running)."""
        with self._connect() as conn:
            row = conn.execute(
                "SELECT state, cancel_requested FROM jobs WHERE id = ?", (job_id,)
            ).fetchone()
        if row is None:
            raise NotFoundError(f"job {job_id} does not exist")
        return bool(row["cancel_requested"]) or row["state"] != "running"

    # --- submitting and claiming --------------------------------------------------------------

    def submit(self, kind: str, params: dict[str, Any], *, model: str | None = None) -> Job:
        """Queue a job; ``ConflictError`` if ``model`` already has a queued or running one."""
        if not kind or len(kind) > 64:
            raise InvalidInputError(f"invalid job kind {kind[:80]!r}")
        payload = _dumps(params, "the job's parameters")
        job_id = uuid.uuid4().hex
        with self._transaction() as conn:
            if model is not None:
                row = conn.execute(
                    "SELECT id, state FROM jobs WHERE kind = ? AND model = ? "
                    "AND state IN ('queued', 'running') ORDER BY created_at LIMIT 1",
                    (kind, model),
                ).fetchone()
                if row is not None:
                    raise ConflictError(
                        f"model {model} already has a {row['state']} {kind} job {row['id']}; "
                        f"wait for it to finish or cancel it (DELETE /v1/admin/jobs/{row['id']})"
                    )
            conn.execute(
                "INSERT INTO jobs (id, kind, model, params, state, message, created_at) "
                "VALUES (?, ?, ?, ?, 'queued', 'queued', ?)",
                (job_id, kind, model, payload, time.time()),
            )
        return self.get(job_id)

    def claim_next(self, worker_pid: int) -> Job | None:
        """Move the oldest queued job to running for ``worker_pid``; None if none is queued."""
        now = time.time()
        with self._transaction() as conn:
            row = conn.execute(
                "SELECT id FROM jobs WHERE state = 'queued' ORDER BY created_at, rowid LIMIT 1"
            ).fetchone()
            if row is None:
                return None
            conn.execute(
                "UPDATE jobs SET state = 'running', worker_pid = ?, started_at = ?, "
                "heartbeat_at = ?, message = 'started' WHERE id = ?",
                (worker_pid, now, now, row["id"]),
            )
        return self.get(row["id"])

    # --- reports from the running task ------------------------------------------------------

    def progress(self, job_id: str, fraction: float, message: str) -> None:
        """Record progress (``fraction`` in [0, 1]) of a running job; also its heartbeat."""
        if not isinstance(fraction, int | float) or not 0.0 <= fraction <= 1.0:
            raise InvalidInputError(f"progress must be a number in [0, 1], got {fraction!r}")
        with self._transaction(immediate=False) as conn:
            conn.execute(
                "UPDATE jobs SET progress = ?, message = ?, heartbeat_at = ? "
                "WHERE id = ? AND state = 'running'",
                (float(fraction), _clip(str(message), MAX_MESSAGE), time.time(), job_id),
            )

    def add_epoch_metrics(self, job_id: str, epoch: int, metrics: dict[str, float]) -> None:
        """Record the metrics after ``epoch`` (a repeated epoch replaces the earlier record)."""
        clean: dict[str, float] = {}
        for name, value in metrics.items():
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise InvalidInputError(f"metric {name!r} of epoch {epoch} is not a number")
            if not math.isfinite(value):
                raise InvalidInputError(f"metric {name!r} of epoch {epoch} is {value}")
            clean[str(name)] = float(value)
        payload = _dumps(clean, "epoch metrics")
        now = time.time()
        with self._transaction(immediate=False) as conn:
            conn.execute(
                "INSERT OR REPLACE INTO job_metrics (job_id, epoch, metrics, recorded_at) "
                "VALUES (?, ?, ?, ?)",
                (job_id, int(epoch), payload, now),
            )
            conn.execute("UPDATE jobs SET heartbeat_at = ? WHERE id = ?", (now, job_id))

    # --- ends -------------------------------------------------------------------------------

    def _end(self, job_id: str, state: JobState, sets: str, args: tuple[Any, ...]) -> bool:
        now = time.time()
        with self._transaction() as conn:
            cur = conn.execute(
                f"UPDATE jobs SET state = ?, finished_at = ?, heartbeat_at = ?, {sets} "
                "WHERE id = ? AND state = 'running'",
                (state, now, now, *args, job_id),
            )
            return cur.rowcount == 1

    def finish(self, job_id: str, result: dict[str, Any]) -> bool:
        """Running → succeeded with ``result`` (its ``"version"`` is the weights version).

        False if the job was no longer running (e.g. marked interrupted meanwhile)."""
        payload = _dumps(result, "the job's result")
        version = result.get("version")
        return self._end(
            job_id,
            "succeeded",
            "progress = 1, message = 'done', result = ?, weights_version = ?",
            (payload, None if version is None else str(version)),
        )

    def fail(self, job_id: str, error: str) -> bool:
        """Running → failed with ``error`` (one line, no traceback)."""
        return self._end(job_id, "failed", "error = ?", (_clip(error, MAX_ERROR),))

    def mark_cancelled(self, job_id: str, message: str = "cancelled") -> bool:
        """Running → cancelled (the task honoured the cancellation)."""
        return self._end(job_id, "cancelled", "message = ?", (_clip(message, MAX_MESSAGE),))

    def request_cancel(self, job_id: str) -> Job:
        """Cancel a job: a queued one at once, a running one when its task next checks."""
        check_job_id(job_id)
        with self._transaction() as conn:
            row = conn.execute("SELECT state FROM jobs WHERE id = ?", (job_id,)).fetchone()
            if row is None:
                raise NotFoundError(f"job {job_id} does not exist")
            state = row["state"]
            if state == "queued":
                conn.execute(
                    "UPDATE jobs SET state = 'cancelled', cancel_requested = 1, "
                    "message = 'cancelled before it started', finished_at = ? WHERE id = ?",
                    (time.time(), job_id),
                )
            elif state == "running":
                conn.execute(
                    "UPDATE jobs SET cancel_requested = 1, message = 'cancelling' WHERE id = ?",
                    (job_id,),
                )
            else:
                raise ConflictError(f"job {job_id} already {state}; there is nothing to cancel")
        return self.get(job_id)

    def mark_interrupted(
        self, *, all_running: bool = False, reason: str = INTERRUPTED
    ) -> builtins.list[str]:
        """Fail running jobs whose worker died; returns their ids.

        A job counts as orphaned when its worker pid is gone (or a zombie), or is this very
        process's pid (a restarted worker can get its predecessor's pid, e.g. in a container);
        ``all_running`` fails every running job (a starting worker that is the only one)."""
        me = os.getpid()
        failed: builtins.list[str] = []
        now = time.time()
        with self._transaction() as conn:
            rows = conn.execute("SELECT id, worker_pid FROM jobs WHERE state = 'running'")
            for row in rows.fetchall():
                pid = row["worker_pid"]
                if all_running or pid is None or pid == me or not pid_alive(int(pid)):
                    failed.append(row["id"])
            for job_id in failed:
                conn.execute(
                    "UPDATE jobs SET state = 'failed', error = ?, finished_at = ? WHERE id = ?",
                    (reason, now, job_id),
                )
        return failed
