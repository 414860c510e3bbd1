"""Fusion: the vectorised fusions against their references, and RRF by hand."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.errors import ConfigurationError
from service.retrieval.fusion import RankedList, get_fusion


def _ranked(docs: list[int], seed: int) -> RankedList:
    rng = np.random.default_rng(seed)
    scores = np.sort(rng.normal(size=len(docs)))[::-1]
    return RankedList(np.asarray(docs, dtype=np.int64), scores.astype(np.float64))


lists = st.lists(st.integers(0, 30), unique=True, max_size=25)


@settings(max_examples=80, deadline=None)
@given(a=lists, b=lists, depth=st.integers(1, 60), seed=st.integers(0, 99),
       name=st.sampled_from(["rrf", "mix"]), w=st.sampled_from([0.0, 0.5, 1.0, 2.0]))  # fmt: skip
def test_fast_equals_reference(a, b, depth, seed, name, w) -> None:
    fusion = get_fusion(name, weights=(1.0, w))
    inputs = [_ranked(a, seed), _ranked(b, seed + 1)]
    fast = fusion.fuse(inputs, depth)
    slow = fusion.fuse_reference(inputs, depth)
    assert fast.docs.tolist() == slow.docs.tolist()
    assert fast.scores.tolist() == slow.scores.tolist()
    assert fast.ranks.tolist() == slow.ranks.tolist()


def test_rrf_by_hand() -> None:
    rrf = get_fusion("rrf", k=60)
    lex = RankedList.of([(1, 9.0), (2, 5.0), (3, 1.0)])
    den = RankedList.of([(3, 0.9), (4, 0.8)])
    out = rrf.fuse([lex, den], 10)
    # 3: 1/63 + 1/61; 1: 1/61; 4: 1/62; 2: 1/62 (tie: smaller number first)
    assert out.docs.tolist() == [3, 1, 2, 4]
    assert out.scores[0] == pytest.approx(1 / 63 + 1 / 61)
    assert out.ranks.tolist() == [[3, 1], [1, 0], [2, 0], [0, 2]]


def test_mix_normalises_each_list() -> None:
    mix = get_fusion("mix")
    out = mix.fuse([RankedList.of([(1, 10.0), (2, 0.0)]), RankedList.of([(2, 0.5), (3, 0.1)])], 5)
    assert dict(zip(out.docs.tolist(), out.scores.tolist(), strict=True)) == {
        1: 1.0,
        2: 1.0,
        3: 0.0,
    }
    assert out.docs.tolist() == [1, 2, 3]


def test_bad_fusions_are_named() -> None:
    with pytest.raises(ConfigurationError, match="unknown fusion 'sum'; choose one of: rrf, mix"):
        get_fusion("sum")
    with pytest.raises(ConfigurationError, match="not all 0"):
        get_fusion("rrf", weights=(0.0, 0.0))
    with pytest.raises(ConfigurationError, match="2 weights"):
        get_fusion("rrf").fuse([RankedList.of([])], 3)
