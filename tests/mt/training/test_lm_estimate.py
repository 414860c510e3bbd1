"""Tests of the modified Kneser-Ney estimator (service.mt.training.lm_estimate).

Two toy corpora are worked out by hand below (count-of-counts, discounts, probabilities and
backoff weights as exact fractions); random corpora are checked against a slow dict-based
reference estimator written from Chen & Goodman (1998) / Heafield et al. (2013) §3, and every
estimated distribution must sum to one.
"""

from __future__ import annotations

import gzip
import math
import random
from collections import Counter
from pathlib import Path

import pytest

from service.errors import DataFormatError, InvalidInputError
from service.mt.lm import ArpaLM, KenLM
from service.mt.training.lm_estimate import (
    LMPLZ_DISCOUNT_FALLBACK,
    estimate_kneser_ney,
    train_lm,
    write_arpa,
)

BOS, EOS, UNK = "<s>", "</s>", "<unk>"


def _estimate_arpa(tmp_path: Path, corpus: list[str], order: int, **kw) -> tuple:
    model = estimate_kneser_ney([s.split() for s in corpus], order, **kw)
    path = tmp_path / "toy.arpa"
    write_arpa(model, path)
    return model, ArpaLM(path), path


def _p(arpa: ArpaLM, *ngram: str) -> float:
    return 10 ** arpa.log10_prob(ngram)


def _b(arpa: ArpaLM, *ngram: str) -> float:
    return 10 ** arpa.log10_backoff(ngram)


# --- toy corpus A: order 3 -------------------------------------------------------------------
# Sentences (padded):  <s> a b </s> | <s> a b a </s> | <s> a b a a </s>
#
# Trigram raw counts: <s> a b: 3, a b a: 2, a b </s>: 1, b a </s>: 1, b a a: 1, a a </s>: 1
#   -> count-of-counts t1..t4 = 4, 1, 1, 0
# Bigrams: <s> a starts with <s>, so it keeps its raw count 3; the others get continuation
# counts (distinct words to their left among the trigrams):
#   a b: {<s>} = 1; b </s>: {a} = 1; b a: {a} = 1; a a: {b} = 1; a </s>: {b, a} = 2
#   -> t = 4, 1, 1, 0
# Unigrams (continuation counts over bigram types; <s> and <unk> have 0):
#   a: {<s>, b, a} = 3; b: {a} = 1; </s>: {b, a} = 2   -> t = 1, 1, 1, 0
#
# Discounts (Y = t1 / (t1 + 2 t2), D_k = k - (k+1) Y t_{k+1} / t_k):
#   unigrams: Y = 1/3; D1 = 1 - 2(1/3)(1/1) = 1/3; D2 = 2 - 3(1/3)(1/1) = 1; D3 = 3 - 0 = 3
#   bigrams and trigrams: Y = 4/6 = 2/3; D1 = 1 - 2(2/3)(1/4) = 2/3;
#                         D2 = 2 - 3(2/3)(1/1) = 0; D3 = 3 - 4(2/3)(0/1) = 3
CORPUS_A = ["a b", "a b a", "a b a a"]


def test_toy_a_counts_and_discounts(tmp_path: Path) -> None:
    model, _, _ = _estimate_arpa(tmp_path, CORPUS_A, 3)
    assert [s.count_of_counts for s in model.stats] == [(1, 1, 1, 0), (4, 1, 1, 0), (4, 1, 1, 0)]
    expected = [(1 / 3, 1.0, 3.0), (2 / 3, 0.0, 3.0), (2 / 3, 0.0, 3.0)]
    for stats, discounts in zip(model.stats, expected, strict=True):
        assert stats.discounts == pytest.approx(discounts, abs=1e-12)
        assert not stats.fallback
    # <unk> <s> </s> a b; 6 bigrams; 6 trigrams
    assert model.counts() == [5, 6, 6]


def test_toy_a_probabilities(tmp_path: Path) -> None:
    _, arpa, _ = _estimate_arpa(tmp_path, CORPUS_A, 3)
    # Unigrams: sum of adjusted counts = 3 + 1 + 2 = 6; the uniform distribution is over
    # V without <s> = {<unk>, </s>, a, b}, 4 words.
    # gamma(ε) = (D3·1 [a] + D1·1 [b] + D2·1 [</s>]) / 6 = (3 + 1/3 + 1) / 6 = 13/18
    # p(a) = (3 - 3)/6 + (13/18)/4 = 13/72
    # p(b) = (1 - 1/3)/6 + 13/72 = 8/72 + 13/72 = 21/72
    # p(</s>) = (2 - 1)/6 + 13/72 = 25/72;  p(<unk>) = 13/72   (sum 72/72)
    p_a, p_b, p_eos, p_unk = 13 / 72, 21 / 72, 25 / 72, 13 / 72
    assert _p(arpa, "a") == pytest.approx(p_a, rel=1e-6)
    assert _p(arpa, "b") == pytest.approx(p_b, rel=1e-6)
    assert _p(arpa, EOS) == pytest.approx(p_eos, rel=1e-6)
    assert _p(arpa, UNK) == pytest.approx(p_unk, rel=1e-6)
    assert arpa.log10_prob([BOS]) == -99.0

    # Bigram context a: a b (1), a </s> (2), a a (1); denominator 4
    # gamma(a) = (D1·2 + D2·1) / 4 = (4/3 + 0) / 4 = 1/3
    # p(b|a) = (1 - 2/3)/4 + (1/3)(21/72) = 6/72 + 7/72 = 13/72
    # p(</s>|a) = (2 - 0)/4 + (1/3)(25/72) = 108/216 + 25/216 = 133/216
    # p(a|a) = (1 - 2/3)/4 + (1/3)(13/72) = 18/216 + 13/216 = 31/216
    assert _b(arpa, "a") == pytest.approx(1 / 3, rel=1e-6)
    assert _p(arpa, "a", "b") == pytest.approx(13 / 72, rel=1e-6)
    assert _p(arpa, "a", EOS) == pytest.approx(133 / 216, rel=1e-6)
    assert _p(arpa, "a", "a") == pytest.approx(31 / 216, rel=1e-6)
    # Context b: b </s> (1), b a (1); gamma(b) = 2·(2/3) / 2 = 2/3
    # p(a|b) = (1 - 2/3)/2 + (2/3)(13/72) = 18/108 + 13/108 = 31/108
    # p(</s>|b) = (1 - 2/3)/2 + (2/3)(25/72) = 36/216 + 50/216 = 86/216
    p_a_b, p_eos_b = 31 / 108, 86 / 216
    assert _b(arpa, "b") == pytest.approx(2 / 3, rel=1e-6)
    assert _p(arpa, "b", "a") == pytest.approx(p_a_b, rel=1e-6)
    assert _p(arpa, "b", EOS) == pytest.approx(p_eos_b, rel=1e-6)
    # Context <s>: only <s> a, with its raw count 3 (D3 = 3): gamma(<s>) = 3/3 = 1
    # p(a|<s>) = 0 + 1 · 13/72
    assert _b(arpa, BOS) == pytest.approx(1.0, rel=1e-6)
    assert _p(arpa, BOS, "a") == pytest.approx(13 / 72, rel=1e-6)

    # Trigram context a b: a b </s> (1), a b a (2); denominator 3
    # gamma(a b) = (D1·1 + D2·1) / 3 = (2/3) / 3 = 2/9
    # p(a|a b) = (2 - 0)/3 + (2/9)(31/108) = 648/972 + 62/972 = 710/972
    # p(</s>|a b) = (1 - 2/3)/3 + (2/9)(86/216) = 1/9 + 172/1944 = 388/1944
    assert _b(arpa, "a", "b") == pytest.approx(2 / 9, rel=1e-6)
    assert _p(arpa, "a", "b", "a") == pytest.approx(710 / 972, rel=1e-6)
    assert _p(arpa, "a", "b", EOS) == pytest.approx(388 / 1944, rel=1e-6)
    # Context b a: b a </s> (1), b a a (1); gamma = 2(2/3)/2 = 2/3
    # p(a|b a) = (1 - 2/3)/2 + (2/3)(31/216) = 108/648 + 62/648 = 170/648
    assert _p(arpa, "b", "a", "a") == pytest.approx(170 / 648, rel=1e-6)
    # An unseen trigram backs off: p(b | b a) = gamma(b a) · p(b | a) = (2/3)(13/72)
    assert math.exp(arpa.logp(("b", "a"), "b")) == pytest.approx(2 / 3 * 13 / 72, rel=1e-6)


# --- toy corpus B: order 2, every t_k > 0 ----------------------------------------------------
# Sentences: <s> a c </s> | <s> c d </s> | <s> d c </s> | <s> d d </s> | <s> c c </s> | <s> c </s>
# Bigram raw counts: c </s>: 4 (sentences 1, 3, 5, 6); <s> c: 3; <s> d: 2; d </s>: 2;
#   <s> a, a c, c d, d c, d d, c c: 1 each   -> t1..t4 = 6, 2, 1, 1
# Unigram continuation counts: a: {<s>} = 1; </s>: {c, d} = 2; d: {<s>, c, d} = 3;
#   c: {<s>, a, d, c} = 4                      -> t1..t4 = 1, 1, 1, 1
# Bigrams: Y = 6/(6 + 4) = 3/5; D1 = 1 - 2(3/5)(2/6) = 3/5; D2 = 2 - 3(3/5)(1/2) = 11/10;
#          D3 = 3 - 4(3/5)(1/1) = 3/5
# Unigrams: Y = 1/3; D1 = 1 - 2(1/3)(1) = 1/3; D2 = 2 - 3(1/3)(1) = 1; D3 = 3 - 4(1/3)(1) = 5/3
CORPUS_B = ["a c", "c d", "d c", "d d", "c c", "c"]


def test_toy_b_discounts_and_probabilities(tmp_path: Path) -> None:
    model, arpa, path = _estimate_arpa(tmp_path, CORPUS_B, 2)
    assert [s.count_of_counts for s in model.stats] == [(1, 1, 1, 1), (6, 2, 1, 1)]
    assert model.stats[0].discounts == pytest.approx((1 / 3, 1, 5 / 3), abs=1e-12)
    assert model.stats[1].discounts == pytest.approx((3 / 5, 11 / 10, 3 / 5), abs=1e-12)
    # Unigrams: sum of adjusted counts 1 + 2 + 3 + 4 = 10; |V \ {<s>}| = 5
    # gamma(ε) = (D1·1 + D2·1 + D3·2) / 10 = (1/3 + 1 + 10/3) / 10 = 7/15; uniform share 7/75
    # p(a) = (1 - 1/3)/10 + 7/75 = 5/75 + 7/75 = 12/75
    # p(c) = (4 - 5/3)/10 + 7/75 = 35/150 + 14/150 = 49/150
    # p(d) = (3 - 5/3)/10 + 7/75 = 10/75 + 7/75 = 17/75
    # p(</s>) = (2 - 1)/10 + 7/75 = 15/150 + 14/150 = 29/150;  p(<unk>) = 7/75
    unigrams = {"a": 12 / 75, "c": 49 / 150, "d": 17 / 75, EOS: 29 / 150, UNK: 7 / 75}
    for word, prob in unigrams.items():
        assert _p(arpa, word) == pytest.approx(prob, rel=1e-6)
    # Context c: c </s> (4), c d (1), c c (1); denominator 6
    # gamma(c) = (D3·1 + D1·2) / 6 = (3/5 + 6/5) / 6 = 3/10
    # p(</s>|c) = (4 - 3/5)/6 + (3/10)(29/150) = 850/1500 + 87/1500 = 937/1500
    # p(d|c) = (1 - 3/5)/6 + (3/10)(17/75) = 50/750 + 51/750 = 101/750
    # p(a|c), not seen: gamma(c) p(a) = (3/10)(12/75) = 36/750
    assert _b(arpa, "c") == pytest.approx(3 / 10, rel=1e-6)
    assert _p(arpa, "c", EOS) == pytest.approx(937 / 1500, rel=1e-6)
    assert _p(arpa, "c", "d") == pytest.approx(101 / 750, rel=1e-6)
    assert math.exp(arpa.logp(("c",), "a")) == pytest.approx(36 / 750, rel=1e-6)
    # Context <s>: <s> a (1), <s> c (3), <s> d (2), raw counts; denominator 6
    # gamma(<s>) = (D1 + D3 + D2) / 6 = (3/5 + 3/5 + 11/10) / 6 = 23/60
    # p(c|<s>) = (3 - 3/5)/6 + (23/60)(49/150) = 3600/9000 + 1127/9000 = 4727/9000
    # p(d|<s>) = (2 - 11/10)/6 + (23/60)(17/75) = 675/4500 + 391/4500 = 1066/4500
    assert _b(arpa, BOS) == pytest.approx(23 / 60, rel=1e-6)
    assert _p(arpa, BOS, "c") == pytest.approx(4727 / 9000, rel=1e-6)
    assert _p(arpa, BOS, "d") == pytest.approx(1066 / 4500, rel=1e-6)

    # KenLM reads the same file and gives the same probabilities (natural log)
    kenlm = KenLM(path)
    state = kenlm.begin_state()
    logp, state = kenlm.score(state, "c")
    assert logp == pytest.approx(math.log(4727 / 9000), abs=1e-5)
    logp, state = kenlm.score(state, "d")
    assert logp == pytest.approx(math.log(101 / 750), abs=1e-5)
    assert kenlm.end_score(state) == pytest.approx(math.log(_p(arpa, "d", EOS)), abs=1e-5)


# --- a slow reference estimator ---------------------------------------------------------------


def reference_kneser_ney(
    sentences: list[list[str]], order: int, prune_singletons: bool = False
) -> dict[tuple[str, ...], tuple[float, float | None]]:
    """Interpolated modified KN with dicts of tuples: ngram -> (prob, backoff or None)."""
    raw: list[Counter[tuple[str, ...]]] = [Counter() for _ in range(order + 1)]
    for sentence in sentences:
        toks = [BOS, *sentence, EOS]
        for n in range(1, order + 1):
            for i in range(len(toks) - n + 1):
                raw[n][tuple(toks[i : i + n])] += 1
    adj: list[dict[tuple[str, ...], int]] = [{} for _ in range(order + 1)]
    adj[order] = dict(raw[order])
    for n in range(order - 1, 0, -1):
        for g in raw[n]:
            if g[0] == BOS:
                adj[n][g] = raw[n][g]
            else:
                adj[n][g] = len({x[0] for x in raw[n + 1] if x[1:] == g})
    adj[1][(BOS,)] = 0
    adj[1][(UNK,)] = 0
    discount: dict[int, dict[int, float]] = {}
    for n in range(1, order + 1):
        t = [sum(1 for v in adj[n].values() if v == k) for k in (1, 2, 3, 4)]
        y = t[0] / (t[0] + 2 * t[1])
        d = {k: k - (k + 1) * y * t[k] / t[k - 1] for k in (1, 2, 3)}
        discount[n] = {0: 0.0, 1: d[1], 2: d[2], 3: d[3]}

    def kept(g: tuple[str, ...]) -> bool:
        return not (prune_singletons and len(g) >= 3 and raw[len(g)][g] <= 1)

    vocab = [g[0] for g in adj[1] if g[0] != BOS]
    result: dict[tuple[str, ...], tuple[float, float | None]] = {}
    probs: dict[tuple[str, ...], float] = {}
    gammas: dict[tuple[str, ...], float] = {}
    for n in range(1, order + 1):
        by_context: dict[tuple[str, ...], list[tuple[str, ...]]] = {}
        for g in adj[n]:
            by_context.setdefault(g[:-1], []).append(g)
        for context, grams in by_context.items():
            denom = sum(adj[n][g] for g in grams)
            mass = sum(discount[n][min(adj[n][g], 3)] if kept(g) else adj[n][g] for g in grams)
            gammas[context] = mass / denom
            for g in grams:
                u = (adj[n][g] - discount[n][min(adj[n][g], 3)]) / denom
                lower = 1 / len(vocab) if n == 1 else probs[g[1:]]
                probs[g] = u + gammas[context] * lower
    for n in range(1, order + 1):
        for g in adj[n]:
            if kept(g):
                result[g] = (probs[g], gammas.get(g) if n < order else None)
    return result


def _random_corpus(seed: int, sentences: int = 150, vocab: int = 80) -> list[list[str]]:
    """Sentences from a sparse random Markov chain, so that n-grams of every order repeat."""
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(vocab)]
    successors = {w: rng.sample(words, 3) for w in words}
    corpus = []
    for _ in range(sentences):
        word = rng.choice(words[: vocab // 3])
        sentence = [word]
        while rng.random() > 0.2 and len(sentence) < 12:
            word = rng.choice(successors[word]) if rng.random() < 0.9 else rng.choice(words)
            sentence.append(word)
        corpus.append(sentence)
    return corpus


@pytest.mark.parametrize(
    ("seed", "order", "prune"), [(1, 4, False), (2, 3, False), (3, 4, True), (4, 2, False)]
)
def test_vectorised_estimator_equals_reference(
    tmp_path: Path, seed: int, order: int, prune: bool
) -> None:
    corpus = _random_corpus(seed)
    model = estimate_kneser_ney(corpus, order, prune_singletons=prune)
    assert not any(s.fallback for s in model.stats)
    if prune:
        assert model.stats[2].pruned > 0
    path = tmp_path / "r.arpa"
    write_arpa(model, path)
    arpa = ArpaLM(path)
    expected = reference_kneser_ney(corpus, order, prune)
    expected.pop((BOS,))
    got = dict(arpa.entries)
    assert got.pop((BOS,))[0] == -99.0
    assert set(got) == set(expected)
    for ngram, (prob, backoff) in expected.items():
        log10p, log10b = got[ngram]
        assert log10p == pytest.approx(math.log10(prob), abs=2e-6), ngram
        if backoff is not None:
            assert log10b == pytest.approx(math.log10(backoff), abs=2e-6), ngram
        else:
            assert log10b == 0.0


def test_every_context_sums_to_one(tmp_path: Path) -> None:
    corpus = _random_corpus(5)
    model = estimate_kneser_ney(corpus, 3)
    path = tmp_path / "s.arpa"
    write_arpa(model, path)
    arpa = ArpaLM(path)
    kenlm = KenLM(path)
    vocab = sorted(w for w in arpa.vocab if w != BOS)
    contexts = {ng[:-1] for ng in arpa.entries if len(ng) > 1}
    contexts |= {(), ("w1", "w1"), ("w9", "w0"), (BOS, "w79")}  # some unseen as well
    for context in contexts:
        total = sum(math.exp(arpa.logp(context, w)) for w in vocab)
        assert total == pytest.approx(1.0, abs=1e-5), context
        total_kenlm = sum(math.exp(kenlm.logp(context, w)) for w in vocab)
        assert total_kenlm == pytest.approx(1.0, abs=1e-4), context


# --- degenerate and bad input ----------------------------------------------------------------


def test_degenerate_counts_raise_or_fall_back(tmp_path: Path) -> None:
    corpus = [["a", "b"], ["a", "b"]]  # every n-gram has the same count: t1 = 0 somewhere
    with pytest.raises(InvalidInputError, match="discount_fallback"):
        estimate_kneser_ney(corpus, 2)
    model = estimate_kneser_ney(corpus, 2, discount_fallback=LMPLZ_DISCOUNT_FALLBACK)
    assert any(s.fallback for s in model.stats)
    assert all(s.discounts == LMPLZ_DISCOUNT_FALLBACK for s in model.stats if s.fallback)
    path = tmp_path / "fallback.arpa.gz"
    write_arpa(model, path)
    with gzip.open(path, "rt") as fh:
        assert fh.readline() == "\\data\\\n"
    assert math.exp(ArpaLM(path).logp((BOS,), "a")) > 0.0


def test_empty_input_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="no usable sentence"):
        estimate_kneser_ney([[], []], 3)
    text = tmp_path / "empty.txt"
    text.write_text("\n   \n\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"empty\.txt"):
        train_lm(text, tmp_path / "x.arpa")
    assert not (tmp_path / "x.arpa").exists()


def test_sentences_too_short_for_the_order() -> None:
    with pytest.raises(InvalidInputError, match="lower order"):
        estimate_kneser_ney([["a"], ["b"]], 4)


def test_special_tokens_are_dropped_and_counted(tmp_path: Path) -> None:
    with_specials = ["a <s> c", "c d </s>", "d c", "d d", "c <unk> c", "c", "<unk> </s>"]
    model = estimate_kneser_ney([s.split() for s in with_specials], 2)
    assert model.special_tokens_dropped == 5
    assert model.empty_lines == 1  # the last line had only special tokens
    write_arpa(model, tmp_path / "specials.arpa")
    write_arpa(estimate_kneser_ney([s.split() for s in CORPUS_B], 2), tmp_path / "b.arpa")
    assert (tmp_path / "specials.arpa").read_text() == (tmp_path / "b.arpa").read_text()


def test_train_lm_reads_gzip_text_and_skips_bad_utf8(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = tmp_path / "text.txt.gz"
    with gzip.open(text, "wb") as fh:
        fh.write("\n".join(CORPUS_B).encode() + b"\n\xff\xfe broken\n")
    model = train_lm(text, tmp_path / "lm.arpa", 2)
    assert model.sentences == 6
    assert "skipped 1 malformed line" in capsys.readouterr().err
    assert ArpaLM(tmp_path / "lm.arpa").order == 2
