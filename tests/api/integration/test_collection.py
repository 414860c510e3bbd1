"""A live collection behind the API: ``POST/DELETE /v1/admin/documents`` commit at once and the:
the tests that start processes, Ray or a browser, read the shared data or run long (the
integration tier, tests/README.md); the rest are in :mod:`tests.api.test_collection`."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.api.conftest import MakeClient
from tests.api.test_collection import QUERY, search, wait_ready


@pytest.mark.ray
@pytest.mark.slow
def test_ray_backend_answers_as_local_and_degrades_for_a_dead_shard(
    local_ray: None, make_client: MakeClient, coll_path: Path
) -> None:
    import ray

    local = make_client(doc_indexes=[coll_path])
    fanned = make_client(doc_indexes=[coll_path], search_backend="ray", search_shard_timeout_s=60)
    wait_ready(fanned)  # the shard workers start in the background
    for method in ("dt", "psq", "bowfd"):
        assert search(fanned, method) == search(local, method)
        # feedback: the method's ranking from the shard workers, the expansion ranked here
        body = {"query": QUERY, "lang": "de", "method": method, "feedback": True, "explain": True}
        got, want = fanned.post("/v1/search", json=body), local.post("/v1/search", json=body)
        assert got.status_code == want.status_code == 200, got.text
        for key in ("results", "total", "total_relation", "expansion", "signature"):
            assert got.json()[key] == want.json()[key], (method, key)
    ready = fanned.get("/readyz").json()
    assert [s["up"] for s in ready["collection"]["shards"]] == [True, True]
    service = fanned.app.state.service  # type: ignore[attr-defined]
    (searcher,) = service.searchers.ray_searchers()
    # gone for good (the router starts it again under a new name): a copy Ray restarts in
    # place keeps its name, but the name was seen not to resolve from this process for over a
    # minute afterwards (the router's own handle answered), which the loop below relies on
    ray.kill(searcher.actors[0], no_restart=True)
    r = fanned.post("/v1/search", json={"query": QUERY, "lang": "de", "method": "dt"})
    assert r.status_code == 200
    body = r.json()
    assert body["degraded"] is True and "shard 0" in body["degraded_reason"]
    metrics = fanned.get("/metrics").text
    assert "clir_degraded_responses_total" in metrics
    # every shard gone at once (as when the workers are still starting): the answer is
    # searched in the API process, says why, and is never a 5xx — for each method
    for method in ("dt", "psq", "bowfd"):
        # the copies the previous round killed are being started again: wait until each
        # shard's new copy is registered (a copy not found by its name would not be killed),
        # then kill every copy of every shard (a shard's router may have started a standby
        # beside the copy it lost: on loaded cores it is registered by now, and answers)
        deadline = time.monotonic() + 60
        while not all(copies := searcher.copy_actors()) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert len(copies) == 2 and all(copies)
        for actor in (a for shard in copies for a in shard):
            ray.kill(actor, no_restart=True)
        r = fanned.post("/v1/search", json={"query": QUERY, "lang": "de", "method": method})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["degraded"] is True
        assert [(x["id"], x["score"]) for x in body["results"]] == search(local, method)
        assert "shard 0" in body["degraded_reason"] and "shard 1" in body["degraded_reason"]
