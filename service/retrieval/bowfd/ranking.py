"""One sentence's top ``k`` documents by BOW-FD score, fast and exact (Hieber & Riezler 2015, §3).

With v ≥ 0 (all bonuses ≥ 0) bounds skip documents that cannot enter the top k
(:func:`doc_bounds`): lower bound = the best SMT derivation producing one of the document's terms
plus that term's bonus; upper bound = max over the document's terms t_i, ordered by the best SMT
score g_i of a derivation producing them, of g_i + v·Σ_{j≤i} max_count_j·bm25(t_j, d). Documents
are scored (:func:`block_scores`, the block pass) by descending upper
bound until it falls below the k-th best score known (about 1–2k of 16k candidates for k=1000;
bench/bench_bowfd.py records the measurements). Scores are in the log domain (max-plus), ties
broken by ascending document number.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from service.forest.hypergraph import FloatArray, IntArray
from service.index.inverted import Int32Array
from service.retrieval.bowfd.kernels import DEFAULT_BLOCK, Board, board_args, bound_margin, kernel
from service.retrieval.bowfd.prepare import PreparedSentence


def fast_bounds(
    prep: PreparedSentence, rows: FloatArray, factor: float
) -> tuple[FloatArray, FloatArray]:
    """Every candidate's lower and upper bound (the kernel ``bounds``) from its IR rows
    (``prep.ir_rows(v)``)."""
    n = len(prep.docs)
    lower, upper = np.empty(n), np.empty(n)
    if n:
        kernel("bounds")(
            prep.doc_ptr, prep.doc_terms, np.ascontiguousarray(rows, dtype=np.float64),
            prep.best_through, prep.max_count, float(factor), float(prep.viterbi), lower, upper,
        )  # fmt: skip
    return lower, upper


def _seed(scores: FloatArray | None, k: int) -> FloatArray:
    """The ``k`` best of ``scores``, ascending (the kernel's heap starts with them)."""
    if scores is None or k == 0:
        return np.zeros(0)
    return np.ascontiguousarray(np.sort(np.asarray(scores, dtype=np.float64))[-k:])


def block_scores(
    prep: PreparedSentence,
    v: float,
    order: IntArray,
    *,
    upper: FloatArray | None = None,
    theta0: float = -np.inf,
    k: int = 0,
    block: int = DEFAULT_BLOCK,
    board: Board | None = None,
    seed: FloatArray | None = None,
    ir: tuple[FloatArray, float] | None = None,
) -> tuple[FloatArray, int]:
    """The block pass (the kernel ``block`` of :mod:`~service.retrieval.bowfd.kernels`) over
    the candidates ``order`` of ``prep``: their scores, and how many were scored before the
    bounds stopped the pass (with ``upper``, ``theta0`` and ``k``; ``board``, ``seed``: see
    :func:`rank_sentence`). ``ir``: ``prep.ir_rows(v)`` when the caller has it already."""
    f = prep.live
    order = np.ascontiguousarray(order, dtype=np.int64)
    out = np.empty(len(order), dtype=np.float64)
    bounded = upper is not None
    ub = upper if upper is not None else np.zeros(len(prep.docs), dtype=np.float64)
    eps = bound_margin(prep.viterbi)
    rows, factor = prep.ir_rows(v) if ir is None else ir
    scored = kernel("block")(
        f.in_ptr, f.in_edges, f.tail_ptr, f.tail_nodes, f.occ_ptr, f.occ_term,
        prep.term_edge_ptr, prep.term_edges, f.smt, f.goal,
        prep.doc_ptr, prep.doc_terms, rows, float(factor), order, int(block), bounded,
        ub, float(theta0), int(k), eps, out, *board_args(board, k),
        _seed(seed, k if bounded else 0),
    )  # fmt: skip
    return out, int(scored)


def fast_scores(
    prep: PreparedSentence, v: float, which: IntArray | None = None, block: int = DEFAULT_BLOCK
) -> FloatArray:
    """Exact scores of the candidates ``prep.docs[which]`` (default: all), without pruning;
    equal to :func:`~service.retrieval.bowfd.reference.reference_scores`."""
    if which is None:
        which = np.arange(len(prep.docs), dtype=np.int64)
    return block_scores(prep, v, which, block=block)[0]


def doc_bounds(prep: PreparedSentence, v: float) -> tuple[FloatArray, FloatArray]:
    """Lower and upper bounds of every candidate's score (valid when every term's bonus —
    v·bm25, or (v + δ_t)·bm25 with per-term weights — is ≥ 0), in one compiled pass.

    Lower: max(Viterbi, max_t g_t + v·bm25(t, d)) — the best derivation producing t earns at
    least t's weight. Upper: max(Viterbi, max_i g_i + C_i) with terms by descending g and
    C_i = v·Σ_{j≤i} max_count_j·bm25(t_j, d) — a derivation whose last term (in that order)
    is t_i scores at most g_i in SMT and C_i in bonus. :func:`reference_bounds` is the same
    in numpy.
    """
    return fast_bounds(prep, *prep.ir_rows(v))


def reference_bounds(prep: PreparedSentence, v: float) -> tuple[FloatArray, FloatArray]:
    """:func:`doc_bounds` by whole-array numpy operations (the tested reference)."""
    n = len(prep.docs)
    vit = prep.viterbi
    if n == 0:
        return np.zeros(0), np.zeros(0)
    g = prep.best_through[prep.doc_terms]
    starts = prep.doc_ptr[:-1]
    rows, v = prep.ir_rows(v)
    lower = np.maximum(np.maximum.reduceat(g + v * rows, starts), vit)
    bonus = v * prep.max_count[prep.doc_terms] * rows
    upper = np.full(n, -np.inf)
    for i in range(n):  # the running sum of each row, as C_i is defined
        lo, hi = int(prep.doc_ptr[i]), int(prep.doc_ptr[i + 1])
        upper[i] = np.max(g[lo:hi] + np.cumsum(bonus[lo:hi]), initial=-np.inf)
    return lower, np.maximum(upper, vit)


def top_k_order(docs: Int32Array, scores: FloatArray, k: int) -> IntArray:
    """Positions of the ``k`` best (score descending, document number ascending)."""
    order = np.lexsort((docs, -scores))
    return order[:k].astype(np.int64)


@dataclass(frozen=True)
class SentenceRanking:
    """One sentence's top list (best first) with its SMT Viterbi score and diagnostics."""

    docs: Int32Array | IntArray  # document numbers (a collection's: int64 sequence numbers)
    scores: FloatArray
    viterbi: float
    complete: bool  # True if the list holds every candidate (fewer than k)
    info: dict[str, Any]


def rank_sentence(
    prep: PreparedSentence,
    v: float,
    k: int,
    *,
    bounds: bool = True,
    block: int = DEFAULT_BLOCK,
    floor: float = -np.inf,
    board: Board | None = None,
    seed: FloatArray | None = None,
) -> SentenceRanking:
    """The top ``k`` candidates of one sentence by BOW-FD score (fast and exact).

    With ``bounds`` (used when every term bonus is ≥ 0, so that W' ≥ W) the
    candidates are scored by descending upper bound (:func:`doc_bounds`) until the bound falls
    below θ, the larger of the k-th best lower bound and the k-th best score found so far:
    no document left can enter the top k. Otherwise every candidate is scored. ``floor``: a
    score that k documents elsewhere already reach (the segments of a collection ranked
    before this one): a document whose upper bound is below it cannot enter the top k of the
    union, so θ starts there (the list then holds only documents above it). ``board``: where
    such scores are shared with searches of other documents running at the same time (see
    :func:`~service.retrieval.bowfd.kernels._block_kernel`); ``seed``: the scores of the
    documents of the same board slot searched before (this shard's earlier segments): the
    search starts from their ``k``-th best and posts their ranks merged with its own.
    """
    t0 = time.perf_counter()
    n = len(prep.docs)
    rows, factor = prep.ir_rows(v)
    use_bounds = bounds and factor >= 0 and n > k and bool(np.all(rows >= 0))
    if use_bounds:
        lower, upper = fast_bounds(prep, rows, factor)
        if seed is not None and len(seed) >= k:
            floor = max(floor, float(np.partition(seed, len(seed) - k)[len(seed) - k]))
        if board is None:
            theta0 = max(float(np.partition(lower, n - k)[n - k]), floor)
        else:  # what the others may prune by from the start, and what they posted so far
            theta0 = max(board.post_lower_bounds(lower, k), floor, board.floor(k))
        # only candidates whose bound reaches θ0 can be scored (θ only rises): sort those
        keep = np.flatnonzero(upper >= theta0 - bound_margin(prep.viterbi))
        order = keep[np.argsort(-upper[keep], kind="stable")]
        out, scored = block_scores(
            prep, v, order, upper=upper, theta0=theta0, k=k, block=block, board=board,
            seed=seed, ir=(rows, factor),
        )  # fmt: skip
        cand, scores = order[:scored], out[:scored]
        bounded = {"theta0": theta0, "above_theta0": len(order)}
    else:
        cand = np.arange(n, dtype=np.int64)
        scores, scored = block_scores(prep, v, cand, block=block, ir=(rows, factor))
        bounded = {}
    docs = prep.docs[cand]
    pos = top_k_order(docs, scores, k)
    info = {
        "candidates": n,
        "scored": scored,
        "bounds": use_bounds,
        "live_edges": len(prep.live.edges),
        **bounded,
        "seconds": time.perf_counter() - t0,
    }
    return SentenceRanking(docs[pos], scores[pos], prep.viterbi, n <= k, info)
