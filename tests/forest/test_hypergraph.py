"""Hypergraph construction, the array view, edge weights, and inside/outside/Viterbi."""

from __future__ import annotations

import math
import random
from collections import Counter, defaultdict

import numpy as np
import pytest
from hypothesis import given, settings

from service.errors import ConfigurationError, InternalError, InvalidInputError
from service.forest.hypergraph import DerivationNode, HypergraphBuilder
from service.forest.inference import (
    edge_posteriors,
    enumerate_derivations,
    fast_viterbi,
    inside,
    node_posteriors,
    outside,
    viterbi,
    viterbi_backpointers,
    viterbi_scores,
)
from service.forest.semiring import COUNTING, LOG, REAL, TROPICAL
from service.mt.rules import GLUE, nt, target_yield
from tests.forest.forests import (
    SEEDS,
    TOY_WEIGHTS,
    WP,
    P,
    all_trees,
    brute_force,
    random_forest,
    random_weights,
    toy_forest,
)

PROPERTY = settings(max_examples=150, derandomize=True, deadline=None)


# --- construction ---------------------------------------------------------------------------
def test_target_yield_maps_gaps_to_tail_positions() -> None:
    assert target_yield(["the", nt(2), "of", nt(1)]) == ("the", 1, "of", 0)


def test_builder_keeps_ids_when_nodes_come_in_topological_order() -> None:
    b = HypergraphBuilder()
    x = b.add_node("X", (0, 1))
    s = b.add_node("S", (0, 1), state=("<s>", "a"))
    b.add_edge(x, [], ["a"], {P: -1.0})
    e = b.add_edge(s, [x], target_yield([nt(1)]), {GLUE: 1}, rule_id=7)
    hg = b.build(s)
    assert b.renumbering is None
    assert hg.goal == s
    assert hg.nodes[s].state == ("<s>", "a")
    assert hg.edges[e].tails == (x,)
    assert hg.edges[e].target == (0,)
    assert hg.edges[e].span == (0, 1)
    assert hg.edges[e].rule_id == 7
    assert hg.incoming(s) == (e,)


def test_builder_sorts_nodes_added_out_of_order() -> None:
    b = HypergraphBuilder()
    goal = b.add_node("S", (0, 2))  # added first, derived last
    right = b.add_node("X", (1, 2))
    left = b.add_node("X", (0, 1))
    b.add_edge(goal, [left, right], target_yield([nt(1), nt(2)]), {})
    b.add_edge(right, [], ["b"], {})
    b.add_edge(left, [], ["a"], {})
    hg = b.build(goal)
    assert b.renumbering == [2, 0, 1]
    assert hg.goal == 2
    assert [n.span for n in hg.nodes] == [(1, 2), (0, 1), (0, 2)]
    assert hg.edges[0].tails == (1, 0)
    assert viterbi(hg, {}).tokens == ("a", "b")


def test_builder_is_closed_after_build() -> None:
    b = HypergraphBuilder()
    v = b.add_node("X", (0, 1))
    b.add_edge(v, [], ["a"], {})
    b.build(v)
    with pytest.raises(InvalidInputError, match="already built"):
        b.add_edge(v, [], ["b"], {})


def test_arrays_agree_with_the_edges_also_when_renumbered() -> None:
    for seed in range(40):
        rng = random.Random(seed)
        hg = random_forest(rng, shuffle=True)
        a = hg.arrays()
        assert list(a.edge_head) == [e.head for e in hg.edges]
        for e in hg.edges:
            assert list(a.tail_nodes[a.tail_ptr[e.id] : a.tail_ptr[e.id + 1]]) == list(e.tails)
            terms = a.term_ids[a.term_ptr[e.id] : a.term_ptr[e.id + 1]]
            assert tuple(a.vocabulary[t] for t in terms) == e.target_terminals
            ids = a.feat_ids[a.feat_ptr[e.id] : a.feat_ptr[e.id + 1]]
            vals = a.feat_vals[a.feat_ptr[e.id] : a.feat_ptr[e.id + 1]]
            assert {a.feature_names[i]: v for i, v in zip(ids, vals, strict=True)} == e.features
        for v in range(hg.num_nodes):
            assert tuple(a.in_edges[a.in_ptr[v] : a.in_ptr[v + 1]]) == hg.incoming(v)
        w = random_weights(rng)
        by_hand = [sum(w.get(f, 0.0) * x for f, x in e.features.items()) for e in hg.edges]
        assert list(hg.edge_weights(w)) == pytest.approx(by_hand)


def test_cycle_is_rejected_with_the_node_named() -> None:
    b = HypergraphBuilder()
    u, v = b.add_node("X", (0, 1)), b.add_node("X", (0, 1))
    b.add_edge(u, [v], [0], {})
    b.add_edge(v, [u], [0], {})
    with pytest.raises(InvalidInputError, match="cycle through node 0"):
        b.build(v)


@pytest.mark.parametrize(
    ("tails", "target", "match"),
    [
        ([5], [0], "refers to node 5"),
        ([0], ["a"], "reference each of its 1 tails exactly once"),
        ([0], [0, 0], "exactly once"),
        ([0, 0], [0, 2], "exactly once"),
    ],
)
def test_bad_edges_are_rejected(tails: list[int], target: list[str | int], match: str) -> None:
    b = HypergraphBuilder()
    b.add_node("X", (0, 1))
    head = b.add_node("S", (0, 1))
    with pytest.raises(InvalidInputError, match=match):
        b.add_edge(head, tails, target, {})


def test_non_finite_feature_and_weight_are_rejected() -> None:
    b = HypergraphBuilder()
    v = b.add_node("X", (0, 1))
    with pytest.raises(InvalidInputError, match="finite"):
        b.add_edge(v, [], ["a"], {P: math.nan})
    with pytest.raises(InvalidInputError, match="LogPEgivenF=nan"):
        toy_forest().edge_weights({P: math.nan})


def test_bad_goal_and_bad_span() -> None:
    b = HypergraphBuilder()
    with pytest.raises(InvalidInputError, match="span"):
        b.add_node("X", (2, 1))
    b.add_node("X", (0, 1))
    with pytest.raises(InvalidInputError, match="goal node 3"):
        b.build(3)


# --- array view and weights -----------------------------------------------------------------
def test_arrays_of_the_toy_forest() -> None:
    hg = toy_forest()
    a = hg.arrays()
    assert (a.num_nodes, a.num_edges, a.goal) == (8, 13, 7)
    assert list(a.edge_head) == [0, 0, 1, 1, 2, 2, 3, 4, 5, 6, 6, 7, 7]
    assert list(a.arity) == [0, 0, 0, 0, 0, 0, 2, 0, 1, 2, 1, 2, 2]
    assert list(a.tail_nodes[a.tail_ptr[6] : a.tail_ptr[7]]) == [1, 2]
    assert list(a.in_edges[a.in_ptr[7] : a.in_ptr[8]]) == [11, 12]
    words = [a.vocabulary[t] for t in a.term_ids[a.term_ptr[5] : a.term_ptr[6]]]
    assert words == ["is", "burning"]
    assert list(np.diff(a.term_ptr)) == [1, 1, 1, 1, 1, 2, 0, 2, 0, 0, 0, 0, 0]
    assert a.feature_names == tuple(sorted([GLUE, P, WP]))


def test_feature_matrix_rows_are_the_dense_edge_vectors() -> None:
    hg = toy_forest()
    m = hg.feature_matrix([WP, P, "Missing"])
    assert m.shape == (13, 3)
    assert list(m[5]) == [2.0, -0.75, 0.0]
    assert list(m[11]) == [0.0, 0.0, 0.0]
    assert hg.feature_matrix([WP, P, "Missing"]) is m  # cached per name list


def test_edge_weights_are_dot_products_and_cached() -> None:
    hg = toy_forest()
    w = hg.edge_weights(TOY_WEIGHTS)
    by_hand = [-1.0, -1.5, -0.75, -2.0, -1.5, -1.75, -0.5, -2.5] + [-0.25] * 5
    assert list(w) == pytest.approx(by_hand)
    assert hg.edge_weights(dict(reversed(TOY_WEIGHTS.items()))) is w
    other = hg.edge_weights({P: 2.0})
    assert other[0] == -1.0
    assert not w.flags.writeable


# --- Viterbi by hand --------------------------------------------------------------------------
def test_viterbi_of_the_toy_forest_by_hand() -> None:
    hg = toy_forest()
    d = viterbi(hg, TOY_WEIGHTS)
    assert d.score == pytest.approx(-4.0)
    assert d.tokens == ("the", "house", "burns")
    assert d.features == pytest.approx({P: -1.75, WP: 3.0, GLUE: 3.0})
    assert d.edges == (11, 9, 8, 0, 2, 4)
    assert d.rule_ids == (-1, -1, -1, 0, 2, 4)
    assert d.spans == ((0, 3), (0, 2), (0, 1), (0, 1), (1, 2), (2, 3))
    s01 = DerivationNode(8, (DerivationNode(0),))
    s02 = DerivationNode(9, (s01, DerivationNode(2)))
    assert d.tree == DerivationNode(11, (s02, DerivationNode(4)))
    assert d.translation().text == "the house burns"


def test_viterbi_follows_the_weights() -> None:
    # Rewarding words makes "is burning" (2 words) beat "burns", and the swap rule loses.
    d = viterbi(toy_forest(), {P: 1.0, WP: 1.0})
    assert d.tokens == ("the", "house", "is", "burning")
    assert d.score == pytest.approx(-0.5 + 1 - 0.25 + 1 - 0.75 + 2)


def test_inside_values_of_the_toy_forest_by_hand() -> None:
    alpha = inside(toy_forest(), TOY_WEIGHTS, TROPICAL)
    assert alpha == pytest.approx([-1.0, -0.75, -1.5, -2.75, -2.5, -1.25, -2.25, -4.0])
    assert inside(toy_forest(), TOY_WEIGHTS, COUNTING) == [2, 2, 2, 4, 1, 2, 5, 18]


def test_viterbi_needs_a_selective_semiring() -> None:
    with pytest.raises(ConfigurationError, match="selective"):
        viterbi_backpointers(toy_forest(), TOY_WEIGHTS, LOG)


def test_goal_without_derivation_is_an_internal_error() -> None:
    b = HypergraphBuilder()
    x = b.add_node("X", (0, 1))
    goal = b.add_node("S", (0, 1))
    b.add_edge(goal, [x], [0], {})  # x has no incoming edge
    hg = b.build(goal)
    assert inside(hg, {}, COUNTING) == [0, 0]
    for f in (viterbi, fast_viterbi, edge_posteriors):
        with pytest.raises(InternalError, match="no derivation of its goal"):
            f(hg, {})


def test_edge_weight_array_must_match_the_forest() -> None:
    with pytest.raises(InvalidInputError, match="13 edges"):
        inside(toy_forest(), np.zeros(3), TROPICAL)
    with pytest.raises(InvalidInputError, match="finite"):
        inside(toy_forest(), np.full(13, np.nan), TROPICAL)


# --- against brute force on random forests --------------------------------------------------
def logsumexp(xs: list[float]) -> float:
    if not xs:
        return -math.inf
    m = max(xs)
    return m + math.log(sum(math.exp(x - m) for x in xs))


@PROPERTY
@given(seed=SEEDS)
def test_inside_equals_brute_force_sums(seed: int) -> None:
    rng = random.Random(seed)
    hg = random_forest(rng, shuffle=rng.random() < 0.3)
    weights = random_weights(rng)
    derivations = brute_force(hg, weights)
    scores = [s for s, _, _ in derivations]
    assert inside(hg, weights, COUNTING)[hg.goal] == len(derivations)
    assert inside(hg, weights, LOG)[hg.goal] == pytest.approx(logsumexp(scores))
    assert inside(hg, weights, REAL)[hg.goal] == pytest.approx(sum(math.exp(s) for s in scores))
    assert inside(hg, weights, TROPICAL)[hg.goal] == max(scores, default=-math.inf)
    assert sorted(map(repr, enumerate_derivations(hg))) == sorted(
        repr(t) for _, _, t in derivations
    )


@PROPERTY
@given(seed=SEEDS)
def test_viterbi_is_a_best_derivation(seed: int) -> None:
    rng = random.Random(seed)
    hg = random_forest(rng)
    weights = random_weights(rng)
    derivations = brute_force(hg, weights)
    if not derivations:
        return
    d = viterbi(hg, weights)
    hg.check_derivation(d.tree)
    assert d.score == max(s for s, _, _ in derivations)
    assert d.tokens == hg.yield_of(d.tree)
    feats = Counter[str]()
    for e in d.edges:
        feats.update(hg.edges[e].features)
    assert d.features == pytest.approx(dict(feats))
    assert sum(weights.get(f, 0.0) * v for f, v in d.features.items()) == pytest.approx(d.score)


@PROPERTY
@given(seed=SEEDS)
def test_edge_posteriors_are_expected_counts(seed: int) -> None:
    rng = random.Random(seed)
    hg = random_forest(rng)
    weights = random_weights(rng)
    derivations = brute_force(hg, weights)
    if not derivations:
        return
    z = sum(math.exp(s) for s, _, _ in derivations)
    expected = np.zeros(hg.num_edges)
    for s, _, tree in derivations:
        for e in tree.preorder():
            expected[e] += math.exp(s) / z
    mu = edge_posteriors(hg, weights)
    assert mu == pytest.approx(expected, abs=1e-9)
    # Derived properties: the goal is used once; each node is entered as often as its incoming
    # edges are used, and (below the goal) as often as edges use it as a tail.
    nu = node_posteriors(hg, weights)
    assert sum(mu[e] for e in hg.incoming(hg.goal)) == pytest.approx(1.0)
    as_tail = np.zeros(hg.num_nodes)
    for edge in hg.edges:
        for u in edge.tails:
            as_tail[u] += mu[edge.id]
    for v in range(hg.num_nodes):
        assert sum(mu[e] for e in hg.incoming(v)) == pytest.approx(nu[v], abs=1e-9)
        if v != hg.goal:
            assert as_tail[v] == pytest.approx(nu[v], abs=1e-9)


@PROPERTY
@given(seed=SEEDS)
def test_outside_times_inside_in_the_real_semiring(seed: int) -> None:
    rng = random.Random(seed)
    hg = random_forest(rng)
    weights = random_weights(rng)
    alpha = inside(hg, weights, REAL)
    beta = outside(hg, weights, REAL, alpha)
    assert beta[hg.goal] == 1.0
    assert alpha[hg.goal] * beta[hg.goal] == alpha[hg.goal]
    # Z = Σ_{e ∈ in(v)} β(v) W(e) Π α(tails) summed over the goal's incoming edges, and for
    # every node v: α(v) β(v) = Σ over the derivations through v of (uses of v) · weight.
    through: dict[int, float] = defaultdict(float)
    for s, _, tree in brute_force(hg, weights):
        stack = [(tree, hg.goal)]
        while stack:
            t, v = stack.pop()
            through[v] += math.exp(s)
            stack.extend(zip(t.children, hg.edges[t.edge].tails, strict=True))
    for v in range(hg.num_nodes):
        assert alpha[v] * beta[v] == pytest.approx(through.get(v, 0.0), rel=1e-9, abs=1e-12)


@PROPERTY
@given(seed=SEEDS)
def test_fast_viterbi_equals_generic(seed: int) -> None:
    rng = random.Random(seed)
    hg = random_forest(rng, max_nodes=9, max_derivations=10**6)
    weights = random_weights(rng)
    best, back = viterbi_backpointers(hg, weights)
    fast_best, fast_back = viterbi_scores(hg, weights)
    assert list(fast_best) == best
    assert list(fast_back) == back
    if back[hg.goal] >= 0:
        assert fast_viterbi(hg, weights) == viterbi(hg, weights)
    # A batch of weight vectors gives one column per vector.
    batch = np.stack([hg.edge_weights(random_weights(rng)) for _ in range(3)], axis=1)
    many_best, many_back = viterbi_scores(hg, batch)
    for c in range(3):
        b1, k1 = viterbi_backpointers(hg, np.ascontiguousarray(batch[:, c]))
        assert list(many_best[:, c]) == b1
        assert list(many_back[:, c]) == k1


def test_fast_viterbi_on_the_toy_forest() -> None:
    d = fast_viterbi(toy_forest(), TOY_WEIGHTS)
    assert d.tokens == ("the", "house", "burns")
    assert d.score == pytest.approx(-4.0)


def test_random_forests_cover_the_shapes_the_algorithms_must_handle() -> None:
    shapes = Counter[str]()
    for seed in range(200):
        hg = random_forest(random.Random(seed))
        shapes.update(f"arity{e.arity}" for e in hg.edges)
        shapes.update("several-incoming" for v in range(hg.num_nodes) if len(hg.incoming(v)) > 1)
        uses = Counter(t for e in hg.edges for t in e.tails)
        shapes.update("shared" for n in uses.values() if n > 1)
        shapes.update("no-derivation" for v in range(hg.num_nodes) if not hg.incoming(v))
        if len(all_trees(hg, hg.goal)) > 1:
            shapes["ambiguous-goal"] += 1
    for shape in ("arity0", "arity1", "arity2", "several-incoming", "shared", "no-derivation"):
        assert shapes[shape] > 20, shape
    assert shapes["ambiguous-goal"] > 50
