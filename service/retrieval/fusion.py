"""Fusion of rankings: the lexical reader's and the dense reader's, into one.

Two readers of one query see different things: forced decoding reads the query's words in
the documents (Hieber & Riezler 2015, §3), a dense encoder reads the meaning of its English
translation. Their scores are on different scales, so they are fused by rank or by
normalised score:

* ``rrf`` — reciprocal rank fusion (Cormack, Clarke & Büttcher 2009, §2): a document's score
  is ``Σ_i w_i / (k + rank_i(d))`` over the lists that hold it (ranks from 1; ``k`` = 60 as in
  the paper); with weights it is weighted RRF.
* ``mix`` — CombSUM of min-max normalised scores (Fox & Shaw 1994): ``Σ_i w_i · (s_i(d) −
  min_i) / (max_i − min_i)``; a list that does not hold the document adds nothing.

Ties go to the smaller document number, as everywhere in ranking here. Each fusion has its
slow, obviously correct version (:meth:`Fusion.fuse_reference`, dictionaries and loops) beside
the vectorised one (:meth:`Fusion.fuse`); the tests hold them to the same result.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import numpy.typing as npt

from service.errors import ConfigurationError

Int64Array = npt.NDArray[np.int64]
Float64Array = npt.NDArray[np.float64]


@dataclass(frozen=True)
class RankedList:
    """One reader's ranking: document numbers best first and their scores."""

    docs: Int64Array
    scores: Float64Array

    @classmethod
    def of(cls, pairs: Sequence[tuple[int, float]]) -> RankedList:
        return cls(
            np.asarray([d for d, _ in pairs], dtype=np.int64),
            np.asarray([s for _, s in pairs], dtype=np.float64),
        )


@dataclass(frozen=True)
class Fused:
    """The fused ranking: documents best first, their fused scores, and each document's rank
    (from 1) in each input list (0 where the list does not hold it)."""

    docs: Int64Array
    scores: Float64Array
    ranks: npt.NDArray[np.int64]  # (len(docs), number of lists)


class Fusion(ABC):
    """Fuses ranked lists of one query (one base class; :data:`FUSIONS` by name)."""

    name: ClassVar[str]

    def __init__(self, weights: Sequence[float] = (1.0, 1.0)) -> None:
        if any(w < 0 for w in weights) or not any(w > 0 for w in weights):
            raise ConfigurationError(f"fusion weights must be >= 0 and not all 0: {list(weights)}")
        self.weights = tuple(float(w) for w in weights)

    def _check(self, lists: Sequence[RankedList]) -> None:
        if len(lists) != len(self.weights):
            raise ConfigurationError(
                f"{len(lists)} rankings to fuse with {len(self.weights)} weights"
            )

    @abstractmethod
    def contributions(self, ranked: RankedList) -> Float64Array:
        """What each document of one list adds (before the list's weight)."""

    def fuse(self, lists: Sequence[RankedList], depth: int) -> Fused:
        """The fused top ``depth`` (vectorised)."""
        self._check(lists)
        docs = np.concatenate([lst.docs for lst in lists]) if lists else np.zeros(0, np.int64)
        if not len(docs):
            return Fused(docs, np.zeros(0, np.float64), np.zeros((0, len(lists)), np.int64))
        adds = np.concatenate(
            [w * self.contributions(lst) for w, lst in zip(self.weights, lists, strict=True)]
        )
        uniq, inverse = np.unique(docs, return_inverse=True)
        total = np.bincount(inverse, weights=adds, minlength=len(uniq)).astype(np.float64)
        order = np.lexsort((uniq, -total))[:depth]
        ranks = np.zeros((len(uniq), len(lists)), dtype=np.int64)
        start = 0
        for i, lst in enumerate(lists):
            n = len(lst.docs)
            ranks[inverse[start : start + n], i] = np.arange(1, n + 1)
            start += n
        return Fused(uniq[order], total[order], ranks[order])

    def fuse_reference(self, lists: Sequence[RankedList], depth: int) -> Fused:
        """:meth:`fuse`, one document at a time."""
        self._check(lists)
        total: dict[int, float] = {}
        ranks: dict[int, list[int]] = {}
        for i, (w, lst) in enumerate(zip(self.weights, lists, strict=True)):
            adds = self.contributions(lst)
            for r, doc in enumerate(lst.docs.tolist()):
                total[doc] = total.get(doc, 0.0) + w * float(adds[r])
                ranks.setdefault(doc, [0] * len(lists))[i] = r + 1
        best = sorted(total, key=lambda d: (-total[d], d))[:depth]
        return Fused(
            np.asarray(best, dtype=np.int64),
            np.asarray([total[d] for d in best], dtype=np.float64),
            np.asarray([ranks[d] for d in best], dtype=np.int64).reshape(len(best), len(lists)),
        )

    def signature(self) -> str:
        return f"{self.name}({','.join(f'{w:g}' for w in self.weights)})"


class ReciprocalRank(Fusion):
    """RRF: ``w / (k + rank)`` (Cormack, Clarke & Büttcher 2009, §2; k = 60)."""

    name = "rrf"

    def __init__(self, weights: Sequence[float] = (1.0, 1.0), k: float = 60.0) -> None:
        super().__init__(weights)
        if k < 0:
            raise ConfigurationError(f"RRF's k must be >= 0, not {k}")
        self.k = float(k)

    def contributions(self, ranked: RankedList) -> Float64Array:
        return 1.0 / (self.k + np.arange(1, len(ranked.docs) + 1, dtype=np.float64))

    def signature(self) -> str:
        return f"rrf(k={self.k:g};{','.join(f'{w:g}' for w in self.weights)})"


class ScoreMix(Fusion):
    """CombSUM of min-max normalised scores (a list of one document, or of equal scores,
    normalises to 1)."""

    name = "mix"

    def contributions(self, ranked: RankedList) -> Float64Array:
        s = np.asarray(ranked.scores, dtype=np.float64)
        if not len(s):
            return s
        lo, hi = float(s.min()), float(s.max())
        if hi <= lo:
            return np.ones_like(s)
        return (s - lo) / (hi - lo)


FUSIONS: dict[str, Callable[..., Fusion]] = {"rrf": ReciprocalRank, "mix": ScoreMix}


def get_fusion(name: str, **params: float | Sequence[float]) -> Fusion:
    factory = FUSIONS.get(name)
    if factory is None:
        raise ConfigurationError(f"unknown fusion {name!r}; choose one of: {', '.join(FUSIONS)}")
    return factory(**params)
