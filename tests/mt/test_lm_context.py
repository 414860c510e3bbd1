"""LM boundary combination: edge scores of any derivation add up to the sentence score."""

from __future__ import annotations

import hashlib
import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.mt.lm_context import (
    Boundary,
    Piece,
    combine,
    estimate,
    finish,
    sentence_logprob,
)


def toy_logp(context: tuple[str, ...], word: str) -> float:
    """A deterministic stand-in LM: any function of (context, word) will do for this check."""
    digest = hashlib.sha256(("|".join(context) + "#" + word).encode()).digest()
    return -1.0 - digest[0] / 64.0


def leaf(words: list[str], order: int) -> tuple[Boundary, float, list[str]]:
    comb = combine(words, order, toy_logp)
    return comb.boundary, comb.logprob, words


def test_bigram_by_hand() -> None:
    calls: list[tuple[tuple[str, ...], str]] = []

    def logp(ctx: tuple[str, ...], w: str) -> float:
        calls.append((ctx, w))
        return -1.0

    a = combine(["the", "house"], 2, logp)
    assert a.boundary == Boundary(("the",), ("house",), 2)
    assert calls == [(("the",), "house")] and a.logprob == -1.0
    calls.clear()
    b = combine(["is", a.boundary, "big"], 2, logp)
    # "is" is the first word (no history yet); "the" gets "is", "big" gets "house"
    assert calls == [(("is",), "the"), (("house",), "big")]
    assert b.boundary == Boundary(("is",), ("big",), 4)
    calls.clear()
    assert finish(b.boundary, 2, logp) == -2.0
    assert calls == [(("<s>",), "is"), (("big",), "</s>")]


def _random_tree(rng: random.Random, order: int, depth: int) -> tuple[Boundary, float, list[str]]:
    """A random derivation: returns (boundary, sum of its edge LM scores, its words)."""
    vocab = ["a", "b", "c", "d", "e"]
    if depth == 0 or rng.random() < 0.3:
        return leaf([rng.choice(vocab) for _ in range(rng.randint(1, 5))], order)
    pieces: list[Piece] = []
    words: list[str] = []
    inside = 0.0
    for _ in range(rng.randint(1, 4)):
        if rng.random() < 0.5:
            w = rng.choice(vocab)
            pieces.append(w)
            words.append(w)
        else:
            b, s, ws = _random_tree(rng, order, depth - 1)
            pieces.append(b)
            words.extend(ws)
            inside += s
    if not pieces:
        pieces.append("a")
        words.append("a")
    comb = combine(pieces, order, toy_logp)
    return comb.boundary, inside + comb.logprob, words


@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 10**6), order=st.integers(1, 5))
def test_edge_scores_sum_to_sentence_score(seed: int, order: int) -> None:
    rng = random.Random(seed)
    boundary, inside, words = _random_tree(rng, order, 3)
    total = inside + finish(boundary, order, toy_logp)
    assert total == pytest.approx(sentence_logprob(words, order, toy_logp))
    h = order - 1
    assert boundary.length == len(words)
    assert boundary.left == tuple(words[:h])
    assert boundary.right == (tuple(words[-h:]) if h else ())


def test_equal_boundaries_score_the_same_in_any_context() -> None:
    # two different yields with the same boundary (trigram: 2 words each side)
    x = combine(["a", "b", "c", "d", "e"], 3, toy_logp).boundary
    y = combine(["a", "b", "x", "d", "e"], 3, toy_logp).boundary
    assert x == y
    for ctx in (["q"], ["q", "r", "s"], []):
        cx = combine([*ctx, x, "z"], 3, toy_logp)
        cy = combine([*ctx, y, "z"], 3, toy_logp)
        assert cx.logprob == cy.logprob and cx.boundary == cy.boundary


def test_estimate_scores_the_prefix_with_inner_history() -> None:
    b = Boundary(("a", "b"), ("c", "d"), 6)
    assert estimate(b, toy_logp) == toy_logp((), "a") + toy_logp(("a",), "b")
    assert math.isfinite(estimate(Boundary((), (), 0), toy_logp))
