"""The service searches a German how-to question as its instruction (service.text.questions),
while suggestions and translations keep the question as it was asked."""

from __future__ import annotations

from tests.api.conftest import MakeClient


def test_the_service_searches_the_instruction_and_suggests_for_the_question(
    make_client: MakeClient,
) -> None:
    client = make_client()
    body = {"query": "Wie kann ich das Haus?", "lang": "de"}
    search = client.post("/v1/search", json={**body, "k": 3})
    assert search.status_code == 200, search.text
    assert search.json()["translation"].split() == ["the", "house", "."]
    suggest = client.post("/v1/suggest", json={**body, "k": 3, "nbest": 1})
    assert suggest.status_code == 200, suggest.text
    # the suggestions come from the translation of the whole question, not of the instruction
    assert suggest.json()["translations"][0]["text"].split() != ["the", "house", "."]
    translate = client.post("/v1/translate", json=body)
    assert translate.json()["sentences"][0]["source"] == "wie kann ich das haus ?"
