"""POST /v1/search on the toy bundle and the 8-document toy index, and GET /metrics."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.collection import CollectionWriter, build_collection
from service.data import write_docs
from service.index import build_docs_index
from service.index.build import build_params
from service.index.inverted import InvertedIndex
from service.mt.bundle import ModelBundle
from service.records import Doc
from service.retrieval.base import get_scorer
from service.retrieval.feedback import FeedbackParams
from service.retrieval.query import decode_query
from tests.api.conftest import MakeClient
from tests.conftest import TOY_DOCS

HOUSE = "das haus ist groß"


def search(client: TestClient, **body: object) -> dict[str, object]:
    r = client.post("/v1/search", json={"query": HOUSE, "lang": "de", **body})
    assert r.status_code == 200, r.text
    out: dict[str, object] = r.json()
    return out


@pytest.mark.parametrize("method", ["bowfd", "dt", "psq"])
def test_house_query_finds_the_house_documents(client: TestClient, method: str) -> None:
    body = search(client, method=method, k=8)
    results = body["results"]
    assert isinstance(results, list)
    ids = [h["id"] for h in results]
    assert ids[0] == "d1"  # "the house is big . a big house is an old house"
    assert "d3" not in ids[:2]  # cars come after houses
    assert body["translation"] == "the house is big"
    assert str(body["signature"]).startswith(f"method:{method}|")
    assert body["weights_version"] == "default"
    assert body["degraded"] is False and body["degraded_reason"] is None
    scores = [h["score"] for h in results]
    assert scores == sorted(scores, reverse=True)
    first = results[0]
    assert first["title"] == "Houses"
    assert "<mark>house</mark>" in first["snippet"]
    assert "<mark>big</mark>" in first["snippet"]
    assert "<mark>the</mark>" not in first["snippet"]  # in 7 of 8 documents: no weight
    assert first["explanation"] is None


def test_bowfd_explanation_is_the_documents_derivation(client: TestClient) -> None:
    body = search(client, method="bowfd", k=2, explain=True, feedback=False)
    first = body["results"][0]  # type: ignore[index]
    sentences = first["explanation"]["sentences"]
    assert len(sentences) == 1
    assert "house" in sentences[0]["translation"].split()
    assert {m["term"] for m in sentences[0]["matched"]} >= {"house"}


def test_pagination_returns_the_next_page_from_the_cache(client: TestClient) -> None:
    full = search(client, k=3)
    page2 = search(client, k=1, offset=1)
    assert full["cached"] is False
    assert page2["cached"] is True
    assert page2["timings"]["decode_ms"] == 0.0  # type: ignore[index]
    assert [h["id"] for h in page2["results"]] == [full["results"][1]["id"]]  # type: ignore[index]
    metrics = client.get("/metrics").text
    assert "clir_query_cache_hits_total 1.0\n" in metrics
    assert "clir_query_cache_misses_total 1.0\n" in metrics
    search_200 = 'clir_http_requests_total{endpoint="/v1/search",method="POST",status="200"}'
    assert f"{search_200} 2.0\n" in metrics
    assert re.search(r'clir_http_request_duration_seconds_count\{endpoint="/v1/search"', metrics)
    assert re.search(r"clir_decode_seconds_count 1.0\n", metrics)


def test_a_query_that_normalises_alike_shares_the_cache(client: TestClient) -> None:
    search(client)
    again = search(client, query="  Das   Haus ist groß ")
    assert again["cached"] is True


@pytest.mark.parametrize("query", ["", "   \n\t"])
def test_empty_query_is_422(client: TestClient, query: str) -> None:
    r = client.post("/v1/search", json={"query": query, "lang": "de"})
    assert r.status_code == 422


def test_too_long_query_is_413(make_client: MakeClient) -> None:
    client = make_client(max_query_chars=10)
    r = client.post("/v1/search", json={"query": HOUSE + " und alt", "lang": "de"})
    assert r.status_code == 413
    assert "at most 10" in r.json()["detail"]


@pytest.mark.parametrize("body", [{"k": 0}, {"k": 1001}, {"offset": -1}, {"method": "bm25"}])
def test_out_of_range_parameters_are_422(client: TestClient, body: dict[str, object]) -> None:
    r = client.post("/v1/search", json={"query": HOUSE, "lang": "de", **body})
    assert r.status_code == 422


def test_page_beyond_the_ranking_depth_is_422(client: TestClient) -> None:
    r = client.post("/v1/search", json={"query": HOUSE, "lang": "de", "k": 10, "offset": 995})
    assert r.status_code == 422
    assert "offset + k at most 1000" in r.json()["detail"]


def test_unknown_language_names_the_loaded_ones(client: TestClient) -> None:
    r = client.post("/v1/search", json={"query": HOUSE, "lang": "fr"})
    assert r.status_code == 422
    assert "loaded languages: de" in r.json()["detail"]
    # a language the service could load but did not is the same client error
    r = client.post("/v1/search", json={"query": "房子很大", "lang": "zh"})
    assert r.status_code == 422
    assert "no model is loaded for language 'zh'; loaded languages: de" in r.json()["detail"]


def test_no_document_index_is_503(make_client: MakeClient) -> None:
    client = make_client(doc_indexes=[])
    r = client.post("/v1/search", json={"query": HOUSE, "lang": "de"})
    assert r.status_code == 503
    assert "no document index" in r.json()["detail"]


def test_exhausted_time_budget_skips_sentences_and_says_so(make_client: MakeClient) -> None:
    client = make_client(request_time_budget_s=1e-9)
    query = "Das Haus ist groß. Das Auto ist rot."
    body = search(client, query=query, method="dt")
    assert body["degraded"] is True
    assert body["degraded_reason"] == "time budget of 1e-09 s exceeded: sentences 2 of 2 skipped"
    assert body["translation"] == "the house is big ."  # only the first sentence
    again = search(client, query=query, method="dt")
    assert again["cached"] is False  # degraded decodes are not cached
    assert "clir_degraded_responses_total 2.0\n" in client.get("/metrics").text


def test_unmatched_paths_count_as_other(client: TestClient) -> None:
    assert client.get("/nowhere").status_code == 404
    metrics = client.get("/metrics").text
    assert 'clir_http_requests_total{endpoint="other",method="GET",status="404"} 1' in metrics


def test_concurrent_requests_agree(make_client: MakeClient) -> None:
    client = make_client(max_concurrency=2)
    queries = [HOUSE, "das auto ist rot", HOUSE, "ein buch ist alt"] * 3

    def run(q: str) -> list[tuple[str, float]]:
        body = search(client, query=q, k=5)
        return [(h["id"], h["score"]) for h in body["results"]]  # type: ignore[attr-defined]

    with ThreadPoolExecutor(max_workers=4) as pool:
        together = list(pool.map(run, queries))
    alone = [run(q) for q in queries]
    assert together == alone


@pytest.mark.parametrize("method", ["bowfd", "dt", "psq"])
def test_a_query_of_common_words_or_punctuation_finds_nothing_and_says_why(
    make_client: MakeClient, tmp_path: Path, method: str
) -> None:
    # an index that keeps stopwords, where "the" is rare enough to weigh: without the rule a
    # lone "das" (→ "the") would rank the documents holding "the"
    docs = [Doc(f"d{i}", f"T{i}", text, "t") for i, text in enumerate(
        ["the house is big", "a big car", "an old book", "a small dog", "a red tree", "new cars"]
    )]  # fmt: skip
    write_docs(tmp_path / "docs.jsonl", docs)
    build_docs_index(tmp_path / "docs.jsonl", tmp_path / "idx", analysis="word")
    assert InvertedIndex.load(tmp_path / "idx").term_id("the") is not None
    client = make_client(doc_indexes=[tmp_path / "idx"])
    r = client.post("/v1/search", json={"query": "das", "lang": "de", "method": method})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["translation"] == "the"
    assert (body["results"], body["total"], body["total_relation"]) == ([], 0, "eq")
    assert body["empty_reason"].startswith("nothing to search for: the query translates to "
                                           "common words only ('the')")  # fmt: skip
    r = client.post("/v1/search", json={"query": "???", "lang": "de", "method": method})
    assert r.json()["results"] == []
    assert "translates to punctuation only" in r.json()["empty_reason"]
    # a query that says something: results, and no reason
    r = client.post("/v1/search", json={"query": "das haus", "lang": "de", "method": method})
    assert r.json()["results"][0]["id"] == "d0" and r.json()["empty_reason"] is None


def test_an_empty_result_names_the_words_no_document_holds(
    make_client: MakeClient, tmp_path: Path
) -> None:
    write_docs(tmp_path / "docs.jsonl", [Doc("d0", "Cars", "a red car", "t")])
    build_docs_index(tmp_path / "docs.jsonl", tmp_path / "idx")
    client = make_client(doc_indexes=[tmp_path / "idx"])
    r = client.post("/v1/search", json={"query": "das haus", "lang": "de", "method": "dt"})
    assert r.json()["results"] == []
    assert r.json()["empty_reason"] == (
        "no document matched the query: no document holds house (the query's translation: "
        "'the house')"
    )


def test_same_titled_results_say_which_manual_they_come_from(
    make_client: MakeClient, tmp_path: Path
) -> None:
    docs = [
        Doc("lo:text/swriter/guide/print_preview.html", "Print Preview", "the house preview",
            "libreoffice-help"),
        Doc("lo:text/scalc/guide/print_preview.html", "Print Preview", "the house print",
            "libreoffice-help"),
        Doc("man:house.1", "house", "house manual", "manpage"),
        *(Doc(f"d{i}", "Other", "a red car", "t") for i in range(4)),  # "house" weighs
    ]  # fmt: skip
    write_docs(tmp_path / "docs.jsonl", docs)
    build_docs_index(tmp_path / "docs.jsonl", tmp_path / "idx")
    client = make_client(doc_indexes=[tmp_path / "idx"])
    r = client.post("/v1/search", json={"query": "das haus", "lang": "de", "method": "dt"})
    origins = {h["id"]: h["origin"] for h in r.json()["results"]}
    assert origins == {
        "lo:text/swriter/guide/print_preview.html": "LibreOffice Writer help",
        "lo:text/scalc/guide/print_preview.html": "LibreOffice Calc help",
        "man:house.1": "man page, section 1 (commands)",
    }


def test_a_lower_bound_total_comes_with_an_upper_bound(client: TestClient) -> None:
    body = {"query": "das haus ist groß", "lang": "de", "method": "bowfd", "feedback": False}
    page = client.post("/v1/search", json={**body, "k": 1}).json()
    assert page["total_relation"] == "gte"
    full = client.post("/v1/search", json={**body, "k": 1000}).json()
    assert full["total_relation"] == "eq" and full["total_max"] is None
    # the exact count lies between the bounds a short page gives
    assert page["total"] <= full["total"] <= page["total_max"] <= 8  # the toy index's size
    dt = client.post("/v1/search", json={**body, "method": "dt", "k": 1}).json()
    assert dt["total_relation"] == "eq" and dt["total_max"] is None  # exact already


# --- feedback (RM3) --------------------------------------------------------------------------


def _search(client: TestClient, **body: object) -> dict[str, Any]:
    r = client.post("/v1/search", json={"query": "das haus ist groß", "lang": "de", **body})
    assert r.status_code == 200, r.text
    out: dict[str, Any] = r.json()
    return out


@pytest.mark.parametrize("method", ["dt", "psq", "bowfd"])
def test_feedback_expands_the_query_and_says_with_what(
    make_client: MakeClient,
    toy_bundle: ModelBundle,
    toy_index: InvertedIndex,
    method: str,
) -> None:
    client = make_client()
    plain = _search(client, method=method, feedback=False)
    fb = _search(client, method=method, feedback=True, explain=True)
    assert plain["expansion"] is None
    exp = fb["expansion"]
    # BOW-FD ranks its documents again; DT and PSQ cannot, and interpolate
    default = "rm3(10,10,0.7)+" + ("rerank@100" if method == "bowfd" else "mix(0.5@100)")
    assert exp["feedback"] == default and fb["signature"].endswith(f"|fb:{default}")
    # the library's stage, through the service's decode
    scorer = get_scorer(method, toy_index, bundle=toy_bundle)
    query = decode_query(toy_bundle.decoder(), "das haus ist groß", "de")
    ranking = scorer.rank(query, 10, feedback=FeedbackParams())
    assert [h["id"] for h in fb["results"]] == [h.doc_id for h in ranking.hits]
    assert [t["term"] for t in exp["terms"]] == [
        t["term"] for t in ranking.info["expansion"]["terms"]
    ]
    assert set(exp["added"]) <= {t["term"] for t in exp["terms"]}
    assert fb["total"] == scorer.retrieved(ranking, 10, query)[0]
    for hit in fb["results"]:
        matched = hit["explanation"]["matched"]
        assert {m["term"] for m in matched} <= {t["term"] for t in exp["terms"]}
        for m in matched:  # the snippet marks what the document matched
            assert toy_index.contains(m["term"], toy_index.docno(hit["id"]))


def test_feedback_follows_the_service_default_unless_the_request_says(
    make_client: MakeClient,
) -> None:
    # shipped on (CLIR_FEEDBACK): a request that does not say is expanded, one that says no is not
    shipped = make_client()
    assert _search(shipped)["expansion"]["feedback"] == "rm3(10,10,0.7)+rerank@100"
    assert _search(shipped, feedback=False)["expansion"] is None
    off = make_client(feedback=False)
    assert _search(off)["expansion"] is None
    assert _search(off, feedback=True)["expansion"]["feedback"] == "rm3(10,10,0.7)+rerank@100"
    on = make_client(feedback=True, feedback_docs=2, feedback_terms=3, feedback_weight=0.7)
    assert _search(on)["expansion"]["feedback"] == "rm3(2,3,0.7)+rerank@100"
    assert _search(on, method="dt")["expansion"]["feedback"] == "rm3(2,3,0.7)+mix(0.5@100)"
    both = make_client(feedback=True, feedback_form="rerank+interpolate")
    assert _search(both)["expansion"]["feedback"] == "rm3(10,10,0.7)+rerank+mix(0.5@100)"
    alone = make_client(feedback=True, feedback_form="replace")
    assert _search(alone)["expansion"]["feedback"] == "rm3(10,10,0.7)"
    assert _search(on, feedback=False)["expansion"] is None


@pytest.mark.parametrize("method", ["dt", "psq", "bowfd"])
def test_feedback_on_a_collection_ranks_as_on_the_index(
    make_client: MakeClient, tmp_path: Path, method: str
) -> None:
    out = tmp_path / "coll"
    build_collection(TOY_DOCS, out, build_params("docs"), shards=2)
    single, coll = make_client(), make_client(doc_indexes=[out])
    body = {"method": method, "feedback": True, "explain": True, "k": 5}
    one, many = _search(single, **body), _search(coll, **body)
    keep = ("results", "total", "total_relation", "total_max", "expansion", "signature")
    assert {k: many[k] for k in keep} == {k: one[k] for k in keep}
    assert (
        _search(coll, **body, offset=5)["results"] == _search(single, **body, offset=5)["results"]
    )


def test_readyz_tells_the_page_whether_feedback_is_offered(
    make_client: MakeClient, tmp_path: Path
) -> None:
    assert make_client().get("/readyz").json()["feedback"] == {"offered": True, "default": True}
    off = make_client(feedback=False)
    assert off.get("/readyz").json()["feedback"] == {"offered": True, "default": False}
    out = tmp_path / "coll"
    build_collection(TOY_DOCS, out, build_params("docs"), shards=2)
    coll = make_client(doc_indexes=[out], feedback=True)
    assert coll.get("/readyz").json()["feedback"] == {"offered": True, "default": True}
    assert make_client(doc_indexes=[]).get("/readyz").json()["feedback"]["offered"] is False


@pytest.mark.parametrize("method", ["bowfd", "dt", "psq"])
def test_alternatives_are_offered_and_a_pin_is_honoured(client: TestClient, method: str) -> None:
    """The response lists the words the forest translates in several ways; pinning one's
    least likely option searches again with every translation saying it (DT's 1-best too),
    the signature and the alternatives saying so."""
    body = search(client, method=method, feedback=False)
    alts = body["alternatives"]
    assert isinstance(alts, list) and alts, "the toy forest of HOUSE offers a choice"
    alt = alts[0]
    assert alt["chosen"] is None and len(alt["options"]) >= 2
    ps = [o["p"] for o in alt["options"]]
    assert ps == sorted(ps, reverse=True) and sum(ps) <= 1.0 + 1e-6
    option = alt["options"][-1]["english"]
    pinned = search(client, method=method, feedback=False, pins={alt["source"]: option})
    assert option in str(pinned["translation"]).split()
    assert str(pinned["signature"]).endswith(f"|pin:{alt['source']}={option}")
    assert pinned["choices"] == {"pins": {alt["source"]: option}, "blocks": []}
    again = {a["source"]: a for a in pinned["alternatives"]}  # offered as before, one chosen
    assert again[alt["source"]]["chosen"] == option
    assert again[alt["source"]]["options"] == alt["options"]
    blocked = search(client, method=method, feedback=False, blocks=[option])
    assert option not in str(blocked["translation"]).split()


@pytest.mark.parametrize(
    ("body", "match"),
    [
        ({"pins": {"baum": "tree"}}, "pin 'baum': no word of the query is 'baum'"),
        ({"pins": {"haus": "zebra"}}, "pin haus=zebra: no translation of 'haus'"),
        ({"pins": {"das haus": "house"}}, "a pin is one source word"),
        ({"blocks": ["big house"]}, "a block is one English word"),
    ],
)
def test_choices_that_cannot_be_met_are_422_naming_them(
    client: TestClient, body: dict[str, object], match: str
) -> None:
    r = client.post("/v1/search", json={"query": HOUSE, "lang": "de", **body})
    assert r.status_code == 422, r.text
    assert match in r.text


def holds(doc: Doc, english: str) -> bool:
    words = f"{doc.title} {doc.text}".lower().split()
    return all(w in words for w in english.lower().split())


def test_each_option_comes_with_a_document_that_uses_it(
    make_client: MakeClient, tmp_path: Path
) -> None:
    """A cue: the title of the document the option's words weigh most in, from the index or
    the collection (never a deleted document)."""
    by_title = {d.title: d for d in TOY_DOCS}
    body = search(make_client(), feedback=False)
    options = [o for a in body["alternatives"] for o in a["options"]]  # type: ignore[union-attr]
    assert options and all(o["cue"] is not None for o in options)
    for o in options:
        assert holds(by_title[o["cue"]], o["english"]), o
    out = tmp_path / "coll"
    build_collection(TOY_DOCS, out, build_params("docs"), shards=2)
    coll = make_client(doc_indexes=[out])
    cues = {o["english"]: o["cue"] for a in search(coll, feedback=False)["alternatives"]
            for o in a["options"]}  # type: ignore[union-attr]  # fmt: skip
    assert cues == {o["english"]: o["cue"] for o in options}
    english, title = next(iter(cues.items()))
    with CollectionWriter(out) as w:  # the cue's document deleted: another is shown, or none
        w.delete([by_title[title].id])
        w.commit()
    after = {o["english"]: o["cue"] for a in search(coll, feedback=False)["alternatives"]
             for o in a["options"]}  # type: ignore[union-attr]  # fmt: skip
    assert after[english] != title
    assert after[english] is None or holds(by_title[after[english]], english)
