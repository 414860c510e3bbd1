"""``make serve`` (README's first set-up command) starts the service on the committed demo
bundle and answers a German query, a suggestion and the web page.

The demo paths are given explicitly: on a fresh clone they are what the defaults resolve to
(the full bundles are not committed), and here they keep the test from loading the full models
when those were built in this checkout."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import httpx2 as httpx
import pytest

from tests.servers import free_port, wait_ready

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.process  # starts a process
def test_make_serve_answers_a_german_query_on_the_demo_bundle(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLIR_")}
    env.update(
        {
            "CLIR_MODEL_BUNDLES": json.dumps(["models/demo-de-en"]),
            "CLIR_DOC_INDEXES": json.dumps(["indexes/demo"]),
            "CLIR_POOL_INDEXES": json.dumps(["indexes/demo-pool"]),
            "CLIR_JOB_STORE": str(tmp_path / "jobs.sqlite3"),
        }
    )
    log = (tmp_path / "make_serve.log").open("w")
    proc = subprocess.Popen(
        ["make", "-s", "serve", f"PORT={port}"], cwd=ROOT, env=env, stdout=log,
        stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    try:
        wait_ready(url, proc, 120, tmp_path / "make_serve.log")
        ready = httpx.get(f"{url}/readyz", timeout=5).json()
        assert ready["models"] == {"de": "demo-de-en"}
        r = httpx.post(
            f"{url}/v1/search",
            json={"query": "Wie kann ich ein Dokument drucken?", "lang": "de", "k": 5},
            timeout=60,
        )
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["results"] and all(h["id"] and h["title"] for h in body["results"])
        assert body["translation"].strip()
        s = httpx.post(
            f"{url}/v1/suggest",
            json={"sentence": "Klicken Sie auf Drucken.", "lang": "de", "k": 3},
            timeout=60,
        )
        assert s.status_code == 200 and s.json()["results"], s.text
        page = httpx.get(f"{url}/", timeout=10)
        assert page.status_code == 200 and "<form" in page.text
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            pytest.fail("make serve did not stop on SIGTERM")
        finally:
            log.close()
