"""The background worker: claims queued jobs from the job store and runs their tasks
(it claims jobs, reports progress, honours cancellation, and on restart marks the jobs that were
running when it died as failed).

``run_worker`` first fails the jobs a dead worker left running (all running jobs when
``worker_exclusive`` says this is the only worker of the store, else those whose worker pid is
gone), then loops: claim the oldest queued job, run its task (:mod:`service.jobs.tasks`) with a
store-backed :class:`~service.jobs.context.StoreJobContext`, record the outcome:

* the task returns → ``succeeded`` with its result and weights version;
* it raises ``JobCancelled`` after a user's ``DELETE`` → ``cancelled``;
* any other exception → ``failed`` with ``"ExceptionType: message"`` (the traceback goes to the
  worker's log only, never to the API).

Shutdown (SIGTERM, SIGINT, or the parent process of an embedded worker going away): the
worker stops claiming, ``ctx.cancelled()`` turns true so the running task ends after its
current step, and the job is marked **failed** with ``"interrupted: worker shut down"``,
not cancelled: nobody decided to abandon the training, so it reads like the SIGKILL case
("interrupted") and is simply submitted again; ``cancelled`` stays reserved for a user's
request. A task that ignores cancellation is killed by the supervisor's grace period, and the
next worker start marks it interrupted. A task writes its weights version atomically and never
activates it unless asked, so an interrupted job leaves the serving weights untouched.

The API's lifespan starts one worker as a subprocess (:class:`EmbeddedWorker`, restarted if
it dies) when ``embedded_worker`` is set; ``clir worker`` and ``python -m service.jobs.worker``
run one in the foreground.
"""

from __future__ import annotations

import argparse
import json
import logging
import logging.config
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from types import FrameType

from service.core.logs import logging_config
from service.core.settings import Settings, get_settings
from service.errors import ClirError, JobCancelled
from service.jobs.context import StoreJobContext
from service.jobs.store import SHUTDOWN, Job, JobState, JobStore
from service.jobs.tasks import resolve_task

log = logging.getLogger("service.jobs.worker")  # not "__main__" when run with -m


def execute(
    store: JobStore,
    job: Job,
    settings: Settings,
    *,
    shutdown: threading.Event | None = None,
    check_interval_s: float = 0.5,
) -> JobState:
    """Run the claimed ``job`` to its end (its task given ``settings``) and record the
    outcome; returns the final state."""
    shutdown = shutdown or threading.Event()
    ctx = StoreJobContext(store, job.id, shutdown=shutdown, check_interval_s=check_interval_s)
    log.info("job %s (%s) started", job.id, job.kind)
    outcome: JobState
    try:
        task = resolve_task(job.kind)
        result = task(dict(job.params), ctx, settings)
        if not isinstance(result, dict):
            raise TypeError(f"the {job.kind} task returned {type(result).__name__}, not a dict")
        try:
            store.finish(job.id, result)
        except ClirError as exc:  # a result that is not JSON
            store.fail(job.id, f"{type(exc).__name__}: {exc}")
            outcome = "failed"
        else:
            outcome = "succeeded"
    except JobCancelled as exc:
        if shutdown.is_set() and not _user_cancelled(store, job.id):
            store.fail(job.id, SHUTDOWN)
            outcome = "failed"
        else:
            store.mark_cancelled(job.id, str(exc) or "cancelled")
            outcome = "cancelled"
    except Exception as exc:
        log.exception("job %s (%s) failed", job.id, job.kind)
        store.fail(job.id, f"{type(exc).__name__}: {exc}")
        outcome = "failed"
    except BaseException:
        store.fail(job.id, SHUTDOWN)
        raise
    log.info("job %s (%s) %s", job.id, job.kind, outcome)
    return outcome


def _user_cancelled(store: JobStore, job_id: str) -> bool:
    return store.get(job_id).cancel_requested


def run_worker(
    settings: Settings,
    *,
    once: bool = False,
    poll_s: float | None = None,
    shutdown: threading.Event | None = None,
    parent_pid: int | None = None,
) -> int:
    """Claim and run jobs until shut down (``once``: at most one job, then return).

    Returns the number of jobs run. SIGTERM/SIGINT (when called from the main thread), a set
    ``shutdown`` event, or ``parent_pid`` no longer being the parent stop the loop."""
    shutdown = shutdown or threading.Event()
    poll = settings.worker_poll_s if poll_s is None else poll_s
    store = JobStore(settings.job_store)
    interrupted = store.mark_interrupted(all_running=settings.worker_exclusive)
    for job_id in interrupted:
        log.warning("job %s was running when its worker stopped: marked failed", job_id)
    restore = _install_signal_handlers(shutdown)
    if parent_pid is not None:
        threading.Thread(
            target=_watch_parent, args=(parent_pid, shutdown), daemon=True, name="watch-parent"
        ).start()
    log.info("worker %d serving the job store %s", os.getpid(), store.path)
    done = 0
    try:
        while not shutdown.is_set():
            job = store.claim_next(os.getpid())
            if job is None:
                if once:
                    break
                shutdown.wait(poll)
                continue
            execute(store, job, settings, shutdown=shutdown)
            done += 1
            if once:
                break
    finally:
        restore()
    log.info("worker %d stopped after %d job(s)", os.getpid(), done)
    return done


def _install_signal_handlers(shutdown: threading.Event) -> Callable[[], None]:
    if threading.current_thread() is not threading.main_thread():
        return lambda: None

    def handler(signum: int, _frame: FrameType | None) -> None:
        log.warning("worker got %s: finishing the current step, then stopping", signum)
        shutdown.set()

    previous = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGINT)}

    def restore() -> None:
        for s, h in previous.items():
            signal.signal(s, h)

    return restore


def _watch_parent(parent_pid: int, shutdown: threading.Event) -> None:
    while not shutdown.wait(1.0):
        if os.getppid() != parent_pid:
            log.warning("the parent process %d is gone: stopping", parent_pid)
            shutdown.set()


# --- the embedded worker of the API --------------------------------------------------------


SETTINGS_ENV = "CLIR_WORKER_SETTINGS"


def worker_env(settings: Settings) -> dict[str, str]:
    """The environment of a worker subprocess: this process's without any ``CLIR_*`` variable,
    plus ``settings`` as JSON in ``CLIR_WORKER_SETTINGS`` (so the child sees exactly the app's
    settings), without the admin token, which the worker does not need."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLIR_")}
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    env[SETTINGS_ENV] = settings.model_dump_json(exclude={"admin_token"})
    return env


def settings_from_env() -> Settings:
    """The settings a parent passed in ``CLIR_WORKER_SETTINGS``, else :func:`get_settings`."""
    payload = os.environ.get(SETTINGS_ENV)
    if payload is None:
        return get_settings()
    fields = json.loads(payload)
    fields["admin_token"] = None  # the worker never needs it, whatever the environment says
    return Settings.model_validate(fields)


def start_worker_process(settings: Settings) -> subprocess.Popen[bytes]:
    """Start ``python -m service.jobs.worker`` as a child that stops when this process dies.

    The child is not exclusive: it recognises orphaned jobs by their dead worker pid, which is
    right on one host and safe if several API processes each start a worker."""
    env = worker_env(settings.model_copy(update={"worker_exclusive": False}))
    cmd = [sys.executable, "-m", "service.jobs.worker", "--parent-pid", str(os.getpid())]
    proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL)
    log.info("started a worker process (pid %d)", proc.pid)
    return proc


def stop_worker_process(proc: subprocess.Popen[bytes], timeout_s: float = 10.0) -> int:
    """SIGTERM the worker, wait up to ``timeout_s``, then SIGKILL it; returns its exit code."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            log.warning("the worker did not stop in %g s: killing it", timeout_s)
            proc.kill()
            proc.wait()
    return proc.returncode


class EmbeddedWorker:
    """The API's worker subprocess, restarted (with back-off) if it dies.

    A restarted worker fails the job its predecessor left running ("interrupted")."""

    def __init__(self, settings: Settings, *, check_s: float = 2.0) -> None:
        self.settings = settings
        self.check_s = check_s
        self.proc: subprocess.Popen[bytes] | None = None
        self.restarts = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        with self._lock:
            self.proc = start_worker_process(self.settings)
        self._thread = threading.Thread(target=self._supervise, daemon=True, name="worker-sup")
        self._thread.start()

    def _supervise(self) -> None:
        delay = self.check_s
        started = time.monotonic()
        while not self._stop.wait(delay):
            with self._lock:
                if self._stop.is_set() or self.proc is None or self.proc.poll() is None:
                    delay = self.check_s
                    continue
                code = self.proc.returncode
                lived = time.monotonic() - started
                delay = self.check_s if lived > 30 else min(max(2 * delay, self.check_s), 60.0)
                log.error("the worker process exited with %s: restarting it", code)
                self.proc = start_worker_process(self.settings)
                self.restarts += 1
                started = time.monotonic()

    def stop(self) -> int | None:
        """Stop supervising and stop the worker (SIGTERM, then SIGKILL after the grace)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        with self._lock:
            if self.proc is None:
                return None
            return stop_worker_process(self.proc, self.settings.worker_stop_timeout_s)


# --- python -m service.jobs.worker -------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m service.jobs.worker", description="Run the background job worker."
    )
    add_worker_flags(p)
    p.add_argument("--parent-pid", type=int, default=None, help=argparse.SUPPRESS)
    return p


def add_worker_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--once", action="store_true", help="Run at most one queued job, then exit.")
    p.add_argument("--poll-s", type=float, default=None, help="Seconds between queue polls.")


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        settings = settings_from_env()
    except ClirError as exc:
        print(f"worker: error: {exc}", file=sys.stderr)
        return 1
    # the API server's format (CLIR_LOG_FORMAT): one stream of JSON lines, or of text
    logging.config.dictConfig(logging_config(settings.log_format, request_ids=False))
    try:
        run_worker(settings, once=args.once, poll_s=args.poll_s, parent_pid=args.parent_pid)
    except ClirError as exc:
        log.error("worker: %s", exc)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
