"""Request logs: one record per request with its request id (echoed in ``X-Request-ID``),
route, status and the query's language, method, decode/rank times, cache use and degradation;
JSON lines from ``clir serve`` when ``CLIR_LOG_FORMAT=json`` (or ``auto`` off a terminal),
text on a terminal."""

from __future__ import annotations

import io
import logging
import re

import pytest
from fastapi.testclient import TestClient

from service.api.logs import REQUEST_LOGGER
from service.core.logs import TextFormatter, logging_config, resolve_format

SEARCH = {"query": "das Haus ist groß", "lang": "de", "method": "bowfd", "k": 3}


def _records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == REQUEST_LOGGER]


def test_request_id_is_echoed_or_made(client: TestClient) -> None:
    given = client.get("/healthz", headers={"X-Request-ID": "client-42.a"})
    assert given.headers["x-request-id"] == "client-42.a"
    made = client.get("/healthz").headers["x-request-id"]
    assert re.fullmatch(r"[0-9a-f]{32}", made)
    refused = client.get("/healthz", headers={"X-Request-ID": "a b\tc"}).headers["x-request-id"]
    assert re.fullmatch(r"[0-9a-f]{32}", refused)  # not echoed as it came


def test_one_record_per_request_with_the_query_fields(
    client: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=REQUEST_LOGGER)
    first = client.post("/v1/search", json=SEARCH, headers={"X-Request-ID": "rid-1"})
    again = client.post("/v1/search", json=SEARCH)
    translated = client.post("/v1/translate", json={"text": "das Haus", "lang": "de"})
    missing = client.get("/nowhere")
    assert [first.status_code, again.status_code, translated.status_code] == [200, 200, 200]
    assert missing.status_code == 404
    records = _records(caplog)
    assert len(records) == 4
    a, b, t, m = (r.__dict__ for r in records)
    assert a["request_id"] == "rid-1" and b["request_id"] == again.headers["x-request-id"]
    assert {k: a[k] for k in ("route", "path", "http_method", "status", "lang", "method")} == {
        "route": "/v1/search",
        "path": "/v1/search",
        "http_method": "POST",
        "status": 200,
        "lang": "de",
        "method": "bowfd",
    }
    body = first.json()
    assert a["decode_ms"] == round(body["timings"]["decode_ms"], 1) and a["decode_ms"] > 0
    assert a["rank_ms"] == round(body["timings"]["rank_ms"], 1)
    assert (a["cached"], a["degraded"], a["weights_version"]) == (
        False,
        False,
        body["weights_version"],
    )
    assert (b["cached"], b["decode_ms"]) == (True, 0.0)
    assert a["duration_ms"] > 0 and records[0].getMessage().startswith("POST /v1/search 200 ")
    assert (t["route"], t["lang"], t["method"], t["cached"]) == ("/v1/translate", "de", None, False)
    assert t["decode_ms"] is not None and t["decode_ms"] > 0
    assert (m["route"], m["status"], m["lang"], m["decode_ms"]) == ("other", 404, None, None)


def test_refused_requests_are_logged_too(
    client: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=REQUEST_LOGGER)
    r = client.post("/v1/search", json={**SEARCH, "lang": "xx"})
    assert r.status_code == 422
    (record,) = _records(caplog)
    assert (record.__dict__["status"], record.__dict__["lang"]) == (422, "xx")
    assert record.__dict__["request_id"] == r.headers["x-request-id"]


def test_requests_refused_before_routing_name_their_route(
    client: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=REQUEST_LOGGER)
    plain = client.post("/v1/search", content=b"haus", headers={"content-type": "text/plain"})
    latin1 = client.post(
        "/v1/translate", content='{"query": "groß"}'.encode("latin-1"),
        headers={"content-type": "application/json"},
    )  # fmt: skip
    wrong_method = client.delete("/v1/search")
    assert (plain.status_code, latin1.status_code, wrong_method.status_code) == (415, 422, 405)
    routes = [(r.__dict__["route"], r.__dict__["status"]) for r in _records(caplog)]
    assert routes == [("/v1/search", 415), ("/v1/translate", 422), ("/v1/search", 405)]
    metrics = client.get("/metrics").text
    assert 'endpoint="/v1/search",method="POST",status="415"} 1' in metrics
    assert 'endpoint="/v1/translate",method="POST",status="422"} 1' in metrics


class _Stream(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


def test_text_on_a_terminal_json_otherwise() -> None:
    assert resolve_format("auto", _Stream(tty=True)) == "text"
    assert resolve_format("auto", _Stream(tty=False)) == "json"
    assert resolve_format("json", _Stream(tty=True)) == "json"
    assert resolve_format("text", _Stream(tty=False)) == "text"
    config = logging_config("auto", "info", _Stream(tty=True))
    assert list(config["formatters"]) == ["text"]
    assert config["loggers"]["service"]["level"] == "INFO"


def test_text_lines_carry_the_fields() -> None:
    record = logging.LogRecord(REQUEST_LOGGER, logging.INFO, __file__, 1, "GET /x 200", (), None)
    record.__dict__.update(request_id="r1", route="/x", status=200, lang=None, cached=True)
    line = TextFormatter("%(levelprefix)s %(message)s", use_colors=False).format(record)
    assert line.split() == ["INFO:", "GET", "/x", "200", "request_id=r1", "route=/x", "cached=True"]
