"""A sharded collection ranks exactly as one index over the same documents (DT, PSQ, BOW-FD):
the committed demo index's documents as a collection of 1, 2 and 4 shards (several segments
per shard, or each shard merged into one), the same documents in the same order and scores
equal to the last bit. The queries: every fourth German dev query (65) decoded by the demo
bundle, dealt out in turn to the layouts (and to the feedback forms), so that each query is
checked once, every layout on a quarter of them (the suite's time budget; every query on every
layout, in this process and on Ray shard workers, is the identity dump's,
``bench/identity_stores.py``, run around a refactor)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from service.collection.reader import Collection
from service.collection.searcher import SnapshotSearcher
from service.collection.writer import build_collection
from service.data import read_queries
from service.index.build import BuildParams
from service.index.inverted import InvertedIndex
from service.mt.bundle import ModelBundle, load_bundle
from service.retrieval.base import DecodedQuery, get_scorer
from service.retrieval.bowfd.scorer import SegmentsWeighting
from service.retrieval.query import decode_query

ROOT = Path(__file__).resolve().parents[3]
DEV = ROOT.parent / "shared" / "data" / "clir" / "lohelp-de" / "queries.dev.tsv"

pytestmark = [pytest.mark.slow, pytest.mark.data]


@pytest.fixture(scope="module")
def demo(weights_root: Path) -> tuple[InvertedIndex, ModelBundle]:
    bundle = load_bundle(ROOT / "models" / "demo-de-en", state_root=weights_root)
    return InvertedIndex.load(ROOT / "indexes" / "demo"), bundle


@pytest.fixture(scope="module")
def dev_queries(demo: tuple[InvertedIndex, ModelBundle]) -> list[DecodedQuery]:
    if not DEV.is_file():
        pytest.skip(f"{DEV} is absent (../shared/data beside the checkout)")
    decoder = demo[1].decoder()
    return [decode_query(decoder, q.text, "de", qid=q.qid) for q in list(read_queries(DEV))[::4]]


def collection_of(index: InvertedIndex, out: Path, shards: int, *, merge: bool) -> Collection:
    docs = [index.doc(i) for i in range(index.n_docs)]
    params = BuildParams(**index.manifest["build"])
    # a small buffer: several segments per shard unless merged
    build_collection(docs, out, params, shards=shards, buffer_mb=1.5, merge=merge, max_segments=1)
    return Collection(out)


# PSQ's n-best size does not change how segments merge; a smaller one keeps the test quick
PARAMS = {"dt": {}, "psq": {"nbest": 100}, "bowfd": {}}


def share(queries: list[DecodedQuery], turn: int, of: int = 4) -> list[DecodedQuery]:
    """The queries dealt to the ``turn``-th of ``of`` layouts (or forms): every ``of``-th."""
    return queries[turn::of]


@pytest.mark.parametrize(
    ("turn", "shards", "merge", "threads"),
    [(0, 1, False, 1), (1, 2, False, 1), (2, 2, False, 2), (3, 4, True, 4)],
)
def test_sharded_collection_ranks_like_one_index(
    demo: tuple[InvertedIndex, ModelBundle],
    dev_queries: list[DecodedQuery],
    tmp_path: Path,
    turn: int,
    shards: int,
    merge: bool,
    threads: int,
) -> None:
    """Shards searched in turn (each bounding the next) or at once in threads (sharing
    BOW-FD's boards) rank as the one index: ids, scores, the count retrieved and the
    signature."""
    index, bundle = demo
    coll = collection_of(index, tmp_path / "c", shards, merge=merge)
    snap = coll.snapshot
    assert snap.n_docs == index.n_docs
    # several segments a shard are merged at search time, or one merged segment a shard
    assert all((len(s) > 1) != merge for s in snap.shards)
    searcher = SnapshotSearcher(bundle, threads=threads)
    queries = share(dev_queries, turn)
    assert len(queries) >= 15
    for method in ("dt", "psq", "bowfd"):
        scorer = get_scorer(method, index, bundle=bundle, **PARAMS[method])
        for q in queries:
            one = scorer.rank(q, 20)
            ids, scores = [h.doc_id for h in one.hits], [h.score for h in one.hits]
            retrieved, signature = scorer.retrieved(one, 20, q), one.signature
            many, (total, relation) = searcher.rank(snap, method, q, 20, params=PARAMS[method])
            assert [h.doc_id for h in many.hits] == ids, (method, q.qid)
            assert [h.score for h in many.hits] == scores, (method, q.qid)
            assert [coll.doc(h.docno).id for h in many.hits] == ids
            assert (total, relation) == retrieved, (method, q.qid)
            assert many.signature == signature


def test_explanations_are_the_single_index_ones(
    demo: tuple[InvertedIndex, ModelBundle], dev_queries: list[DecodedQuery], tmp_path: Path
) -> None:
    index, bundle = demo
    snap = collection_of(index, tmp_path / "c", 2, merge=False).snapshot
    searcher = SnapshotSearcher(bundle)
    for method in ("dt", "psq", "bowfd"):
        extra = {} if method == "dt" else {"bundle": bundle}
        scorer = get_scorer(method, index, **extra, **PARAMS[method])
        for q in dev_queries[:12]:
            one = scorer.rank(q, 5, explain=True)
            many, _ = searcher.rank(snap, method, q, 5, explain=True, params=PARAMS[method])
            got = [h.explanation.to_json() for h in many.hits if h.explanation is not None]
            want = [h.explanation.to_json() for h in one.hits if h.explanation is not None]
            assert got == want and len(got) == len(one.hits), (method, q.qid)


def test_segment_weights_equal_the_precomputed_ones(
    demo: tuple[InvertedIndex, ModelBundle], tmp_path: Path
) -> None:
    """One segment holding every document, scored with its own statistics, reads exactly the
    weights the builder precomputed (float64 expression rounded to float32)."""
    index, _ = demo
    view = collection_of(index, tmp_path / "c", 1, merge=True).snapshot.views()[0].index
    assert view.n_terms == index.n_terms
    for t in range(0, index.n_terms, 7):
        a, b = index.postings(t), view.postings(t)
        np.testing.assert_array_equal(a.docs, b.docs)
        np.testing.assert_array_equal(a.weights, b.weights)
    np.testing.assert_array_equal(index.rsj, view.rsj)


def test_segments_weigh_forest_words_as_one_index(
    demo: tuple[InvertedIndex, ModelBundle], dev_queries: list[DecodedQuery], tmp_path: Path
) -> None:
    """A query's forests are prepared once for all segments: the words their segments
    together call weighted terms are the ones the single index does (whichever segment
    holds a term, and none for a word no segment holds)."""
    index, _ = demo
    snap = collection_of(index, tmp_path / "c", 4, merge=False).snapshot
    assert len(snap.views()) > 4
    words = {
        w for q in dev_queries[:40] for f in q.forests for w in f.hypergraph.arrays().vocabulary
    }
    words |= {"the", "zzzunheard", ""}
    weighting = SegmentsWeighting(snap.views())
    got = {w: weighting.weighted_term(w) for w in sorted(words)}
    assert got == {w: index.weighted_term(w) for w in sorted(words)}
    assert sum(t is not None for t in got.values()) > 100  # not a trivial agreement
    assert got["zzzunheard"] is None


@pytest.mark.parametrize(
    ("turn", "form"), list(enumerate(["interpolate", "replace", "rerank", "rerank+interpolate"]))
)
def test_feedback_over_a_collection_ranks_like_one_index(
    demo: tuple[InvertedIndex, ModelBundle],
    dev_queries: list[DecodedQuery],
    tmp_path: Path,
    turn: int,
    form: str,
) -> None:
    """RM3 over 2 shards of several segments: the expansion (its terms and weights), the
    ranking and the count equal one index's, for every method and dev query."""
    from service.collection.searcher import CollectionScorer
    from service.retrieval.feedback import FeedbackParams

    index, bundle = demo
    coll = collection_of(index, tmp_path / "c", 2, merge=False)
    feedback = FeedbackParams(form=form, pool=30)  # type: ignore[arg-type]
    # the rerank forms: BOW-FD ranks its documents again; DT cannot and interpolates
    methods = ("dt", "bowfd") if form.startswith("rerank") else ("dt", "psq", "bowfd")
    for method in methods:
        one = get_scorer(method, index, bundle=bundle, **PARAMS[method])
        many = CollectionScorer(coll, method, bundle=bundle, **PARAMS[method])
        for q in share(dev_queries, turn):
            a, b = one.rank(q, 20, feedback=feedback), many.rank(q, 20, feedback=feedback)
            assert b.info["expansion"] == a.info["expansion"], (method, q.qid)
            assert [h.doc_id for h in b.hits] == [h.doc_id for h in a.hits], (method, q.qid)
            assert [h.score for h in b.hits] == [h.score for h in a.hits], (method, q.qid)
            assert many.retrieved(b, 20, q) == one.retrieved(a, 20, q), (method, q.qid)
            assert b.signature == a.signature


@pytest.mark.parametrize("form", ["rerank", "rerank+interpolate", "interpolate"])
def test_feedback_explanations_are_the_single_index_ones(
    demo: tuple[InvertedIndex, ModelBundle],
    dev_queries: list[DecodedQuery],
    tmp_path: Path,
    form: str,
) -> None:
    """A page with feedback, explained: each hit's explanation (the expansion words it holds
    and the method's own, from the ranking the stage read) equals one index's — the rerank
    forms explain only the page's hits of their own ranking, not the first ranking's."""
    from service.collection.searcher import CollectionScorer
    from service.retrieval.feedback import FeedbackParams

    index, bundle = demo
    coll = collection_of(index, tmp_path / "c", 2, merge=False)
    feedback = FeedbackParams(form=form, pool=30)  # type: ignore[arg-type]
    for method in ("dt", "bowfd"):
        one = get_scorer(method, index, bundle=bundle, **PARAMS[method])
        many = CollectionScorer(coll, method, bundle=bundle, **PARAMS[method])
        for q in dev_queries[:12]:
            a = one.rank(q, 5, explain=True, feedback=feedback)
            b = many.rank(q, 5, explain=True, feedback=feedback)
            want = [h.explanation.to_json() for h in a.hits if h.explanation is not None]
            got = [h.explanation.to_json() for h in b.hits if h.explanation is not None]
            assert got == want and len(got) == len(a.hits), (method, form, q.qid)
            firsts = [e["first"] for e in got]
            if method == "bowfd" or form == "interpolate":  # the method's own rides along
                assert any(f is not None for f in firsts), (method, form, q.qid)
