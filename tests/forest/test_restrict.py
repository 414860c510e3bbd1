"""The source positions an edge's own words translate, a forest cut to the derivations that
use only some edges (the searcher's pins and blocks), and the compiled edge posteriors: checked
against every derivation enumerated by brute force and against the generic inside–outside."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings

from service.errors import InternalError, InvalidInputError
from service.forest.inference import (
    covered_positions,
    covering_edges,
    derives,
    edge_posteriors,
    fast_edge_posteriors,
    fast_restrict,
    restrict,
    single_positions,
)
from service.mt.bundle import ModelBundle
from tests.forest.forests import (
    SEEDS,
    TOY_WEIGHTS,
    brute_force,
    random_forest,
    random_weights,
    toy_forest,
)

PROPERTY = settings(max_examples=150, derandomize=True, deadline=None)


def test_covered_positions_of_the_toy_forest_by_hand() -> None:
    hg = toy_forest()
    covered = covered_positions(hg)
    # e0-e5 one word each; e6 the swap (its tails cover it all); e7 "the house"; glue: none
    assert covered[:8] == [(0,), (0,), (1,), (1,), (2,), (2,), (), (0, 1)]
    assert covered[8:] == [()] * 5
    # each derivation translates every position by exactly one edge's own words
    for _, _, tree in brute_force(hg, TOY_WEIGHTS):
        positions = sorted(i for e in tree.preorder() for i in covered[e])
        assert positions == [0, 1, 2]


def derivations(hg: object, weights: dict[str, float]) -> list[tuple[float, tuple[str, ...]]]:
    return sorted((s, y) for s, y, _ in brute_force(hg, weights))  # type: ignore[arg-type]


@PROPERTY
@given(seed=SEEDS)
def test_restrict_keeps_exactly_the_derivations_of_kept_edges(seed: int) -> None:
    rng = random.Random(seed)
    hg = random_forest(rng)
    weights = {"f1": 1.0, "f2": -1.0, "f3": 0.5}
    keep = [rng.random() < 0.7 for _ in range(hg.num_edges)]
    want = sorted(
        (s, y) for s, y, tree in brute_force(hg, weights) if all(keep[e] for e in tree.preorder())
    )
    cut = restrict(hg, keep)
    if not want:
        assert cut is None
        return
    assert cut is not None
    assert derivations(cut, weights) == want
    assert cut.num_edges <= sum(keep)  # edges no derivation of the goal can use are gone


@PROPERTY
@given(seed=SEEDS)
def test_fast_restrict_makes_the_reference_forest(seed: int) -> None:
    """Over the arrays, the same sub-forest as the reference's objects: the same arrays (words
    first-seen, features sorted), spans, nodes and hyperedges, renumbered alike."""
    rng = random.Random(seed)
    hg = random_forest(rng)
    keep = [rng.random() < rng.choice([0.5, 0.8, 1.0]) for _ in range(hg.num_edges)]
    ref, fast = restrict(hg, keep), fast_restrict(hg, keep)
    assert derives(hg, keep) == (ref is not None)
    if ref is None:
        assert fast is None
        return
    assert fast is not None and fast.array_backed
    x, y = ref.arrays(), fast.arrays()
    for name in x.__dataclass_fields__:
        u, v = getattr(x, name), getattr(y, name)
        assert np.array_equal(u, v) if isinstance(u, np.ndarray) else u == v, name
    assert all(np.array_equal(s, t) for s, t in zip(ref.spans(), fast.spans(), strict=True))
    assert list(ref.nodes) == list(fast.nodes)
    assert list(ref.edges) == list(fast.edges)
    assert [fast.incoming(v) for v in range(fast.num_nodes)] == [
        ref.incoming(v) for v in range(ref.num_nodes)
    ]


@PROPERTY
@given(seed=SEEDS)
def test_covering_edges_are_the_covered_positions(seed: int) -> None:
    hg = random_forest(random.Random(seed))
    covered = covered_positions(hg)
    last = max(int(hg.spans()[0][:, 1].max()), 1)
    for i in range(-1, last + 1):
        assert covering_edges(hg, i).tolist() == [i in c for c in covered]


@pytest.mark.parametrize("cut", [restrict, fast_restrict])
def test_restrict_checks_its_flags(cut: Any) -> None:
    hg = toy_forest()
    assert cut(hg, [True] * hg.num_edges) is not None
    with pytest.raises(InvalidInputError, match="3 edge flags for a forest of 13 edges"):
        cut(hg, [True] * 3)


@PROPERTY
@given(seed=SEEDS)
def test_fast_edge_posteriors_equal_the_generic_ones(seed: int) -> None:
    """The compiled inside–outside pass (log-sum-exp per node) against the semiring one,
    on random forests with shared subforests, ties and nodes without derivations."""
    rng = random.Random(seed)
    hg = random_forest(rng)
    weights = random_weights(rng)
    try:
        want = edge_posteriors(hg, weights)
    except InternalError:
        with pytest.raises(InternalError, match="no derivation of its goal"):
            fast_edge_posteriors(hg, weights)
        return
    assert fast_edge_posteriors(hg, weights) == pytest.approx(want, abs=1e-9)


def test_single_positions_are_the_one_word_covered_positions() -> None:
    hg = toy_forest()
    want = [c[0] if len(c) == 1 else -1 for c in covered_positions(hg)]
    assert single_positions(hg).tolist() == want
    assert want.count(-1) == 7  # the swap, "the house" and the glue edges


def test_an_array_backed_forest_s_spans_are_its_objects(toy_bundle: ModelBundle) -> None:
    """The compiled decoder hands its spans over; they equal the nodes' and edges' own, and
    the one-word positions agree with the object-built reference."""
    forest = toy_bundle.decoder().forest(("das", "haus", "ist", "groß"))
    hg = forest.hypergraph
    assert hg.array_backed and hg._spans is not None
    node_span, edge_span = hg.spans()
    assert node_span.tolist() == [list(hg.nodes[v].span) for v in range(hg.num_nodes)]
    assert edge_span.tolist() == [list(hg.edges[e].span) for e in range(hg.num_edges)]
    want = [c[0] if len(c) == 1 else -1 for c in covered_positions(hg)]
    assert single_positions(hg).tolist() == want and max(want) == 3
