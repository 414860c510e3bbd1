"""Checks of the n-gram structure (state minimisation) that the table tests and the demo LM's
verification share: the LM table against the reference ArpaLM, a brute-force pass over the
listed n-grams, and KenLM's own states."""

from __future__ import annotations

import random

import pytest

from service.mt.lm import ArpaLM, KenLM, LmTable
from tests.mt.lm.toy_lm import key_of


def assert_left_flags(table: LmTable, arpalm: ArpaLM) -> None:
    """``left_ext`` and ``uni_left_ext`` against a brute-force set of the proper suffixes of
    the listed n-grams, slot by slot (every slot holds a listed n-gram or such a suffix)."""
    suffixes = {ng[i:] for ng in arpalm.entries for i in range(1, len(ng))}
    higher = {ng for ng in suffixes.union(arpalm.entries) if len(ng) >= 2}
    slots = {k: s for s, k in enumerate(table.keys.tolist()) if k}
    assert len(slots) == len(higher)
    ids = table.vocab
    for ngram in higher:
        slot = slots[int(key_of([ids[w] for w in ngram]))]
        assert bool(table.left_ext[slot]) == (ngram in suffixes), ngram
    for word, i in ids.items():
        assert bool(table.uni_left_ext[i]) == ((word,) in suffixes), word


def structure_queries(
    arpalm: ArpaLM, rng: random.Random, ngrams: list[tuple[str, ...]], count: int
) -> list[tuple[str, ...]]:
    """Every run of words inside the given n-grams (their contexts, prefixes and suffixes),
    then ``count`` random tuples of 0 to ``order`` words from the vocabulary, ``<s>``,
    ``<unk>`` and unknown words."""
    queries = {ng[i:j] for ng in ngrams for i in range(len(ng)) for j in range(i, len(ng) + 1)}
    words = [*sorted(arpalm.vocab), "<s>", "<unk>", "</s>", "zzz-oov", "qqq-oov"]
    for _ in range(count):
        queries.add(tuple(rng.choice(words) for _ in range(rng.randint(0, arpalm.order))))
    return sorted(queries)


def assert_structures_agree(table: LmTable, arpalm: ArpaLM, queries: list[tuple[str, ...]]) -> None:
    """Equal answers; backoffs to float32 precision (ArpaLM reads them as float64)."""
    assert table.order == arpalm.order
    for q in queries:
        if len(q) < table.order:
            assert table.right_minimal(q) == arpalm.right_minimal(q), q
        assert table.left_extends(q) == arpalm.left_extends(q), q
        assert table.backoff(q) == pytest.approx(arpalm.backoff(q), rel=1e-6, abs=1e-12), q


def assert_kenlm_minimises_alike(
    table: LmTable, kenlm: KenLM, queries: list[tuple[str, ...]]
) -> None:
    """``right_minimal`` is KenLM's own right state: a context (scored from the null context)
    reaches the state of its right-minimal suffix, a suffix of it that is its own minimum and
    whose state differs from that of its own suffix (KenLM's states compare by their words)."""
    null = kenlm.null_state()
    for q in queries:
        if len(q) >= table.order:
            continue
        short = table.right_minimal(q)
        assert q[len(q) - len(short) :] == short and table.right_minimal(short) == short, q
        assert kenlm.score_words(null, q)[1] == kenlm.score_words(null, short)[1], q
        if short:
            assert kenlm.score_words(null, short)[1] != kenlm.score_words(null, short[1:])[1], q
