"""Schema-driven fuzzing of the whole API, and hand-written bad input.

schemathesis reads the app's own OpenAPI document and generates requests for every operation,
valid ones and invalid ones, seeded (``deterministic``) and bounded (25 examples per operation
and phase). They go in-process to an app over the toy bundle, no network. Every answer must be
a non-5xx whose status code, content type, headers and body the document describes.

(schemathesis' ``negative_data_rejection`` is not among the checks: pydantic's lax mode accepts
``"explain": 0`` or ``"k": "10"`` by coercion, which that check counts as a failure.)"""

from __future__ import annotations

import asyncio
import builtins
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from fastapi import FastAPI
from fastapi.testclient import TestClient
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from service.api.app import create_app
from service.core.settings import Settings
from service.index.inverted import InvertedIndex
from service.mt.bundle import ModelBundle

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    response_headers_conformance,
]
TOKEN = "fuzz-admin-token"  # set so that the admin routes exist; the fuzzer never sends it


def fuzz_settings(
    bundles: list[Path], docs: list[Path], pools: list[Path], jobs: Path | None = None
) -> Settings:
    fields: dict[str, object] = {
        "model_bundles": bundles,
        "doc_indexes": docs,
        "pool_indexes": pools,
        "admin_token": TOKEN,
        "embedded_worker": False,
    }
    if jobs is not None:
        fields["job_store"] = jobs
    return Settings.model_validate(fields)


# The document only depends on the routes, so it is read from an app that loads nothing; the
# requests go to ``toy_app`` (passed as ``app=`` to each call).
schema = schemathesis.openapi.from_asgi("/openapi.json", create_app(fuzz_settings([], [], [])))
schema.config.generation.update(
    modes=list(schemathesis.GenerationMode), max_examples=25, deterministic=True, database="none"
)


@pytest.fixture(scope="module")
def toy_app(
    toy_bundle: ModelBundle,
    toy_index: InvertedIndex,
    pool_index: InvertedIndex,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[FastAPI]:
    jobs = tmp_path_factory.mktemp("jobs") / "jobs.sqlite3"
    yield create_app(fuzz_settings([toy_bundle.path], [toy_index.path], [pool_index.path], jobs))


@schema.parametrize()
def test_no_server_error_and_answers_conform(case: Any, toy_app: FastAPI) -> None:
    case.call_and_validate(app=toy_app, checks=CHECKS)


# --- hand-written bad input -------------------------------------------------------------------

# (endpoint, the field that carries the text)
TEXT_ENDPOINTS = [("/v1/search", "query"), ("/v1/suggest", "sentence"), ("/v1/translate", "text")]


@pytest.fixture(scope="module")
def client(toy_app: FastAPI) -> Iterator[TestClient]:
    with TestClient(toy_app) as c:
        yield c


def post_json(client: TestClient, url: str, body: dict[str, Any]) -> Any:
    """POST ``body`` as ASCII JSON, so lone surrogates travel as ``\\ud800`` escapes."""
    data = json.dumps(body).encode("ascii")
    return client.post(url, content=data, headers={"content-type": "application/json"})


@pytest.mark.parametrize(("url", "field"), TEXT_ENDPOINTS)
@pytest.mark.parametrize("text", ["", " ", " \t\n\u3000 "])
def test_empty_and_whitespace_text_is_422(
    client: TestClient, url: str, field: str, text: str
) -> None:
    r = post_json(client, url, {field: text, "lang": "de"})
    assert r.status_code == 422
    (error,) = r.json()["errors"]
    assert error["loc"] == ["body", field] and "empty or only whitespace" in error["msg"]
    assert r.json()["detail"].startswith(f"{field}: Value error, must not be empty")


@pytest.mark.parametrize(("url", "field"), TEXT_ENDPOINTS)
def test_a_100k_character_text_is_413(client: TestClient, url: str, field: str) -> None:
    r = post_json(client, url, {field: "x" * 100_000, "lang": "de"})
    assert r.status_code == 413 and "at most 65536 bytes" in r.json()["detail"]


# The toy collection's pages for "haus": "Houses" (house ×3) and "Home" (home ×3). Their order
# turns on a few thousandths of a point (the title weight; the words passed through beside
# them), so the check is that both lead the ranking.
HOUSE_PAGES = {"d1", "d2"}


def top_two(answer: dict[str, Any]) -> set[str]:
    return {hit["id"] for hit in answer["results"][:2]}


# Texts that carry the German words "das haus" among oddities: each must still find "house".
ODD_TEXTS = {
    "control characters": "das \x07 haus \x1b[0m \x7f",
    "lone surrogate": "das \ud800 haus \udfff",
    "mixed scripts": "das haus 房子 дом σπίτι",
    "emoji": "das haus 🏠👍🏽",
    "right-to-left": "das haus \u202eשלום\u202c مرحبا",
    "zero-width": "das\u200b haus\ufeff",
}


@pytest.mark.parametrize(("url", "field"), TEXT_ENDPOINTS)
@pytest.mark.parametrize("name", sorted(ODD_TEXTS))
def test_odd_characters_are_answered(client: TestClient, url: str, field: str, name: str) -> None:
    r = post_json(client, url, {field: ODD_TEXTS[name], "lang": "de"})
    assert r.status_code == 200, r.text
    r.content.decode("utf-8")  # the answer is valid UTF-8 (no surrogate leaked into it)
    answer = r.json()
    if url == "/v1/search":
        assert answer["translation"].startswith("the house")
        assert top_two(answer) == HOUSE_PAGES
    elif url == "/v1/suggest":
        assert answer["translations"][0]["text"].startswith("the house")
    else:
        assert answer["sentences"][0]["nbest"][0]["text"].startswith("the house")


def test_a_text_of_only_a_lone_surrogate_has_no_words(client: TestClient) -> None:
    r = post_json(client, "/v1/search", {"query": "\ud800", "lang": "de"})
    assert r.status_code == 422 and "no words left" in r.json()["detail"]


INJECTIONS = [
    "<script>alert(1)</script> das haus",
    '"><img src=x onerror=alert(1)> das haus',
    "das haus' OR '1'='1'; DROP TABLE docs; --",
    "das haus {{7*7}} ${jndi:ldap://x} %s%n",
]


@pytest.mark.parametrize("text", INJECTIONS)
def test_injection_strings_are_plain_text(client: TestClient, text: str) -> None:
    r = post_json(client, "/v1/search", {"query": text, "lang": "de", "explain": True})
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    answer = r.json()
    assert top_two(answer) == HOUSE_PAGES
    for hit in answer["results"]:
        # the snippet is HTML: only <mark> tags, everything else escaped
        markup = hit["snippet"].replace("<mark>", "").replace("</mark>", "")
        assert "<" not in markup and ">" not in markup
    r = post_json(client, "/v1/documents", {"id": text})  # no such route: 405, not a crash
    assert r.status_code == 405


def test_only_unknown_words_pass_through(client: TestClient) -> None:
    words = "xylophon quetzalcoatl"
    r = post_json(client, "/v1/translate", {"text": words, "lang": "de"})
    assert r.status_code == 200
    assert r.json()["sentences"][0]["nbest"][0]["text"] == words
    r = post_json(client, "/v1/search", {"query": words, "lang": "de"})
    assert r.status_code == 200
    assert r.json()["translation"] == words and r.json()["results"] == []  # in no document


def test_only_stopwords_find_nothing(client: TestClient) -> None:
    # "das" -> "the", in 6 of the 8 toy documents: its RSJ weight is floored at 0
    r = post_json(client, "/v1/search", {"query": "das das", "lang": "de"})
    assert r.status_code == 200
    assert r.json()["translation"] == "the the" and r.json()["results"] == []


@pytest.mark.parametrize(
    ("url", "body", "field"),
    [
        ("/v1/search", {"query": "das haus", "lang": "de", "k": 0}, "k"),
        ("/v1/search", {"query": "das haus", "lang": "de", "k": 10**9}, "k"),
        ("/v1/search", {"query": "das haus", "lang": "de", "offset": -1}, "offset"),
        ("/v1/search", {"query": "das haus", "lang": "de", "method": "magic"}, "method"),
        ("/v1/suggest", {"sentence": "das haus", "lang": "de", "k": 0}, "k"),
        ("/v1/suggest", {"sentence": "das haus", "lang": "de", "nbest": 3}, "nbest"),
        ("/v1/translate", {"text": "das haus", "lang": "de", "nbest": 10**9}, "nbest"),
        ("/v1/translate", {"text": "das haus", "lang": "de", "extra": 1}, "extra"),
    ],
)
def test_out_of_range_fields_are_422_naming_the_field(
    client: TestClient, url: str, body: dict[str, Any], field: str
) -> None:
    r = post_json(client, url, body)
    assert r.status_code == 422
    assert [e["loc"] for e in r.json()["errors"]] == [["body", field]]
    # one shape for every error: a sentence naming the field, with the value given
    assert r.json()["detail"].startswith(f"{field}: ")
    assert repr(body[field]) in r.json()["detail"]


def test_offset_plus_k_beyond_the_ranking_depth_is_422(client: TestClient) -> None:
    r = post_json(client, "/v1/search", {"query": "das haus", "lang": "de", "offset": 999, "k": 2})
    assert r.status_code == 422 and "offset + k at most 1000" in r.json()["detail"]


@pytest.mark.parametrize(("url", "field"), TEXT_ENDPOINTS)
@pytest.mark.parametrize("lang", ["xx", "", "EN", "en-US", "d e", "\ud800"])
def test_unknown_language_names_the_loaded_ones(
    client: TestClient, url: str, field: str, lang: str
) -> None:
    r = post_json(client, url, {field: "das haus", "lang": lang})
    assert r.status_code == 422
    assert "unknown language" in r.json()["detail"] and "loaded languages: de" in r.json()["detail"]


@pytest.mark.parametrize(("url", "field"), TEXT_ENDPOINTS)
@pytest.mark.parametrize("lang", ["DE", " de ", "de-DE", "de_AT", "De-ch"])
def test_a_language_in_any_case_or_as_a_tag_is_accepted(
    client: TestClient, url: str, field: str, lang: str
) -> None:
    r = post_json(client, url, {field: "das haus", "lang": lang})
    want = post_json(client, url, {field: "das haus", "lang": "de"})
    assert r.status_code == want.status_code == 200, r.text
    body, ref = r.json(), want.json()
    for volatile in ("took_ms", "cached", "timings"):
        body.pop(volatile, None)
        ref.pop(volatile, None)
    assert body == ref


@pytest.mark.parametrize(("url", "field"), TEXT_ENDPOINTS)
def test_malformed_json_and_wrong_content_type(client: TestClient, url: str, field: str) -> None:
    headers = {"content-type": "application/json"}
    r = client.post(url, content=b'{"' + field.encode() + b'": "das haus"', headers=headers)
    assert r.status_code == 422 and "not valid JSON" in r.json()["detail"]
    body = json.dumps({field: "das haus", "lang": "de"}).encode()
    r = client.post(url, content=body, headers={"content-type": "text/plain"})
    assert r.status_code == 415 and "application/json" in r.json()["detail"]


# --- document ids never reach the file system -------------------------------------------------

TRAVERSALS = [
    "../secret.txt",
    "../../secret.txt",
    "%2e%2e/secret.txt",
    "%2e%2e%2fsecret.txt",
    "..%2f..%2fsecret.txt",
    "%252e%252e%252fsecret.txt",
    "....//secret.txt",
    "..\\secret.txt",
    "/etc/passwd",
    "%00../secret.txt",
]


def raw_get(app: FastAPI, path: str) -> tuple[int, str]:
    """GET ``path`` exactly as given (HTTP clients would normalise ``..`` away first)."""
    sent: list[dict[str, Any]] = []
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode("utf-8"),
        "root_path": "",
        "query_string": b"",
        "headers": [(b"host", b"testserver")],
        "client": ("127.0.0.1", 5000),
        "server": ("testserver", 80),
    }

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return int(sent[0]["status"]), body.decode("utf-8")


@pytest.mark.parametrize("doc_id", TRAVERSALS)
def test_document_ids_with_dot_dot_are_404_and_read_no_file(
    client: TestClient,
    toy_app: FastAPI,
    toy_index: InvertedIndex,
    doc_id: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    secret = toy_index.path.parent / "secret.txt"
    secret.write_text("TOP SECRET", encoding="utf-8")
    opened: list[str] = []
    real_open = builtins.open

    def spy(file: Any, *args: Any, **kwargs: Any) -> Any:
        opened.append(str(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", spy)
    r = client.get(f"/v1/documents/{doc_id}")  # as a client sends it (may normalise)
    raw_status, raw_text = raw_get(toy_app, f"/v1/documents/{doc_id}")  # as written
    monkeypatch.undo()
    for status, text in [(r.status_code, r.text), (raw_status, raw_text)]:
        assert status == 404, text
        assert "TOP SECRET" not in text
    assert "no document" in raw_text  # the raw path reached the documents route
    assert not [p for p in opened if "secret" in p or "passwd" in p]
