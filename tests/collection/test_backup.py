"""Snapshots and restores of a collection: a snapshot is the commit it was taken at, even
while a writer goes on; a restore brings back exactly those documents (ranked as before),
over a live collection as a new generation."""

from __future__ import annotations

from pathlib import Path

import pytest

from service.collection.backup import restore_collection, snapshot_collection
from service.collection.dense import embed_collection
from service.collection.manifest import read_commit
from service.collection.reader import Collection
from service.collection.writer import CollectionWriter, build_collection
from service.dense.passages import PassageParams
from service.dense.vectors import open_vectors
from service.errors import ConflictError, InvalidInputError, NotFoundError
from service.index.build import build_params
from service.mt.bundle import ModelBundle
from service.records import Doc
from service.retrieval.base import DecodedQuery
from tests.collection.test_live import assert_same_rankings, corpus, reference
from tests.dense.conftest import HashEncoder


def live_collection(path: Path) -> list[Doc]:
    """A collection with adds, a replace and deletes over several segments; its live docs."""
    docs = corpus(60, 1)
    build_collection(docs, path, build_params("docs"), shards=2, buffer_mb=0.002, merge=False)
    extra = corpus(15, 2, prefix="e")
    with CollectionWriter(path, buffer_mb=0.002) as w:
        w.add([*extra, Doc("d3", "Red Car", "a red car", "a")])
        w.delete(["d5", "e1"])
        w.commit()
    live = {d.id: d for d in [*docs, *extra]}
    live["d3"] = Doc("d3", "Red Car", "a red car", "a")
    for gone in ("d5", "e1"):
        del live[gone]
    # the order one index built from the same documents would give (a replace goes last)
    order = [d.id for d in docs if d.id in live and d.id != "d3"]
    order += [d.id for d in extra if d.id in live] + ["d3"]
    return [live[i] for i in order]


def test_a_snapshot_is_the_commit_and_restores_to_it(
    tmp_path: Path, toy_bundle: ModelBundle, queries: list[DecodedQuery]
) -> None:
    src = tmp_path / "c"
    docs = live_collection(src)
    commit = read_commit(src)
    made = snapshot_collection(src, tmp_path / "snap")
    assert (made.generation, made.n_docs, made.linked) == (commit.generation, len(docs), True)
    assert read_commit(tmp_path / "snap") == commit
    ref = reference(docs, tmp_path / "r")
    assert_same_rankings(Collection(tmp_path / "snap"), ref, toy_bundle, queries)

    # the collection goes on: adds, merges (which remove the snapshot's segments from it)
    with CollectionWriter(src, buffer_mb=0.002) as w:
        w.add(corpus(10, 3, prefix="later"))
        w.delete(["d7"])
        w.commit()
        w.merge_all()
    reader = Collection(src)
    restored = restore_collection(tmp_path / "snap", src, force=True)
    assert restored.generation > commit.generation
    assert reader.refresh()
    assert_same_rankings(reader, ref, toy_bundle, queries)
    with pytest.raises(NotFoundError):
        reader.doc("later1")
    assert reader.doc("d7").id == "d7"
    # a restore to a new path is a copy
    restore_collection(tmp_path / "snap", tmp_path / "copy")
    assert_same_rankings(Collection(tmp_path / "copy"), ref, toy_bundle, queries)


def test_restore_is_refused_without_force_and_snapshot_needs_a_new_path(tmp_path: Path) -> None:
    src = tmp_path / "c"
    live_collection(src)
    snapshot_collection(src, tmp_path / "snap")
    before = read_commit(src)
    with pytest.raises(ConflictError, match="--force"):
        restore_collection(tmp_path / "snap", src)
    with pytest.raises(ConflictError, match="exists"):
        snapshot_collection(src, tmp_path / "snap")
    with pytest.raises(InvalidInputError, match="not a collection"):
        snapshot_collection(tmp_path / "nothing", tmp_path / "snap2")
    index = tmp_path / "index"  # an index built whole is no snapshot to restore
    reference(corpus(5, 9), index)
    for where in (src, tmp_path / "new"):
        with pytest.raises(InvalidInputError, match="not a collection"):
            restore_collection(index, where, force=True)
    assert read_commit(src) == before and not (tmp_path / "new").exists()


WRITER = """
import sys
from pathlib import Path
from service.collection.writer import CollectionWriter
from tests.collection.test_live import corpus

for i in range(10_000):
    with CollectionWriter(Path(sys.argv[1]), buffer_mb=0.002) as w:
        w.add(corpus(8, 100 + i, prefix=f"w{i}-"))
        w.commit()
        w.merge(max_segments=2)
    print(i, flush=True)
"""


def test_dense_vectors_come_back_with_the_segments(tmp_path: Path) -> None:
    src = tmp_path / "c"
    live_collection(src)
    embed_collection(Collection(src), HashEncoder(), PassageParams(60, 2))
    snapshot_collection(src, tmp_path / "snap")
    with CollectionWriter(src) as w:
        w.delete(["d1"])
        w.commit()
    restore_collection(tmp_path / "snap", src, force=True)
    for view in Collection(src).snapshot.views():
        vectors = open_vectors(view.segment.path)
        assert vectors is not None and vectors.n_docs == view.segment.n_docs
