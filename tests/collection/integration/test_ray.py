"""Search fanned out to shard workers on Ray ranks exactly as in one process; a shard worker
that dies costs a degraded answer naming it (never an error), and Ray brings it back."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from service.collection import Collection, SnapshotSearcher, build_collection
from service.collection.distributed import RaySearcher
from service.collection.docstore import open_store
from service.index.build import build_params
from service.index.inverted import InvertedIndex
from service.mt.bundle import ModelBundle
from service.retrieval.base import DecodedQuery, get_scorer
from service.retrieval.query import decode_query
from tests.collection.test_live import QUERIES, corpus

pytestmark = [pytest.mark.ray, pytest.mark.slow]


@pytest.fixture(scope="module")
def queries(toy_bundle: ModelBundle) -> list[DecodedQuery]:
    decoder = toy_bundle.decoder()
    return [decode_query(decoder, q, "de", qid=f"q{i}") for i, q in enumerate(QUERIES)]


def test_ray_fan_out_equals_one_process_and_survives_a_killed_shard(
    local_ray: None, tmp_path: Path, toy_bundle: ModelBundle, queries: list[DecodedQuery]
) -> None:
    import ray

    out = tmp_path / "c"
    build_collection(corpus(300, 11), out, build_params("docs"), shards=3, buffer_mb=0.01)
    coll = Collection(out)
    local = SnapshotSearcher(toy_bundle)
    searcher = RaySearcher(coll, toy_bundle, timeout_s=60)
    try:
        assert [s["up"] for s in searcher.status()] == [True] * 3
        assert sum(s["n_docs"] for s in searcher.status()) == 300
        runs = [("dt", {}), ("psq", {}), ("bowfd", {}), ("bowfd", {"cascade": 20})]
        for method, params in runs:
            for q in queries:
                want, want_total = local.rank(
                    coll.snapshot, method, q, 10, explain=True, params=params
                )
                got, got_total, failed = searcher.rank(
                    coll.snapshot, method, q, 10, explain=True, params=params
                )
                assert failed == []
                assert [(h.doc_id, h.score) for h in got.hits] == [
                    (h.doc_id, h.score) for h in want.hits
                ]
                assert [h.explanation for h in got.hits] == [h.explanation for h in want.hits]
                assert got_total == want_total
        ray.kill(searcher.actors[1], no_restart=False)  # a crash: Ray restarts the worker
        _, _, failed = searcher.rank(coll.snapshot, "dt", queries[0], 10)
        assert failed and "shard 1" in failed[0]
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            got, _, failed = searcher.rank(coll.snapshot, "dt", queries[0], 10)
            if not failed:
                break
            time.sleep(0.5)
        want, _ = local.rank(coll.snapshot, "dt", queries[0], 10)
        assert failed == [] and [h.doc_id for h in got.hits] == [h.doc_id for h in want.hits]
        # a worker gone for good (as when its node is lost): degraded once, then spawned again
        ray.kill(searcher.actors[2], no_restart=True)
        _, _, failed = searcher.rank(coll.snapshot, "dt", queries[0], 10)
        assert failed and "shard 2" in failed[0]
        got, _, failed = searcher.rank(coll.snapshot, "dt", queries[0], 10)
        assert failed == [] and [h.doc_id for h in got.hits] == [h.doc_id for h in want.hits]
    finally:
        searcher.close()


def test_an_index_built_whole_is_fanned_out_as_one_shard(
    local_ray: None, toy_index: InvertedIndex, toy_bundle: ModelBundle, queries: list[DecodedQuery]
) -> None:
    """An index built whole is a store like any: with the Ray backend one shard worker opens
    it as the collection of its one segment and ranks as the index's own scorer does."""
    coll = open_store(toy_index.path)
    assert coll.built_whole
    searcher = RaySearcher(coll, toy_bundle, timeout_s=60)
    try:
        assert [(s["up"], s["n_docs"]) for s in searcher.status()] == [(True, toy_index.n_docs)]
        for method in ("dt", "psq", "bowfd"):
            scorer = get_scorer(method, toy_index, bundle=toy_bundle)
            for q in queries:
                want = scorer.rank(q, 10)
                got, total, failed = searcher.rank(coll.snapshot, method, q, 10)
                assert failed == []
                assert [(h.doc_id, h.score) for h in got.hits] == [
                    (h.doc_id, h.score) for h in want.hits
                ], (method, q.qid)
                assert total == scorer.retrieved(want, 10, q)
    finally:
        searcher.close()


def test_a_decoded_query_survives_pickling(toy_bundle: ModelBundle) -> None:
    """A query sent to shard workers: the compiled decoder's forests travel as their arrays,
    the rules' yields and the nodes, and every node and hyperedge comes out equal."""
    import pickle

    q = decode_query(toy_bundle.decoder(), "der Hund ist alt . das Buch ist neu", "de")
    back = pickle.loads(pickle.dumps(q))
    for f1, f2 in zip(q.forests, back.forests, strict=True):
        h1, h2 = f1.hypergraph, f2.hypergraph
        assert h1.array_backed and h2.array_backed
        assert [h2.edges[i] for i in range(h2.num_edges)] == list(h1.edges)
        assert [h2.edges[i].features for i in range(h2.num_edges)] == [e.features for e in h1.edges]
        assert [h2.nodes[i] for i in range(h2.num_nodes)] == list(h1.nodes)
