"""Request hardening: the body guard (413 by Content-Length and by
counted chunks, 415 for non-JSON bodies, 422 for non-UTF-8), clear answers for malformed JSON,
CORS only when configured, and overload answered with 503 + Retry-After instead of a queue."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.api.limits import BodyGuardMiddleware, is_json_content_type
from service.api.serving import QueryService
from service.api.telemetry import Message, Metrics, Receive, Scope, Send
from service.collection.searcher import SnapshotSearcher
from service.core.settings import Settings
from service.errors import OverloadedError
from tests.api.conftest import MakeClient

WAIT_S = 30.0  # upper bound for waits on other threads; never reached when the code works

# --- the body guard as a unit ----------------------------------------------------------------


class Inner:
    """An ASGI app that records the body it read and answers 200."""

    def __init__(self) -> None:
        self.called = False
        self.body = b""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.called = True
        while True:
            message = await receive()
            self.body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})


def guard_call(
    chunks: list[bytes],
    *,
    method: str = "POST",
    headers: dict[str, str] | None = None,
    limit: int = 1024,
) -> tuple[int | None, dict[str, Any] | None, Inner, int]:
    """(status, JSON body or None, the inner app, chunks the guard read) of one request."""
    inner = Inner()
    guard = BodyGuardMiddleware(inner, max_body_bytes=limit)
    sent: list[Message] = []
    read = 0
    scope: Scope = {
        "type": "http",
        "method": method,
        "path": "/v1/search",
        "headers": [(k.encode(), v.encode()) for k, v in (headers or {}).items()],
    }

    async def receive() -> Message:
        nonlocal read
        if read < len(chunks):
            read += 1
            more = read < len(chunks)
            return {"type": "http.request", "body": chunks[read - 1], "more_body": more}
        raise AssertionError("receive() called after the last chunk")

    async def send(message: Message) -> None:
        sent.append(message)

    asyncio.run(guard(scope, receive, send))
    if not sent:
        return None, None, inner, read
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    parsed = json.loads(body) if sent[0]["status"] != 200 else None
    return int(sent[0]["status"]), parsed, inner, read


JSON_HEADERS = {"content-type": "application/json"}


def test_declared_length_over_the_limit_is_413_before_reading() -> None:
    status, body, inner, read = guard_call(
        [b"x" * 1025], headers={**JSON_HEADERS, "content-length": "1025"}
    )
    assert status == 413 and not inner.called and read == 0
    assert body is not None
    assert "has 1025 bytes" in body["detail"] and "at most 1024 bytes" in body["detail"]


def test_chunks_are_counted_without_content_length() -> None:
    status, body, inner, read = guard_call([b"a" * 512, b"b" * 512, b"c"], headers=JSON_HEADERS)
    assert status == 413 and not inner.called and read == 3
    assert body is not None and "exceeds 1024 bytes" in body["detail"]


def test_a_body_of_exactly_the_limit_reaches_the_app_whole() -> None:
    chunks = [b"a" * 512, b"b" * 500, b"c" * 12]
    status, _body, inner, _read = guard_call(chunks, headers=JSON_HEADERS)
    assert status == 200 and inner.called
    assert inner.body == b"a" * 512 + b"b" * 500 + b"c" * 12


def test_a_get_without_body_passes() -> None:
    status, _body, inner, _read = guard_call([b""], method="GET")
    assert status == 200 and inner.called and inner.body == b""


@pytest.mark.parametrize(
    ("content_type", "status", "phrase"),
    [
        (None, 415, "no Content-Type header"),
        ("text/plain", 415, "unsupported Content-Type 'text/plain'"),
        ("application/x-www-form-urlencoded", 415, "Content-Type: application/json"),
        ("application/json; charset=utf-8", 200, None),
        ("application/problem+json", 200, None),
    ],
)
def test_post_bodies_must_be_json(content_type: str | None, status: int, phrase: str) -> None:
    headers = {"content-type": content_type} if content_type else {}
    got, body, inner, _read = guard_call([b'{"a": 1}'], headers=headers)
    assert got == status and inner.called == (status == 200)
    if phrase is not None:
        assert body is not None and phrase in body["detail"]


def test_a_body_that_is_not_utf8_is_422_naming_the_byte() -> None:
    status, body, inner, _read = guard_call([b'{"q\xff": 1}'], headers=JSON_HEADERS)
    assert status == 422 and not inner.called
    assert body is not None and "byte 0xff at offset 3" in body["detail"]


def test_a_malformed_content_length_is_400() -> None:
    status, body, _inner, _read = guard_call([b"{}"], headers={"content-length": "12abc"})
    assert status == 400 and body is not None and "'12abc'" in body["detail"]


def test_a_client_that_goes_away_mid_body_is_dropped() -> None:
    inner = Inner()
    sent: list[Message] = []
    messages = iter(
        [{"type": "http.request", "body": b"a", "more_body": True}, {"type": "http.disconnect"}]
    )

    async def receive() -> Message:
        return next(messages)

    async def send(message: Message) -> None:
        sent.append(message)

    scope: Scope = {"type": "http", "method": "POST", "path": "/", "headers": []}
    asyncio.run(BodyGuardMiddleware(inner, 1024)(scope, receive, send))
    assert not inner.called and sent == []


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("application/json", True),
        ("Application/JSON; charset=UTF-8", True),
        ("application/vnd.api+json", True),
        ("text/json", False),
        ("application/jsonp", False),
        ("multipart/form-data; boundary=x", False),
    ],
)
def test_json_content_types(value: str, expected: bool) -> None:
    assert is_json_content_type(value) is expected


# --- the same through the app -------------------------------------------------------------------


@pytest.fixture
def api(make_client: MakeClient) -> TestClient:
    return make_client(embedded_worker=False)


def post_raw(client: TestClient, url: str, body: bytes, content_type: str | None = None) -> Any:
    headers = {"content-type": content_type} if content_type else {}
    return client.post(url, content=body, headers=headers)


def test_a_100k_character_query_is_413_from_the_body_limit(api: TestClient) -> None:
    r = api.post("/v1/search", json={"query": "haus " * 20_000, "lang": "de"})
    assert r.status_code == 413
    assert "at most 65536 bytes" in r.json()["detail"]


def test_a_streamed_body_over_the_limit_is_413(make_client: MakeClient) -> None:
    client = make_client(embedded_worker=False, max_body_bytes=2048)

    def stream() -> Iterator[bytes]:
        yield b'{"query": "'
        for _ in range(10):
            yield b"haus " * 50  # 250 bytes per chunk
        yield b'", "lang": "de"}'

    r = client.post("/v1/search", content=stream(), headers=JSON_HEADERS)
    assert r.status_code == 413
    assert "exceeds 2048 bytes" in r.json()["detail"]


def test_a_query_over_max_query_chars_but_within_the_body_is_413(api: TestClient) -> None:
    r = api.post("/v1/search", json={"query": "a" * 2001, "lang": "de"})
    assert r.status_code == 413
    assert "2001 characters; at most 2000" in r.json()["detail"]


@pytest.mark.parametrize(
    ("body", "phrase"),
    [
        # '}' at offset 17 of the first line: column 18
        (
            b'{"query": "haus",}',
            "Expecting property name enclosed in double quotes at line 1, column 18",
        ),
        # the '"' of "lang" opens line 3 after two spaces: column 3
        (b'{\n  "query": "haus"\n  "lang": "de"\n}', "Expecting ',' delimiter at line 3, column 3"),
    ],
)
def test_malformed_json_says_where_and_what_was_expected(
    api: TestClient, body: bytes, phrase: str
) -> None:
    r = post_raw(api, "/v1/search", body, "application/json")
    assert r.status_code == 422
    detail = r.json()["detail"]
    assert detail.startswith("the request body is not valid JSON: ") and phrase in detail
    assert "send a JSON object such as" in detail


@pytest.mark.parametrize(
    ("body", "phrase"),
    [
        (b"", "the request body is empty"),
        (b'["das haus"]', "the request body is an array, not a JSON object"),
        (b'"das haus"', "the request body is a string, not a JSON object"),
    ],
)
def test_a_body_that_is_not_an_object(api: TestClient, body: bytes, phrase: str) -> None:
    r = post_raw(api, "/v1/translate", body, "application/json")
    assert r.status_code == 422 and r.json()["detail"].startswith(phrase)


@pytest.mark.parametrize("url", ["/v1/search", "/v1/suggest", "/v1/translate"])
@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", None])
def test_wrong_content_type_is_415(api: TestClient, url: str, content_type: str | None) -> None:
    r = post_raw(api, url, b'{"query": "das haus", "lang": "de"}', content_type)
    assert r.status_code == 415
    assert "Content-Type: application/json" in r.json()["detail"]


def test_field_errors_keep_their_list_and_survive_a_lone_surrogate(api: TestClient) -> None:
    # the JSON escape \ud800 is a lone surrogate: echoing it back used to crash the encoder
    r = post_raw(
        api, "/v1/search", b'{"query": "haus", "lang": "de", "k": "\\ud800"}', "application/json"
    )
    assert r.status_code == 422
    (error,) = r.json()["errors"]
    assert error["loc"] == ["body", "k"] and error["input"] == "\ufffd"
    assert r.json()["detail"].startswith("k: Input should be a valid")
    assert r.json()["detail"].endswith("(got '\ufffd')")


def test_the_openapi_document_lists_the_error_answers(api: TestClient) -> None:
    spec = api.get("/openapi.json").json()
    search = spec["paths"]["/v1/search"]["post"]["responses"]
    assert {"200", "413", "415", "422", "503"} <= set(search)
    assert "Retry-After" in search["503"]["headers"]
    doc = spec["paths"]["/v1/documents/{doc_id}"]["get"]["responses"]
    assert "404" in doc and "415" not in doc
    assert spec["components"]["schemas"]["ErrorDetail"]["required"] == ["detail"]


# --- CORS -------------------------------------------------------------------------------------

PREFLIGHT = {
    "access-control-request-method": "POST",
    "access-control-request-headers": "content-type",
}


def test_cors_is_off_by_default(api: TestClient) -> None:
    r = api.options("/v1/search", headers={"origin": "https://app.example", **PREFLIGHT})
    assert "access-control-allow-origin" not in r.headers
    r = api.post(
        "/v1/search",
        json={"query": "das haus", "lang": "de"},
        headers={"origin": "https://app.example"},
    )
    assert r.status_code == 200 and "access-control-allow-origin" not in r.headers


def test_cors_allows_only_the_configured_origins(make_client: MakeClient) -> None:
    client = make_client(embedded_worker=False, cors_origins=["https://app.example"])
    ok = {"origin": "https://app.example"}
    evil = {"origin": "https://evil.example"}
    r = client.options("/v1/search", headers={**ok, **PREFLIGHT})
    assert r.status_code == 200
    assert r.headers["access-control-allow-origin"] == "https://app.example"
    assert "POST" in r.headers["access-control-allow-methods"]
    r = client.options("/v1/search", headers={**evil, **PREFLIGHT})
    assert r.status_code == 400 and "access-control-allow-origin" not in r.headers
    body = {"query": "das haus", "lang": "de"}
    r = client.post("/v1/search", json=body, headers=ok)
    assert r.status_code == 200
    assert r.headers["access-control-allow-origin"] == "https://app.example"
    # a page on that origin may send its own request id and read the echoed one
    assert "access-control-expose-headers" in r.headers
    assert "x-request-id" in r.headers["access-control-expose-headers"].lower()
    r = client.options(
        "/v1/search",
        headers={**ok, **PREFLIGHT, "access-control-request-headers": "content-type,x-request-id"},
    )
    assert (
        r.status_code == 200 and "x-request-id" in r.headers["access-control-allow-headers"].lower()
    )
    r = client.post("/v1/search", json=body, headers=evil)
    assert "access-control-allow-origin" not in r.headers
    # the body guard's answers carry the header too (CORS wraps it), so browsers can read them
    r = client.post("/v1/search", content=b"x", headers={**ok, "content-type": "text/plain"})
    assert r.status_code == 415
    assert r.headers["access-control-allow-origin"] == "https://app.example"


# --- overload -----------------------------------------------------------------------------------


class Gate:
    """Blocks callers until opened; counts how many are waiting inside."""

    def __init__(self) -> None:
        self.inside = 0
        self._cond = threading.Condition()
        self._open = threading.Event()

    def enter(self) -> None:
        with self._cond:
            self.inside += 1
            self._cond.notify_all()
        assert self._open.wait(WAIT_S), "the test never opened the gate"

    def wait_inside(self, n: int) -> None:
        with self._cond:
            assert self._cond.wait_for(lambda: self.inside >= n, WAIT_S), f"{n} never entered"

    def open(self) -> None:
        self._open.set()


def test_run_refuses_beyond_max_concurrency_and_recovers() -> None:
    settings = Settings(max_concurrency=2, queue_timeout_s=0.01, retry_after_s=3)
    service = QueryService(settings, Metrics())
    gate = Gate()

    def slow() -> str:
        gate.enter()
        return "done"

    with ThreadPoolExecutor(2) as pool:
        held = [pool.submit(service.run, slow) for _ in range(2)]
        gate.wait_inside(2)
        with pytest.raises(OverloadedError) as info:
            service.run(lambda: "never")
        assert info.value.retry_after == 3
        assert "2 requests are in progress" in str(info.value)
        gate.open()
        assert [f.result(WAIT_S) for f in held] == ["done", "done"]
    assert service.run(lambda: "again") == "again"  # the slots were given back


TRANSLATE = {"text": "das haus", "lang": "de"}


def test_overload_is_503_with_retry_after_while_requests_are_held(
    make_client: MakeClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = make_client(embedded_worker=False, max_concurrency=2, queue_timeout_s=0.01)
    gate = Gate()
    real = SnapshotSearcher.rank

    def slow_rank(self: SnapshotSearcher, *args: Any, **kwargs: Any) -> Any:
        gate.enter()  # the test's stand-in for a slow ranking
        return real(self, *args, **kwargs)

    monkeypatch.setattr(SnapshotSearcher, "rank", slow_rank)
    body = {"query": "das haus", "lang": "de"}
    # two different queries: the same one would wait for the cache entry's lock instead
    bodies = [body, {"query": "das auto", "lang": "de"}]
    with ThreadPoolExecutor(2) as pool:
        held: list[Future[Any]] = [pool.submit(client.post, "/v1/search", json=b) for b in bodies]
        try:
            gate.wait_inside(2)
            for url, busy in [("/v1/search", body), ("/v1/translate", TRANSLATE)]:
                r = client.post(url, json=busy)
                assert r.status_code == 503, r.text
                assert r.headers["retry-after"] == "1"
                assert "the service is busy: 2 requests are in progress" in r.json()["detail"]
            assert client.get("/healthz").status_code == 200  # liveness is not gated
        finally:
            gate.open()
        assert [f.result(WAIT_S).status_code for f in held] == [200, 200]
    assert client.post("/v1/search", json=body).status_code == 200
    metrics = client.get("/metrics").text
    assert 'clir_http_requests_total{endpoint="/v1/search",method="POST",status="503"} 1' in metrics
