"""The search backends (``service.search.stores``): with the Ray backend, a collection rebuilt
to another shard count is searched by a fan-out over its new shards — the pipeline, built
once, asks for the fan-out at each search instead of keeping the first one (whose workers
serve the old shard count and would answer every search in process, degraded, for good).
The Ray fan-out is replaced by a stand-in that records the shard count it was made for and
answers from the collection in this process: what is tested is which fan-out is asked."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import pytest

import service.collection.distributed as distributed
from service.collection.reader import Collection
from service.collection.searcher import SnapshotSearcher
from service.mt.bundle import ModelBundle
from service.retrieval.query import decode_query
from service.search.pipeline import SearchOptions
from service.search.stores import Backend, StoreSearchers
from tests.collection.test_live import corpus
from tests.collection.test_writers import build


class StandIn:
    """Records the shard count it serves; answers in process, like a fan-out whose workers
    all answered."""

    made: ClassVar[list[StandIn]] = []

    def __init__(self, collection: Collection, bundle: ModelBundle, **kw: Any) -> None:
        self.shards = collection.snapshot.commit.shards
        self.local: SnapshotSearcher = kw["local"]
        self.closed = False
        self.asked = 0
        StandIn.made.append(self)

    def rank(self, snapshot: Any, method: str, query: Any, k: int, **kw: Any) -> Any:
        assert snapshot.commit.shards == self.shards, "asked over another shard count"
        self.asked += 1
        ranking, counted = self.local.rank(snapshot, method, query, k, **kw)
        return ranking, counted, []

    def close(self) -> None:
        self.closed = True


def test_a_rebuild_to_another_shard_count_gets_a_fan_out_over_the_new_shards(
    tmp_path: Path, toy_bundle: ModelBundle, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(distributed, "RaySearcher", StandIn)
    StandIn.made = []
    out = tmp_path / "c"
    build(corpus(30, 1), out, shards=2)
    coll = Collection(out)
    searchers = StoreSearchers(Backend(kind="ray"))
    pipeline = searchers.pipeline(coll, toy_bundle)
    query = decode_query(toy_bundle.decoder(), "das Haus ist groß", "de", qid="q")
    first = pipeline.search(query, SearchOptions("dt", k=5))
    assert [s.shards for s in StandIn.made] == [2] and StandIn.made[0].asked == 1
    assert first.failed == () and first.hits

    build(corpus(30, 1), out, shards=3, force=True)  # rebuilt under the running service
    again = searchers.pipeline(coll, toy_bundle)
    assert again is pipeline  # built once
    second = pipeline.search(query, SearchOptions("dt", k=5))
    assert [s.shards for s in StandIn.made] == [2, 3]
    assert StandIn.made[1].asked == 1 and second.failed == ()
    assert [h.doc_id for h in second.hits] == [h.doc_id for h in first.hits]
    searchers.close()
    assert StandIn.made[1].closed
