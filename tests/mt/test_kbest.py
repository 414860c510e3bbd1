"""Lazy k-best (Huang & Chiang 2005, Algorithm 3) and unique k-best against brute force."""

from __future__ import annotations

import random
from itertools import groupby

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.mt.hypergraph import HypergraphBuilder
from service.mt.inference import viterbi
from service.mt.kbest import LazyKBest, kbest, unique_kbest
from service.mt.rules import GLUE
from tests.mt.forests import (
    TOY_WEIGHTS,
    WP,
    P,
    brute_force,
    random_forest,
    random_weights,
    toy_forest,
)

SEEDS = st.integers(min_value=0, max_value=2**32 - 1)
PROPERTY = settings(max_examples=150, derandomize=True, deadline=None)

# All 18 derivations of the toy forest, worked out by hand (see tests/mt/forests.py),
# grouped by score; "(phrase)" marks the derivation through the phrase rule "the house".
TOY_BY_SCORE: list[tuple[float, list[str]]] = [
    (-4.0, ["the house burns"]),
    (-4.25, ["the house is burning", "the burns house"]),
    (-4.5, ["that house burns", "the house burns", "the is burning house"]),
    (-4.75, ["that house is burning", "the house is burning", "that burns house"]),
    (-5.0, ["that is burning house"]),
    (-5.25, ["the home burns"]),
    (-5.5, ["the home is burning", "the burns home"]),
    (-5.75, ["that home burns", "the is burning home"]),
    (-6.0, ["that home is burning", "that burns home"]),
    (-6.25, ["that is burning home"]),
]


def grouped(entries: list[tuple[float, str]]) -> list[tuple[float, list[str]]]:
    return [(s, sorted(t for _, t in g)) for s, g in groupby(entries, key=lambda x: x[0])]


def test_all_derivations_of_the_toy_forest_in_order() -> None:
    got = kbest(toy_forest(), TOY_WEIGHTS, 100)
    assert len(got) == 18
    assert grouped([(d.score, d.text) for d in got]) == [(s, sorted(t)) for s, t in TOY_BY_SCORE]
    assert got[0] == viterbi(toy_forest(), TOY_WEIGHTS)
    for d in got:
        assert sum(TOY_WEIGHTS[f] * v for f, v in d.features.items()) == pytest.approx(d.score)


def test_ties_are_broken_by_edge_id() -> None:
    # At -4.25 "the house is burning" (goal edge 11) comes before "the burns house" (edge 12).
    got = kbest(toy_forest(), TOY_WEIGHTS, 3)
    assert [d.text for d in got] == ["the house burns", "the house is burning", "the burns house"]
    assert [d.edges[0] for d in got] == [11, 11, 12]


def test_unique_kbest_of_the_toy_forest() -> None:
    got = unique_kbest(toy_forest(), TOY_WEIGHTS, 100)
    # 18 derivations, 16 strings: the phrase-rule derivations repeat two strings.
    assert len(got) == 16
    firsts: dict[str, float] = {}
    for s, texts in TOY_BY_SCORE:
        for t in texts:
            firsts.setdefault(t, s)
    assert {d.text: d.score for d in got} == firsts
    assert [d.score for d in got] == sorted(firsts.values(), reverse=True)
    assert got[0].text == "the house burns" and got[0].rule_ids[-3:] == (0, 2, 4)


def test_unique_kbest_examines_at_most_max_derivations() -> None:
    # The 2nd and 3rd derivations have new strings, the 5th repeats "the house burns" ...
    assert [d.text for d in unique_kbest(toy_forest(), TOY_WEIGHTS, 10, max_derivations=3)] == [
        "the house burns",
        "the house is burning",
        "the burns house",
    ]
    assert len(unique_kbest(toy_forest(), TOY_WEIGHTS, 2)) == 2


def test_many_derivations_with_one_string() -> None:
    # Two words, each with 3 translations that all print "x": 9 derivations, 1 string.
    b = HypergraphBuilder()
    a, c = b.add_node("X", (0, 1)), b.add_node("X", (1, 2))
    for v in (a, c):
        for i in range(3):
            b.add_edge(v, [], ["x"], {P: -float(i)})
    goal = b.add_node("S", (0, 2))
    b.add_edge(goal, [a, c], [0, 1], {GLUE: 1})
    hg = b.build(goal)
    assert [d.score for d in kbest(hg, {P: 1.0}, 20)] == [0, -1, -1, -2, -2, -2, -3, -3, -4]
    only = unique_kbest(hg, {P: 1.0}, 5)
    assert [(d.text, d.score) for d in only] == [("x x", 0.0)]
    assert unique_kbest(hg, {P: 1.0}, 5, max_derivations=0) == []


def test_goal_without_derivations_has_an_empty_kbest_list() -> None:
    b = HypergraphBuilder()
    x = b.add_node("X", (0, 1))
    goal = b.add_node("S", (0, 1))
    b.add_edge(goal, [x], [0], {WP: 1})
    hg = b.build(goal)
    assert kbest(hg, {}, 5) == []
    assert unique_kbest(hg, {}, 5) == []


def test_extractor_is_lazy_and_resumable() -> None:
    ex = LazyKBest(toy_forest(), TOY_WEIGHTS)
    third = ex.derivation(2)
    first = ex.derivation(0)
    assert third is not None and first is not None
    assert (first.score, third.score) == (-4.0, -4.25)
    assert ex.derivation(18) is None
    assert [d.score for d in ex] == [d.score for d in kbest(toy_forest(), TOY_WEIGHTS, 18)]


@PROPERTY
@given(seed=SEEDS)
def test_kbest_equals_sorted_brute_force_for_every_k(seed: int) -> None:
    rng = random.Random(seed)
    hg = random_forest(rng, shuffle=rng.random() < 0.3)
    weights = random_weights(rng)
    reference = brute_force(hg, weights)
    expected_scores = sorted((s for s, _, _ in reference), reverse=True)
    everything = kbest(hg, weights, len(reference) + 3)
    assert [d.score for d in everything] == expected_scores
    # All derivations, each once, each a real derivation with its own string and score.
    assert sorted(repr(d.tree) for d in everything) == sorted(repr(t) for _, _, t in reference)
    for d in everything:
        hg.check_derivation(d.tree)
        assert d.tokens == hg.yield_of(d.tree)
        assert sum(weights.get(f, 0.0) * v for f, v in d.features.items()) == d.score
    for k in range(len(reference) + 1):
        got = kbest(hg, weights, k)
        assert [d.score for d in got] == expected_scores[:k]
        assert got == everything[:k]  # a fresh extractor gives the same prefix


@PROPERTY
@given(seed=SEEDS)
def test_unique_kbest_equals_brute_force_distinct_strings(seed: int) -> None:
    rng = random.Random(seed)
    hg = random_forest(rng)
    weights = random_weights(rng)
    best_of: dict[tuple[str, ...], float] = {}
    for s, tokens, _ in brute_force(hg, weights):
        best_of[tokens] = max(s, best_of.get(tokens, s))
    expected = sorted(best_of.values(), reverse=True)
    for k in (1, 2, 5, len(best_of) + 1):
        got = unique_kbest(hg, weights, k, max_derivations=10**6)
        assert [d.score for d in got] == expected[:k]
        assert len({d.tokens for d in got}) == len(got)
        assert all(best_of[d.tokens] == d.score for d in got)
