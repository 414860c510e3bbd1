"""The sign sketch's first pass: kernel against reference, the candidates' exact scores, and
that centring is what makes it find the nearest documents."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import service.dense.kernels as kernels
import service.dense.sketch as sketch_module
from service.dense.kernels import doc_scores, quantize, top_docs
from service.dense.passages import PassageParams
from service.dense.sketch import SketchParams, build_sketch, candidates, sketch_scores
from service.dense.vectors import DenseVectors


def _collection(seed: int, n_docs: int, dim: int, offset: float = 0.0, most: int = 4):
    """Random passages around a common direction of length ``offset`` (E5's vectors share
    one: unrelated texts have cosines of 0.7–0.9)."""
    rng = np.random.default_rng(seed)
    counts = rng.integers(1, most + 1, size=n_docs)
    doc_ptr = np.zeros(n_docs + 1, dtype=np.int64)
    np.cumsum(counts, out=doc_ptr[1:])
    common = rng.normal(size=dim)
    common *= offset / max(np.linalg.norm(common), 1e-9)
    rows = (rng.normal(size=(int(doc_ptr[-1]), dim)) / np.sqrt(dim) + common).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    codes, scales = quantize(rows)
    q = (rng.normal(size=dim) / np.sqrt(dim) + common).astype(np.float32)
    return codes, scales, doc_ptr, q / np.linalg.norm(q)


def _vectors(codes, scales, doc_ptr) -> DenseVectors:
    return DenseVectors(Path("."), "test", PassageParams(), codes, scales, doc_ptr)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), n_docs=st.integers(1, 40), dim=st.integers(1, 150))
def test_sketch_kernel_equals_reference(seed: int, n_docs: int, dim: int) -> None:
    codes, scales, doc_ptr, q = _collection(seed, n_docs, dim, offset=1.0)
    sk = build_sketch(codes, scales)
    fast = sketch_scores(sk, doc_ptr, q)
    np.testing.assert_array_equal(fast, sketch_scores(sk, doc_ptr, q, "reference"))
    assert fast.max() <= 0 and fast.min() >= -dim


def test_the_sketch_is_the_signs_around_the_mean(monkeypatch: pytest.MonkeyPatch) -> None:
    codes, scales, _, _ = _collection(5, 60, 70, offset=2.0)
    rows = codes.astype(np.float64) * scales[:, None]
    whole = build_sketch(codes, scales)
    np.testing.assert_allclose(whole.mean, rows.mean(axis=0), atol=1e-6)
    bits = np.unpackbits(whole.bits.view(np.uint8), axis=1, bitorder="little")
    assert bits[:, :70].astype(bool).tolist() == (rows > whole.mean).tolist()
    assert not bits[:, 70:].any()  # the padding is zero in every row and in the query
    monkeypatch.setattr(sketch_module, "_ROWS_PER_STEP", 7)  # built in steps: the same
    stepped = build_sketch(codes, scales)
    np.testing.assert_array_equal(stepped.bits, whole.bits)
    np.testing.assert_allclose(stepped.mean, whole.mean, atol=1e-6)


def test_two_threads_equal_one(monkeypatch: pytest.MonkeyPatch) -> None:
    codes, scales, doc_ptr, q = _collection(3, 500, 64, offset=1.0)
    sk = build_sketch(codes, scales)
    one = sketch_scores(sk, doc_ptr, q)
    some = np.array([3, 17, 18, 200, 499], dtype=np.int64)
    exact_some = doc_scores(codes, scales, doc_ptr, q, docs=some)
    monkeypatch.setattr(kernels, "PARALLEL_MIN_PASSAGES", 1)
    np.testing.assert_array_equal(sketch_scores(sk, doc_ptr, q), one)
    np.testing.assert_array_equal(doc_scores(codes, scales, doc_ptr, q, docs=some), exact_some)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), n_docs=st.integers(1, 60), picks=st.integers(0, 2**60))
def test_scoring_some_documents_is_scoring_all_then_picking(
    seed: int, n_docs: int, picks: int
) -> None:
    codes, scales, doc_ptr, q = _collection(seed, n_docs, 24)
    docs = np.array([i for i in range(n_docs) if (picks >> i) & 1], dtype=np.int64)
    full = doc_scores(codes, scales, doc_ptr, q)
    for engine in ("compiled", "reference"):
        got = doc_scores(codes, scales, doc_ptr, q, engine, docs=docs)  # type: ignore[arg-type]
        np.testing.assert_array_equal(got, full[docs])


def test_the_two_passes_answer_exact_scores_of_live_documents_in_order() -> None:
    codes, scales, doc_ptr, q = _collection(11, 400, 48, offset=1.5)
    vectors = _vectors(codes, scales, doc_ptr)
    live = np.random.default_rng(2).random(400) > 0.3
    exact = vectors.scores(q)
    for engine in ("compiled", "reference"):
        docs, scores = vectors.top(q, 10, live, engine, SketchParams(above=0, oversample=3))  # type: ignore[arg-type]
        assert len(docs) == 10 and live[docs].all()
        np.testing.assert_array_equal(scores, exact[docs])
        want = sorted(docs.tolist(), key=lambda d: (-exact[d], d))
        assert docs.tolist() == want


def test_the_two_passes_score_later_passages_as_the_exact_search() -> None:
    codes, scales, doc_ptr, q = _collection(17, 300, 32, offset=1.5)
    vectors = _vectors(codes, scales, doc_ptr)
    exact = vectors.scores(q, later=0.05)
    docs, scores = vectors.top(q, 10, sketch=SketchParams(above=0, oversample=3), later=0.05)
    np.testing.assert_array_equal(scores, exact[docs])
    assert docs.tolist() == sorted(docs.tolist(), key=lambda d: (-exact[d], d))
    wide = vectors.top(q, 10, sketch=SketchParams(above=0, oversample=1000), later=0.05)
    assert wide[0].tolist() == top_docs(exact, 10)[0].tolist()


def test_the_first_pass_stands_aside_where_it_would_not_skip_anything() -> None:
    codes, scales, doc_ptr, q = _collection(13, 200, 32, offset=1.0)
    vectors = _vectors(codes, scales, doc_ptr)
    want = top_docs(vectors.scores(q), 5)
    small = SketchParams(above=len(codes))  # not more passages than the threshold
    wide = SketchParams(above=0, oversample=40)  # 40 × 5 candidates: every document
    for params in (small, wide):
        assert not params.applies(vectors.n_passages, vectors.n_docs, 5)
        got = vectors.top(q, 5, sketch=params)
        assert got[0].tolist() == want[0].tolist() and got[1].tolist() == want[1].tolist()
    assert "sketch" not in vectors.__dict__  # and was never built


def test_centring_is_what_finds_the_nearest_documents() -> None:
    """Documents on 150 topics around a large common direction (E5's vectors share one): the
    centred signs keep most of the exact top 10 among 10 × 10 candidates out of 3,000
    documents; the plain signs (the mean taken as zero) are nearly the same for every passage
    and keep few."""
    rng = np.random.default_rng(17)
    dim, n_docs = 96, 3000
    common = np.sign(rng.normal(size=dim)) * 0.4  # outweighs the topics in every dimension
    topics = rng.normal(size=(150, dim)) / np.sqrt(dim)
    topic_of = rng.integers(150, size=n_docs)
    doc_ptr = np.arange(n_docs + 1, dtype=np.int64)  # one passage each
    rows = common + topics[topic_of] + rng.normal(size=(n_docs, dim)) / np.sqrt(dim) * 0.5
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    codes, scales = quantize(rows.astype(np.float32))
    vectors = _vectors(codes, scales, doc_ptr)
    params = SketchParams(above=0, oversample=10)
    plain_sketch = sketch_module.Sketch(np.zeros(dim, np.float32), sketch_module._pack(codes > 0))
    centred, plain = [], []
    for t in range(20):  # a query on a topic, as a query is near its answers
        q = (common + topics[t] + rng.normal(size=dim) / np.sqrt(dim) * 0.5).astype(np.float32)
        q /= np.linalg.norm(q)
        want = set(vectors.top(q, 10)[0].tolist())
        centred.append(len(want & set(vectors.top(q, 10, sketch=params)[0].tolist())) / 10)
        kept = top_docs(sketch_scores(plain_sketch, doc_ptr, q).astype(np.float32), 100)[0]
        got = kept[top_docs(vectors.scores(q)[kept], 10)[0]]
        plain.append(len(want & set(got.tolist())) / 10)
    assert np.mean(centred) >= 0.9, np.mean(centred)
    assert np.mean(plain) < np.mean(centred) - 0.2, (np.mean(plain), np.mean(centred))


@settings(max_examples=60, deadline=None)
@given(
    scores=st.lists(st.integers(-12, 0), min_size=0, max_size=40),
    count=st.integers(1, 45),
    mask=st.integers(0, 2**40),
)
def test_the_candidates_are_the_best_and_their_ties(scores: list[int], count: int, mask: int):
    arr = np.asarray(scores, dtype=np.int32)
    live = np.asarray([(mask >> i) & 1 == 1 for i in range(len(arr))], dtype=bool)
    got = candidates(arr, count, live)
    best = top_docs(arr.astype(np.float32), count, live)[0]
    assert got.tolist() == sorted(got.tolist()) and live[got].all()
    assert set(best.tolist()) <= set(got.tolist())
    if len(best) == count and count:  # the rest are tied with the last of the best
        assert set(arr[np.setdiff1d(got, best)].tolist()) <= {int(arr[best].min())}
    else:  # fewer live than asked: all of them
        assert got.tolist() == np.flatnonzero(live).tolist()
    assert candidates(arr, count).tolist() == candidates(arr, count, np.ones_like(live)).tolist()
