"""BLEU for tuning: sufficient statistics, corpus BLEU and smoothed sentence BLEU.

Corpus BLEU (Papineni et al. 2002) is a function of per-sentence sufficient statistics —
clipped n-gram matches and n-gram totals for n = 1..4, hypothesis length and reference
length — summed over the corpus; MERT (Och 2003) sums them along its line search.
Sentence BLEU for ranking k-best lists uses the add-one smoothing of Lin & Och (2004), as
Chen et al. 2017 (§2.3) do: 1 is added to the match and total counts of every order
n > 1. All scores are fractions in [0, 1]; :func:`sacrebleu_corpus_bleu` reports sacrebleu's
number (in percent) on already-tokenised text, and agrees with :func:`corpus_bleu` whenever
every order has a match (tested). One reference per sentence.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from service.errors import InvalidInputError

MAX_ORDER = 4
# Layout of a statistics vector: matches[0..3], totals[0..3], hyp_len, ref_len.
STATS_SIZE = 2 * MAX_ORDER + 2


def ngram_counts(tokens: Sequence[str], n: int) -> Counter[tuple[str, ...]]:
    """The multiset of ``n``-grams of ``tokens``."""
    return Counter(zip(*(tokens[i:] for i in range(n)), strict=False))


@dataclass(frozen=True, slots=True)
class Reference:
    """A reference's n-gram counts per order, computed once for all its hypotheses."""

    counts: tuple[Counter[tuple[str, ...]], ...]
    length: int

    @classmethod
    def of(cls, tokens: Sequence[str]) -> Reference:
        toks = tuple(tokens)
        return cls(tuple(ngram_counts(toks, n) for n in range(1, MAX_ORDER + 1)), len(toks))


@dataclass(frozen=True, slots=True)
class BleuStats:
    """Sufficient statistics of one (or a sum of) hypothesis/reference pair(s)."""

    matches: tuple[int, ...]
    totals: tuple[int, ...]
    hyp_len: int
    ref_len: int

    def __add__(self, other: BleuStats) -> BleuStats:
        return BleuStats(
            tuple(a + b for a, b in zip(self.matches, other.matches, strict=True)),
            tuple(a + b for a, b in zip(self.totals, other.totals, strict=True)),
            self.hyp_len + other.hyp_len,
            self.ref_len + other.ref_len,
        )

    def vector(self) -> NDArray[np.int64]:
        """The statistics as one integer vector (layout: matches, totals, hyp_len, ref_len)."""
        return np.array([*self.matches, *self.totals, self.hyp_len, self.ref_len], dtype=np.int64)

    @staticmethod
    def zero() -> BleuStats:
        return BleuStats((0,) * MAX_ORDER, (0,) * MAX_ORDER, 0, 0)


def bleu_stats(hyp: Sequence[str], ref: Sequence[str] | Reference) -> BleuStats:
    """Clipped n-gram matches and totals of ``hyp`` against the single reference ``ref``."""
    reference = ref if isinstance(ref, Reference) else Reference.of(ref)
    hyp = tuple(hyp)
    matches: list[int] = []
    totals: list[int] = []
    for n in range(1, MAX_ORDER + 1):
        r = reference.counts[n - 1]
        matches.append(sum(min(c, r[g]) for g, c in ngram_counts(hyp, n).items() if g in r))
        totals.append(max(len(hyp) - n + 1, 0))
    return BleuStats(tuple(matches), tuple(totals), len(hyp), reference.length)


def bleu_from_vector(stats: NDArray[np.int64] | NDArray[np.float64], smooth: bool = False) -> float:
    """BLEU of a statistics vector; ``smooth`` adds one to matches and totals of orders n > 1.

    Unsmoothed, any order without a match gives 0. The brevity penalty is
    ``min(1, exp(1 - ref_len / hyp_len))`` and 0 for an empty hypothesis.
    """
    m = stats[:MAX_ORDER].astype(np.float64)
    t = stats[MAX_ORDER : 2 * MAX_ORDER].astype(np.float64)
    hyp_len = float(stats[2 * MAX_ORDER])
    ref_len = float(stats[2 * MAX_ORDER + 1])
    if hyp_len <= 0:
        return 0.0
    if smooth:
        m[1:] += 1.0
        t[1:] += 1.0
    if np.any(m <= 0) or np.any(t <= 0):
        return 0.0
    log_p = float(np.mean(np.log(m / t)))
    log_bp = min(0.0, 1.0 - ref_len / hyp_len)
    return math.exp(log_p + log_bp)


def bleu_from_matrix(stats: NDArray[np.int64]) -> NDArray[np.float64]:
    """Unsmoothed BLEU of each row of an ``[N, STATS_SIZE]`` array (vectorised, for MERT)."""
    s = np.asarray(stats, dtype=np.float64)
    m = s[:, :MAX_ORDER]
    t = s[:, MAX_ORDER : 2 * MAX_ORDER]
    hyp_len = s[:, 2 * MAX_ORDER]
    ref_len = s[:, 2 * MAX_ORDER + 1]
    ok = np.all(m > 0, axis=1) & np.all(t > 0, axis=1) & (hyp_len > 0)
    out = np.zeros(s.shape[0])
    if np.any(ok):
        log_p = np.mean(np.log(m[ok] / t[ok]), axis=1)
        log_bp = np.minimum(0.0, 1.0 - ref_len[ok] / hyp_len[ok])
        out[ok] = np.exp(log_p + log_bp)
    return out


def sentence_bleu(hyp: Sequence[str], ref: Sequence[str]) -> float:
    """Add-one smoothed sentence BLEU (Lin & Och 2004) in [0, 1]."""
    return bleu_from_vector(bleu_stats(hyp, ref).vector(), smooth=True)


def corpus_bleu(stats: Iterable[BleuStats]) -> float:
    """Unsmoothed corpus BLEU in [0, 1] from per-sentence statistics."""
    total = BleuStats.zero()
    for s in stats:
        total = total + s
    return bleu_from_vector(total.vector())


def corpus_bleu_of(hyps: Sequence[Sequence[str]], refs: Sequence[Sequence[str]]) -> float:
    """Corpus BLEU in [0, 1] of tokenised hypotheses against one tokenised reference each."""
    if len(hyps) != len(refs):
        raise InvalidInputError(
            f"{len(hyps)} hypotheses but {len(refs)} references: give one reference per sentence"
        )
    return corpus_bleu(bleu_stats(h, r) for h, r in zip(hyps, refs, strict=True))


def sacrebleu_corpus_bleu(hyps: Sequence[Sequence[str]], refs: Sequence[Sequence[str]]) -> float:
    """sacrebleu's corpus BLEU (percent) on tokenised text, without re-tokenising."""
    if len(hyps) != len(refs):
        raise InvalidInputError(
            f"{len(hyps)} hypotheses but {len(refs)} references: give one reference per sentence"
        )
    import sacrebleu

    score = sacrebleu.corpus_bleu(
        [" ".join(h) for h in hyps], [[" ".join(r) for r in refs]], tokenize="none", force=True
    )
    return float(score.score)
