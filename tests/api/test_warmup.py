"""The warm-up before readiness runs every request path once and leaves no trace."""

from __future__ import annotations

import logging

import pytest

from service.api.warmup import warm_up
from tests.api.conftest import MakeClient


def test_warm_up_runs_every_path_then_empties_the_cache(
    make_client: MakeClient, caplog: pytest.LogCaptureFixture
) -> None:
    client = make_client()
    app = client.app
    service, resources = app.state.service, app.state.resources  # type: ignore[attr-defined]
    with caplog.at_level(logging.WARNING, logger="service.api.warmup"):
        seconds = warm_up(service, resources, app.state.settings)  # type: ignore[attr-defined]
    parts = {"decode", "translate", "search-dt", "search-psq", "search-bowfd", "suggest"}
    parts.add("search-feedback")  # the store's term vectors for feedback, built once
    ids = {"ids-docs", "ids-pool"}  # each store's documents by id, found once
    assert set(seconds) == {f"de/{p}" for p in parts} | ids
    for view in resources.pool_index.snapshot.views():  # the table the lookup reads, made
        whole = view.segment.whole  # an index built whole finds ids with its own table
        made = whole.__dict__.get("_docno_of") if whole else view.segment.__dict__.get("ids")
        assert made is not None
    assert not [r for r in caplog.records if "failed" in r.getMessage()]
    assert len(service.cache) == 0


def test_app_with_warm_up_is_ready_and_answers(make_client: MakeClient) -> None:
    client = make_client(warm_up=True)
    assert client.get("/readyz").status_code == 200
    r = client.post("/v1/search", json={"query": "das haus", "lang": "de"})
    assert r.status_code == 200, r.text
    assert r.json()["cached"] is False  # the warm-up's queries were not kept
