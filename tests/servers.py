"""Helpers for tests that run the service as a real process on loopback."""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

import httpx2 as httpx
import pytest


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
