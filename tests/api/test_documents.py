"""``GET /v1/documents/{id}?terms=…``: highlight spans by the snippets' word matcher."""

from __future__ import annotations

import html
import random
import re
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from service.api.schemas import MAX_HIGHLIGHT_TERMS
from service.api.snippets import highlight_spans, make_snippet, match_key
from service.data import write_docs
from service.index import build_docs_index
from service.records import Doc
from tests.api.conftest import MakeClient

D5_TEXT = "the book is old . an old book"  # the toy document d5, titled "Books"


def test_without_terms_the_answer_is_unchanged(client: TestClient) -> None:
    r = client.get("/v1/documents/d5")
    assert r.status_code == 200
    assert r.json() == {"id": "d5", "title": "Books", "text": D5_TEXT, "source": "t"}


def test_terms_give_the_spans_of_matching_words(client: TestClient) -> None:
    # "the"0-3 "book"4-8 "is"9-11 "old"12-15 "."16 "an"18-20 "old"21-24 "book"25-29
    r = client.get("/v1/documents/d5", params={"terms": ["book", "OLD"]})
    assert r.status_code == 200
    body = r.json()
    assert body["highlights"] == [[4, 8], [12, 15], [21, 24], [25, 29]]
    assert [D5_TEXT[s:e] for s, e in body["highlights"]] == ["book", "old", "old", "book"]
    assert body["title_highlights"] == []  # "Books" is not the word "book"
    assert (body["id"], body["title"], body["text"]) == ("d5", "Books", D5_TEXT)


def test_title_highlights(client: TestClient) -> None:
    body = client.get("/v1/documents/d5?terms=books").json()
    assert body["title_highlights"] == [[0, 5]]
    assert body["highlights"] == []


def test_an_empty_term_matches_nothing(client: TestClient) -> None:
    body = client.get("/v1/documents/d5?terms=").json()
    assert body["highlights"] == [] and body["title_highlights"] == []


def test_unknown_document_with_terms_is_404(client: TestClient) -> None:
    r = client.get("/v1/documents/nope", params={"terms": ["book"]})
    assert r.status_code == 404
    assert r.json()["detail"].startswith("no document 'nope' in the index")


def test_too_many_terms_is_422(client: TestClient) -> None:
    terms = [f"t{i}" for i in range(MAX_HIGHLIGHT_TERMS + 1)]
    r = client.get("/v1/documents/d5", params={"terms": terms})
    assert r.status_code == 422
    assert r.json()["detail"] == (
        f"{MAX_HIGHLIGHT_TERMS + 1} terms to highlight: at most {MAX_HIGHLIGHT_TERMS} are allowed"
    )


def test_ids_with_colons_and_slashes_and_code_point_offsets(
    make_client: MakeClient, tmp_path: Path
) -> None:
    doc_id = "lo:text/swriter/guide/x.html"
    text = "😀 Insert a ＴＡＢＬＥ.\nTables: insert, table!"
    write_docs(tmp_path / "docs.jsonl", [Doc(doc_id, "Inserting a Table", text, "lohelp")])
    build_docs_index(tmp_path / "docs.jsonl", tmp_path / "idx")
    client = make_client(doc_indexes=[tmp_path / "idx"])
    r = client.get(f"/v1/documents/{doc_id}", params={"terms": ["table", "insert"]})
    assert r.status_code == 200, r.text
    body = r.json()
    # offsets count code points (the emoji is one), the full-width word folds to "table"
    words = [text[s:e] for s, e in body["highlights"]]
    assert words == ["Insert", "ＴＡＢＬＥ", "insert", "table"]
    assert body["highlights"][0] == [2, 8]
    assert body["title_highlights"] == [[12, 17]]


@pytest.mark.parametrize(
    ("word", "terms", "expected"),
    [
        ("Table", {"table"}, "table"),
        ("ＴＡＢＬＥ", {"table"}, "table"),
        ("Tables", {"table"}, None),
        ("ß", {"ß"}, "ß"),
        ("x", set(), None),
    ],
)
def test_match_key_by_hand(word: str, terms: set[str], expected: str | None) -> None:
    assert match_key(word, terms) == expected


def test_snippets_mark_exactly_the_highlighted_words() -> None:
    """One matcher: a snippet wide enough for the whole text marks the highlight spans."""
    rng = random.Random(16)
    vocabulary = ["Table", "table", "TABLE", "row", "ＲＯＷ", "<b>", "&", "insert", "x", "Ünïcode"]
    for _ in range(200):
        words = [rng.choice(vocabulary) for _ in range(rng.randint(0, 12))]
        text = "".join(w + rng.choice([" ", "  ", "\n", ", "]) for w in words)
        terms = set(rng.sample(["table", "row", "insert", "ünïcode", "b"], rng.randint(0, 3)))
        snippet = make_snippet(text, terms, width=100)
        marked = [html.unescape(m) for m in re.findall(r"<mark>(.*?)</mark>", snippet)]
        assert marked == [text[s:e] for s, e in highlight_spans(text, terms)], (text, terms)


def test_openapi_documents_the_terms_and_the_highlights(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    [param] = spec["paths"]["/v1/documents/{doc_id}"]["get"]["parameters"][1:]
    assert param["name"] == "terms" and param["in"] == "query"
    assert not param.get("required", False)
    assert "highlights" in param["description"]
    schema = spec["components"]["schemas"]["DocumentPublic"]
    assert set(schema["required"]) == {"id", "title", "text", "source"}
    for field in ("highlights", "title_highlights"):
        assert schema["properties"][field]["description"]
    assert "code points" in schema["properties"]["highlights"]["description"]
