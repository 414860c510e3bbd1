"""Helpers for tests that run the service as a real process on loopback."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx2 as httpx
import pytest

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_ready(
    url: str, proc: subprocess.Popen[bytes], timeout: float, log: Path | None = None, times: int = 1
) -> None:
    """Wait until ``url``/readyz answers 200 ``times`` times in a row (with several API
    processes behind one port, a few answers in a row mean they are all up); fail with the
    server's log if ``proc`` exits or ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    in_a_row = 0
    while in_a_row < times:
        if proc.poll() is not None:
            text = log.read_text() if log is not None else ""
            pytest.fail(f"the server exited with {proc.returncode}\n{text}")
        if time.monotonic() > deadline:
            pytest.fail(f"the server at {url} was not ready in {timeout:g} s")
        try:
            ok = httpx.get(f"{url}/readyz", timeout=2).status_code == 200
        except httpx.TransportError:
            ok = False
        in_a_row = in_a_row + 1 if ok else 0
        time.sleep(0.1 if ok else 0.2)


def serve_env(bundle: Path, index: Path, tmp_path: Path, **settings: str) -> dict[str, str]:
    """The environment of a ``clir serve`` over one bundle and one document index, with no
    pool index and its job store in ``tmp_path``: this process's environment without its
    ``CLIR_`` variables, and ``settings`` as further ``CLIR_`` variables."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLIR_")}
    env.update(
        {
            "CLIR_MODEL_BUNDLES": json.dumps([str(bundle)]),
            "CLIR_DOC_INDEXES": json.dumps([str(index)]),
            "CLIR_POOL_INDEXES": "[]",
            "CLIR_JOB_STORE": str(tmp_path / "jobs.sqlite3"),
        }
    )
    env.update(settings)
    return env


@contextmanager
def clir_serve(
    env: dict[str, str], log: Path, *args: str, stdout_to_log: bool = True
) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """``clir serve ARGS`` on a free loopback port with the environment ``env``: yields the
    process and its URL (not yet waited for: see ``wait_ready``). Its stderr, and its stdout
    unless ``stdout_to_log`` is false, go to ``log``. On leaving, SIGTERM; a server still
    running a minute later is killed and fails the test."""
    port = free_port()
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "service.cli", "serve", "--port", str(port), *args],
            cwd=ROOT,
            env=env,
            stdout=out if stdout_to_log else subprocess.DEVNULL,
            stderr=subprocess.STDOUT if stdout_to_log else out,
        )
        try:
            yield proc, f"http://127.0.0.1:{port}"
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                pytest.fail(f"clir serve {' '.join(args)} did not stop on SIGTERM")
