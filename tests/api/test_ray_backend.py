"""The Ray search backend without the ``ray`` extra: the service is not ready and says which
extra to install, and searches are answered in the API process, flagged degraded — never a
501 for every search while ``/readyz`` says ready."""

from __future__ import annotations

from pathlib import Path

import pytest

from service.collection import build_collection, distributed
from service.index.build import build_params
from tests.api.conftest import MakeClient
from tests.conftest import TOY_DOCS

QUERY = "das Haus ist groß"


def test_ray_backend_without_the_extra_is_not_ready_and_answers_in_process(
    make_client: MakeClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "coll"
    build_collection(TOY_DOCS, out, build_params("docs"), shards=2)
    monkeypatch.setattr(distributed, "ray_installed", lambda: False)
    local = make_client(doc_indexes=[out])
    fanned = make_client(doc_indexes=[out], search_backend="ray")
    r = fanned.get("/readyz")
    assert r.status_code == 503, r.text
    detail = r.json()["detail"]
    assert "'ray' extra" in detail and "pip install" in detail
    assert fanned.get("/healthz").status_code == 200
    for method in ("dt", "bowfd"):
        body = {"query": QUERY, "lang": "de", "method": method}
        got, want = fanned.post("/v1/search", json=body), local.post("/v1/search", json=body)
        assert got.status_code == 200, got.text
        assert got.json()["results"] == want.json()["results"]
        assert got.json()["degraded"] is True
        assert "'ray' extra" in got.json()["degraded_reason"]
    metrics = fanned.get("/metrics").text
    assert 'clir_shard_in_process_total{shard="-1"}' in metrics
