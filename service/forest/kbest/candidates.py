"""What both unique k-best engines prepare alike (Huang & Chiang 2005, Algorithm 3).

Before the lazy search of :class:`~service.forest.kbest.lazy.LazyKBest` (and the reference
built on it) or of the compiled kernel (:mod:`.compiled`) starts, each node's initial candidates
``⟨e, 0⟩`` (GetCandidates) are scored and sorted once, in numpy, the edges' target words get
canonical ids (equal strings, equal ids) and, when an edge's arrays leave the place of its gaps
open, its target is read as a pattern of word ids and gaps. Both engines take these from here,
so they add the same floats in the same order and compare the same ids: the ground of their
identical lists. The time budget and the clock's rhythm of
:func:`~service.forest.kbest.unique_kbest` are here too, the same for both.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from service.core.csr import ptr_from_counts
from service.forest.hypergraph import FloatArray, HypergraphArrays, IntArray, Yield

# Default time budget (seconds) of :func:`~service.forest.kbest.unique_kbest` when no
# ``max_derivations`` is given: the search for distinct strings stops after about this long
# (and keeps what it found).
UNIQUE_KBEST_TIME_BUDGET_S = 0.5
# The unique k-best searches read the clock once per this many derivations (the compiled one:
# after this many, then after more at each call of its kernel).
CLOCK_EVERY = 256

# A derivation of a node: (score, edge, ranks of the tails' derivations).
Entry = tuple[float, int, tuple[int, ...]]


def initial_candidates(
    a: HypergraphArrays, w: FloatArray, best: FloatArray, back: IntArray
) -> tuple[IntArray, FloatArray, IntArray]:
    """The initial candidates ``⟨e, 0⟩`` of every node (GetCandidates), sorted per node.

    The incoming edges other than the 1-best whose tails all have a derivation, scored
    ``W(e) + Σ_i viterbi(T_i(e))`` (summed in tail order, as a derivation's score is) and sorted
    per node by ``(−score, edge id)``: the order in which a heap of ``(−score, e, 0)`` pops them.
    Returns the edges, their scores and, per node ``v``, the run ``ptr[v] : ptr[v + 1]``.
    """
    arity = np.diff(a.tail_ptr)
    max_arity = int(arity.max()) if a.num_edges else 0
    score = np.array(w, dtype=np.float64)
    usable = np.ones(a.num_edges, dtype=bool)
    first = a.tail_ptr[:-1]
    for i in range(max_arity):
        has = arity > i
        tail = a.tail_nodes[first[has] + i]
        score[has] += best[tail]
        usable[has] &= back[tail] >= 0
    usable &= back[a.edge_head] != np.arange(a.num_edges)
    ids = np.flatnonzero(usable)
    heads = a.edge_head[ids]
    order = np.lexsort((ids, -score[ids], heads))
    run = ids[order]
    return run, score[run], ptr_from_counts(np.bincount(heads, minlength=a.num_nodes))


def canonical_term_ids(a: HypergraphArrays) -> IntArray:
    """The edges' target words as ids; equal strings get equal ids (the first id of the string)."""
    first_id: dict[str, int] = {}
    canon = np.array(
        [first_id.setdefault(s, i) for i, s in enumerate(a.vocabulary)], dtype=np.int64
    )
    return canon[a.term_ids] if len(a.term_ids) else np.zeros(0, dtype=np.int64)


def target_pattern(target: Yield, words: Sequence[int]) -> tuple[int, ...]:
    """An edge's target as word ids (``words``, in order) and gaps ``~i`` (tail ``i``'s yield)."""
    it = iter(words)
    return tuple(next(it) if isinstance(s, str) else ~s for s in target)
