"""Real Ray clusters on this machine for the cluster tests: a head (``ray start --head
--block``) and more nodes (``ray start --address ... --block``), each the child process of the
test, with an auth token as Ray 2.60 requires.

A cluster here lives in a temp dir of its own and is stopped by signalling the processes that
started it, never by ``ray stop``: that would also stop the one local Ray instance the rest of
the Ray tests share for the whole session (``local_ray`` in tests/conftest.py), and the default
temp dir's ``ray_current_cluster``, left behind by a head stopped by a signal, would send every
later ``ray.init()`` to a dead cluster."""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.servers import free_port

ROOT = Path(__file__).resolve().parents[3]


def ray_command() -> str:
    exe = shutil.which("ray", path=str(Path(sys.executable).parent))
    assert exe is not None, "the ray command is installed with the ray extra"
    return exe


def ray_environment() -> dict[str, str]:
    """This environment without CLIR_ settings, with a fresh Ray auth token."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLIR_")}
    env.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=secrets.token_hex(16),
               RAY_USAGE_STATS_ENABLED="0", PYTHONPATH=str(ROOT))  # fmt: skip
    return env


class Head:
    """``ray start --head --block`` on ``port``: stopped by signalling its own process."""

    def __init__(self, port: int, env: dict[str, str], log: Path) -> None:
        self.temp_dir = tempfile.mkdtemp(prefix="clir-ray-", dir="/tmp")  # short: sockets
        self.cmd = [ray_command(), "start", "--head", "--block", f"--port={port}",
                    "--num-cpus=1", "--include-dashboard=false", "--disable-usage-stats",
                    f"--temp-dir={self.temp_dir}"]  # fmt: skip
        self.env, self.log = env, log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(self.cmd, env=self.env, stdout=out, stderr=out)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # ray start --block stops what it started
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.proc = None

    def remove(self) -> None:
        shutil.rmtree(self.temp_dir, ignore_errors=True)


class Node(Head):
    """``ray start --address ... --block``: a second node on this machine."""

    def __init__(self, address: str, env: dict[str, str], log: Path) -> None:
        super().__init__(0, env, log)
        self.remove()  # the head's temp dir is the cluster's
        self.cmd = [self.cmd[0], "start", f"--address={address}", "--block", "--num-cpus=1",
                    "--disable-usage-stats"]  # fmt: skip


@contextmanager
def two_nodes(logs: Path) -> Iterator[tuple[str, dict[str, str], Node]]:
    """A head and a second node, one CPU each: the head's address, the environment (with the
    token) a driver connects with, and the second node (to lose it)."""
    env = ray_environment()
    port = free_port()
    head = Head(port, env, logs / "head.log")
    node = Node(f"127.0.0.1:{port}", env, logs / "node.log")
    head.start()
    try:
        node.start()
        yield f"127.0.0.1:{port}", env, node
    finally:
        node.stop()
        head.stop()
        head.remove()
