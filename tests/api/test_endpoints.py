"""POST /v1/translate, POST /v1/suggest, GET /v1/documents/{id}."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from service.api.telemetry import CACHE_HITS, CACHE_MISSES
from service.data import write_docs
from service.index import build_docs_index
from service.mt.bundle import ModelBundle
from service.mt.translate import translate_text
from service.records import Doc
from tests.api.conftest import MakeClient

# --- translate -----------------------------------------------------------------------------


def test_translate_nbest(client: TestClient) -> None:
    r = client.post("/v1/translate", json={"text": "das haus ist groß", "lang": "de", "nbest": 3})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["weights_version"] == "default"
    [sentence] = body["sentences"]
    assert sentence["source"] == "das haus ist groß"
    texts = [t["text"] for t in sentence["nbest"]]
    scores = [t["score"] for t in sentence["nbest"]]
    assert texts[0] == "the house is big"
    assert len(texts) == 3 and len(set(texts)) == 3
    assert scores == sorted(scores, reverse=True)


def test_translate_offers_alternatives_and_honours_pins_and_blocks(client: TestClient) -> None:
    """The same alternatives as a search; a pin makes every one of the n best say it, a block
    makes none use the word; a pin no word matches is a 422 naming it."""
    body = {"text": "das haus ist groß", "lang": "de", "nbest": 5}
    r = client.post("/v1/translate", json=body)
    assert r.status_code == 200, r.text
    alts = r.json()["alternatives"]
    assert alts and all(len(a["options"]) >= 2 and a["chosen"] is None for a in alts)
    search = client.post("/v1/search", json={"query": body["text"], "lang": "de"}).json()
    strip = [{k: v for k, v in a.items() if k != "options"} for a in search["alternatives"]]
    assert strip == [{k: v for k, v in a.items() if k != "options"} for a in alts]
    word, option = alts[0]["source"], alts[0]["options"][-1]["english"]
    pinned = client.post("/v1/translate", json={**body, "pins": {word: option}}).json()
    nbest = [t["text"].split() for t in pinned["sentences"][0]["nbest"]]
    assert nbest and all(option in words for words in nbest)
    assert {a["source"]: a["chosen"] for a in pinned["alternatives"]}[word] == option
    blocked = client.post("/v1/translate", json={**body, "blocks": [option]}).json()
    assert all(option not in t["text"].split() for t in blocked["sentences"][0]["nbest"])
    r = client.post("/v1/translate", json={**body, "pins": {"baum": "tree"}})
    assert r.status_code == 422 and "pin 'baum'" in r.text


def test_translate_two_sentences(client: TestClient) -> None:
    r = client.post(
        "/v1/translate", json={"text": "Das Haus ist groß. Das Auto ist rot.", "lang": "de"}
    )
    assert [s["source"] for s in r.json()["sentences"]] == [
        "das haus ist groß .",
        "das auto ist rot .",
    ]


def _counter(client: TestClient, name: str) -> float:
    for line in client.get("/metrics").text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"{name} is not in /metrics")


def test_translate_decodes_through_the_query_cache(
    client: TestClient, toy_bundle: ModelBundle
) -> None:
    text = "Das Auto ist groß. Das Haus ist rot."
    hits, misses = _counter(client, CACHE_HITS), _counter(client, CACHE_MISSES)
    first = client.post("/v1/translate", json={"text": text, "lang": "de", "nbest": 3}).json()
    again = client.post("/v1/translate", json={"text": text, "lang": "de", "nbest": 3}).json()
    assert (first["cached"], again["cached"]) == (False, True)
    assert (first["degraded"], first["degraded_reason"]) == (False, None)
    assert again["sentences"] == first["sentences"]
    assert _counter(client, CACHE_MISSES) == misses + 1
    assert _counter(client, CACHE_HITS) == hits + 1
    # a search and a suggestion of the same text find its forests decoded
    search = client.post("/v1/search", json={"query": text, "lang": "de", "method": "dt"})
    assert search.json()["cached"] is True
    suggest = client.post("/v1/suggest", json={"sentence": text, "lang": "de"})
    assert suggest.json()["cached"] is True
    # the same translations as decoding the text afresh (the CLI's path)
    fresh = translate_text(toy_bundle, text, nbest=3)
    assert [[t["text"] for t in s["nbest"]] for s in first["sentences"]] == [
        [d.text for d in s.nbest] for s in fresh
    ]
    assert [[t["score"] for t in s["nbest"]] for s in first["sentences"]] == [
        [d.score for d in s.nbest] for s in fresh
    ]


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ({"text": "das haus", "lang": "de", "nbest": 0}, 422),
        ({"text": "das haus", "lang": "de", "nbest": 101}, 422),
        ({"text": " ", "lang": "de"}, 422),
        ({"text": "das haus", "lang": "xx"}, 422),
        ({"text": "das haus", "lang": "zh"}, 422),  # no model loaded: as an unknown one
    ],
)
def test_translate_errors(client: TestClient, body: dict[str, object], status: int) -> None:
    assert client.post("/v1/translate", json=body).status_code == status


def test_translate_too_long_is_413(make_client: MakeClient) -> None:
    client = make_client(max_query_chars=5)
    r = client.post("/v1/translate", json={"text": "das haus", "lang": "de"})
    assert r.status_code == 413


# --- suggest -------------------------------------------------------------------------------


def test_suggest_finds_the_reference_sentence(client: TestClient) -> None:
    r = client.post(
        "/v1/suggest", json={"sentence": "das haus ist groß", "lang": "de", "nbest": 5, "k": 3}
    )
    assert r.status_code == 200, r.text
    body = r.json()
    first = body["results"][0]
    assert (first["id"], first["text"]) == ("p1", "the house is big")
    assert len(body["results"]) <= 3
    assert body["translations"][0]["text"] == "the house is big"
    assert "the house is big" in [f["translation"] for f in first["found_by"]]
    assert body["signature"].startswith("method:tr|N:5|")
    scores = [s["score"] for s in body["results"]]
    assert scores == sorted(scores, reverse=True)


def test_suggest_rereads_the_head_densely_unless_asked_not_to(
    client: TestClient, make_client: MakeClient
) -> None:
    body = {"sentence": "das haus ist groß", "lang": "de", "k": 3}
    on = client.post("/v1/suggest", json=body).json()
    assert on["dense"] == "on"  # the default encoder reread them (CLIR_SUGGEST_DENSE)
    assert all(-1.0 <= r["dense"] <= 1.0 for r in on["results"])
    assert "|dense-head:20^16|enc:e5-onnx:" in on["signature"]
    off = client.post("/v1/suggest", json=body | {"dense": False}).json()
    assert off["dense"] == "off" and all(r["dense"] is None for r in off["results"])
    assert "dense-head" not in off["signature"]
    assert {r["id"] for r in on["results"]} <= {r["id"] for r in client.post(
        "/v1/suggest", json=body | {"dense": False, "k": 20}).json()["results"]}  # fmt: skip
    unset = make_client(suggest_dense=False).post("/v1/suggest", json=body).json()
    assert unset["dense"] == "off"
    assert [r["id"] for r in unset["results"]] == [r["id"] for r in off["results"]]


def test_suggest_shares_the_query_cache_with_search(client: TestClient) -> None:
    client.post("/v1/search", json={"query": "das haus ist groß", "lang": "de"})
    r = client.post("/v1/suggest", json={"sentence": "das haus ist groß", "lang": "de"})
    assert r.json()["cached"] is True


@pytest.mark.parametrize(
    "body",
    [
        {"sentence": "das haus", "lang": "de", "nbest": 3},
        {"sentence": "das haus", "lang": "de", "k": 0},
        {"sentence": "das haus", "lang": "de", "k": 101},
        {"sentence": "", "lang": "de"},
    ],
)
def test_suggest_bad_input_is_422(client: TestClient, body: dict[str, object]) -> None:
    assert client.post("/v1/suggest", json=body).status_code == 422


def test_suggest_without_a_pool_is_503(make_client: MakeClient) -> None:
    client = make_client(pool_indexes=[])
    r = client.post("/v1/suggest", json={"sentence": "das haus", "lang": "de"})
    assert r.status_code == 503
    assert "no sentence-pool index" in r.json()["detail"]


# --- documents -----------------------------------------------------------------------------


def test_document_by_id(client: TestClient) -> None:
    r = client.get("/v1/documents/d5")
    assert r.status_code == 200
    assert r.json() == {
        "id": "d5",
        "title": "Books",
        "text": "the book is old . an old book",
        "source": "t",
    }


def test_unknown_document_is_404(client: TestClient) -> None:
    r = client.get("/v1/documents/nope")
    assert r.status_code == 404
    assert "nope" in r.json()["detail"]


def test_ids_with_colons_and_slashes(make_client: MakeClient, tmp_path: Path) -> None:
    doc_id = "lo:text/swriter/guide/x.html"
    write_docs(tmp_path / "docs.jsonl", [Doc(doc_id, "Tables", "insert a table", "lohelp")])
    build_docs_index(tmp_path / "docs.jsonl", tmp_path / "idx")
    client = make_client(doc_indexes=[tmp_path / "idx"])
    r = client.get(f"/v1/documents/{doc_id}")
    assert r.status_code == 200, r.text
    assert r.json()["id"] == doc_id and r.json()["source"] == "lohelp"
    assert client.get("/v1/documents/lo:text/swriter/guide/y.html").status_code == 404
    metrics = client.get("/metrics").text
    assert 'endpoint="/v1/documents/{doc_id:path}",method="GET",status="404"} 1' in metrics


def test_a_sentence_of_punctuation_is_never_suggested(
    make_client: MakeClient, tmp_path: Path
) -> None:
    from service.index import build_pool_index
    from tests.api.conftest import write_pool

    rows = [("p1", "the house is big ."), ("p2", "?"), ("p3", "."), ("p4", "a red car ?")]
    build_pool_index(write_pool(tmp_path / "pool.tsv", rows), tmp_path / "pool")
    client = make_client(pool_indexes=[tmp_path / "pool"])
    r = client.post("/v1/suggest", json={"query": "Ist das Haus groß?", "lang": "de", "k": 10})
    assert r.status_code == 200, r.text
    ids = [s["id"] for s in r.json()["results"]]
    assert "p1" in ids  # shares words
    assert "p2" not in ids and "p3" not in ids  # share only punctuation
