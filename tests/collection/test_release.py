"""A dropped snapshot releases its files at once. Every memory-mapped array holds a file
descriptor until the array is freed; a reference cycle among a snapshot's objects would hold
them until the garbage collector's next full pass, which a busy server runs rarely — a server
that refreshes after each commit, or a test that opens many snapshots, then runs out of
descriptors (the limit is often a few thousand; CI's is 20,000, a collection of 100 segments
maps about a thousand arrays)."""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from service.collection.docstore import open_store, store_scorer
from service.collection.reader import Collection
from service.collection.searcher import SnapshotSearcher
from service.collection.writer import CollectionWriter, create_collection
from service.index.build import build_params, write_index
from service.index.tokenizers import get_index_tokenizer
from service.mt.bundle import ModelBundle
from service.retrieval.base import DecodedQuery
from service.retrieval.feedback import FeedbackParams
from service.retrieval.partials import get_method
from service.retrieval.query import decode_query
from tests.collection.test_live import QUERIES, corpus

pytestmark = pytest.mark.skipif(
    not Path("/proc/self/fd").is_dir(), reason="counts descriptors in /proc (Linux)"
)


def open_files() -> int:
    return len(os.listdir("/proc/self/fd"))


@contextmanager
def no_collector() -> Iterator[None]:
    """Only reference counting frees objects here (what is in a cycle stays)."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


@pytest.fixture
def path(tmp_path: Path) -> Path:
    path = tmp_path / "c"
    create_collection(path, build_params("docs"), 3)
    with CollectionWriter(path, buffer_mb=0.002) as w:
        w.add(corpus(120, 3))
        w.commit()
    return path


@pytest.fixture
def whole(tmp_path: Path) -> Path:
    path = tmp_path / "whole"
    params = build_params("docs")
    write_index(path, corpus(120, 3), get_index_tokenizer(params.tokenizer), params)
    return path


@pytest.fixture
def queries(toy_bundle: ModelBundle) -> list[DecodedQuery]:
    decoder = toy_bundle.decoder()
    return [decode_query(decoder, t, "de", qid=f"q{i}") for i, t in enumerate(QUERIES)]


@pytest.mark.parametrize("store", ["path", "whole"], ids=["a collection", "an index built whole"])
@pytest.mark.parametrize("form", [None, "rerank", "interpolate"])
def test_a_dropped_store_closes_its_files_at_once(
    store: str,
    form: str | None,
    toy_bundle: ModelBundle,
    queries: list[DecodedQuery],
    request: pytest.FixtureRequest,
) -> None:
    """The service's path: every method over the store, RM3 after it, a document by id."""
    where: Path = request.getfixturevalue(store)
    feedback = None if form is None else FeedbackParams(form=form, pool=20)  # type: ignore[arg-type]
    with no_collector():
        before = open_files()
        opened = open_store(where)
        for method in ("dt", "psq", "bowfd"):
            scorer = store_scorer(opened, method, toy_bundle)
            for q in queries:
                scorer.rank(q, 10, explain=True, feedback=feedback)
        opened.doc("d7")
        assert open_files() > before + 3  # mapped: one per array
        del opened, scorer
        assert open_files() == before


def test_a_shard_workers_snapshot_closes_its_files_at_once(
    path: Path, toy_bundle: ModelBundle, queries: list[DecodedQuery]
) -> None:
    """A shard worker's: its shard's partials, a term only other shards hold."""
    searcher = SnapshotSearcher(toy_bundle)
    with no_collector():
        before = open_files()
        coll = Collection(path, shards=[1])
        snap = coll.snapshot
        for method in ("dt", "psq", "bowfd"):
            lead = searcher.any_scorer(snap, method, {})
            for q in queries:
                plan = get_method(method).plan(lead, q)
                searcher.shard_partial(method, snap.shards[1], q, 10, {}, plan)
        snap.collection_df("zeppelin")  # held by no segment: the term dictionary
        assert open_files() > before + len(snap.views())
        del coll, snap, lead, plan
        assert open_files() == before


def test_a_refresh_closes_the_files_of_segments_merged_away(
    path: Path, toy_bundle: ModelBundle, queries: list[DecodedQuery]
) -> None:
    """A server's searcher lives on across commits; the segments a merge replaced go."""
    searcher = SnapshotSearcher(toy_bundle)

    def search(coll: Collection) -> None:
        for method in ("dt", "psq", "bowfd"):
            for q in queries:
                searcher.rank(coll.snapshot, method, q, 10)

    with no_collector():
        coll = Collection(path)
        search(coll)
        n_segments = len(coll.snapshot.views())
        with CollectionWriter(path) as w:
            w.merge_all()
        assert coll.refresh()
        search(coll)
        assert len(coll.snapshot.views()) < n_segments
        held = open_files()
        fresh = Collection(path)
        search(fresh)
        opened = open_files() - held
        del fresh
        assert open_files() == held
        del coll
        assert open_files() == held - opened  # the refreshed one held what a fresh one holds
