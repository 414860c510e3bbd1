"""The API outlives its Ray cluster: started while the cluster is down it opens its port
(``/healthz`` 200, ``/readyz`` 503 naming Ray) and answers every search in process, flagged
degraded; it connects when the head comes up; the head stopped under it (a restart), it
keeps answering — past the minute after which a Ray driver ends its own process — and is
whole again when the head is back; SIGTERM stops it. A real ``ray start --head`` on this
machine, with an auth token as Ray 2.60 requires, stopped by its own process (``--block``)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

from service.collection import build_collection
from service.index.build import build_params
from service.mt.bundle import ModelBundle
from tests.collection.integration.clusters import Head, ray_environment
from tests.collection.test_live import QUERIES, toy_corpus
from tests.servers import free_port

pytestmark = [pytest.mark.ray, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def ray_env() -> dict[str, str]:
    return ray_environment()


@pytest.fixture
def head(ray_env: dict[str, str], tmp_path: Path) -> Iterator[tuple[Head, int]]:
    port = free_port()
    h = Head(port, ray_env, tmp_path / "head.log")
    try:
        yield h, port
    finally:
        h.stop()
        h.remove()


def poll(url: str, path: str, want: int, timeout_s: float, proc: Any) -> dict[str, Any]:
    """``path``'s body once it answers ``want`` (fails if the server exits or time passes)."""
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the API process exited"
        try:
            r = httpx.get(url + path, timeout=5)
            last = (r.status_code, r.text[:500])
            if r.status_code == want:
                return dict(r.json())
        except httpx.TransportError as exc:
            last = (0, repr(exc))
        time.sleep(0.5)
    pytest.fail(f"{path} did not answer {want} within {timeout_s:g} s: {last}")


def search(url: str) -> dict[str, Any]:
    body = {"query": QUERIES[0], "lang": "de", "method": "bowfd", "k": 10}
    r = httpx.post(url + "/v1/search", json=body, timeout=60)
    assert r.status_code == 200, r.text
    return dict(r.json())


def test_the_api_outlives_ray(
    head: tuple[Head, int], ray_env: dict[str, str], tmp_path: Path,
    toy_bundle: ModelBundle, weights_root: Path,
) -> None:  # fmt: skip
    cluster, port = head
    out = tmp_path / "c"
    build_collection(toy_corpus(), out, build_params("docs"), shards=2)
    env = ray_env | {
        "CLIR_MODEL_BUNDLES": json.dumps([str(toy_bundle.path)]),
        "CLIR_DOC_INDEXES": str(out),
        "CLIR_POOL_INDEXES": "[]",
        "CLIR_EMBEDDED_WORKER": "false",
        "CLIR_JOB_STORE": str(tmp_path / "jobs.sqlite3"),
        "CLIR_WEIGHTS_STATE_DIR": str(weights_root),
        "CLIR_SEARCH_BACKEND": "ray",
        "CLIR_RAY_ADDRESS": f"127.0.0.1:{port}",
        "CLIR_FOREST_CACHE_SIZE": "0",
        "CLIR_WARM_UP": "true",  # as deployed: the warm-up asks for the shard workers
        # a driver ends its process this long after its cluster is gone (default 60 s)
        "RAY_gcs_rpc_server_reconnect_timeout_s": "5",
    }
    url = f"http://127.0.0.1:{free_port()}"
    log = (tmp_path / "server.log").open("ab")
    server = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "service.api.app:create_app", "--factory",
         "--host", "127.0.0.1", "--port", url.rsplit(":", 1)[1], "--log-level", "warning"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        # 1. Ray down at start: the port opens, not ready (naming Ray), answers in process
        t0 = time.monotonic()
        poll(url, "/healthz", 200, 120, server)
        started_in = time.monotonic() - t0
        r = httpx.get(url + "/readyz", timeout=10)
        assert r.status_code == 503 and "Ray" in r.json()["detail"], r.text
        down = search(url)
        assert down["degraded"] is True and "Ray" in down["degraded_reason"]
        assert down["results"]
        # 2. the head comes up: connected without a restart, the same answer, whole
        cluster.start()
        t1 = time.monotonic()
        poll(url, "/readyz", 200, 180, server)
        connected_in = time.monotonic() - t1
        while True:  # the shard workers load the bundle
            shards = poll(url, "/readyz", 200, 30, server)["collection"]["shards"]
            if [s["copies_up"] for s in shards] == [1, 1]:
                break
            assert time.monotonic() - t1 < 180, shards
            time.sleep(0.5)
        assert all(c["node"] and c["state"] == "up" for s in shards for c in s["copies"])
        workers_in = time.monotonic() - t1
        up = search(url)
        assert up["degraded"] is False, up.get("degraded_reason")
        assert up["results"] == down["results"]
        # 3. the head stopped under it: answers keep coming, degraded, after the driver's end
        cluster.stop()
        for _ in range(3):
            lost = search(url)
            assert lost["degraded"] is True and lost["results"] == down["results"]
        time.sleep(12)  # past the driver's own end (5 s here, a minute by default)
        assert server.poll() is None, "the API process exited with its cluster"
        lost = search(url)
        assert lost["degraded"] is True and lost["results"] == down["results"]
        assert httpx.get(url + "/readyz", timeout=10).status_code == 503
        # 4. the head back: whole again
        cluster.start()
        t2 = time.monotonic()
        poll(url, "/readyz", 200, 180, server)
        back_in = time.monotonic() - t2
        again = search(url)
        assert again["degraded"] is False and again["results"] == down["results"]
        metrics = httpx.get(url + "/metrics", timeout=10).text
        assert 'clir_shard_in_process_total{shard="-1"}' in metrics
        print(f"\nport open {started_in:.1f} s after start with Ray down; connected "
              f"{connected_in:.1f} s after the head started, workers up {workers_in:.1f} s; "
              f"ready {back_in:.1f} s after the head restarted")  # fmt: skip
        # 5. SIGTERM stops it
        server.send_signal(signal.SIGTERM)
        server.wait(30)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait(10)
        log.close()
