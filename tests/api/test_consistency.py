"""One vocabulary across the API: ``query`` is the input text of every
endpoint (``text``/``sentence`` stay accepted, deprecated, for one version), search responses
count the documents a method retrieved (``total``, ``total_relation``), and every id the API
returns resolves on ``GET /v1/documents/{id}`` (suggestions' pool sentences included)."""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.api.app import create_app
from tests.api.conftest import POOL, demo_settings

HOUSE = "das haus ist groß"

# endpoint -> (the deprecated name of its input text, a body without the text)
RENAMED: dict[str, tuple[str, dict[str, Any]]] = {
    "/v1/translate": ("text", {"lang": "de", "nbest": 2}),
    "/v1/suggest": ("sentence", {"lang": "de", "nbest": 5, "k": 3}),
}
SCHEMA_OF = {"/v1/translate": "TranslateRequest", "/v1/suggest": "SuggestRequest"}


def post(client: TestClient, path: str, body: dict[str, Any], status: int = 200) -> Any:
    r = client.post(path, json=body)
    assert r.status_code == status, r.text
    return r.json()


# --- one name for the input text ----------------------------------------------------------------


@pytest.mark.parametrize("path", ["/v1/search", "/v1/translate", "/v1/suggest"])
def test_every_endpoint_takes_its_input_text_as_query(client: TestClient, path: str) -> None:
    rest = RENAMED.get(path, ("query", {"lang": "de", "k": 3}))[1]
    body = post(client, path, {"query": HOUSE, **rest})
    assert body  # answered, with the same fields as always


@pytest.mark.parametrize("path", sorted(RENAMED))
def test_the_old_name_is_still_accepted_and_answers_the_same(client: TestClient, path: str) -> None:
    old, rest = RENAMED[path]
    new_answer = post(client, path, {"query": HOUSE, **rest})
    old_answer = post(client, path, {old: HOUSE, **rest})
    drop = ("timings", "cached")
    assert {k: v for k, v in old_answer.items() if k not in drop} == {
        k: v for k, v in new_answer.items() if k not in drop
    }


@pytest.mark.parametrize("path", sorted(RENAMED))
def test_giving_both_names_is_422_naming_both(client: TestClient, path: str) -> None:
    old, rest = RENAMED[path]
    detail = post(client, path, {"query": HOUSE, old: "das auto", **rest}, status=422)["detail"]
    text = str(detail)
    assert "query" in text and old in text and "not both" in text


@pytest.mark.parametrize("path", sorted(RENAMED))
def test_openapi_shows_query_and_the_old_name_as_deprecated(client: TestClient, path: str) -> None:
    old, _ = RENAMED[path]
    schema = client.get("/openapi.json").json()["components"]["schemas"][SCHEMA_OF[path]]
    props = schema["properties"]
    assert "query" in schema["required"] and old not in schema["required"]
    assert not props["query"].get("deprecated", False)
    assert props[old]["deprecated"] is True
    assert props[old]["type"] == "string"
    assert "`query`" in props[old]["description"]
    assert all("query" in example and old not in example for example in schema["examples"])


@pytest.mark.parametrize("path", ["/v1/search", "/v1/translate", "/v1/suggest"])
def test_a_too_long_input_names_the_query(make_client: Any, path: str) -> None:
    client = make_client(max_query_chars=10)
    rest = RENAMED.get(path, ("query", {"lang": "de"}))[1]
    detail = post(client, path, {"query": "das haus ist sehr groß", **rest}, status=413)["detail"]
    assert detail.startswith("the query has 22 characters")


# --- the number of documents retrieved ----------------------------------------------------------


def search(client: TestClient, **body: Any) -> dict[str, Any]:
    out: dict[str, Any] = post(client, "/v1/search", {"query": HOUSE, "lang": "de", **body})
    return out


@pytest.mark.parametrize("method", ["bowfd", "dt", "psq"])
def test_total_counts_every_document_the_method_retrieved(client: TestClient, method: str) -> None:
    everything = search(client, method=method, k=100, feedback=False)  # deeper than the 8 docs
    n = len(everything["results"])
    assert 2 <= n <= 8
    assert (everything["total"], everything["total_relation"]) == (n, "eq")
    # a page past the end still says how many there are
    past = search(client, method=method, k=5, offset=n, feedback=False)
    assert past["results"] == []
    assert (past["total"], past["total_relation"]) == (n, "eq")
    # the first page of one: DT and PSQ scored every candidate, so they know the count;
    # BOW-FD scored only as deep as the page needs, so it knows a lower bound
    first = search(client, method=method, k=1, feedback=False)
    if method == "bowfd":
        assert (first["total"], first["total_relation"]) == (1, "gte")
    else:
        assert (first["total"], first["total_relation"]) == (n, "eq")


def test_dt_total_is_the_documents_holding_a_weighted_term_of_the_translation(
    client: TestClient,
) -> None:
    # "the house is big": "the" and "is" occur in 7 of the 8 toy documents (rsj < 0, floored
    # to 0: no weight), "house" in d1 only, "big" in d1 and d7 ("the tree is big")
    body = search(client, method="dt", k=1, feedback=False)
    assert body["translation"] == "the house is big"
    assert (body["total"], body["total_relation"]) == (2, "eq")
    found = search(client, method="dt", k=100, feedback=False)["results"]
    assert {h["id"] for h in found} == {"d1", "d7"}


@pytest.mark.parametrize("method", ["bowfd", "dt", "psq"])
def test_with_feedback_a_page_holding_every_result_counts_them_exactly(
    client: TestClient, method: str
) -> None:
    """The feedback default: BOW-FD ranks its own documents again (its count), DT and PSQ mix
    their ranking with the expanded query's — when both hold everything they retrieved, the
    union is counted, not bounded ("of 3", not "of at least 3")."""
    everything = search(client, method=method, k=100, feedback=True)
    assert everything["expansion"] is not None
    n = len(everything["results"])
    assert (everything["total"], everything["total_relation"]) == (n, "eq")
    assert everything["total_max"] is None
    past = search(client, method=method, k=5, offset=n, feedback=True)
    assert past["results"] == [] and (past["total"], past["total_relation"]) == (n, "eq")
    # a page of one: both rankings ran as deep as the mix reads (100), so they still hold all
    one = search(client, method=method, k=1, feedback=True)
    assert (one["total"], one["total_relation"]) == (n, "eq")


def test_total_is_described_in_the_schema(client: TestClient) -> None:
    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    props = schemas["SearchResponse"]["properties"]
    assert "SearchResponse" in schemas
    assert "lower bound" in props["total"]["description"]
    assert props["total_relation"]["enum"] == ["eq", "gte"]
    assert {"total", "total_relation"} <= set(schemas["SearchResponse"]["required"])


# --- every id resolves --------------------------------------------------------------------------


def doc_path(doc_id: str) -> str:
    """The document's URL path: pool ids hold "#", which a URL must carry as %23."""
    return "/v1/documents/" + urllib.parse.quote(doc_id, safe="/:")


def test_suggestion_ids_resolve_to_their_pool_sentences(client: TestClient) -> None:
    body = post(client, "/v1/suggest", {"query": HOUSE, "lang": "de", "k": 4})
    assert body["results"]
    for suggestion in body["results"]:
        r = client.get(doc_path(suggestion["id"]))
        assert r.status_code == 200, r.text
        assert r.json() == {
            "id": suggestion["id"],
            "title": "",  # the toy pool's ids name no page
            "text": suggestion["text"],
            "source": "pool",
        }


def test_a_pool_sentence_has_highlights_like_a_document(client: TestClient) -> None:
    pid, text = POOL[0]  # p1 "the house is big"
    body = client.get(f"/v1/documents/{pid}", params={"terms": ["house"]}).json()
    assert (body["text"], body["highlights"]) == (text, [[4, 9]])


def test_documents_still_win_and_unknown_ids_still_404(client: TestClient) -> None:
    assert client.get("/v1/documents/d1").json()["source"] == "t"
    r = client.get("/v1/documents/p9")
    assert r.status_code == 404
    detail = r.json()["detail"]
    assert detail.startswith("no document 'p9' in the index") and "sentence pool" in detail


def test_pool_sentences_resolve_without_a_document_index(make_client: Any, tmp_path: Path) -> None:
    client = make_client(doc_indexes=[tmp_path / "none"])
    assert client.get("/v1/documents/p2").json()["text"] == "a red car"
    assert client.get("/v1/documents/d1").status_code == 503  # may be in the missing index


@pytest.fixture(scope="module")
def demo_client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    """The committed demo: German bundle, LibreOffice help pages and their paragraphs."""
    with TestClient(create_app(demo_settings(tmp_path_factory.mktemp("jobs")))) as client:
        yield client


def test_demo_suggestions_open_as_sentences_of_their_page(demo_client: TestClient) -> None:
    body = post(
        demo_client,
        "/v1/suggest",
        {"query": "Wie füge ich eine Tabelle ein?", "lang": "de", "nbest": 5, "k": 10},
    )
    paragraphs = [s for s in body["results"] if s["id"].startswith("lop:")]
    assert paragraphs, [s["id"] for s in body["results"]]
    for suggestion in paragraphs:
        r = demo_client.get(doc_path(suggestion["id"]))
        assert r.status_code == 200, r.text
        sentence = r.json()
        assert (sentence["id"], sentence["text"]) == (suggestion["id"], suggestion["text"])
        assert sentence["source"] == "pool"
        # lop:<path>#<par_id> is a paragraph of the help page lo:<path>
        page_id = "lo:" + suggestion["id"].removeprefix("lop:").partition("#")[0]
        assert sentence["page_id"] == page_id
        page = demo_client.get(doc_path(page_id)).json()
        assert page["source"] == "libreoffice-help" and "page_id" not in page
        assert sentence["title"] == page["title"] != ""


def test_demo_search_result_ids_resolve(demo_client: TestClient) -> None:
    body = post(
        demo_client,
        "/v1/search",
        {
            "query": "Wie füge ich eine Tabelle ein?",
            "lang": "de",
            "method": "dt",
            "k": 5,
            "feedback": False,  # DT's own count
            "dense": False,  # (fused, the count is the union's: a lower bound)
        },
    )
    assert body["total_relation"] == "eq" and body["total"] >= len(body["results"]) == 5
    for hit in body["results"]:
        doc = demo_client.get(doc_path(hit["id"])).json()
        assert (doc["id"], doc["title"]) == (hit["id"], hit["title"])
