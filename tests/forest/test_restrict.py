"""The source positions an edge's own words translate, and a forest cut to the derivations
that use only some edges (the searcher's pins and blocks): checked against every derivation
enumerated by brute force."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings

from service.errors import InvalidInputError
from service.forest.inference import covered_positions, restrict
from tests.forest.forests import SEEDS, TOY_WEIGHTS, brute_force, random_forest, toy_forest

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


def test_restrict_checks_its_flags() -> None:
    hg = toy_forest()
    assert restrict(hg, [True] * hg.num_edges) is not None
    with pytest.raises(InvalidInputError, match="3 edge flags for a forest of 13 edges"):
        restrict(hg, [True] * 3)
