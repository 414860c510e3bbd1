"""A live collection behind the API: ``POST/DELETE /v1/admin/documents`` commit at once and the
next search sees the change; searches rank as over one index of the same documents; the
admin token guards the routes (401/403), bad bodies are 422, an index built whole is 409."""

from __future__ import annotations

import contextlib
import gc
import os
import time
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.api.app import create_app
from service.collection import build_collection
from service.collection.writer import CollectionWriter
from service.data import write_docs
from service.index.build import build_docs_index, build_params
from service.mt.bundle import ModelBundle
from service.records import Doc
from tests.api.conftest import MakeClient, bare_settings
from tests.conftest import TOY_DOCS

TOKEN = "collection-admin-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
QUERY = "das Haus ist groß"


@pytest.fixture
def live(make_client: MakeClient, coll_path: Path) -> TestClient:
    return make_client(doc_indexes=[coll_path], admin_token=TOKEN)


def search(client: TestClient, method: str = "bowfd", k: int = 10) -> list[tuple[str, float]]:
    r = client.post("/v1/search", json={"query": QUERY, "lang": "de", "method": method, "k": k})
    assert r.status_code == 200, r.text
    return [(x["id"], x["score"]) for x in r.json()["results"]]


def test_collection_searches_like_the_index(make_client: MakeClient, live: TestClient) -> None:
    single = make_client()  # the toy index: the same documents built whole
    for method in ("dt", "psq", "bowfd"):
        assert search(live, method) == search(single, method)
    r = live.post(
        "/v1/search", json={"query": QUERY, "lang": "de", "method": "bowfd", "explain": True}
    )
    one = single.post(
        "/v1/search", json={"query": QUERY, "lang": "de", "method": "bowfd", "explain": True}
    )
    strip = ("timings", "decode_ms", "rank_ms", "total_ms", "cached", "request_id")
    assert {k: v for k, v in r.json().items() if k not in strip} == {
        k: v for k, v in one.json().items() if k not in strip
    }


def test_add_replace_delete_are_seen_by_the_next_search(live: TestClient) -> None:
    before = search(live)
    doc = {
        "id": "new",
        "title": "Big House",
        "text": "a big house , the biggest house",
        "source": "t",
    }
    r = live.post("/v1/admin/documents", json={"documents": [doc]}, headers=AUTH)
    assert r.status_code == 200, r.text
    assert r.json()["added"] == 1 and r.json()["n_docs"] == len(TOY_DOCS) + 1
    assert "new" in [i for i, _ in search(live)]
    assert live.get("/v1/documents/new").json()["title"] == "Big House"
    # replace: same id, other text
    doc2 = {**doc, "title": "Red Car", "text": "a red car"}
    r = live.post("/v1/admin/documents", json={"documents": [doc2]}, headers=AUTH)
    assert r.json()["replaced"] == 1
    assert live.get("/v1/documents/new").json()["text"] == "a red car"
    r = live.delete("/v1/admin/documents", params={"id": ["new", "nope"]}, headers=AUTH)
    assert r.status_code == 200, r.text
    assert r.json()["deleted"] == 1 and r.json()["not_found"] == ["nope"]
    assert search(live) == before
    assert live.get("/v1/documents/new").status_code == 404
    status = live.get("/v1/admin/collection", headers=AUTH).json()
    assert status["n_docs"] == len(TOY_DOCS) and status["shards"] == 2
    metrics = live.get("/metrics").text
    assert 'clir_shard_search_seconds_count{shard="0"}' in metrics
    counts = [
        float(line.split()[-1])
        for line in metrics.splitlines()
        if line.startswith("clir_shard_documents{")
    ]
    assert sum(counts) == len(TOY_DOCS)


@pytest.mark.parametrize(
    ("method", "path", "kwargs"),
    [
        ("POST", "/v1/admin/documents", {"json": {"documents": [{"id": "a", "text": "x"}]}}),
        ("DELETE", "/v1/admin/documents", {"params": {"id": "d1"}}),
        ("GET", "/v1/admin/collection", {}),
    ],
)
def test_admin_token_is_required(live: TestClient, method: str, path: str, kwargs: dict) -> None:
    assert live.request(method, path, **kwargs).status_code == 401
    bad = {"Authorization": "Bearer wrong"}
    assert live.request(method, path, headers=bad, **kwargs).status_code == 403
    assert live.get("/v1/documents/d1").status_code == 200  # nothing changed


@pytest.mark.parametrize(
    "body",
    [
        {"documents": []},
        {"documents": [{"id": "", "text": "x"}]},
        {"documents": [{"id": "   ", "text": "x"}]},
        {"documents": [{"id": "a"}]},
        {"documents": [{"id": "a", "text": 3}]},
        {"docs": [{"id": "a", "text": "x"}]},
    ],
)
def test_bad_documents_are_422_and_change_nothing(live: TestClient, body: dict) -> None:
    before = live.get("/v1/admin/collection", headers=AUTH).json()
    r = live.post("/v1/admin/documents", json=body, headers=AUTH)
    assert r.status_code == 422, r.text
    assert live.get("/v1/admin/collection", headers=AUTH).json() == before


def test_delete_needs_ids(live: TestClient) -> None:
    assert live.delete("/v1/admin/documents", headers=AUTH).status_code == 422


def test_an_index_built_whole_cannot_take_documents(make_client: MakeClient) -> None:
    client = make_client(admin_token=TOKEN)
    r = client.post(
        "/v1/admin/documents", json={"documents": [{"id": "a", "text": "x"}]}, headers=AUTH
    )
    assert r.status_code == 409
    assert "--shards" in r.json()["detail"]


def wait_ready(client: TestClient, timeout_s: float = 120.0) -> dict[str, Any]:
    """/readyz once it says ready (the Ray backend connects in the background)."""
    deadline = time.monotonic() + timeout_s
    while True:
        r = client.get("/readyz")
        if r.status_code == 200 or time.monotonic() > deadline:
            assert r.status_code == 200, r.text
            return dict(r.json())
        time.sleep(0.5)


def test_cascade_setting_reaches_bowfd(make_client: MakeClient, coll_path: Path) -> None:
    for doc_indexes in ([coll_path], None):  # a collection, and the toy index built whole
        fields = {"bowfd_cascade": 3} | ({"doc_indexes": doc_indexes} if doc_indexes else {})
        client = make_client(**fields)
        r = client.post("/v1/search", json={"query": QUERY, "lang": "de", "method": "bowfd"})
        assert r.status_code == 200 and "cascade:dt@3" in r.json()["signature"]
        assert len(r.json()["results"]) <= 3  # only DT's top 3 are ranked


def test_a_pool_collection_suggests_as_the_pool_index(
    make_client: MakeClient, pool_index: object, tmp_path: Path
) -> None:
    """The sentence pool served as a collection (2 shards): /v1/suggest answers as over the
    pool index — same sentences, scores, translations and found-by — and a suggested
    sentence opens by its id."""
    from service.index.build import BuildParams
    from service.index.inverted import InvertedIndex

    assert isinstance(pool_index, InvertedIndex)
    docs = [pool_index.doc(i) for i in range(pool_index.n_docs)]
    out = tmp_path / "pool-coll"
    build_collection(docs, out, BuildParams(**pool_index.manifest["build"]), shards=2)
    single, sharded = make_client(), make_client(pool_indexes=[out])
    body = {"sentence": "das haus ist groß", "lang": "de", "nbest": 5, "k": 3}
    one, many = single.post("/v1/suggest", json=body), sharded.post("/v1/suggest", json=body)
    assert one.status_code == many.status_code == 200, many.text
    keep = ("results", "translations", "signature")
    assert {k: many.json()[k] for k in keep} == {k: one.json()[k] for k in keep}
    assert many.json()["results"], "the pool has a matching sentence"
    first = many.json()["results"][0]
    assert sharded.get(f"/v1/documents/{first['id']}").json()["text"] == first["text"]


def test_a_forced_rebuild_under_the_running_service(
    make_client: MakeClient, live: TestClient, coll_path: Path, tmp_path: Path
) -> None:
    """The README's build run again (with --force) over the collection a service is serving:
    no 5xx on any route while and after it runs, the documents added since are gone from
    search and from the document route, and the service answers as one built from scratch
    (on main this deleted the added documents silently, and every route answered 500)."""
    doc = {"id": "added", "title": "Big House", "text": "a big house", "source": "t"}
    assert live.post("/v1/admin/documents", json={"documents": [doc]}, headers=AUTH).is_success
    assert live.get("/v1/documents/added").status_code == 200
    rebuilt = [d for d in TOY_DOCS if d.id != TOY_DOCS[0].id]
    build_collection(rebuilt, coll_path, build_params("docs"), shards=3, force=True)
    for path in ("/healthz", "/readyz"):
        assert live.get(path).status_code == 200, path
    assert live.get("/v1/admin/collection", headers=AUTH).json()["shards"] == 3
    assert live.get("/v1/documents/added").status_code == 404
    assert live.get(f"/v1/documents/{TOY_DOCS[0].id}").status_code == 404
    fresh = tmp_path / "fresh"
    build_collection(rebuilt, fresh, build_params("docs"), shards=3)
    other = make_client(doc_indexes=[fresh])
    for method in ("dt", "psq", "bowfd"):
        assert search(live, method) == search(other, method)


def test_a_document_added_by_another_writer_is_served_at_once(
    live: TestClient, coll_path: Path
) -> None:
    """``clir docs add`` in another process commits a document: the document route serves it
    on the next request, before any search has refreshed the collection (on main it answered
    404 until a search did)."""
    search(live)
    with CollectionWriter(coll_path) as w:
        w.add([Doc("elsewhere", "Small House", "a small house", "t")])
        w.commit()
    r = live.get("/v1/documents/elsewhere")
    assert r.status_code == 200 and r.json()["title"] == "Small House"


def test_an_index_built_whole_again_under_the_running_service(
    make_client: MakeClient, tmp_path: Path
) -> None:
    """``clir build-index --force`` over the index built whole that a service serves: the next
    search, the document route and the readiness page read the new build (on main the
    service answered from the old one until it was restarted), and adding documents is still
    refused, naming the command that makes a collection."""
    docs_path, out = tmp_path / "docs.jsonl", tmp_path / "idx"
    write_docs(docs_path, TOY_DOCS)
    build_docs_index(docs_path, out)
    live = make_client(doc_indexes=[out], admin_token=TOKEN)
    before = search(live)
    assert live.get(f"/v1/documents/{TOY_DOCS[0].id}").status_code == 200
    rebuilt = [d for d in TOY_DOCS if d.id != before[0][0]]
    write_docs(docs_path, rebuilt)
    build_docs_index(docs_path, out, force=True)
    assert live.get(f"/v1/documents/{before[0][0]}").status_code == 404
    fresh = tmp_path / "fresh"
    build_docs_index(docs_path, fresh)
    other = make_client(doc_indexes=[fresh])
    for method in ("dt", "psq", "bowfd"):
        assert search(live, method) == search(other, method)
    status = live.get("/readyz").json()["collection"]
    assert (status["generation"], status["writable"], status["n_docs"]) == (1, False, 7)
    doc = {"id": "added", "title": "Big House", "text": "a big house", "source": "t"}
    r = live.post("/v1/admin/documents", json={"documents": [doc]}, headers=AUTH)
    assert r.status_code == 409 and "--shards" in r.text


def open_files_under(path: Path) -> int:
    """File descriptors of this process open on files under ``path`` (a memory map holds one)."""
    n = 0
    for fd in Path("/proc/self/fd").iterdir():
        with contextlib.suppress(OSError):  # closed while listed
            n += os.readlink(fd).startswith(str(path))
    return n


def test_a_stopped_app_lets_its_collection_go(
    toy_bundle: ModelBundle, coll_path: Path, tmp_path: Path
) -> None:
    # FastAPI keeps every app it made reachable (its endpoint caches): what the lifespan loaded
    # must be released at shutdown, or a process that starts apps (tests, reloads) runs out of
    # file descriptors, one per memory-mapped array
    settings = bare_settings(tmp_path, model_bundles=[toy_bundle.path], doc_indexes=[coll_path])
    with TestClient(create_app(settings)) as client:
        for method in ("bowfd", "dt", "psq"):
            search(client, method)
        assert open_files_under(coll_path) > 0
    gc.collect()
    assert open_files_under(coll_path) == 0


def test_an_empty_add_is_refused_with_what_to_send_and_commits_nothing(live: TestClient) -> None:
    before = live.get("/v1/admin/collection", headers=AUTH).json()["generation"]
    empty = live.post(
        "/v1/admin/documents", content=b"", headers={**AUTH, "content-type": "application/json"}
    )
    none = live.post("/v1/admin/documents", json={"documents": []}, headers=AUTH)
    assert empty.status_code == 422 and none.status_code == 422
    # the example is this endpoint's body, not a search's
    assert '{"documents": [{"id": "d1"' in empty.json()["detail"]
    assert "query" not in empty.json()["detail"]
    assert none.json()["detail"].startswith("documents: List should have at least 1 item")
    assert live.get("/v1/admin/collection", headers=AUTH).json()["generation"] == before
