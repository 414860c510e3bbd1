"""LM boundary combination: edge scores of any derivation add up to the sentence score."""

from __future__ import annotations

import hashlib
import math
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.mt.lm import (
    EMPTY_TAIL,
    NO_STRUCTURE,
    ArpaLM,
    Boundary,
    ContextTable,
    KenLM,
    Piece,
    build_lm_table,
    combine,
    combine_ids,
    estimate,
    finish,
    finish_ids,
    id_tail,
    sentence_logprob,
)
from tests.mt.lm.random_arpa import WORDS, write_random_arpa
from tests.mt.lm.toy_lm import TOY_BIGRAM as TOY_ARPA


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
    assert a.boundary == Boundary(("the",), ("house",), True)
    # "the" has no history yet: scored for the estimate only
    assert calls == [((), "the"), (("the",), "house")] and a.logprob == -1.0
    calls.clear()
    b = combine(["is", a.boundary, "big"], 2, logp)
    # "is" is the first word (no history yet); "the" gets "is", "big" gets "house"
    assert calls == [((), "is"), (("is",), "the"), (("house",), "big")]
    assert b.boundary == Boundary(("is",), ("big",), True)
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
    assert boundary.full == (len(words) > h)
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
    b = Boundary(("a", "b"), ("c", "d"), True)
    assert estimate(b, toy_logp) == toy_logp((), "a") + toy_logp(("a",), "b")
    assert math.isfinite(estimate(Boundary((), (), False), toy_logp))


# --- the fast form over interned contexts ----------------------------------------------------


def _random_pieces(rng: random.Random, order: int) -> list[Piece]:
    vocab = ["a", "b", "c", "d", "e"]
    pieces: list[Piece] = []
    for _ in range(rng.randint(1, 5)):
        if rng.random() < 0.5:
            pieces.append(rng.choice(vocab))
        else:
            words = [rng.choice(vocab) for _ in range(rng.randint(1, 6))]
            pieces.append(combine(words, order, toy_logp).boundary)
    return pieces


@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 10**6), order=st.integers(1, 5))
def test_combine_ids_equals_combine(seed: int, order: int) -> None:
    rng = random.Random(seed)
    table = ContextTable(order, toy_logp)
    for _ in range(5):  # several combinations share one table (and its memo)
        pieces = _random_pieces(rng, order)
        target = [p if isinstance(p, str) else k for k, p in enumerate(pieces)]
        tails = [id_tail(p, table) if isinstance(p, Boundary) else EMPTY_TAIL for p in pieces]
        ref = combine(pieces, order, toy_logp)
        logprob, est, left, right, full = combine_ids(target, tails, table)
        assert logprob == ref.logprob  # the same additions in the same order
        assert Boundary(table.words[left], table.words[right], full) == ref.boundary
        assert est == estimate(ref.boundary, toy_logp)


def test_combine_ids_by_hand_trigram() -> None:
    calls: list[tuple[tuple[str, ...], str]] = []

    def logp(ctx: tuple[str, ...], w: str) -> float:
        calls.append((ctx, w))
        return -float(len(calls))

    table = ContextTable(3, logp)
    inner = Boundary(("b", "c"), ("d", "e"), True)  # "b c ? d e"
    tail = id_tail(inner, table)  # scores b, c from the empty context: -1, -2
    assert tail[3] is True and tail[4] == -3.0
    calls.clear()
    logprob, est, left, right, full = combine_ids(["a", 0, "f"], [tail], table)
    # a: (); b: (a) -- the new left words, estimate only; c: (a, b) and f: (d, e) are scored
    assert calls == [((), "a"), (("a",), "b"), (("a", "b"), "c"), (("d", "e"), "f")]
    assert est == -1.0 - 2.0 and logprob == -3.0 - 4.0
    assert (table.words[left], table.words[right], full) == (("a", "b"), ("e", "f"), True)
    # a tail at the start reuses its own estimate; f after (d, e) is memoised: no LM call
    calls.clear()
    logprob, est, left, right, full = combine_ids([0, "f"], [tail], table)
    assert calls == [] and (logprob, est) == (-4.0, -3.0)
    assert (table.words[left], table.words[right], full) == (("b", "c"), ("e", "f"), True)


def test_context_table_through_lm_states_matches_logp() -> None:
    arpa = ArpaLM(TOY_ARPA)
    kenlm = KenLM(TOY_ARPA)
    for lm in (arpa, kenlm):
        by_logp = ContextTable(lm.order, lm.logp)
        by_state = ContextTable(lm.order, lm.logp, lm)
        for ctx in [(), ("the",), ("<s>",), ("house",), ("zzz",)]:
            for word in ["the", "house", "that", "</s>", "zzz"]:
                a = by_logp.step(by_logp.intern(ctx), word)
                b = by_state.step(by_state.intern(ctx), word)
                assert a == b
                assert a[0] == lm.logp(ctx, word)
    with pytest.raises(ValueError, match="longer"):
        ContextTable(2, toy_logp).intern(("a", "b"))


# --- minimised states over real back-off models ---------------------------------------------

VOCAB = (*WORDS, "zz")  # "zz" is unknown to every model: it is scored as <unk>


def _random_words(rng: random.Random, most: int = 6) -> list[str]:
    return [rng.choice(VOCAB) for _ in range(rng.randint(0, most))]


def _random_derivation(
    rng: random.Random, lm: ArpaLM, depth: int
) -> tuple[Boundary, float, list[str]]:
    """A random derivation under minimised states: (boundary, its edges' LM sum, its words)."""
    pieces: list[Piece] = []
    words: list[str] = []
    inside = 0.0
    for _ in range(rng.randint(1, 4)):
        if depth > 0 and rng.random() < 0.5:
            b, s, ws = _random_derivation(rng, lm, depth - 1)
            pieces.append(b)
            words.extend(ws)
            inside += s
        else:
            for w in _random_words(rng, 3):
                pieces.append(w)
                words.append(w)
    comb = combine(pieces, lm.order, lm.logp, lm)
    return comb.boundary, inside + comb.logprob, words


@pytest.fixture(scope="module")
def random_lms(tmp_path_factory: pytest.TempPathFactory) -> list[ArpaLM]:
    root = tmp_path_factory.mktemp("random_arpa")
    return [
        ArpaLM(write_random_arpa(root / f"lm{seed}.arpa", seed, order, ngrams))
        for seed, (order, ngrams) in enumerate([(2, 15), (3, 40), (3, 80), (4, 60), (4, 150)])
    ]


def test_minimised_states_sum_to_the_sentence_score(random_lms: list[ArpaLM]) -> None:
    rng = random.Random(7)
    minimised = 0
    for lm in random_lms:
        for _ in range(300):
            boundary, inside, words = _random_derivation(rng, lm, 3)
            total = inside + finish(boundary, lm.order, lm.logp, lm)
            assert total == pytest.approx(sentence_logprob(words, lm.order, lm.logp), abs=1e-9)
            h = lm.order - 1
            assert len(boundary.left) <= h and len(boundary.right) <= h
            minimised += len(boundary.left) < min(h, len(words)) or len(boundary.right) < min(
                h, len(words)
            )
    assert minimised > 200  # the states were really minimised, often


def test_equal_minimised_states_score_the_same_in_any_context(random_lms: list[ArpaLM]) -> None:
    """Recombination is exact: items with one minimised boundary earn equal scores later."""
    rng = random.Random(11)
    compared = 0
    for lm in random_lms:
        groups: dict[Boundary, list[list[str]]] = {}
        for _ in range(400):
            words = _random_words(rng, 6) or ["a"]
            groups.setdefault(combine(words, lm.order, lm.logp, lm).boundary, []).append(words)
        for boundary, members in groups.items():
            if len({tuple(m) for m in members}) < 2:
                continue
            for _ in range(3):
                before, after = _random_words(rng, 3), _random_words(rng, 3)
                scores = set()
                for words in members:
                    inner = combine(words, lm.order, lm.logp, lm)
                    outer = combine([*before, inner.boundary, *after], lm.order, lm.logp, lm)
                    scores.add(
                        round(outer.logprob + finish(outer.boundary, lm.order, lm.logp, lm), 9)
                    )
                    # and the sentence score differs from theirs by the inner part only
                    whole = sentence_logprob([*before, *words, *after], lm.order, lm.logp)
                    assert whole == pytest.approx(
                        inner.logprob
                        + outer.logprob
                        + finish(outer.boundary, lm.order, lm.logp, lm),
                        abs=1e-9,
                    )
                assert len(scores) == 1, boundary
                compared += 1
    assert compared > 50


def test_no_structure_keeps_the_textbook_boundary(random_lms: list[ArpaLM]) -> None:
    lm = random_lms[3]
    rng = random.Random(3)
    for _ in range(100):
        words = _random_words(rng, 8) or ["b"]
        b = combine(words, lm.order, lm.logp, NO_STRUCTURE).boundary
        assert b.left == tuple(words[:3]) and b.right == tuple(words[-3:])
        assert b.full == (len(words) > 3)


def test_combine_ids_equals_combine_with_minimised_states(
    random_lms: list[ArpaLM], tmp_path: Path
) -> None:
    rng = random.Random(5)
    for lm in random_lms:
        table = ContextTable(lm.order, lm.logp, lm, lm)
        bos = table.intern(("<s>",) if lm.order > 1 else ())
        for _ in range(200):
            pieces: list[Piece] = []
            for _ in range(rng.randint(1, 4)):
                if rng.random() < 0.5:
                    pieces.append(rng.choice(VOCAB))
                else:
                    pieces.append(_random_derivation(rng, lm, 1)[0])
            target = [p if isinstance(p, str) else k for k, p in enumerate(pieces)]
            tails = [id_tail(p, table) if isinstance(p, Boundary) else EMPTY_TAIL for p in pieces]
            ref = combine(pieces, lm.order, lm.logp, lm)
            logprob, est, left, right, full = combine_ids(target, tails, table)
            assert logprob == ref.logprob
            assert Boundary(table.words[left], table.words[right], full) == ref.boundary
            assert est == estimate(ref.boundary, lm.logp, lm)
            tail = id_tail(ref.boundary, table)
            assert finish_ids(tail, table, bos) == finish(ref.boundary, lm.order, lm.logp, lm)


def test_the_lm_table_minimises_as_the_arpa_reference(random_lms: list[ArpaLM]) -> None:
    """The table's structure (what the compiled decoder reads) gives the same boundaries."""
    rng = random.Random(9)
    for lm in random_lms:
        table = build_lm_table(lm.path, verify=False)
        for _ in range(200):
            words = _random_words(rng, 7) or ["c"]
            ours = combine(words, lm.order, lm.logp, table)
            ref = combine(words, lm.order, lm.logp, lm)
            assert ours.boundary == ref.boundary
            assert ours.logprob == pytest.approx(ref.logprob, abs=1e-5)
