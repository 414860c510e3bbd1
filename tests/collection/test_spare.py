"""A spare shard worker (started without a shard, as the router keeps one on each node) adopts
a shard and then serves it as a worker started with it does; it refuses another shard, and a
call before any adoption fails naming why instead of hanging (no Ray: the worker's class in
this process)."""

from __future__ import annotations

import pytest

from service.collection import build_collection
from service.collection import distributed as dist
from service.collection.distributed import ShardWorker
from service.errors import InternalError
from service.index.build import build_params
from tests.collection.test_live import toy_corpus


@pytest.fixture(scope="module")
def path(tmp_path_factory: pytest.TempPathFactory) -> str:
    out = tmp_path_factory.mktemp("spare") / "c"
    build_collection(toy_corpus(10), out, build_params("docs"), shards=2)
    return str(out)


def live(worker: ShardWorker) -> list[int]:
    views = worker.collection.snapshot.shards[worker.shard]
    return [int(s) for v in views for s in v.seq.tolist()]


def test_a_spare_adopts_a_shard_and_serves_it_as_a_worker_started_with_it(path: str) -> None:
    spare = ShardWorker(path, None, None, None)
    assert spare.shard == -1
    assert spare.adopt(1) is True and spare.adopt(1) is True  # a repeated adoption is one
    started = ShardWorker(path, 1, None, None)
    assert spare.shard == 1 and live(spare) == live(started) and live(spare)
    assert live(spare) != live(ShardWorker(path, 0, None, None))
    with pytest.raises(InternalError, match="holds shard 1, not 0"):
        spare.adopt(0)


def test_a_spare_asked_before_any_adoption_says_so(
    path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(dist, "ADOPT_WAIT_S", 0.05)
    spare = ShardWorker(path, None, None, None)
    with pytest.raises(InternalError, match="holds no shard: a spare not adopted within"):
        spare.collection  # noqa: B018 - the property is the call
