"""BLEU: sentence BLEU with add-one smoothing by hand, corpus BLEU against sacrebleu."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
import sacrebleu

from service.errors import InvalidInputError
from service.mt.tuning.bleu import (
    BleuStats,
    bleu_from_matrix,
    bleu_from_vector,
    bleu_stats,
    corpus_bleu,
    corpus_bleu_of,
    sacrebleu_corpus_bleu,
    sentence_bleu,
)


def test_stats_by_hand() -> None:
    hyp = ["the", "cat", "sat", "on", "the", "mat"]
    s = bleu_stats(hyp, ["the", "cat", "is", "on", "the", "mat"])
    # unigrams: the×2, cat, on, mat match; bigrams: "the cat", "on the", "the mat";
    # trigrams: "on the mat"; no 4-gram.
    assert s == BleuStats((5, 3, 1, 0), (6, 5, 4, 3), 6, 6)
    clipped = bleu_stats(["the", "the", "the"], ["the", "cat"])
    assert clipped == BleuStats((1, 0, 0, 0), (3, 2, 1, 0), 3, 2)


@pytest.mark.parametrize(
    ("hyp", "ref", "expected"),
    [
        # p = 5/6, (3+1)/(5+1), (1+1)/(4+1), (0+1)/(3+1); equal lengths, no brevity penalty
        (
            "the cat sat on the mat",
            "the cat is on the mat",
            (5 / 6 * 4 / 6 * 2 / 5 * 1 / 4) ** 0.25,
        ),
        # all precisions 1 after smoothing (orders 3, 4 have no n-grams: (0+1)/(0+1));
        # brevity penalty exp(1 - 6/2)
        ("the cat", "the cat is on the mat", math.exp(-2.0)),
        # clipping: p = 1/3, 1/3, 1/2, 1/1
        ("the the the", "the cat", (1 / 3 * 1 / 3 * 1 / 2) ** 0.25),
        ("dog", "the cat", 0.0),  # no unigram match
        ("", "the cat", 0.0),  # empty hypothesis
        ("a b c d", "a b c d", 1.0),
    ],
)
def test_sentence_bleu_by_hand(hyp: str, ref: str, expected: float) -> None:
    assert sentence_bleu(hyp.split(), ref.split()) == pytest.approx(expected, rel=1e-12)


def random_corpus(seed: int, n: int) -> tuple[list[list[str]], list[list[str]]]:
    rng = random.Random(seed)
    vocab = ["a", "b", "c", "d", "e", "f", "g"]
    hyps, refs = [], []
    for _ in range(n):
        ref = [rng.choice(vocab) for _ in range(rng.randint(4, 14))]
        hyp = [w if rng.random() < 0.7 else rng.choice(vocab) for w in ref]
        hyp = hyp[: rng.randint(3, len(hyp))] + [
            rng.choice(vocab) for _ in range(rng.randint(0, 3))
        ]
        hyps.append(hyp)
        refs.append(ref)
    return hyps, refs


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_sentence_bleu_equals_sacrebleu_add_one(seed: int) -> None:
    hyps, refs = random_corpus(seed, 20)
    for h, r in zip(hyps, refs, strict=True):
        if len(h) < 4:
            continue  # sacrebleu's add-k stops at orders without n-grams
        ours = sentence_bleu(h, r)
        theirs = sacrebleu.sentence_bleu(
            " ".join(h), [" ".join(r)], smooth_method="add-k", smooth_value=1, tokenize="none"
        ).score
        assert 100 * ours == pytest.approx(theirs, abs=1e-9)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_corpus_bleu_equals_sacrebleu(seed: int) -> None:
    hyps, refs = random_corpus(seed, 30)
    ref_score = sacrebleu.corpus_bleu(
        [" ".join(h) for h in hyps], [[" ".join(r) for r in refs]], tokenize="none", force=True
    )
    total = BleuStats.zero()
    for h, r in zip(hyps, refs, strict=True):
        total = total + bleu_stats(h, r)
    assert list(total.matches) == list(ref_score.counts)
    assert list(total.totals) == list(ref_score.totals)
    assert (total.hyp_len, total.ref_len) == (ref_score.sys_len, ref_score.ref_len)
    assert 100 * corpus_bleu_of(hyps, refs) == pytest.approx(ref_score.score, abs=1e-9)
    assert sacrebleu_corpus_bleu(hyps, refs) == pytest.approx(ref_score.score, abs=1e-12)
    assert 0.05 < corpus_bleu_of(hyps, refs) < 0.95  # a non-trivial value


def test_corpus_bleu_is_not_the_mean_of_sentence_bleu() -> None:
    hyps, refs = random_corpus(5, 10)
    stats = [bleu_stats(h, r) for h, r in zip(hyps, refs, strict=True)]
    mean = sum(bleu_from_vector(s.vector()) for s in stats) / len(stats)
    assert corpus_bleu(stats) != pytest.approx(mean)


def test_matrix_equals_vector() -> None:
    hyps, refs = random_corpus(3, 12)
    rows = np.array([bleu_stats(h, r).vector() for h, r in zip(hyps, refs, strict=True)])
    rows = np.vstack([rows, np.zeros((1, rows.shape[1]), dtype=np.int64)])
    expected = [bleu_from_vector(row) for row in rows]
    assert bleu_from_matrix(rows).tolist() == pytest.approx(expected, rel=1e-12)
    assert any(v == 0 for v in expected) and any(v > 0 for v in expected)


def test_length_mismatch_is_an_error() -> None:
    with pytest.raises(InvalidInputError, match="one reference per sentence"):
        corpus_bleu_of([["a"]], [])
    with pytest.raises(InvalidInputError, match="one reference per sentence"):
        sacrebleu_corpus_bleu([["a"]], [["a"], ["b"]])
