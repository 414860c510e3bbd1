"""The API process SIGKILLed while it answers requests: after a restart it
serves again, with the same active weights version and the same answers."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

from service.index.inverted import InvertedIndex
from service.mt.bundle import ModelBundle, load_bundle
from tests.servers import free_port, wait_ready

ROOT = Path(__file__).resolve().parents[3]
QUERY = {"query": "das Haus ist groß", "lang": "de", "method": "bowfd", "k": 5}


class Server:
    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.url = f"http://127.0.0.1:{free_port()}"
        full = {k: v for k, v in os.environ.items() if not k.startswith("CLIR_")}
        full.update(env)
        self.log = log.open("a", encoding="utf-8")
        port = self.url.rsplit(":", 1)[1]
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "service.api.app:create_app", "--factory",
             "--host", "127.0.0.1", "--port", port, "--log-level", "warning"],
            cwd=ROOT, env=full, stdout=self.log, stderr=subprocess.STDOUT,
        )  # fmt: skip

    def wait_ready(self, timeout: float = 60.0) -> None:
        wait_ready(self.url, self.proc, timeout)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=30)
        self.log.close()


@pytest.mark.process  # starts a process
def test_sigkill_mid_request_then_restart_serves_the_same_version(
    toy_bundle: ModelBundle, toy_index: InvertedIndex, tmp_path: Path
) -> None:
    bundle_dir = Path(shutil.copytree(toy_bundle.path, tmp_path / "de-en"))
    state_root = tmp_path / "weights"
    store = load_bundle(bundle_dir, state_root=state_root).weights_store
    active = store.active()
    doubled = store.save({k: 2 * v for k, v in active.weights.items()}, version="doubled")
    store.activate(doubled.version)
    env = {
        "CLIR_MODEL_BUNDLES": json.dumps([str(bundle_dir)]),
        "CLIR_DOC_INDEXES": json.dumps([str(toy_index.path)]),
        "CLIR_POOL_INDEXES": "[]",
        "CLIR_EMBEDDED_WORKER": "false",
        "CLIR_JOB_STORE": str(tmp_path / "jobs.sqlite3"),
        "CLIR_WEIGHTS_STATE_DIR": str(state_root),
        "CLIR_FOREST_CACHE_SIZE": "0",  # every request decodes: work is in flight when killed
    }
    server = Server(env, tmp_path / "server.log")
    outcomes: list[Any] = []
    try:
        server.wait_ready()
        before = httpx.post(f"{server.url}/v1/search", json=QUERY, timeout=30).json()
        assert before["weights_version"] == "doubled" and before["results"]
        stop = threading.Event()

        def hammer() -> None:
            with httpx.Client(base_url=server.url, timeout=30) as http:
                while not stop.is_set():
                    try:
                        outcomes.append(http.post("/v1/search", json=QUERY).status_code)
                    except httpx.TransportError as exc:
                        outcomes.append(type(exc).__name__)
                        return

        threads = [threading.Thread(target=hammer) for _ in range(4)]
        for t in threads:
            t.start()
        while len(outcomes) < 20:  # requests are flowing
            time.sleep(0.01)
        server.kill()
        stop.set()
        for t in threads:
            t.join(timeout=30)
    finally:
        server.kill()
    assert any(isinstance(o, str) for o in outcomes)  # some request was cut off mid-flight
    assert all(o == 200 for o in outcomes if isinstance(o, int))

    restarted = Server(env, tmp_path / "server.log")
    try:
        restarted.wait_ready()
        after = httpx.post(f"{restarted.url}/v1/search", json=QUERY, timeout=30).json()
    finally:
        restarted.kill()
    assert after["weights_version"] == "doubled"
    assert [(h["id"], h["score"]) for h in after["results"]] == [
        (h["id"], h["score"]) for h in before["results"]
    ]
    assert load_bundle(bundle_dir, state_root=state_root).active_weights().version == "doubled"
