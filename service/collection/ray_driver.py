"""The Ray driver in a process of its own, so that the API outlives the cluster.

A Ray driver cannot outlive its cluster: when the head stops (``ray stop``, a restart) the
driver's core worker ends its process a minute later ("Failed to connect to GCS within 60
seconds ... The program will terminate"), and ``ray.init`` of an address where nothing
answers waits without end. So the API process does not hold the driver: a child process
(:func:`serve`) connects, runs the :class:`~service.collection.replicas.ShardRouter` and
answers the API's calls over a pipe; :class:`DriverProcess`, in the API process, starts it,
notices when it is gone (end of the pipe) or never connects (within
:data:`CONNECT_TIMEOUT_S`), and starts another, again and again, backing off up to
:data:`BACKOFF_MAX_S`. While there is none, calls raise :class:`DriverUnavailable` at once and
the searcher answers in process (:class:`~service.collection.distributed.RaySearcher`).

The child dies with the API process (``PR_SET_PDEATHSIG`` and the end of the pipe) and stops
a Ray instance it started itself on its way out.
"""

from __future__ import annotations

import ctypes
import itertools
import logging
import logging.config
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from service.core.logs import LogFormat, logging_config

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 20.0  # a child that has not connected by then is killed and retried
BACKOFF_MAX_S = 5.0


class DriverUnavailable(Exception):  # a state, caught by the searcher
    """No driver process is connected to the cluster now; the message says why."""


@dataclass(frozen=True)
class DriverConfig:
    """What the child needs: where the cluster is, the workers' constructor arguments, the
    shards, copies and budget (see :class:`~service.collection.replicas.ShardRouter`)."""

    address: str | None
    args: tuple[str, str | None, str | None]  # collection path, bundle path, state root
    shards: int
    replicas: int | None
    timeout_s: float
    concurrency: int
    worker: Callable[[Any, int], Any]  # (ray, concurrency) -> the shard worker's actor class
    log_level: int = logging.INFO  # the child logs as its parent (failovers are at info)
    log_format: LogFormat = "text"
    spares: int | None = None  # spare workers a node (None: the router's default)


class DriverProcess:
    """The API side of the driver process (see the module docstring). ``on_event(kind,
    shard, n)`` is called for the router's events (failovers, hedges, re-placements)."""

    def __init__(
        self, config: DriverConfig, on_event: Callable[[str, int, int], None] | None = None
    ) -> None:
        self.config = config
        self.on_event = on_event
        self.connected = threading.Event()
        self.error: str | None = "connecting to Ray"
        self.attempts = 0
        self._conn: Connection | None = None
        self._process: Any = None
        self._send_lock = threading.Lock()
        self._pending: dict[int, Future[Any]] = {}
        self._ids = itertools.count()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._supervise, name="ray-driver", daemon=True)
        self._thread.start()

    @property
    def where(self) -> str:
        return self.config.address or "a local Ray instance"

    def call(self, kind: str, *args: Any, timeout: float) -> Any:
        """``kind(*args)`` in the driver process (``ask``, ``status``, ``names``), or
        :class:`DriverUnavailable` (not connected, lost, or no reply within ``timeout``)."""
        conn = self._conn
        if conn is None or not self.connected.is_set():
            raise DriverUnavailable(self.error or "not connected")
        rid = next(self._ids)
        future: Future[Any] = Future()
        self._pending[rid] = future
        try:
            with self._send_lock:
                conn.send((rid, kind, args))
            return future.result(timeout)
        except (OSError, EOFError, ValueError, TypeError) as exc:
            # TypeError: the connection was closed by the supervisor while this sent on it
            raise DriverUnavailable(f"lost the driver process ({type(exc).__name__})") from None
        except FutureTimeout:
            raise DriverUnavailable(f"the driver process did not reply in {timeout:g} s") from None
        finally:
            self._pending.pop(rid, None)

    def wait_connected(self, timeout: float) -> bool:
        """Whether a driver is connected within ``timeout`` seconds, or this attempt failed."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.connected.is_set():
                return True
            if self.attempts > 0:  # one attempt failed: do not hold the caller up
                return False
            time.sleep(0.05)
        return self.connected.is_set()

    def _supervise(self) -> None:
        backoff = 1.0
        ctx = multiprocessing.get_context("spawn")  # never fork a process with threads
        while not self._stop.is_set():
            ours, theirs = ctx.Pipe()
            process = ctx.Process(
                target=serve, args=(theirs, self.config), name="clir-ray-driver", daemon=True
            )
            process.start()
            theirs.close()
            self._process = process
            hello = self._hello(ours)
            if hello is None:
                self._end(process, ours)
            else:
                log.info("Ray driver connected to %s (pid %d)", self.where, process.pid)
                self._conn, self.error = ours, None
                backoff = 1.0
                self.connected.set()
                self._read(ours)
                self.connected.clear()
                self._conn = None
                self.error = f"lost the connection to Ray at {self.where}; reconnecting"
                log.warning("%s", self.error)
                for future in list(self._pending.values()):
                    if not future.done():
                        future.set_exception(DriverUnavailable(self.error))
                self._end(process, ours)
            self.attempts += 1
            if self._stop.wait(backoff):
                break
            backoff = min(backoff * 2, BACKOFF_MAX_S)

    def _hello(self, conn: Connection) -> dict[str, Any] | None:
        try:
            if not conn.poll(CONNECT_TIMEOUT_S):
                self.error = (
                    f"cannot reach Ray at {self.where}: no connection within "
                    f"{CONNECT_TIMEOUT_S:g} s; retrying"
                )
                log.warning("%s", self.error)
                return None
            kind, body = conn.recv()
        except (OSError, EOFError) as exc:
            self.error = f"cannot reach Ray at {self.where} ({type(exc).__name__}); retrying"
            return None
        if kind != "ready":
            self.error = f"cannot reach Ray at {self.where}: {body}; retrying"
            log.warning("%s", self.error)
            return None
        return dict(body)

    def _read(self, conn: Connection) -> None:
        while not self._stop.is_set():
            try:
                msg = conn.recv()
            except (OSError, EOFError):
                return
            if msg[0] == "event":
                if self.on_event is not None:
                    self.on_event(*msg[1])
                continue
            _, rid, ok, value = msg
            future = self._pending.get(rid)
            if future is not None and not future.done():
                if ok:
                    future.set_result(value)
                else:
                    future.set_exception(DriverUnavailable(f"the driver failed: {value}"))

    @staticmethod
    def _end(process: Any, conn: Connection) -> None:
        conn.close()
        process.join(2.0)
        if process.is_alive():
            process.terminate()
            process.join(5.0)
        if process.is_alive():
            process.kill()
            process.join(2.0)

    @property
    def pid(self) -> int | None:
        p = self._process
        return None if p is None else p.pid

    def close(self) -> None:
        self._stop.set()
        conn, process = self._conn, self._process
        if conn is not None:
            try:
                with self._send_lock:
                    conn.send((-1, "close", ()))
            except (OSError, ValueError):
                pass
        if process is not None:
            self._end(process, conn) if conn is not None else process.terminate()
        self._thread.join(5.0)


def _die_with_parent() -> None:
    """Linux: SIGTERM this process when the one that started it dies."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
        except OSError:
            log.debug("prctl is not available")


def log_as(config: DriverConfig) -> None:
    """Write this (spawned) process's logs as its parent does: without it only warnings reach
    stderr, and the router's standbys, copies up and re-placements are not in the log."""
    level = logging.getLevelName(config.log_level)
    logging.config.dictConfig(logging_config(config.log_format, level, request_ids=False))


def router_calls(ray: Any, router: Any) -> dict[str, Callable[..., Any]]:
    """The calls a driver answers: ``ask(method, args, budget)`` (a search's query and plan
    put once into the object store, for every copy to read), ``status``, ``names``."""

    def ask(method: str, args: tuple[Any, ...], budget: float | None = None) -> Any:
        if method == "partial":  # (method, query, depth, params, plan, final, count)
            m, query, depth, params, plan, *rest = args
            args = (m, ray.put(query), depth, params, ray.put(plan), *rest)
        return router.ask(method, args, budget)

    return {"ask": ask, "status": router.status, "names": router.names}


def serve(conn: Connection, config: DriverConfig) -> None:
    """The driver process: connect, start the shard copies, answer calls until the pipe ends."""
    _die_with_parent()
    log_as(config)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # so that Ray shuts down cleanly
    send_lock = threading.Lock()

    def send(msg: Any) -> None:
        with send_lock:
            conn.send(msg)

    try:
        import ray

        from service.collection.replicas import ShardRouter

        if config.address:
            ray.init(address=config.address, log_to_driver=False, namespace="clir")
        else:
            ray.init(include_dashboard=False, log_to_driver=False, namespace="clir")
        remote = config.worker(ray, config.concurrency)
        router = ShardRouter(
            ray, remote, config.args, config.shards, replicas=config.replicas,
            timeout_s=config.timeout_s, on_event=lambda *e: send(("event", e)),
            spares=config.spares,
        )  # fmt: skip
    except Exception as exc:  # reported to the API, which retries
        send(("error", f"{type(exc).__name__}: {exc}"[:500]))
        return
    send(("ready", {"replicas": router.replicas, "pid": os.getpid()}))
    calls = router_calls(ray, router)
    pool = ThreadPoolExecutor(config.concurrency + 2, thread_name_prefix="driver")

    def answer(rid: int, kind: str, args: tuple[Any, ...]) -> None:
        try:
            value = calls[kind](*args)
        except Exception as exc:  # sent back, not lost
            msg: Any = ("reply", rid, False, f"{type(exc).__name__}: {exc}"[:500])
        else:
            msg = ("reply", rid, True, value)
        try:
            send(msg)
        except (OSError, ValueError):
            log.debug("the API process is gone")

    try:
        while True:
            try:
                rid, kind, args = conn.recv()
            except (OSError, EOFError):
                break
            if kind == "close":
                break
            pool.submit(answer, rid, kind, args)
    finally:
        router.close()
        pool.shutdown(wait=False, cancel_futures=True)
        ray.shutdown()
