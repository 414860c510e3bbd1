"""What goes in is bounded: a document over ``max_doc_bytes`` is refused (413) with its id and
the limit, and nothing of its request is added; a 422 echoes at most a short prefix of the
input it refuses, with its length."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from service.collection import build_collection
from service.index.build import build_params
from tests.api.conftest import MakeClient
from tests.conftest import TOY_DOCS

TOKEN = "doc-limits-admin-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def live(make_client: MakeClient, tmp_path: Path) -> TestClient:
    out = tmp_path / "coll"
    build_collection(TOY_DOCS, out, build_params("docs"), shards=2)
    return make_client(doc_indexes=[out], admin_token=TOKEN, max_doc_bytes=4096)


def test_a_document_over_the_limit_is_413_naming_it_and_nothing_is_added(
    live: TestClient,
) -> None:
    before = live.get("/v1/admin/collection", headers=AUTH).json()
    docs = [
        {"id": "small", "title": "Red Car", "text": "a red car"},
        {"id": "big:1", "title": "Big", "text": "ü" * 2100},  # 4,203 bytes of UTF-8
    ]
    r = live.post("/v1/admin/documents", json={"documents": docs}, headers=AUTH)
    assert r.status_code == 413, r.text
    detail = r.json()["detail"]
    assert detail.startswith("documents[1]: document 'big:1' has 4,203 bytes")
    assert "at most 4,096" in detail and "CLIR_MAX_DOC_BYTES" in detail
    assert "nothing was added" in detail
    assert live.get("/v1/admin/collection", headers=AUTH).json() == before
    assert live.get("/v1/documents/small").status_code == 404
    r = live.post("/v1/admin/documents", json={"documents": docs[:1]}, headers=AUTH)
    assert r.status_code == 200 and r.json()["added"] == 1


def test_a_document_larger_than_the_schema_allowed_before_is_413_not_422(
    make_client: MakeClient, tmp_path: Path
) -> None:
    out = tmp_path / "coll"
    build_collection(TOY_DOCS, out, build_params("docs"), shards=1)
    client = make_client(doc_indexes=[out], admin_token=TOKEN)  # the default limit, 1 MiB
    text = "a" * 10_000_001
    r = client.post(
        "/v1/admin/documents", json={"documents": [{"id": "x", "text": text}]}, headers=AUTH
    )
    assert r.status_code == 413 and "'x'" in r.json()["detail"]
    assert len(r.content) < 1000


def test_a_422_never_echoes_the_whole_input(live: TestClient) -> None:
    long_id = "i" * 5000  # ids are at most 2,048 characters
    r = live.post(
        "/v1/admin/documents", json={"documents": [{"id": long_id, "text": "t"}]}, headers=AUTH
    )
    assert r.status_code == 422, r.text
    error = r.json()["errors"][0]
    assert error["input"] == "i" * 80 + "…" and error["input_length"] == 5000
    assert len(r.content) < 1000
    r = live.post("/v1/search", json=[{"query": "q" * 200}] * 50)  # an array, not an object
    assert r.status_code == 422, r.text
    error = r.json()["errors"][0]
    assert error["input"].startswith('[{"query": "qqq') and len(error["input"]) == 81
    assert error["input_length"] > 10_000
    short = live.post("/v1/search", json={"query": "das haus", "lang": "de", "k": 5000})
    assert short.json()["errors"][0]["input"] == 5000  # short inputs are echoed as they are
    assert "input_length" not in short.json()["errors"][0]
