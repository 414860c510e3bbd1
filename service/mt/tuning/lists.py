"""k-best lists as tuning data: entries scored by BLEU, merging, and dense feature arrays.

A :class:`KbestEntry` is one translation of a dev sentence with its feature vector, BLEU
sufficient statistics and add-one smoothed sentence BLEU (Chen et al. 2017, §2.3). The
two ways of building the training set of Algorithm 1 (Chen et al. 2017, §3.2) are here: *k-best
merging* (one list per sentence, the union of the lists of all iterations, deduplicated by string)
and *instance aggregating* (every iteration's list of every sentence is its own instance).
:class:`FeatureSpace` fixes an order of the feature names so the optimisers work on arrays.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from service.mt.tuning.bleu import (
    STATS_SIZE,
    BleuStats,
    Reference,
    bleu_from_vector,
    bleu_stats,
)

FloatArray = NDArray[np.float64]


class Hypothesis(Protocol):
    """What a k-best decoder returns per candidate (e.g. :class:`service.records.Translation`)."""

    @property
    def tokens(self) -> tuple[str, ...]: ...

    @property
    def features(self) -> dict[str, float]: ...


@dataclass(frozen=True, slots=True)
class KbestEntry:
    """One candidate translation of a dev sentence, scored against its reference."""

    tokens: tuple[str, ...]
    features: dict[str, float] = field(hash=False, compare=False)
    stats: BleuStats = field(hash=False, compare=False)
    bleu: float = field(hash=False, compare=False)  # add-one smoothed sentence BLEU in [0, 1]

    @classmethod
    def scored(
        cls,
        tokens: Sequence[str],
        features: Mapping[str, float],
        reference: Sequence[str] | Reference,
    ) -> KbestEntry:
        toks = tuple(tokens)
        stats = bleu_stats(toks, reference)
        return cls(toks, dict(features), stats, bleu_from_vector(stats.vector(), smooth=True))


def score_list(hyps: Iterable[Hypothesis], reference: Sequence[str]) -> list[KbestEntry]:
    """The entries of one k-best list, in the given order, duplicates (same string) dropped."""
    ref = Reference.of(reference)
    seen: set[tuple[str, ...]] = set()
    out: list[KbestEntry] = []
    for h in hyps:
        toks = tuple(h.tokens)
        if toks in seen:
            continue
        seen.add(toks)
        out.append(KbestEntry.scored(toks, h.features, ref))
    return out


def merge_lists(lists: Iterable[Sequence[KbestEntry]]) -> list[KbestEntry]:
    """k-best merging (Chen et al. 2017, §3.2): the union of a sentence's lists, first
    occurrence kept."""
    seen: set[tuple[str, ...]] = set()
    out: list[KbestEntry] = []
    for lst in lists:
        for e in lst:
            if e.tokens not in seen:
                seen.add(e.tokens)
                out.append(e)
    return out


@dataclass(frozen=True, slots=True)
class ListArrays:
    """One k-best list as arrays: features ``[n, d]``, sentence BLEU ``[n]``, stats ``[n, 10]``."""

    features: FloatArray
    bleu: FloatArray
    stats: NDArray[np.int64]

    def __len__(self) -> int:
        return int(self.bleu.shape[0])


@dataclass(frozen=True)
class FeatureSpace:
    """A fixed order of feature names: weight dicts <-> vectors, entries -> matrices."""

    names: tuple[str, ...]

    @classmethod
    def of(
        cls, weights: Mapping[str, float], lists: Iterable[Sequence[KbestEntry]]
    ) -> FeatureSpace:
        """The weights' names followed by every other name seen in the lists (sorted)."""
        known = set(weights)
        extra: set[str] = set()
        for lst in lists:
            for e in lst:
                extra.update(n for n in e.features if n not in known)
        return cls((*weights, *sorted(extra)))

    @property
    def index(self) -> dict[str, int]:
        return {n: i for i, n in enumerate(self.names)}

    def vector(self, weights: Mapping[str, float]) -> FloatArray:
        return np.array([float(weights.get(n, 0.0)) for n in self.names], dtype=np.float64)

    def weights(self, vector: FloatArray) -> dict[str, float]:
        return {n: float(v) for n, v in zip(self.names, vector.tolist(), strict=True)}

    def arrays(self, entries: Sequence[KbestEntry]) -> ListArrays:
        index = self.index
        x = np.zeros((len(entries), len(self.names)), dtype=np.float64)
        for i, e in enumerate(entries):
            for name, value in e.features.items():
                x[i, index[name]] = value
        bleu = np.array([e.bleu for e in entries], dtype=np.float64)
        stats = np.zeros((len(entries), STATS_SIZE), dtype=np.int64)
        for i, e in enumerate(entries):
            stats[i] = e.stats.vector()
        return ListArrays(x, bleu, stats)
