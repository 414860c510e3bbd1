"""Lazy k-best (Huang & Chiang 2005, Algorithm 3) and unique k-best against brute force.

The array-based extractor is also checked entry by entry against the previous object-based
implementation (``ObjectLazyKBest`` below, kept verbatim as the slow reference), on forests
whose edge objects are made lazily (``Hypergraph.from_arrays``) and counted.
"""

from __future__ import annotations

import dataclasses
import heapq
import math
import random
import time
from itertools import groupby
from typing import Literal

import numpy as np
import pytest
from hypothesis import given, settings

import service.forest.kbest as kbest_module
from service.core.settings import Settings
from service.forest.hypergraph import (
    Derivation,
    DerivationNode,
    Hyperedge,
    Hypergraph,
    HypergraphBuilder,
)
from service.forest.inference import Weights, resolve_edge_weights, viterbi, viterbi_backpointers
from service.forest.kbest import LazyKBest, kbest, unique_kbest
from service.forest.semiring import TROPICAL
from service.mt.rules import GLUE
from tests.forest.forests import (
    SEEDS,
    TOY_WEIGHTS,
    WP,
    P,
    arity_three_forest,
    brute_force,
    random_forest,
    random_weights,
    toy_forest,
)

PROPERTY = settings(max_examples=150, derandomize=True, deadline=None)
# unique_kbest: the compiled search (the default) and the Python reference
ENGINES = pytest.mark.parametrize("engine", ["compiled", "reference"])
Engine = Literal["compiled", "reference"]

# All 18 derivations of the toy forest, worked out by hand (see tests/forest/forests.py),
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


@ENGINES
def test_unique_kbest_of_the_toy_forest(engine: Engine) -> None:
    got = unique_kbest(toy_forest(), TOY_WEIGHTS, 100, engine=engine)
    # 18 derivations, 16 strings: the phrase-rule derivations repeat two strings.
    assert len(got) == 16
    firsts: dict[str, float] = {}
    for s, texts in TOY_BY_SCORE:
        for t in texts:
            firsts.setdefault(t, s)
    assert {d.text: d.score for d in got} == firsts
    assert [d.score for d in got] == sorted(firsts.values(), reverse=True)
    assert got[0].text == "the house burns" and got[0].rule_ids[-3:] == (0, 2, 4)


@ENGINES
def test_unique_kbest_examines_at_most_max_derivations(engine: Engine) -> None:
    # The 2nd and 3rd derivations have new strings, the 5th repeats "the house burns" ...
    assert [
        d.text
        for d in unique_kbest(toy_forest(), TOY_WEIGHTS, 10, max_derivations=3, engine=engine)
    ] == [
        "the house burns",
        "the house is burning",
        "the burns house",
    ]
    assert len(unique_kbest(toy_forest(), TOY_WEIGHTS, 2, engine=engine)) == 2


@ENGINES
def test_many_derivations_with_one_string(engine: Engine) -> None:
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
    only = unique_kbest(hg, {P: 1.0}, 5, engine=engine)
    assert [(d.text, d.score) for d in only] == [("x x", 0.0)]
    assert unique_kbest(hg, {P: 1.0}, 5, max_derivations=0, engine=engine) == []


@ENGINES
def test_goal_without_derivations_has_an_empty_kbest_list(engine: Engine) -> None:
    b = HypergraphBuilder()
    x = b.add_node("X", (0, 1))
    goal = b.add_node("S", (0, 1))
    b.add_edge(goal, [x], [0], {WP: 1})
    hg = b.build(goal)
    assert kbest(hg, {}, 5) == []
    assert unique_kbest(hg, {}, 5, engine=engine) == []


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


@ENGINES
@PROPERTY
@given(seed=SEEDS)
def test_unique_kbest_equals_brute_force_distinct_strings(seed: int, engine: Engine) -> None:
    rng = random.Random(seed)
    hg = random_forest(rng)
    weights = random_weights(rng)
    best_of: dict[tuple[str, ...], float] = {}
    for s, tokens, _ in brute_force(hg, weights):
        best_of[tokens] = max(s, best_of.get(tokens, s))
    expected = sorted(best_of.values(), reverse=True)
    for k in (1, 2, 5, len(best_of) + 1):
        got = unique_kbest(hg, weights, k, max_derivations=10**6, engine=engine)
        assert [d.score for d in got] == expected[:k]
        assert len({d.tokens for d in got}) == len(got)
        assert all(best_of[d.tokens] == d.score for d in got)


# --- the slow reference: the previous, object-based implementation ------------------------------
_Entry = tuple[float, int, tuple[int, ...]]


class ObjectLazyKBest:
    """SLOW REFERENCE — the previous ``LazyKBest`` (Algorithm 3 over ``hg.edges`` objects and a
    heap of every incoming edge per node), kept verbatim apart from its name and docstrings, for
    the tests below and the before/after comparison of ``bench/bench_kbest.py``.
    """

    def __init__(self, hg: Hypergraph, weights: Weights) -> None:
        self.hg = hg
        self._w = resolve_edge_weights(hg, weights)
        self._viterbi, self._back = viterbi_backpointers(hg, self._w, TROPICAL)
        self._found: dict[int, list[_Entry]] = {}
        self._cand: dict[int, list[_Entry]] = {}
        self._pushed: dict[int, set[tuple[int, tuple[int, ...]]]] = {}
        self._exhausted: set[int] = set()
        self._trees: dict[tuple[int, int], DerivationNode] = {}
        self._yields: dict[tuple[int, int], tuple[str, ...]] = {}

    def _derivations(self, v: int) -> list[_Entry]:
        found = self._found.get(v)
        if found is None:
            e = self._back[v]
            found = [] if e < 0 else [(self._viterbi[v], e, (0,) * self.hg.edges[e].arity)]
            self._found[v] = found
        return found

    def _get_candidates(self, v: int) -> list[_Entry]:
        heap: list[_Entry] = []
        for e in self.hg.incoming(v):
            tails = self.hg.edges[e].tails
            if e == self._back[v] or any(self._back[u] < 0 for u in tails):
                continue
            score = float(self._w[e])
            for u in tails:
                score += self._viterbi[u]
            heap.append((-score, e, (0,) * len(tails)))
        heapq.heapify(heap)
        self._pushed[v] = {(e, j) for _, e, j in heap}
        if self._back[v] >= 0:
            self._pushed[v].add((self._back[v], (0,) * self.hg.edges[self._back[v]].arity))
        self._cand[v] = heap
        return heap

    def _lazy_kth_best(self, v: int, k: int) -> None:
        found = self._derivations(v)
        if len(found) >= k or v in self._exhausted or not found:
            return
        cand = self._cand.get(v)
        if cand is None:
            cand = self._get_candidates(v)
        while len(found) < k:
            _, e, j = found[-1]
            self._lazy_next(v, e, j)
            if not cand:
                self._exhausted.add(v)
                return
            neg, e, j = heapq.heappop(cand)
            found.append((-neg, e, j))

    def _lazy_next(self, v: int, e: int, j: tuple[int, ...]) -> None:
        tails = self.hg.edges[e].tails
        for i, u in enumerate(tails):
            jj = (*j[:i], j[i] + 1, *j[i + 1 :])
            if (e, jj) in self._pushed[v]:
                continue
            self._lazy_kth_best(u, jj[i] + 1)
            if jj[i] < len(self._found[u]):
                score = float(self._w[e])
                for t, r in zip(tails, jj, strict=True):
                    score += self._derivations(t)[r][0]
                heapq.heappush(self._cand[v], (-score, e, jj))
                self._pushed[v].add((e, jj))

    def entry(self, j: int, node: int | None = None) -> _Entry | None:
        v = self.hg.goal if node is None else node
        self._lazy_kth_best(v, j + 1)
        found = self._found[v]
        if j >= len(found):
            return None
        score, e, ranks = found[j]
        return score, e, ranks

    def tokens(self, v: int, j: int) -> tuple[str, ...]:
        key = (v, j)
        out = self._yields.get(key)
        if out is None:
            _, e, ranks = self._derivations(v)[j]
            edge = self.hg.edges[e]
            parts: list[str] = []
            for s in edge.target:
                if isinstance(s, str):
                    parts.append(s)
                else:
                    parts.extend(self.tokens(edge.tails[s], ranks[s]))
            out = tuple(parts)
            self._yields[key] = out
        return out

    def tree(self, v: int, j: int) -> DerivationNode:
        key = (v, j)
        tree = self._trees.get(key)
        if tree is None:
            _, e, ranks = self._derivations(v)[j]
            tails = self.hg.edges[e].tails
            tree = DerivationNode(
                e, tuple(self.tree(u, r) for u, r in zip(tails, ranks, strict=True))
            )
            self._trees[key] = tree
        return tree


def old_unique_kbest(
    hg: Hypergraph, weights: Weights, k: int, max_derivations: int | None = None
) -> list[Derivation]:
    """SLOW REFERENCE — the previous ``unique_kbest``: at most ``100·k`` derivations examined."""
    limit = 100 * k if max_derivations is None else max_derivations
    extractor = ObjectLazyKBest(hg, weights)
    seen: set[tuple[str, ...]] = set()
    out: list[Derivation] = []
    goal = hg.goal
    for j in range(limit):
        if len(out) >= k:
            break
        entry = extractor.entry(j)
        if entry is None:
            break
        tokens = extractor.tokens(goal, j)
        if tokens in seen:
            continue
        seen.add(tokens)
        out.append(hg.derivation(extractor.tree(goal, j), entry[0]))
    return out


def _old_unique_strings(hg: Hypergraph, weights: Weights, k: int) -> list[tuple[str, ...]]:
    return [d.tokens for d in old_unique_kbest(hg, weights, k)]


def array_backed(hg: Hypergraph) -> tuple[Hypergraph, list[int]]:
    """``hg`` as an array-backed forest whose edge objects are made (and listed) on access."""
    made: list[int] = []

    def edge(e: int) -> Hyperedge:
        made.append(e)
        return dataclasses.replace(hg.edges[e])

    return Hypergraph.from_arrays(hg.arrays(), lambda v: hg.nodes[v], edge), made


def trees_edges(trees: list[DerivationNode]) -> set[int]:
    return {e for t in trees for e in t.preorder()}


@PROPERTY
@given(seed=SEEDS)
def test_array_extractor_equals_the_object_based_reference(seed: int) -> None:
    rng = random.Random(seed)
    hg = random_forest(rng, shuffle=rng.random() < 0.3)
    weights = random_weights(rng)
    lazy, made = array_backed(hg)
    new, old = LazyKBest(lazy, weights), ObjectLazyKBest(hg, weights)
    # Every node's whole list, the goal's first; entries are compared exactly (score, edge,
    # tail ranks), so the order of ties is the reference's too.
    for v in (hg.goal, *range(hg.num_nodes)):
        j = 0
        while True:
            got = new.entry(j, v)
            assert got == old.entry(j, v)
            if got is None:
                break
            j += 1
    assert made == []  # scores and ranks come from the arrays alone
    used: list[DerivationNode] = []
    for v in range(hg.num_nodes):
        for j in range(len(old._found[v])):
            assert new.tokens(v, j) == old.tokens(v, j)
            used.append(new.tree(v, j))
            assert new.tree(v, j) is new.tree(v, j)
            hg.check_derivation(used[-1], v)
    # only edges of extracted derivations were asked for their target, each once
    assert set(made) <= trees_edges(used) and len(made) == len(set(made))
    for k in (1, 3):  # the count bound of the previous unique_kbest gives the same lists
        assert unique_kbest(lazy, weights, k, max_derivations=100 * k) == old_unique_kbest(
            hg, weights, k
        )


@pytest.mark.parametrize("seed", range(40))
def test_edges_of_arity_three_equal_the_reference(seed: int) -> None:
    # The decoder's rules have at most two gaps; the generic successor rule is checked here.
    rng = random.Random(seed)
    hg = arity_three_forest(rng)
    weights = {P: 1.0, GLUE: -0.5}
    new, old = LazyKBest(hg, weights), ObjectLazyKBest(hg, weights)
    for v in (hg.goal, *range(hg.num_nodes)):
        j = 0
        while (got := new.entry(j, v)) == old.entry(j, v) and got is not None:
            assert new.tokens(v, j) == old.tokens(v, j)
            j += 1
        assert got is None and old.entry(j, v) is None, (v, j)
    assert len(new._found[hg.goal]) == len(brute_force(hg, weights))


@ENGINES
def test_edge_objects_are_made_only_for_derivations_used(engine: Engine) -> None:
    # A forest with many edges, of which few lie on the 3 best strings.
    b = HypergraphBuilder()
    words = [b.add_node("X", (i, i + 1)) for i in range(4)]
    for i, v in enumerate(words):
        for r in range(200):
            b.add_edge(v, [], [f"w{i}.{r}"], {P: -r / 7})
    prev = b.add_node("S", (0, 1))
    b.add_edge(prev, [words[0]], [0], {GLUE: 1})
    for i, v in enumerate(words[1:], start=2):
        s = b.add_node("S", (0, i))
        b.add_edge(s, [prev, v], [0, 1], {GLUE: 1})
        b.add_edge(s, [prev, v], ["and", 1, 0], {GLUE: 1, P: -0.5})  # swapped, with a word
        prev = s
    hg = b.build(prev)
    lazy, made = array_backed(hg)
    got = unique_kbest(lazy, {P: 1.0, GLUE: -0.1}, 3, engine=engine)
    assert [d.tokens for d in got] == _old_unique_strings(hg, {P: 1.0, GLUE: -0.1}, 3)
    assert set(made) <= trees_edges([d.tree for d in got]) | set(range(800, hg.num_edges))
    assert len(set(made)) < 30 < hg.num_edges


@ENGINES
def test_equal_strings_under_different_word_ids_are_one_string(engine: Engine) -> None:
    # An array-backed forest may give one string two word ids: it is still one string.
    b = HypergraphBuilder()
    x = b.add_node("X", (0, 1))
    b.add_edge(x, [], ["a"], {P: 0.0})
    b.add_edge(x, [], ["b"], {P: -1.0})
    b.add_edge(x, [], ["c"], {P: -2.0})
    hg = b.build(x)
    a = hg.arrays()
    twice = dataclasses.replace(
        a, term_ids=np.array([0, 1, 2], dtype=np.int64), vocabulary=("a", "a", "c")
    )
    forest = Hypergraph.from_arrays(twice, lambda v: hg.nodes[v], lambda e: hg.edges[e])
    ex = LazyKBest(forest, {P: 1.0})
    assert ex.entry(2) is not None and ex.entry(3) is None
    assert [ex.tokens(x, j) for j in range(3)] == [("a",), ("a",), ("c",)]
    assert [d.score for d in unique_kbest(forest, {P: 1.0}, 3, engine=engine)] == [0.0, -2.0]


# --- spurious ambiguity and the time budget -----------------------------------------------------
def ambiguous_forest(positions: int, synonyms: int) -> Hypergraph:
    """``positions`` words, each with ``synonyms`` translations printing "x" (scores 0, −0.01,
    …) and one "y" (−1): ``synonyms^positions`` derivations of "x … x" rank first, then the
    strings with one "y", and so on (``2^positions`` strings).
    """
    b = HypergraphBuilder()
    prev = -1
    for i in range(positions):
        x = b.add_node("X", (i, i + 1))
        for r in range(synonyms):
            b.add_edge(x, [], ["x"], {P: -0.01 * r})
        b.add_edge(x, [], ["y"], {P: -1.0})
        s = b.add_node("S", (0, i + 1))
        if prev < 0:
            b.add_edge(s, [x], [0], {GLUE: 1})
        else:
            b.add_edge(s, [prev, x], [0, 1], {GLUE: 1})
        prev = s
    return b.build(prev)


@ENGINES
def test_unique_kbest_sees_past_spurious_ambiguity(engine: Engine) -> None:
    hg = ambiguous_forest(3, 10)  # 1,000 derivations of "x x x" before any other string
    best_of: dict[tuple[str, ...], float] = {}
    for s, tokens, _ in brute_force(hg, {P: 1.0}):
        best_of[tokens] = max(s, best_of.get(tokens, s))
    expected = sorted(best_of.items(), key=lambda ts: -ts[1])
    # no time budget: how far a budget gets depends on the machine (the reference engine under
    # a loaded test run examined too few derivations to see every string)
    got = unique_kbest(hg, {P: 1.0}, 5, time_budget=math.inf, engine=engine)
    assert [(d.tokens, d.score) for d in got] == expected[:5]
    # the previous bound of 100·k derivations stopped at the first string
    assert _old_unique_strings(hg, {P: 1.0}, 5) == [("x", "x", "x")]
    assert len(unique_kbest(hg, {P: 1.0}, 5, max_derivations=500, engine=engine)) == 1
    # and every string when asked for more than there are (the derivations run out)
    assert len(unique_kbest(hg, {P: 1.0}, 100, time_budget=math.inf, engine=engine)) == 8


@ENGINES
def test_unique_kbest_stops_at_the_time_budget(engine: Engine) -> None:
    hg = ambiguous_forest(5, 10)  # 100,000 derivations of one string before the second
    start = time.perf_counter()
    got = unique_kbest(hg, {P: 1.0}, 2, time_budget=0.01, engine=engine)
    assert time.perf_counter() - start < 5.0
    assert [d.text for d in got] == ["x x x x x"]  # 10^5 derivations do not fit in 0.01 s


@ENGINES
def test_the_time_budget_bounds_the_search(engine: Engine) -> None:
    hg = ambiguous_forest(3, 10)
    assert len(unique_kbest(hg, {P: 1.0}, 2, engine=engine)) == 2  # the default budget
    assert Settings().kbest_time_budget_s == kbest_module.UNIQUE_KBEST_TIME_BUDGET_S
    # the clock is read after the first few hundred derivations: one string, never none
    tight = unique_kbest(hg, {P: 1.0}, 2, time_budget=1e-9, engine=engine)
    assert [d.text for d in tight] == ["x x x"]
    assert len(unique_kbest(hg, {P: 1.0}, 2, time_budget=60.0, engine=engine)) == 2
    # a count bound alone is not timed
    assert len(unique_kbest(hg, {P: 1.0}, 2, max_derivations=2000, engine=engine)) == 2
    # a forest with fewer derivations than one clock interval is searched to the end
    full = unique_kbest(toy_forest(), TOY_WEIGHTS, 100, max_derivations=10**6, engine=engine)
    assert unique_kbest(toy_forest(), TOY_WEIGHTS, 100, time_budget=0.0, engine=engine) == full
