"""The IR features of BOW-FD and how they weight an edge's words (Hieber & Riezler 2015, §3).

``IR_BM25`` is ``BM25(h, d) = Σ_{t ∈ h} bm25(t, d)``, summed over the *occurrences* of terms in
the derivation; its weight is the default IR weight ``v`` ("Default Retrieval Weights").

Sparse IR features ("Decomposable Retrieval Features": the term weights fire *per term*, and
their weights "are interpretable as additional, general term weights"): besides ``IR_BM25``
every English term ``t`` has the feature ``ir:<t>`` whose value is the bm25 weight its
occurrences in ``h`` earn; learning to rank gives it a weight δ_t, so ``t`` earns
``(v + δ_t)·bm25(t, d)`` and a term without a learned weight (an unseen named entity) keeps the
default ``v``. Without ``ir:`` weights the model is the plain one. :func:`term_bonus` is the one
rule the fast search, the explanations and learning to rank weight a word by.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from service.errors import ConfigurationError
from service.forest.hypergraph import FloatArray

IR_FEATURE = "IR_BM25"  # Σ_{t ∈ h} bm25(t, d): the feature whose weight is v
IR_TERM_PREFIX = "ir:"  # ir:<term>: bm25(term, d) per occurrence in h; weight δ_term (added to v)


def term_bonus(
    bm25: FloatArray, terms: NDArray[np.integer[Any]], v: float, delta: FloatArray | None
) -> tuple[FloatArray, float]:
    """What an edge's bonus sums, and the factor it is scaled by: ``(bm25, v)``, or with
    per-term weights ``delta`` (indexed by ``terms``) ``(bm25·(v + δ_t), 1)``. One rule for
    the fast search, explanations and learning to rank, so their arithmetic is identical."""
    if delta is None:
        return bm25, v
    return bm25 * (v + delta[terms]), 1.0


def ir_term_feature(term: str) -> str:
    """The name of the sparse IR feature of the English term ``term``."""
    return IR_TERM_PREFIX + term


def is_ir_term_feature(name: str) -> bool:
    """True for the names of the per-term IR features (``ir:<term>``)."""
    return name.startswith(IR_TERM_PREFIX)


def term_deltas(terms: Sequence[str], weights: Mapping[str, float]) -> FloatArray | None:
    """δ_t of each term (its ``ir:<t>`` weight, 0 if none), or None if all are 0."""
    delta = np.array([float(weights.get(IR_TERM_PREFIX + t, 0.0)) for t in terms])
    if not np.all(np.isfinite(delta)):
        bad = [t for t, x in zip(terms, delta.tolist(), strict=True) if not math.isfinite(x)]
        raise ConfigurationError(f"per-term IR weights must be finite; not for {bad[:5]}")
    return delta if np.any(delta != 0.0) else None
