"""The dense search kernel against its reference, quantisation, and top-k order."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.dense.kernels import doc_scores, doc_scores_reference, quantize, top_docs


def _random(seed: int, n_docs: int, dim: int, most: int = 4):
    rng = np.random.default_rng(seed)
    counts = rng.integers(1, most + 1, size=n_docs)
    doc_ptr = np.zeros(n_docs + 1, dtype=np.int64)
    np.cumsum(counts, out=doc_ptr[1:])
    rows = rng.normal(size=(int(doc_ptr[-1]), dim)).astype(np.float32)
    codes, scales = quantize(rows)
    q = rng.normal(size=dim).astype(np.float32)
    return rows, codes, scales, doc_ptr, q / np.linalg.norm(q)


@settings(max_examples=30, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    n_docs=st.integers(1, 40),
    dim=st.integers(1, 48),
    later=st.sampled_from([0.0, 0.01, 0.3, 2.0]),
)
def test_kernel_equals_reference(seed: int, n_docs: int, dim: int, later: float) -> None:
    _, codes, scales, doc_ptr, q = _random(seed, n_docs, dim)
    fast = doc_scores(codes, scales, doc_ptr, q, later=later)
    slow = doc_scores_reference(codes, scales, doc_ptr, q, later)
    np.testing.assert_array_equal(fast, slow)  # integer sums: the same to the last bit


def test_two_threads_equal_one(monkeypatch: pytest.MonkeyPatch) -> None:
    import service.dense.kernels as kernels

    _, codes, scales, doc_ptr, q = _random(3, 500, 16)
    one = doc_scores(codes, scales, doc_ptr, q)
    monkeypatch.setattr(kernels, "PARALLEL_MIN_PASSAGES", 1)
    np.testing.assert_array_equal(doc_scores(codes, scales, doc_ptr, q), one)


def test_maxp_is_the_best_passage_cosine() -> None:
    rows, _, _, doc_ptr, q = _random(7, 30, 64)
    exact = rows @ q / np.linalg.norm(rows, axis=1)
    unit_codes, unit_scales = quantize(rows / np.linalg.norm(rows, axis=1, keepdims=True))
    got = doc_scores(unit_codes, unit_scales, doc_ptr, q)
    want = np.maximum.reduceat(exact, doc_ptr[:-1])
    assert np.max(np.abs(got - want)) < 0.02  # int8 of both sides: about 1 % of a cosine


def test_later_passages_lose_the_penalty_and_the_first_keeps_its_cosine() -> None:
    rows, _, _, doc_ptr, q = _random(5, 60, 32, most=5)
    codes, scales = quantize(rows / np.linalg.norm(rows, axis=1, keepdims=True))  # cosines
    cos = doc_scores(codes, scales, np.arange(len(codes) + 1, dtype=np.int64), q)  # each passage
    firsts = cos[doc_ptr[:-1]]
    for later in (0.05, 0.2):
        got = doc_scores(codes, scales, doc_ptr, q, later=later)
        for d in range(60):
            rest = cos[doc_ptr[d] + 1 : doc_ptr[d + 1]] - np.float32(later)
            assert got[d] == pytest.approx(max([firsts[d], *rest]), abs=1e-6)
    # a penalty no cosine can make up (|cos| <= 1): the first passage alone (FirstP)
    np.testing.assert_array_equal(doc_scores(codes, scales, doc_ptr, q, later=2.0), firsts)
    assert (
        doc_scores(codes, scales, doc_ptr, q, later=0.2) <= doc_scores(codes, scales, doc_ptr, q)
    ).all()


def test_quantize_round_trip_and_zero_row() -> None:
    rows = np.array([[0.5, -1.0, 0.25], [0.0, 0.0, 0.0]], dtype=np.float32)
    codes, scales = quantize(rows)
    assert codes[0].tolist() == [64, -127, 32]
    assert codes[1].tolist() == [0, 0, 0] and scales[1] == 1.0
    np.testing.assert_allclose(codes[0] * scales[0], rows[0], atol=scales[0] / 2)


@settings(max_examples=50, deadline=None)
@given(
    scores=st.lists(st.sampled_from([0.1, 0.2, 0.3, -0.5, 0.9]), min_size=0, max_size=30),
    depth=st.integers(0, 35),
    mask=st.integers(0, 2**30),
)
def test_top_docs_is_the_sorted_prefix(scores: list[float], depth: int, mask: int) -> None:
    arr = np.asarray(scores, dtype=np.float32)
    live = np.asarray([(mask >> i) & 1 == 1 for i in range(len(arr))], dtype=bool)
    docs, got = top_docs(arr, depth, live)
    want = sorted((i for i in range(len(arr)) if live[i]), key=lambda i: (-arr[i], i))[:depth]
    assert docs.tolist() == want
    assert got.tolist() == [float(arr[i]) for i in want]
