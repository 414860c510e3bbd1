"""The OpenAPI document names the schemas and carries their examples."""

from __future__ import annotations

from fastapi.testclient import TestClient


def test_openapi_has_the_endpoints_and_examples(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    paths = spec["paths"]
    assert {
        "/v1/search",
        "/v1/translate",
        "/v1/suggest",
        "/v1/documents/{doc_id}",
        "/metrics",
    } <= set(paths)
    schemas = spec["components"]["schemas"]
    for name in ("SearchRequest", "SearchResponse", "TranslateRequest", "SuggestRequest"):
        assert schemas[name]["examples"], name
    assert paths["/v1/search"]["post"]["summary"] == "Search"
    assert "German or Chinese" in paths["/v1/search"]["post"]["description"]
