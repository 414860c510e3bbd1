"""The API over an index with vectors: the dense reader on by default, off by request, and
said when the index has none (/readyz too); vectors written while serving are picked up."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from service.dense.vectors import build_vectors
from service.index.inverted import InvertedIndex
from tests.api.conftest import MakeClient
from tests.dense.conftest import HashEncoder, copy_index

QUERY = "das haus ist groß"


@pytest.fixture
def dense_index(toy_index: InvertedIndex, tmp_path: Path) -> InvertedIndex:
    index = copy_index(Path(toy_index.path), tmp_path / "dense-idx")
    build_vectors(index, HashEncoder())
    return index


def test_api_fuses_by_default_and_says_so(
    make_client: MakeClient, dense_index: InvertedIndex, toy_index: InvertedIndex
) -> None:
    client = make_client(doc_indexes=[dense_index.path])
    body = {"query": QUERY, "lang": "de", "method": "bowfd", "k": 8, "feedback": False}
    on = client.post("/v1/search", json=body).json()
    assert on["dense"] == "on"
    assert all(r["readers"] for r in on["results"])
    assert any("dense" in r["readers"] for r in on["results"])
    assert on["signature"].endswith(
        "|dense:mix(1,1)@100|later:0.005|sketch>500000x50|enc:test-hash:hash32:32|passages:600x8"
    )
    off = client.post("/v1/search", json=body | {"dense": False}).json()
    assert off["dense"] == "off" and all(r["readers"] == {} for r in off["results"])
    ready = client.get("/readyz").json()
    assert ready["dense"]["available"] is True and ready["dense"]["default"] is True
    assert ready["dense"]["encoder"] == "test-hash:hash32:32"

    plain = make_client(doc_indexes=[toy_index.path])
    res = plain.post("/v1/search", json=body).json()
    assert res["dense"] == "no vectors (clir embed --index writes them)"
    assert [r["id"] for r in res["results"]] == [r["id"] for r in off["results"]]
    ready = plain.get("/readyz").json()
    assert ready["ready"] is True and ready["dense"]["available"] is False


def test_vectors_written_while_serving_are_picked_up(
    make_client: MakeClient, toy_index: InvertedIndex, tmp_path: Path, monkeypatch
) -> None:
    import service.collection.dense as collection_dense

    monkeypatch.setattr(collection_dense, "RECHECK_S", 0.0)
    index = copy_index(Path(toy_index.path), tmp_path / "idx")
    client = make_client(doc_indexes=[index.path])
    body = {"query": QUERY, "lang": "de", "method": "dt", "k": 3}
    assert client.post("/v1/search", json=body).json()["dense"] != "on"
    build_vectors(index, HashEncoder())
    assert client.post("/v1/search", json=body).json()["dense"] == "on"
    assert np.isfinite(client.post("/v1/search", json=body).json()["results"][0]["score"])
