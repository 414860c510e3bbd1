"""Pruning what the goal cannot reach: the reference on hand-made and random forests, and the
compiled decoder's pass on the kernel's arrays against it.

Removing the nodes and edges that no top-down walk from the goal meets changes no derivation of
the goal: the derivations (strings, scores, features, rules), the Viterbi 1-best, the k-best
lists and the inside values at the goal stay the same, only ids are renumbered (in order).
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings

from service.forest.hypergraph import Hypergraph, prune_unreachable, reachable
from service.forest.inference import fast_viterbi, inside, viterbi
from service.forest.kbest import kbest
from service.forest.semiring import COUNTING, LOG
from service.mt.bundle import ModelBundle
from service.mt.decoder import Decoder, DecoderConfig, Forest
from service.mt.decoder.compiled import CompiledDecoder
from service.mt.decoder.reference import ReferenceDecoder
from tests.forest.forests import (
    SEEDS,
    TOY_WEIGHTS,
    brute_force,
    random_forest,
    random_weights,
    toy_forest,
)
from tests.mt.test_compiled_decoder import (
    arrays_difference,
    forest_difference,
)

PROPERTY = settings(max_examples=200, derandomize=True, deadline=None)


def with_goal(hg: Hypergraph, goal: int) -> Hypergraph:
    return Hypergraph(hg.nodes, hg.edges, goal)


def test_the_toy_forest_below_s02_by_hand() -> None:
    # nodes: x01 0, x12 1, x23 2, x13 3, x02 4, s01 5, s02 6, s03 7; S[0,2] derives "das Haus"
    # from X[0,1] X[1,2] (through S[0,1]) or X[0,2]: X[2,3], X[1,3] and S[0,3] are unreachable
    hg = with_goal(toy_forest(), 6)
    assert reachable(hg) == ([0, 1, 4, 5, 6], [0, 1, 2, 3, 7, 8, 9, 10])
    pruned = prune_unreachable(hg)
    assert (pruned.num_nodes, pruned.num_edges, pruned.goal) == (5, 8, 4)
    assert [(v.id, v.label, v.span) for v in pruned.nodes] == [
        (0, "X", (0, 1)),
        (1, "X", (1, 2)),
        (2, "X", (0, 2)),
        (3, "S", (0, 1)),
        (4, "S", (0, 2)),
    ]
    assert [(e.id, e.head, e.tails, e.rule_id) for e in pruned.edges] == [
        (0, 0, (), 0),
        (1, 0, (), 1),
        (2, 1, (), 2),
        (3, 1, (), 3),
        (4, 2, (), 7),
        (5, 3, (0,), -1),
        (6, 4, (3, 1), -1),
        (7, 4, (2,), -1),
    ]
    assert [pruned.incoming(v) for v in range(5)] == [(0, 1), (2, 3), (4,), (5,), (6, 7)]
    for e in pruned.edges:  # targets and features travel with their edges
        old = hg.edges[[0, 1, 2, 3, 7, 8, 9, 10][e.id]]
        assert (e.target, e.features, e.span) == (old.target, old.features, old.span)
    a = pruned.arrays()
    assert a.vocabulary == ("the", "that", "house", "home")  # "burns" only below X[2,3]
    assert (
        viterbi(pruned, TOY_WEIGHTS).tokens
        == viterbi(hg, TOY_WEIGHTS).tokens
        == (
            "the",
            "house",
        )
    )


def test_a_forest_the_goal_reaches_entirely_is_returned_as_is() -> None:
    hg = toy_forest()
    assert reachable(hg) == (list(range(8)), list(range(13)))
    assert prune_unreachable(hg) is hg


def test_a_leaf_goal_keeps_itself() -> None:
    hg = with_goal(toy_forest(), 2)  # X[2,3]: two lexical edges
    pruned = prune_unreachable(hg)
    assert (pruned.num_nodes, pruned.num_edges, pruned.goal) == (1, 2, 0)
    assert [e.target for e in pruned.edges] == [("burns",), ("is", "burning")]


def _closure(hg: Hypergraph) -> set[int]:
    """Reachable nodes by fixed-point iteration over the edges (independent of the search)."""
    reached = {hg.goal}
    changed = True
    while changed:
        changed = False
        for e in hg.edges:
            if e.head in reached and not reached.issuperset(e.tails):
                reached.update(e.tails)
                changed = True
    return reached


def _derivations(hg: Hypergraph, weights: dict[str, float]) -> list[tuple[object, ...]]:
    """Every derivation of the goal, without ids: score, string, and per edge in preorder
    (rule, span, target, features)."""
    out = []
    for score, tokens, tree in brute_force(hg, weights):
        edges = tuple(
            (
                hg.edges[e].rule_id,
                hg.edges[e].span,
                hg.edges[e].target,
                sorted(hg.edges[e].features.items()),
            )
            for e in tree.preorder()
        )
        out.append((score, tokens, edges))
    return sorted(out, key=repr)


@PROPERTY
@given(seed=SEEDS)
def test_pruning_changes_no_derivation_of_the_goal(seed: int) -> None:
    rng = random.Random(seed)
    hg = random_forest(rng, max_nodes=9, shuffle=rng.random() < 0.3)
    if rng.random() < 0.6:  # a goal below the last node leaves more to prune
        hg = with_goal(hg, rng.randrange(hg.num_nodes))
    weights = random_weights(rng)
    pruned = prune_unreachable(hg)
    nodes, edges = reachable(hg)
    assert set(nodes) == _closure(hg)
    assert edges == [e.id for e in hg.edges if e.head in _closure(hg)]
    # the sub-forest: same nodes and edges in the same order, renumbered
    assert [(v.label, v.span) for v in pruned.nodes] == [
        (hg.nodes[v].label, hg.nodes[v].span) for v in nodes
    ]
    assert pruned.goal == nodes.index(hg.goal)
    for new, old in enumerate(edges):
        x, y = pruned.edges[new], hg.edges[old]
        assert nodes[x.head] == y.head
        assert tuple(nodes[t] for t in x.tails) == y.tails
        assert (x.target, x.features, x.rule_id) == (y.target, y.features, y.rule_id)
    for v, old in enumerate(nodes):
        assert [edges[e] for e in pruned.incoming(v)] == list(hg.incoming(old))
    # every derivation of the goal, its score and string, are unchanged
    assert _derivations(pruned, weights) == _derivations(hg, weights)
    assert inside(pruned, weights, COUNTING)[pruned.goal] == inside(hg, weights, COUNTING)[hg.goal]
    assert inside(pruned, weights, LOG)[pruned.goal] == inside(hg, weights, LOG)[hg.goal]
    if inside(hg, weights, COUNTING)[hg.goal] == 0:
        return
    a, b = viterbi(hg, weights), viterbi(pruned, weights)
    assert (b.score, b.tokens, b.features, b.rule_ids) == (
        a.score,
        a.tokens,
        a.features,
        a.rule_ids,
    )
    assert [edges[e] for e in b.edges] == list(a.edges)
    fa, fb = fast_viterbi(hg, weights), fast_viterbi(pruned, weights)
    assert (fb.score, fb.tokens) == (fa.score, fa.tokens)
    ka, kb = kbest(hg, weights, 50), kbest(pruned, weights, 50)
    assert [(d.score, d.tokens, d.rule_ids) for d in kb] == [
        (d.score, d.tokens, d.rule_ids) for d in ka
    ]
    assert [[edges[e] for e in d.edges] for d in kb] == [list(d.edges) for d in ka]


# --- the decoders ---------------------------------------------------------------------------
def _decoders(bundle: ModelBundle, pop: int, use_lm: bool, prune: bool) -> tuple[Decoder, Decoder]:
    config = DecoderConfig(pop_limit=pop, use_lm=use_lm, prune_unreachable=prune)
    weights = bundle.active_weights().weights
    ref = ReferenceDecoder(bundle.grammar, bundle.lm, weights, config)
    fast = CompiledDecoder(bundle.grammar, bundle.lm, weights, config, bundle.lm_table)
    return ref, fast


TOY_TEXTS = ("das haus ist klein", "das auto ist rot und das haus ist alt", "qqq haus", "klein")


@pytest.mark.parametrize("pop", [1, 3, 20])
@pytest.mark.parametrize("use_lm", [True, False])
def test_the_compiled_pass_equals_the_reference_on_the_search_output(
    toy_bundle: ModelBundle, use_lm: bool, pop: int
) -> None:
    ref, fast = _decoders(toy_bundle, pop, use_lm, prune=True)
    ref_all, fast_all = _decoders(toy_bundle, pop, use_lm, prune=False)
    pruned_something = False
    for text in TOY_TEXTS:
        toks = tuple(text.split())
        whole_ref, whole = ref_all.forest(toks), fast_all.forest(toks)
        assert forest_difference(whole_ref, whole) is None  # the search's output, unpruned
        a, b = ref.forest(toks), fast.forest(toks)
        assert forest_difference(a, b) is None
        assert arrays_difference(a, b) is None
        # the compiled pass on the arrays = the reference on the compiled search's forest
        by_reference = prune_unreachable(whole.hypergraph)
        as_forest = Forest(toks, by_reference, whole.best_score, whole.stats, whole.use_lm)
        assert forest_difference(as_forest, b) is None
        assert arrays_difference(as_forest, b) is None
        for x in (a, b):
            assert (x.stats.search_nodes, x.stats.search_edges) == (
                whole.hypergraph.num_nodes,
                whole.hypergraph.num_edges,
            )
            assert (x.stats.nodes, x.stats.edges) == (
                b.hypergraph.num_nodes,
                b.hypergraph.num_edges,
            )
        assert whole.stats.nodes == whole.stats.search_nodes
        pruned_something |= b.hypergraph.num_nodes < whole.hypergraph.num_nodes
        weights = toy_bundle.active_weights().weights
        d0, d1 = fast_viterbi(whole.hypergraph, weights), fast_viterbi(b.hypergraph, weights)
        assert (d1.tokens, d1.score, d1.features) == (d0.tokens, d0.score, d0.features)
        assert b.best_score == whole.best_score
    # small pop limits leave +LM items that no cell above uses (at 20 the toy search keeps all)
    assert pruned_something == (pop < 20)
