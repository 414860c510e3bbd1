"""A live collection: adds, replacements, deletes and merges rank exactly as one index rebuilt: the
tests that start processes, Ray or a browser, read the shared data or run long (the integration
tier, tests/README.md); the rest are in :mod:`tests.collection.test_live`."""

from __future__ import annotations

from pathlib import Path

import pytest

from service.collection.reader import Collection
from service.collection.writer import CollectionWriter, build_collection
from service.index.build import build_params
from service.mt.bundle import ModelBundle
from service.records import Doc
from service.retrieval.base import DecodedQuery
from tests.collection.test_live import (
    assert_same_rankings,
    corpus,
    kill_at_commit,
    new_collection,
    reference,
)


@pytest.mark.slow
def test_kill_9_during_add_or_merge_loses_nothing_committed(
    tmp_path: Path, toy_bundle: ModelBundle, queries: list[DecodedQuery]
) -> None:
    docs = corpus(90, 7)
    path = new_collection(tmp_path / "c")
    with CollectionWriter(path, buffer_mb=0.002) as w:
        w.add(docs)
        w.commit()
    before = (path / "collection.json").read_bytes()
    ref = reference(docs, tmp_path / "r")
    for what in ("add", "merge"):
        kill_at_commit(path, what)
        assert (path / "collection.json").read_bytes() == before
        assert_same_rankings(Collection(path), ref, toy_bundle, queries)
    # the next writer removes what the killed ones left and works
    with CollectionWriter(path) as w:
        committed = {e.name for e in w.commit_manifest.segments}
        assert {p.name for p in (path / "segments").iterdir()} == committed
        w.add([Doc("z", "", "red car", "a")])
        w.commit()
    assert_same_rankings(
        Collection(path), reference([*docs, Doc("z", "", "red car", "a")], tmp_path / "r2"),
        toy_bundle, queries,
    )  # fmt: skip


@pytest.mark.process  # starts a process
def test_parallel_indexing_equals_serial(
    tmp_path: Path, toy_bundle: ModelBundle, queries: list[DecodedQuery]
) -> None:
    """Buffers indexed in two worker processes make the same collection (same rankings)."""
    docs = corpus(150, 13)
    out = tmp_path / "c"
    build_collection(docs, out, build_params("docs"), shards=2, buffer_mb=0.003, workers=2)
    assert_same_rankings(Collection(out), reference(docs, tmp_path / "r"), toy_bundle, queries)


@pytest.mark.process  # starts a process
@pytest.mark.parametrize("workers", [1, 2])
def test_replacing_and_deleting_within_one_writer_across_buffers(
    tmp_path: Path, toy_bundle: ModelBundle, queries: list[DecodedQuery], workers: int
) -> None:
    """A document added again after its buffer was written (serially, or while a worker
    process indexes it) replaces it; a delete finds it too; all in one writer, one commit."""
    first, again = corpus(60, 21), corpus(60, 22)
    path = new_collection(tmp_path / "c")
    with CollectionWriter(path, buffer_mb=0.002, workers=workers) as w:
        w.add(first)
        w.add(again[10:30])  # ids d10..d29 again, new text: replaces
        w.add(again[20:25])  # and once more: replaces the replacement
        assert w.delete(["d40", "d22", "nope"]) == ["nope"]
        summary = w.commit()
    assert (summary.n_docs, summary.added, summary.deleted) == (58, 84, 2)
    kept = [d for d in first if d.id not in {f"d{i}" for i in range(10, 30)} | {"d40"}]
    left = (
        kept + [d for d in again[10:20] + again[25:30]] + [d for d in again[20:25] if d.id != "d22"]
    )
    coll = Collection(path)
    assert coll.doc("d12").text == again[12].text and coll.doc("d21").text == again[21].text
    assert_same_rankings(coll, reference(left, tmp_path / "r"), toy_bundle, queries)
