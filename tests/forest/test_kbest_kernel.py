"""The compiled unique k-best (service/forest/kbest/compiled.py, kernel.py) against the reference.

With a count bound (``max_derivations``) both engines examine the same derivations in the same
order, so their lists must be identical — trees, scores (the same floats), strings, rules, spans
and feature vectors — on random forests with ties, forests of heavy spurious ambiguity, forests
of the demo bundle (both decoders), with arrays that start empty and grow at every step, and
with a string hash narrowed to a few bits, where strings collide and must still be told apart.
"""

from __future__ import annotations

import random
import time

import pytest
from hypothesis import given, settings

import service.forest.kbest.compiled as kk
from service.errors import ConfigurationError
from service.forest.hypergraph import Derivation, Hypergraph
from service.forest.inference import Weights
from service.forest.kbest import kbest, unique_kbest
from service.forest.kbest.compiled import extraction, unique_kbest_compiled
from service.mt.rules import GLUE
from tests.forest.forests import (
    SEEDS,
    TOY_WEIGHTS,
    P,
    arity_three_forest,
    brute_force,
    random_forest,
    random_weights,
    toy_forest,
)
from tests.forest.test_kbest import ambiguous_forest, array_backed

PROPERTY = settings(max_examples=150, derandomize=True, deadline=None)


def records(ds: list[Derivation]) -> list[tuple[object, ...]]:
    """Everything a derivation holds, features included (``==`` on Derivation skips them)."""
    return [
        (d.tree, d.score, type(d.score), d.tokens, d.edges, d.rule_ids, d.spans, d.features)
        for d in ds
    ]


def assert_same(hg: Hypergraph, weights: Weights, k: int, max_derivations: int) -> list[Derivation]:
    got = unique_kbest(hg, weights, k, max_derivations=max_derivations)
    ref = unique_kbest(hg, weights, k, max_derivations=max_derivations, engine="reference")
    assert records(got) == records(ref)
    return got


@PROPERTY
@given(seed=SEEDS)
def test_random_forests_equal_the_reference(seed: int) -> None:
    rng = random.Random(seed)
    hg = random_forest(rng, shuffle=rng.random() < 0.3)
    weights = random_weights(rng)
    for k in (1, 2, 5, 100):
        for limit in (0, 1, 7, 10**6):
            assert_same(hg, weights, k, limit)


@settings(max_examples=60, derandomize=True, deadline=None)
@given(seed=SEEDS)
def test_arrays_grown_from_nothing_equal_the_reference(seed: int) -> None:
    # No room at the start: the kernel stops for every array at its first use and resumes its
    # frames of LazyKthBest after each growth.
    rng = random.Random(seed)
    hg = random_forest(rng, max_nodes=9, max_derivations=2000)
    weights = random_weights(rng)
    total = len(kbest(hg, weights, 10**6))
    old = kk.FIRST_SPARE
    kk.FIRST_SPARE = 0
    try:
        for k in (1, 3, 100):
            for limit in (1, 5, 10**6):
                assert_same(hg, weights, k, limit)
        ex = extraction(hg, weights, 10**9)  # every string: every derivation, each once
        assert ex.run(10**6) == kk.EXHAUSTED
        assert ex.examined == total
    finally:
        kk.FIRST_SPARE = old


def test_arrays_grow_mid_search(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kk, "FIRST_SPARE", 0)
    hg = ambiguous_forest(4, 6)
    grew: list[list[int]] = []
    ex = extraction(hg, {P: 1.0}, 100)
    original = ex._grow

    def grow() -> None:
        grew.append(ex.want.tolist())
        original()

    monkeypatch.setattr(ex, "_grow", grow)
    assert ex.run(10**6) == kk.EXHAUSTED
    assert ex.examined == 7**4  # every derivation once: none pushed twice after a growth
    assert len(grew) > 10  # every array grew, several times
    assert {i for wants in grew for i, n in enumerate(wants) if n} == set(range(kk.WANTS))
    assert_same(hg, {P: 1.0}, 100, 10**6)


@pytest.mark.parametrize("seed", range(30))
def test_edges_of_arity_three_equal_the_reference(seed: int) -> None:
    rng = random.Random(seed)
    hg = arity_three_forest(rng)
    for k in (1, 4, 1000):
        assert_same(hg, {P: 1.0, GLUE: -0.5}, k, 10**6)


def test_ties_are_broken_as_in_the_reference() -> None:
    # Every derivation scores 0: the order is edge id, then tail ranks, at every node — the
    # heap's tie-breaks all the way down (kbest lists them all in that order).
    hg = ambiguous_forest(4, 3)
    flat = {P: 0.0, GLUE: 0.0}
    everything = kbest(hg, flat, 10**6)
    assert len(everything) == 4**4 and {d.score for d in everything} == {0.0}
    got = assert_same(hg, flat, 100, 10**6)
    assert len(got) == 2**4
    for limit in (1, 2, 3, 50, 255, 256):  # each bound stops at the same derivation
        assert_same(hg, flat, 100, limit)
    # the toy forest has ties between edges (e.g. at -4.25 and -4.5)
    for limit in range(1, 20):
        assert_same(toy_forest(), TOY_WEIGHTS, 100, limit)


def test_spurious_ambiguity_equals_the_reference() -> None:
    hg = ambiguous_forest(4, 6)  # 1,296 derivations of "x x x x" first
    assert [d.text for d in assert_same(hg, {P: 1.0}, 5, 1000)] == ["x x x x"]
    got = assert_same(hg, {P: 1.0}, 5, 5000)
    best_of: dict[tuple[str, ...], float] = {}
    for s, tokens, _ in brute_force(hg, {P: 1.0}):
        best_of[tokens] = max(s, best_of.get(tokens, s))
    assert [(d.tokens, d.score) for d in got] == sorted(best_of.items(), key=lambda x: -x[1])[:5]


@pytest.mark.parametrize("bits", [0, 1, 2])
def test_hash_collisions_never_merge_strings(bits: int) -> None:
    forests: list[tuple[Hypergraph, dict[str, float]]] = [
        (toy_forest(), TOY_WEIGHTS),
        (ambiguous_forest(4, 3), {P: 1.0}),
    ]
    rng = random.Random(bits)
    forests += [(random_forest(rng), random_weights(rng)) for _ in range(40)]
    collided = 0
    for hg, weights in forests:
        ref = unique_kbest(hg, weights, 100, max_derivations=10**6, engine="reference")
        got = unique_kbest_compiled(hg, weights, 100, 10**6, None, hash_bits=bits)
        assert records(got) == records(ref)
        ex = extraction(hg, weights, 100, hash_bits=bits)
        ex.run(10**6)
        hashes = ex.picked_hash[: ex.found].tolist()
        assert max(hashes, default=0) < 2**bits
        collided += len(set(hashes)) < len(hashes)
        words = [tuple(ex.picked_words_of(i)) for i in range(ex.found)]
        assert len(set(words)) == len(words) == len(ref)
    assert collided >= 3  # the narrow hash did collide, and the strings stayed apart


def test_full_hash_equals_the_reference_strings() -> None:
    hg = toy_forest()
    ex = extraction(hg, TOY_WEIGHTS, 100)
    assert ex.run(10**6) == kk.EXHAUSTED
    vocab = hg.arrays().vocabulary
    strings = [tuple(vocab[i] for i in ex.picked_words_of(i)) for i in range(ex.found)]
    ref = unique_kbest(hg, TOY_WEIGHTS, 100, engine="reference", max_derivations=10**6)
    assert strings == [d.tokens for d in ref]
    assert len(set(ex.picked_hash[: ex.found].tolist())) == ex.found
    assert ex.examined == 18  # every derivation examined once


@PROPERTY
@given(seed=SEEDS)
def test_only_edges_of_examined_derivations_are_asked_for(seed: int) -> None:
    # On forests whose edge objects are made on access, the compiled search asks for the same
    # edges as the reference: those on derivations it examined whose pattern the arrays lack.
    rng = random.Random(seed)
    hg = random_forest(rng)
    weights = random_weights(rng)
    for k, limit in ((1, 3), (3, 10**6)):
        lazy_a, made_a = array_backed(hg)
        lazy_b, made_b = array_backed(hg)
        got = unique_kbest(lazy_a, weights, k, max_derivations=limit)
        ref = unique_kbest(lazy_b, weights, k, max_derivations=limit, engine="reference")
        assert records(got) == records(ref)
        assert set(made_a) == set(made_b)


def test_time_budget_keeps_what_was_found() -> None:
    hg = ambiguous_forest(6, 10)  # 10^6 derivations of one string before the second
    start = time.perf_counter()
    got = unique_kbest(hg, {P: 1.0}, 2, time_budget=0.05)
    assert time.perf_counter() - start < 5.0
    assert [d.text for d in got] == ["x x x x x x"]
    # a budget large enough for 8^4 = 4,096 derivations: the strings after them too
    hg = ambiguous_forest(4, 8)
    full = unique_kbest(hg, {P: 1.0}, 3, max_derivations=10**6)
    assert len(full) == 3 and unique_kbest(hg, {P: 1.0}, 3, time_budget=60.0) == full
    assert unique_kbest(hg, {P: 1.0}, 3, time_budget=60.0, max_derivations=4096) == full[:1]
    # the clock is not read before the first few hundred derivations
    assert unique_kbest(toy_forest(), TOY_WEIGHTS, 100, time_budget=0.0) == unique_kbest(
        toy_forest(), TOY_WEIGHTS, 100, max_derivations=10**6
    )


def test_unknown_engine_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="engine"):
        unique_kbest(toy_forest(), TOY_WEIGHTS, 5, engine="fast")  # type: ignore[arg-type]


# --- forests of the demo bundle ---------------------------------------------------------------
SENTENCES = [
    # heavy spurious ambiguity: thousands of derivations of 1–3 strings first
    "siehe auch : schätzer.exp.add , schätzer.exp.mult , schätzer.exp.stat.mult , "
    "schätzer.exp.vor.add , schätzer.exp.vor.mult , schätzer.exp.saisonal , schätzer",
    "ein argument aus displayvalue oder datavalue muss angegeben werden . wenn beide "
    "vorhanden sind , reicht eine übereinstimmung aus , um den knoten auszuwählen .",
    "ergebnis : eine beliebige numerische variable , die das ergebnis der negation aufnimmt .",
    # many strings
    "lesen und schreiben von werten in bereiche",
    "fügt das hervorgehobene wort einem benutzerwörterbuch hinzu .",
    "die polynomische regressionsgleichung",
]
