"""A live collection: adds, replacements, deletes and merges rank exactly as one index rebuilt
from the documents that remain (in the order they were added); a failed or killed add
changes nothing; a killed merge loses nothing."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from service.collection.manifest import read_commit
from service.collection.reader import Collection
from service.collection.searcher import SnapshotSearcher
from service.collection.writer import CollectionWriter, build_collection, create_collection
from service.errors import ConfigurationError, ConflictError, InvalidInputError
from service.index.build import build_params, write_index
from service.index.inverted import InvertedIndex
from service.index.tokenizers import get_index_tokenizer
from service.mt.bundle import ModelBundle
from service.records import Doc
from service.retrieval.base import DecodedQuery, get_scorer
from tests.conftest import TOY_DOCS

WORDS = [
    *[
        "house",
        "home",
        "car",
        "automobile",
        "book",
        "dog",
        "tree",
        "big",
        "large",
        "small",
        "old",
        "new",
        "red",
        "the",
        "a",
    ],
    *[
        "is",
        "and",
        "at",
        "of",
        "garden",
        "street",
        "city",
        "road",
        "window",
        "door",
        "table",
        "chair",
    ],
]
QUERIES = ["das Haus ist groß", "ein rotes Auto", "der Hund ist alt . das Buch ist neu", "Baum"]
ROOT = Path(__file__).resolve().parents[2]


def corpus(n: int, seed: int, prefix: str = "d") -> list[Doc]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        title = " ".join(rng.choices(WORDS, k=rng.randint(0, 3)))
        text = " ".join(rng.choices(WORDS, k=rng.randint(3, 40)))
        out.append(Doc(f"{prefix}{i}", title, text, rng.choice(["a", "b", "c"])))
    return out


def toy_corpus(copies: int = 40) -> list[Doc]:
    """The toy documents, each ``copies`` times with a varying tail: every test query finds
    documents (the toy bundle translates them), with ties the merge must break as one index."""
    extra = ["house", "car", "book", "dog", "tree", "old", "new", "big"]
    return [
        Doc(f"{d.id}-{i}", d.title, f"{d.text} {' '.join(extra[: i % 5])}", d.source)
        for i in range(copies)
        for d in TOY_DOCS
    ]


def reference(docs: list[Doc], out: Path) -> InvertedIndex:
    """One index built from ``docs`` in this order."""
    write_index(out, docs, get_index_tokenizer("en"), build_params("docs"))
    return InvertedIndex.load(out)


def assert_same_rankings(
    coll: Collection, index: InvertedIndex, bundle: ModelBundle, queries: list[DecodedQuery]
) -> None:
    searcher = SnapshotSearcher(bundle)
    snap = coll.snapshot
    assert snap.n_docs == index.n_docs
    for method in ("dt", "psq", "bowfd"):
        scorer = get_scorer(method, index, **({} if method == "dt" else {"bundle": bundle}))
        for q in queries:
            for k in (3, 50):
                one = scorer.rank(q, k)
                many, _ = searcher.rank(snap, method, q, k)
                assert [(h.doc_id, h.score) for h in many.hits] == [
                    (h.doc_id, h.score) for h in one.hits
                ], (method, q.text, k)


def new_collection(path: Path, shards: int = 2) -> Path:
    create_collection(path, build_params("docs"), shards)
    return path


def test_added_equals_rebuilt(
    tmp_path: Path, toy_bundle: ModelBundle, queries: list[DecodedQuery]
) -> None:
    first, second = corpus(120, 1), corpus(80, 2, prefix="e")
    path = new_collection(tmp_path / "c", shards=3)
    with CollectionWriter(path, buffer_mb=0.002) as w:
        w.add(first)
        w.commit()
    coll = Collection(path)
    assert coll.snapshot.n_docs == 120
    with CollectionWriter(path) as w:
        w.add(second)
        w.commit()
    assert coll.refresh()  # the next search sees the commit
    assert_same_rankings(coll, reference(first + second, tmp_path / "r"), toy_bundle, queries)


def test_deleted_equals_never_added_and_replaced_equals_readded(
    tmp_path: Path, toy_bundle: ModelBundle, queries: list[DecodedQuery]
) -> None:
    docs = corpus(150, 3)
    path = new_collection(tmp_path / "c")
    with CollectionWriter(path, buffer_mb=0.003) as w:
        w.add(docs)
        w.commit()
    gone = {f"d{i}" for i in range(0, 150, 7)}
    changed = Doc("d5", "red car", "a red car and a big red automobile", "a")
    with CollectionWriter(path) as w:
        assert w.delete([*sorted(gone), "no-such-id"]) == ["no-such-id"]
        w.add([changed])
        summary = w.commit()
    assert (summary.deleted, summary.replaced, summary.added) == (len(gone), 1, 1)
    # a replaced document is numbered as if appended: the rebuild lists it last
    left = [d for d in docs if d.id not in gone and d.id != "d5"] + [changed]
    coll = Collection(path)
    assert coll.doc("d5").text == changed.text
    assert_same_rankings(coll, reference(left, tmp_path / "r"), toy_bundle, queries)
    # merging drops the tombstones and changes no ranking
    with CollectionWriter(path) as w:
        assert w.merge_all()
    coll = Collection(path)
    assert all(len(shard) == 1 for shard in coll.snapshot.shards)
    assert all(v.deleted is None for v in coll.snapshot.views())
    assert_same_rankings(coll, reference(left, tmp_path / "r2"), toy_bundle, queries)


def test_tiered_merge_keeps_rankings(
    tmp_path: Path, toy_bundle: ModelBundle, queries: list[DecodedQuery]
) -> None:
    docs = corpus(200, 4)
    path = new_collection(tmp_path / "c", shards=1)
    for i in range(0, 200, 20):  # ten commits, ten segments
        with CollectionWriter(path) as w:
            w.add(docs[i : i + 20])
            w.commit()
    assert len(read_commit(path).segments) == 10
    with CollectionWriter(path) as w:
        w.delete(["d3", "d150"])
        w.commit()
        w.merge(max_segments=3, factor=4)
    assert len(read_commit(path).segments) <= 3
    left = [d for d in docs if d.id not in ("d3", "d150")]
    assert_same_rankings(Collection(path), reference(left, tmp_path / "r"), toy_bundle, queries)


def test_failed_add_changes_nothing(tmp_path: Path) -> None:
    path = new_collection(tmp_path / "c")
    with CollectionWriter(path) as w:
        w.add(corpus(30, 5))
        w.commit()
    before = (path / "collection.json").read_bytes()
    segments = sorted(p.name for p in (path / "segments").iterdir())
    writer = CollectionWriter(path, buffer_mb=0.001)
    with pytest.raises(InvalidInputError, match="non-empty id"), writer as w:
        w.add(corpus(40, 6, prefix="n"))  # flushes segments on the way
        w.add([Doc("x", "", "a", ""), Doc(" ", "", "b", "")])
    assert (path / "collection.json").read_bytes() == before
    assert sorted(p.name for p in (path / "segments").iterdir()) == segments
    assert Collection(path).snapshot.n_docs == 30
    # an id twice in one add, its first copy already written as a segment: also refused
    twice = corpus(40, 7, prefix="t")
    refused = pytest.raises(InvalidInputError, match="'t3' occurs more than once")
    with refused, CollectionWriter(path, buffer_mb=0.001) as w:
        w.add([*twice, twice[3]])
    assert (path / "collection.json").read_bytes() == before
    assert sorted(p.name for p in (path / "segments").iterdir()) == segments


def test_one_writer_at_a_time_and_bad_settings(tmp_path: Path) -> None:
    path = new_collection(tmp_path / "c")
    with CollectionWriter(path), pytest.raises(ConflictError, match="LOCK"):
        CollectionWriter(path, lock_timeout=0.1)
    with pytest.raises(ConfigurationError, match="drop"):
        create_collection(tmp_path / "d", build_params("docs", rsj_policy="drop"), 2)
    with pytest.raises(InvalidInputError, match="shard"):
        create_collection(tmp_path / "e", build_params("docs"), 0)


CHILD = """
import sys, time
from pathlib import Path
import service.collection.writer as writer
from tests.collection.test_live import corpus

path, what = Path(sys.argv[1]), sys.argv[2]
real = writer.write_commit

def stall(p, commit):  # every file of the commit is written: stop right before the rename
    print("ready", flush=True)
    time.sleep(60)
    real(p, commit)

writer.write_commit = stall
w = writer.CollectionWriter(path, buffer_mb=0.002)
if what == "add":
    w.add(corpus(60, 8, prefix="k"))
    w.delete(["d1", "d2"])
    w.commit()
else:
    w.merge_all()
"""


def kill_at_commit(path: Path, what: str) -> None:
    """Run an add (or a merge) in a real process and ``kill -9`` it when everything but the
    commit's rename is written."""
    with subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(CHILD), str(path), what],
        stdout=subprocess.PIPE, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
    ) as proc:  # fmt: skip
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == b"ready"
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    assert proc.returncode == -signal.SIGKILL


def test_a_failed_rebuild_leaves_the_collection_as_it_was(tmp_path: Path) -> None:
    docs = corpus(20, 9)
    out = tmp_path / "c"
    build_collection(docs, out, build_params("docs"), shards=2)
    before = (out / "collection.json").read_bytes()

    def broken() -> list[Doc]:
        return [*docs, Doc("d0", "", "again", "")]  # a repeated id

    with pytest.raises(InvalidInputError):
        build_collection(broken(), out, build_params("docs"), shards=2, force=True)
    assert (out / "collection.json").read_bytes() == before
    assert Collection(out).snapshot.n_docs == 20


@pytest.mark.parametrize("depth", [5, 40])
def test_cascade_is_bowfd_over_the_first_stage_top_documents(
    tmp_path: Path, toy_bundle: ModelBundle, queries: list[DecodedQuery], depth: int
) -> None:
    """BOW-FD with a cascade ranks the first stage's top ``depth`` documents by their
    exhaustive BOW-FD scores (reference: the exhaustive ranking filtered to them), and a
    collection's cascade takes the collection's first-stage top documents."""
    docs = corpus(160, 12)
    index = reference(docs, tmp_path / "r")
    full = get_scorer("bowfd", index, bundle=toy_bundle)
    dt = get_scorer("dt", index, bundle=toy_bundle)
    cascade = get_scorer("bowfd", index, bundle=toy_bundle, cascade=depth)
    for q in queries:
        first = {h.docno for h in dt.rank(q, depth).hits}
        want = [(h.doc_id, h.score) for h in full.rank(q, 1000).hits if h.docno in first][:10]
        assert [(h.doc_id, h.score) for h in cascade.rank(q, 10).hits] == want, q.text
    path = new_collection(tmp_path / "c", shards=3)
    with CollectionWriter(path, buffer_mb=0.004) as w:
        w.add(docs)
        w.commit()
    snap = Collection(path).snapshot
    searcher = SnapshotSearcher(toy_bundle)
    for q in queries:
        got, _ = searcher.rank(snap, "bowfd", q, 10, params={"cascade": depth})
        one = cascade.rank(q, 10)
        assert [(h.doc_id, h.score) for h in got.hits] == [(h.doc_id, h.score) for h in one.hits]
        assert got.signature == one.signature and "cascade:dt@" in got.signature


def test_merges_stay_under_the_size_cap(tmp_path: Path) -> None:
    path = new_collection(tmp_path / "c", shards=1)
    for i in range(6):
        with CollectionWriter(path) as w:
            w.add(corpus(10, 40 + i, prefix=f"m{i}-"))
            w.commit()
    with CollectionWriter(path) as w:
        w.merge(max_segments=1, factor=8, max_merge_docs=25)
    sizes = sorted(e.n_docs for e in read_commit(path).segments)
    assert max(sizes) <= 25 and len(sizes) < 6 and sum(sizes) == 60


def test_gathered_postings_are_the_per_term_postings(tmp_path: Path) -> None:
    """One compiled pass over a query's terms gives each term's postings as
    :meth:`InvertedIndex.postings` does (its reference): weights computed on read in segments
    with deleted documents, precomputed in a built index; all documents or only some."""
    import numpy as np

    docs = corpus(300, 11)
    path = new_collection(tmp_path / "c", shards=2)
    with CollectionWriter(path, buffer_mb=0.004) as w:
        w.add(docs)
        w.commit()
    with CollectionWriter(path) as w:
        w.delete([f"d{i}" for i in range(0, 300, 5)])
        w.commit()
    views = [v.index for v in Collection(path).snapshot.views()]
    assert any(v.live is not None for v in views)
    indexes = [*views, reference(docs, tmp_path / "r")]
    rng = np.random.default_rng(0)
    for index in indexes:
        for trial in range(20):
            ids = rng.integers(-1, index.n_terms, size=rng.integers(0, 12))
            among = None
            if trial % 2:
                among = np.unique(rng.integers(0, index.n_docs, size=rng.integers(0, 40)))
            ptr, got_docs, got_w = index.gather_postings(ids, among)
            assert len(ptr) == len(ids) + 1
            for i, t in enumerate(ids.tolist()):
                lo, hi = int(ptr[i]), int(ptr[i + 1])
                if t < 0:
                    assert lo == hi
                    continue
                want = index.postings(t, among)
                np.testing.assert_array_equal(got_docs[lo:hi], want.docs)
                np.testing.assert_array_equal(got_w[lo:hi], want.weights)  # to the bit
    # a ranking's count of the documents its terms reach: without the deleted ones
    for index in indexes:
        for _ in range(10):
            ids = np.unique(rng.integers(0, index.n_terms, size=rng.integers(1, 8)))
            _, reached = index.rank_counted(ids, np.ones(len(ids)), 3)
            assert reached == len(index.docs_containing_any(ids.tolist()))
    with pytest.raises(InvalidInputError, match="term ids"):
        indexes[0].gather_postings([indexes[0].n_terms])
