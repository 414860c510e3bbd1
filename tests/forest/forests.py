"""Small forests for the hypergraph, semiring and k-best tests (and for forced decoding).

``toy_forest()`` is a hand-made −LM forest of "das Haus brennt" whose derivations are worked
out by hand below; ``random_forest(rng)`` draws small random forests with shared subforests,
edges of arity 0–2, several incoming edges per node, ties (integer weights) and repeated target
strings. ``brute_force(hg, weights)`` enumerates every derivation: the slow reference.
"""

from __future__ import annotations

import itertools
import random

from hypothesis import strategies as st

from service.forest.hypergraph import DerivationNode, Hypergraph, HypergraphBuilder
from service.mt.rules import GLUE, LOG_P_E_GIVEN_F, WORD_PENALTY, nt, target_yield

P, WP = LOG_P_E_GIVEN_F, WORD_PENALTY
TOY_WEIGHTS = {P: 1.0, WP: -0.5, GLUE: -0.25}
SEEDS = st.integers(min_value=0, max_value=2**32 - 1)  # for random.Random(seed)


def toy_forest() -> Hypergraph:
    """The forest of "das Haus brennt" (0 das 1 Haus 2 brennt 3).

    Edge scores with TOY_WEIGHTS (P·1 − 0.5·WP − 0.25·Glue):
      X[0,1]: e0 "the" −1.0, e1 "that" −1.5
      X[1,2]: e2 "house" −0.75, e3 "home" −2.0
      X[2,3]: e4 "burns" −1.5, e5 "is burning" −1.75
      X[1,3]: e6 ⟨[X,1] [X,2], [X,2] [X,1]⟩ over X[1,2] X[2,3] (swap), −0.5
      X[0,2]: e7 "the house" −2.5
      S[0,1]: e8 glue X[0,1], −0.25;   S[0,2]: e9 glue S[0,1] X[1,2], −0.25;
      S[0,2]: e10 glue X[0,2], −0.25;  S[0,3]: e11 glue S[0,2] X[2,3], −0.25;
      S[0,3]: e12 glue S[0,1] X[1,3], −0.25
    Inside (max): X01 −1.0, X12 −0.75, X23 −1.5, X13 −2.75, X02 −2.5, S01 −1.25,
    S02 max(−2.25, −2.75) = −2.25, S03 max(−4.0, −4.25) = −4.0: "the house burns".
    Derivations: S02 has 2·2 + 1 = 5, S03 has 5·2 + 2·4 = 18.
    """
    b = HypergraphBuilder()
    x01, x12, x23 = b.add_node("X", (0, 1)), b.add_node("X", (1, 2)), b.add_node("X", (2, 3))
    b.add_edge(x01, [], ["the"], {P: -0.5, WP: 1}, rule_id=0)
    b.add_edge(x01, [], ["that"], {P: -1.0, WP: 1}, rule_id=1)
    b.add_edge(x12, [], ["house"], {P: -0.25, WP: 1}, rule_id=2)
    b.add_edge(x12, [], ["home"], {P: -1.5, WP: 1}, rule_id=3)
    b.add_edge(x23, [], ["burns"], {P: -1.0, WP: 1}, rule_id=4)
    b.add_edge(x23, [], ["is", "burning"], {P: -0.75, WP: 2}, rule_id=5)
    x13 = b.add_node("X", (1, 3))
    b.add_edge(x13, [x12, x23], target_yield([nt(2), nt(1)]), {P: -0.5}, rule_id=6)
    x02 = b.add_node("X", (0, 2))
    b.add_edge(x02, [], ["the", "house"], {P: -1.5, WP: 2}, rule_id=7)
    s01, s02, s03 = b.add_node("S", (0, 1)), b.add_node("S", (0, 2)), b.add_node("S", (0, 3))
    b.add_edge(s01, [x01], target_yield([nt(1, "S")]), {GLUE: 1})
    b.add_edge(s02, [s01, x12], target_yield([nt(1, "S"), nt(2)]), {GLUE: 1})
    b.add_edge(s02, [x02], target_yield([nt(1)]), {GLUE: 1})
    b.add_edge(s03, [s02, x23], target_yield([nt(1, "S"), nt(2)]), {GLUE: 1})
    b.add_edge(s03, [s01, x13], target_yield([nt(1, "S"), nt(2)]), {GLUE: 1})
    return b.build(s03)


FEATURES = ("f1", "f2", "f3")
WORDS = ("a", "b", "c")


def random_weights(rng: random.Random) -> dict[str, float]:
    return {f: float(rng.randint(-2, 2)) for f in FEATURES}


def random_forest(
    rng: random.Random, max_nodes: int = 7, max_derivations: int = 300, shuffle: bool = False
) -> Hypergraph:
    """A random acyclic forest whose goal (the last node) has at most ``max_derivations``.

    Integer feature values make every score exact, so ties are real ties. Node 0 always has a
    leaf edge; later nodes may have no incoming edge at all (no derivation). With ``shuffle``
    the nodes are added out of topological order (the builder must sort them).
    """
    n = rng.randint(1, max_nodes)
    count = [0] * n
    specs: list[tuple[int, list[int], list[str | int], dict[str, float]]] = []
    for v in range(n):
        n_edges = rng.choice([1, 1, 2, 2, 3]) if v == 0 or rng.random() < 0.9 else 0
        for _ in range(n_edges):
            arity = 0 if v == 0 else rng.choice([0, 1, 1, 2, 2])
            tails = [rng.randrange(v) for _ in range(arity)]
            through = 1
            for t in tails:
                through *= count[t]
            if count[v] + through > max_derivations:
                continue
            count[v] += through
            target: list[str | int] = [rng.choice(WORDS) for _ in range(rng.randint(0, 2))]
            for i in range(arity):
                target.insert(rng.randint(0, len(target)), i)
            features = {f: float(rng.randint(-2, 2)) for f in FEATURES if rng.random() < 0.7}
            specs.append((v, tails, target, features))
    perm = list(range(n))
    if shuffle:
        rng.shuffle(perm)
    b = HypergraphBuilder()
    order = sorted(range(n), key=lambda v: perm[v])
    builder_id = {}
    for v in order:
        builder_id[v] = b.add_node("X", (0, v))
    for v, tails, target, features in specs:
        b.add_edge(builder_id[v], [builder_id[t] for t in tails], target, features)
    return b.build(builder_id[n - 1])


def all_trees(hg: Hypergraph, v: int) -> list[DerivationNode]:
    """Every derivation tree of node ``v``, by recursion over incoming edges and tail choices."""
    return [
        DerivationNode(e, tuple(children))
        for e in hg.incoming(v)
        for children in itertools.product(*(all_trees(hg, u) for u in hg.edges[e].tails))
    ]


def brute_force(
    hg: Hypergraph, weights: dict[str, float]
) -> list[tuple[float, tuple[str, ...], DerivationNode]]:
    """Every derivation of the goal as (score, string, tree), scores summed edge by edge."""
    w = hg.edge_weights(weights)
    return [
        (float(sum(float(w[e]) for e in t.preorder())), hg.yield_of(t), t)
        for t in all_trees(hg, hg.goal)
    ]


def arity_three_forest(rng: random.Random) -> Hypergraph:
    """A random forest with edges of three tails (the decoder's rules have at most two gaps;
    the generic successor rule of k-best is checked on these): leaves with one-word edges, a
    node over them with three-tail edges whose gaps are shuffled among a word, and a goal with
    a three-tail glue edge and a unary one."""
    b = HypergraphBuilder()
    leaves = [b.add_node("X", (i, i + 1)) for i in range(3)]
    for v in leaves:
        for _ in range(rng.randint(1, 3)):
            b.add_edge(v, [], [rng.choice("abc")], {P: float(rng.randint(-2, 0))})
    mid = b.add_node("X", (0, 3))
    for _ in range(rng.randint(1, 3)):
        tails = [rng.choice(leaves) for _ in range(3)]
        target: list[str | int] = [0, 1, 2, "d"]
        rng.shuffle(target)
        b.add_edge(mid, tails, target, {P: float(rng.randint(-1, 0))})
    goal = b.add_node("S", (0, 3))
    b.add_edge(goal, [mid, leaves[0], mid], [2, 0, 1], {GLUE: 1.0})
    b.add_edge(goal, [mid], [0], {GLUE: 2.0})
    return b.build(goal)
