"""Request logs: one record per request with its request id (echoed in ``X-Request-ID``),: the
tests that start processes, Ray or a browser, read the shared data or run long (the integration
tier, tests/README.md); the rest are in :mod:`tests.api.test_logs`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

from service.api.logs import REQUEST_LOGGER
from service.index.inverted import InvertedIndex
from service.mt.bundle import ModelBundle
from tests.api.test_logs import SEARCH
from tests.servers import clir_serve, serve_env, wait_ready


@pytest.mark.process  # starts a process
def test_clir_serve_writes_one_json_line_per_request(
    toy_bundle: ModelBundle, toy_index: InvertedIndex, tmp_path: Path
) -> None:
    env = serve_env(
        toy_bundle.path,
        toy_index.path,
        tmp_path,
        CLIR_EMBEDDED_WORKER="false",
        CLIR_LOG_FORMAT="json",
    )
    log_path = tmp_path / "serve.log"
    # the log holds stderr only: every line of it must be JSON
    with clir_serve(env, log_path, stdout_to_log=False) as (proc, url):
        wait_ready(url, proc, 90, log_path)
        r = httpx.post(f"{url}/v1/search", json=SEARCH, headers={"X-Request-ID": "e2e-1"})
        assert r.status_code == 200 and r.headers["x-request-id"] == "e2e-1"
    lines = [line for line in log_path.read_text().splitlines() if line.strip()]
    records: list[dict[str, Any]] = [json.loads(line) for line in lines]  # every line is JSON
    searches = [r for r in records if r.get("route") == "/v1/search"]
    assert len(searches) == 1
    (s,) = searches
    assert s["logger"] == REQUEST_LOGGER and s["level"] == "INFO"
    assert (s["request_id"], s["status"], s["http_method"]) == ("e2e-1", 200, "POST")
    assert (s["lang"], s["method"], s["cached"], s["degraded"]) == ("de", "bowfd", False, False)
    assert s["decode_ms"] > 0 and s["rank_ms"] >= 0 and "time" in s
    assert any(r.get("route") == "/readyz" for r in records)  # every request, one line each
    assert not any("HTTP/1.1" in r.get("message", "") for r in records)  # no second access log
