"""A collection read densely is one index read densely: the toy documents as one index and as
collections of 1, 2 and 4 shards (one segment a shard, a segment a document, or those merged
after they were embedded), all embedded by the hash encoder, give the same dense top lists
and the same fused rankings (DT, PSQ, BOW-FD) — ids and scores to the last bit. A deleted
document is never read densely; documents added and not yet embedded are pending and searched
lexically; a merge copies its segments' vectors (the encoder is not called again), and a
merge with a segment not yet embedded leaves the merged one to embed."""

from __future__ import annotations

import gc
import json
import weakref
from pathlib import Path

import numpy as np
import pytest

from service.cli import main
from service.collection import Collection, CollectionWriter, build_collection
from service.collection.dense import (
    CollectionDense,
    collection_dense,
    dense_status,
    embed_collection,
    segment_vectors,
)
from service.data import write_docs
from service.dense.encoders import get_encoder
from service.dense.passages import PassageParams
from service.dense.source import IndexDense
from service.dense.vectors import (
    DENSE_DIR,
    DenseVectors,
    build_vectors,
    index_fingerprint,
    open_vectors,
)
from service.index.build import build_params
from service.index.inverted import InvertedIndex
from service.mt.bundle import ModelBundle
from service.records import Doc
from service.retrieval.base import DecodedQuery
from service.retrieval.query import decode_query
from service.retrieval.runner import decoder_for
from service.search.pipeline import DenseParams, SearchOptions, dense_query_text
from service.search.stores import store_pipeline
from tests.conftest import TOY_DOCS
from tests.dense.conftest import HashEncoder, copy_index

QUERY = "das haus ist groß"
PARAMS = PassageParams(60, 2)
NEW = Doc("d9", "Big House", "a big house , a big big house and an old house", "x")

# (shards, how the segments are laid out): one a shard; one a document (a tiny buffer, not
# merged); the first documents in one segment a shard and the last ones added in another,
# both embedded, then merged into one (the vectors copied; the smaller segment first, so the
# merge reorders the documents)
LAYOUTS = [(1, "whole"), (2, "whole"), (4, "whole"), (2, "per-doc"), (2, "merged")]


def make_collection(out: Path, shards: int, layout: str = "whole") -> Collection:
    if layout == "per-doc":
        build_collection(
            TOY_DOCS, out, build_params("docs"), shards=shards, buffer_mb=1e-6, merge=False
        )
    else:
        build_collection(TOY_DOCS, out, build_params("docs"), shards=shards)
    return Collection(out)


def embedded_collection(
    out: Path, shards: int, layout: str = "whole", encoder: HashEncoder | None = None
) -> Collection:
    encoder = encoder or HashEncoder()
    if layout != "merged":
        coll = make_collection(out, shards, layout)
        embed_collection(coll, encoder, PARAMS)
        return coll
    build_collection(TOY_DOCS[:5], out, build_params("docs"), shards=shards)
    coll = Collection(out)
    embed_collection(coll, encoder, PARAMS)
    with CollectionWriter(out) as writer:
        writer.add(TOY_DOCS[5:])
        writer.commit()
    embed_collection(coll, encoder, PARAMS)
    calls = encoder.calls
    with CollectionWriter(out) as writer:
        writer.merge_all()
    assert encoder.calls == calls
    coll.refresh()
    return coll


def dense_counts(documents: int, pending: int) -> dict[str, object]:
    """What the dense status says of the collection embedded by the hash encoder."""
    return {
        "encoder": HashEncoder().signature(), "passages": PARAMS.signature(),
        "documents": documents, "pending": pending,
    }  # fmt: skip


def segment_vectors_of(coll: Collection) -> list[DenseVectors]:
    found = [open_vectors(v.index.path) for v in coll.snapshot.views()]
    assert all(v is not None for v in found)
    return [v for v in found if v is not None]


@pytest.fixture
def dense_index(toy_index: InvertedIndex, tmp_path: Path) -> InvertedIndex:
    index = copy_index(Path(toy_index.path), tmp_path / "idx")
    build_vectors(index, HashEncoder(), PARAMS)
    return index


@pytest.fixture(scope="module")
def query(toy_bundle: ModelBundle) -> DecodedQuery:
    return decode_query(decoder_for(toy_bundle), QUERY, "de")


def as_store(store: InvertedIndex | Collection) -> Collection:
    """An index built whole as the store it is served as (a collection of one segment)."""
    return Collection.of_index(store) if isinstance(store, InvertedIndex) else store


def query_vector(
    query: DecodedQuery, bundle: ModelBundle, store: InvertedIndex | Collection
) -> np.ndarray:
    """The dense reader's query vector, as the pipeline embeds it."""
    out = store_pipeline(as_store(store), bundle).search(query, SearchOptions("dt", k=1))
    return HashEncoder().encode_queries([dense_query_text(out.translation)])[0]


def fused(
    store: InvertedIndex | Collection, bundle: ModelBundle, query: DecodedQuery, method: str
) -> tuple[list[str], list[float], list[dict[str, int]], str, str]:
    out = store_pipeline(as_store(store), bundle).search(
        query, SearchOptions(method, k=8, dense=DenseParams(depth=8))
    )
    return (
        [h.doc_id for h in out.hits],
        [h.score for h in out.hits],
        [out.readers[h.docno] for h in out.hits],
        out.dense,
        out.ranking.signature,
    )


@pytest.mark.parametrize(("shards", "layout"), LAYOUTS)
def test_dense_reader_of_a_collection_is_the_index_one(
    dense_index: InvertedIndex,
    toy_bundle: ModelBundle,
    query: DecodedQuery,
    tmp_path: Path,
    shards: int,
    layout: str,
) -> None:
    coll = embedded_collection(tmp_path / "c", shards, layout)
    views = coll.snapshot.views()
    assert len(views) == (len(TOY_DOCS) if layout == "per-doc" else shards)
    qvec = query_vector(query, toy_bundle, dense_index)
    vectors = open_vectors(dense_index.path)
    assert vectors is not None
    one = IndexDense(dense_index, vectors).top(qvec, 8)
    many = CollectionDense(coll).top(qvec, 8)
    assert len(one) == len(TOY_DOCS)
    assert len({s for _, _, s in one}) > 2  # the scores tell documents apart
    assert [(i, s) for _, i, s in many] == [(i, s) for _, i, s in one]
    # a hit's number is its sequence number: the index's document number
    assert [d for d, _, _ in many] == [d for d, _, _ in one]
    assert [coll.doc(d).id for d, _, _ in many] == [i for _, i, _ in one]
    # a shorter list is the longer one's head (each segment's list merged exactly)
    assert CollectionDense(coll).top(qvec, 3) == many[:3]


@pytest.mark.parametrize(("shards", "layout"), LAYOUTS)
def test_fused_search_of_a_collection_is_the_index_one(
    dense_index: InvertedIndex,
    toy_bundle: ModelBundle,
    query: DecodedQuery,
    tmp_path: Path,
    shards: int,
    layout: str,
) -> None:
    coll = embedded_collection(tmp_path / "c", shards, layout)
    for method in ("dt", "psq", "bowfd"):
        want = fused(dense_index, toy_bundle, query, method)
        got = fused(coll, toy_bundle, query, method)
        assert want[3] == "on" and any("dense" in r for r in want[2]), method
        assert want[4].endswith("|enc:test-hash:hash32:32|passages:60x2"), method
        assert got == want, method


def test_a_merge_copies_the_vectors_of_its_segments(tmp_path: Path) -> None:
    """The merged segment's rows are its sources' rows of its live documents, in its order,
    in the format a build writes; nothing is embedded again."""
    encoder = HashEncoder()
    coll = embedded_collection(tmp_path / "c", 2, "whole", encoder)
    with CollectionWriter(tmp_path / "c") as writer:  # a smaller, later segment a shard
        writer.add([NEW, Doc("d10", "Red Car", "a red car , a red red car", "x")])
        writer.commit()
    embed_collection(coll, encoder, PARAMS)
    coll.refresh()
    assert len(coll.snapshot.views()) == 4
    before: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for view, vectors in zip(coll.snapshot.views(), segment_vectors_of(coll), strict=True):
        for docno in range(view.segment.n_docs):
            a, b = int(vectors.doc_ptr[docno]), int(vectors.doc_ptr[docno + 1])
            rows = (np.array(vectors.codes[a:b]), np.array(vectors.scales[a:b]))
            before[view.segment.doc_id(docno)] = rows
    source_manifest = json.loads(
        (Path(coll.snapshot.views()[0].index.path) / DENSE_DIR / "manifest.json").read_text()
    )
    calls = encoder.calls
    with CollectionWriter(tmp_path / "c") as writer:
        assert writer.delete(["d3"]) == []
        writer.commit()
        merged = writer.merge_all()
    assert len(merged) == 2
    coll.refresh()
    assert encoder.calls == calls
    seen = []
    for view in coll.snapshot.views():
        path = Path(view.index.path)
        vectors = open_vectors(path, verify=True)
        assert vectors is not None and vectors.n_docs == view.segment.n_docs
        manifest = json.loads((path / DENSE_DIR / "manifest.json").read_text())
        assert manifest["index"] == index_fingerprint(path)
        assert set(manifest) == set(source_manifest)
        assert {k: v for k, v in manifest.items() if k not in ("index", "arrays")} == {
            k: v for k, v in source_manifest.items() if k not in ("index", "arrays")
        }
        for docno in range(view.segment.n_docs):
            doc_id = view.segment.doc_id(docno)
            a, b = int(vectors.doc_ptr[docno]), int(vectors.doc_ptr[docno + 1])
            np.testing.assert_array_equal(vectors.codes[a:b], before[doc_id][0])
            np.testing.assert_array_equal(vectors.scales[a:b], before[doc_id][1])
            seen.append(doc_id)
    assert sorted(seen) == sorted([*(d.id for d in TOY_DOCS if d.id != "d3"), "d9", "d10"])
    # and the next embedding run finds nothing to do
    counts = embed_collection(coll, encoder, PARAMS)
    assert counts == {"embedded": 0, "vanished": 0, "had_vectors": 2}
    assert encoder.calls == calls
    assert dense_status(coll)["pending"] == 0


def test_vectors_of_segments_merged_away_are_let_go(tmp_path: Path) -> None:
    """The reader keeps a segment's vectors open while a snapshot holds the segment only (a
    server would otherwise keep the memory maps, and the disk space, of every segment ever
    merged away)."""
    coll = embedded_collection(tmp_path / "c", 1, "per-doc")
    refs = [weakref.ref(v) for v in (segment_vectors(x) for x in coll.snapshot.views()) if v]
    assert len(refs) == len(TOY_DOCS) and all(r() is not None for r in refs)
    with CollectionWriter(tmp_path / "c") as writer:
        writer.merge_all()
    coll.refresh()
    gc.collect()
    assert all(r() is None for r in refs)
    assert segment_vectors(coll.snapshot.views()[0]) is not None


def test_a_closed_collection_takes_its_dense_reader_with_it(tmp_path: Path) -> None:
    """The readers made per snapshot are cached weakly by collection: one that holds its
    collection would keep it, and every array it maps (a file descriptor each), for ever."""
    coll = embedded_collection(tmp_path / "c", 1, "per-doc")
    source, state = collection_dense(coll)
    assert source is not None and state == "on"
    ref = weakref.ref(coll)
    del coll, source
    gc.collect()
    assert ref() is None


def test_a_merge_with_a_segment_not_embedded_leaves_it_to_embed(tmp_path: Path) -> None:
    encoder = HashEncoder()
    coll = embedded_collection(tmp_path / "c", 1, "whole", encoder)
    with CollectionWriter(tmp_path / "c") as writer:
        writer.add([NEW])
        writer.commit()
        writer.merge_all()
    coll.refresh()
    (view,) = coll.snapshot.views()
    assert open_vectors(view.index.path) is None
    status = dense_status(coll)
    assert status["documents"] == 0 and status["pending"] == len(TOY_DOCS) + 1
    calls = encoder.calls
    assert embed_collection(coll, encoder, PARAMS)["embedded"] == 1
    assert encoder.calls > calls
    assert dense_status(coll)["pending"] == 0


def test_vectors_made_otherwise_are_pending_and_not_merged(tmp_path: Path) -> None:
    """A segment embedded with other passages than the others is not read with them, nor
    merged into one table with them."""
    coll = make_collection(tmp_path / "c", 1, "per-doc")
    views = coll.snapshot.views()
    for i, view in enumerate(views):
        build_vectors(view.index, HashEncoder(), PARAMS if i else PassageParams(50, 1))
    # read as most documents were embedded; the one cut otherwise is pending, not mixed in
    assert dense_status(coll) == dense_counts(len(TOY_DOCS) - 1, 1)
    first = views[0].segment.doc_id(0)
    qvec = HashEncoder().encode_queries([TOY_DOCS[0].text])[0]
    assert first not in [i for _, i, _ in CollectionDense(coll).top(qvec, 20)]
    with CollectionWriter(tmp_path / "c") as writer:
        writer.merge_all()
    coll.refresh()
    (view,) = coll.snapshot.views()
    assert open_vectors(view.index.path) is None


def test_a_deleted_document_is_never_read_densely(
    toy_bundle: ModelBundle, query: DecodedQuery, tmp_path: Path
) -> None:
    coll = embedded_collection(tmp_path / "c", 2)
    qvec = query_vector(query, toy_bundle, coll)
    assert CollectionDense(coll).top(qvec, 8)[0][1] == "d1"  # the house: the nearest
    with CollectionWriter(tmp_path / "c") as writer:
        assert writer.delete(["d1"]) == []
        writer.commit()
    coll.refresh()
    top = CollectionDense(coll).top(qvec, 8)
    assert "d1" not in [i for _, i, _ in top] and len(top) == len(TOY_DOCS) - 1
    for method in ("dt", "bowfd"):
        ids, _, readers, state, _ = fused(coll, toy_bundle, query, method)
        assert state == "on" and "d1" not in ids and any("dense" in r for r in readers)
    assert dense_status(coll) == dense_counts(len(TOY_DOCS) - 1, 0)


def test_documents_added_without_vectors_are_pending_and_searched_lexically(
    toy_bundle: ModelBundle, query: DecodedQuery, tmp_path: Path
) -> None:
    coll = embedded_collection(tmp_path / "c", 2)
    with CollectionWriter(tmp_path / "c") as writer:
        writer.add([NEW])
        writer.commit()
    coll.refresh()
    assert dense_status(coll) == dense_counts(len(TOY_DOCS), 1)
    qvec = query_vector(query, toy_bundle, coll)
    assert "d9" not in [i for _, i, _ in CollectionDense(coll).top(qvec, 20)]
    out = store_pipeline(coll, toy_bundle).search(
        query, SearchOptions("bowfd", k=9, dense=DenseParams(depth=9))
    )
    assert out.dense == "on"
    by_id = {h.doc_id: out.readers[h.docno] for h in out.hits}
    assert set(by_id["d9"]) == {"lexical"}  # found, by the lexical reader only
    assert any("dense" in r for r in by_id.values())
    embed_collection(coll, HashEncoder(), PARAMS)
    assert dense_status(coll)["pending"] == 0
    assert "d9" in [i for _, i, _ in CollectionDense(coll).top(qvec, 20)]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, object], str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, json.loads(out) if out.strip() else {}, err


def test_docs_add_status_and_embed_on_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    coll = tmp_path / "c"
    embedded_collection(coll, 2)
    dense_flags = ("--encoder", "test-hash", "--passage-chars", "60", "--max-passages", "2")
    write_docs(tmp_path / "new.jsonl", [NEW])
    code, out, err = run(capsys, "docs", "add", "--index", str(coll), "--docs",
                         str(tmp_path / "new.jsonl"), "--quiet", "--no-merge")  # fmt: skip
    assert code == 0 and out["dense_pending"] == 1
    assert "dense vectors: 1 documents pending" in err
    assert f"clir embed --index {coll}" in err
    code, status, _ = run(capsys, "docs", "status", "--index", str(coll))
    assert code == 0
    assert status["n_docs"] == len(TOY_DOCS) + 1 and status["generation"] == out["generation"]
    assert status["dense"] == dense_counts(len(TOY_DOCS), 1)
    # --embed: the pending segments embedded (only they: the encoder reads their passages
    # alone), then merged into one segment a shard with their vectors copied
    encoder = get_encoder("test-hash", None)  # the command's (one per process)
    assert isinstance(encoder, HashEncoder)
    calls = encoder.calls
    more = Doc("d10", "Red Car", "a red car , a red red car", "x")
    write_docs(tmp_path / "more.jsonl", [more])
    code, out, err = run(capsys, "docs", "add", "--index", str(coll), "--docs",
                         str(tmp_path / "more.jsonl"), "--quiet", "--embed",
                         "--max-segments", "1", *dense_flags)  # fmt: skip
    assert code == 0 and "pending" not in err
    assert out["dense"]["embedded"] == 2 and out["dense"]["had_vectors"] == 2  # type: ignore[index]
    assert out["dense_pending"] == 0 and out["merged_into"] and out["segments"] == 2
    assert encoder.calls == calls + 2  # one batch of passages per new segment
    code, status, _ = run(capsys, "docs", "status", "--index", str(coll))
    assert status["dense"] == dense_counts(len(TOY_DOCS) + 2, 0)
    code, _, err = run(capsys, "docs", "add", "--index", str(coll), "--pool",
                       str(tmp_path / "new.jsonl"), "--embed")  # fmt: skip
    assert code != 0 and "--embed applies to --docs" in err
