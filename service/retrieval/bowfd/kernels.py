"""BOW-FD's compiled kernels and the exact block search (Hieber & Riezler 2015, §3).

The fast search scores documents in blocks by one compiled (max, +) inside pass over the live
forest with the documents as the innermost, vectorised loop (:func:`_block_kernel`), with the
reference's arithmetic in the reference's order (:mod:`service.retrieval.bowfd.reference`), so
scores are identical to the bit. A per-document incremental pass (recomputing only nodes above
activated edges, from a heap) was measured too: its branchy, random-access inner loop was 20×
slower than the block pass (bench/bench_bowfd.py records the measurements).

The other kernels serve the preparation (:mod:`service.retrieval.bowfd.prepare`): the SMT
Viterbi outside scores (:func:`_outside_kernel`), the most occurrences of each term in one
derivation (:func:`_max_count_kernel`) and the grouping of postings by document
(:func:`_scatter_kernel`). Every kernel is a plain function compiled on first use
(:func:`service.core.jit.compiled`, through :func:`kernel`): importing this module does not import
numba. The searches that call the kernels on a prepared sentence are in
:mod:`service.retrieval.bowfd.ranking` (the block pass, the bounds) and
:mod:`service.retrieval.bowfd.prepare` (the outside scores, the counts, the grouping).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from service.core.jit import compiled
from service.forest.hypergraph import FloatArray, IntArray
from service.index.inverted import Int32Array


def _outside_kernel(
    in_ptr: IntArray,
    in_edges: IntArray,
    tail_ptr: IntArray,
    tail_nodes: IntArray,
    w: FloatArray,
    inside: FloatArray,
    goal: int,
    outside: FloatArray,
    edge_through: FloatArray,
) -> None:  # pragma: no cover - compiled by numba
    """Max-plus outside scores and, per edge, the best score of a derivation using it."""
    outside[:] = -np.inf
    outside[goal] = 0.0
    for x in range(inside.shape[0] - 1, -1, -1):
        for p in range(in_ptr[x], in_ptr[x + 1]):
            e = in_edges[p]
            through = outside[x] + w[e]
            for q in range(tail_ptr[e], tail_ptr[e + 1]):
                through += inside[tail_nodes[q]]
            edge_through[e] = through
            if through == -np.inf:
                continue
            for q in range(tail_ptr[e], tail_ptr[e + 1]):
                u = tail_nodes[q]
                s = through - inside[u]  # siblings' inside + W(e) + outside(head)
                if s > outside[u]:
                    outside[u] = s


def _max_count_kernel(
    in_ptr: IntArray,
    in_edges: IntArray,
    tail_ptr: IntArray,
    tail_nodes: IntArray,
    occ_ptr: IntArray,
    occ_term: IntArray,
    goal: int,
    out: FloatArray,
) -> None:  # pragma: no cover - compiled by numba
    """Per term, the most occurrences of it in one derivation of the goal ((max, +) counts
    over a live forest, where every node has a derivation)."""
    n_terms = out.shape[0]
    num_nodes = in_ptr.shape[0] - 1
    best = np.zeros((num_nodes, n_terms), dtype=np.int32)
    tmp = np.zeros(n_terms, dtype=np.int32)
    for x in range(num_nodes):
        row = best[x]
        for p in range(in_ptr[x], in_ptr[x + 1]):
            e = in_edges[p]
            tmp[:] = 0
            for q in range(tail_ptr[e], tail_ptr[e + 1]):
                tmp += best[tail_nodes[q]]
            for o in range(occ_ptr[e], occ_ptr[e + 1]):
                t = occ_term[o]
                if t < n_terms:
                    tmp[t] += 1
            for t in range(n_terms):
                if tmp[t] > row[t]:
                    row[t] = tmp[t]
    for t in range(n_terms):
        out[t] = best[goal, t]


def _block_kernel(
    in_ptr: IntArray,
    in_edges: IntArray,
    tail_ptr: IntArray,
    tail_nodes: IntArray,
    occ_ptr: IntArray,
    occ_term: IntArray,
    term_edge_ptr: IntArray,
    term_edges: IntArray,
    w: FloatArray,
    goal: int,
    doc_ptr: IntArray,
    doc_terms: IntArray,
    doc_weights: FloatArray,
    v: float,
    order: IntArray,
    block: int,
    bounded: bool,
    upper: FloatArray,
    theta0: float,
    k: int,
    eps: float,
    out: FloatArray,
    board: FloatArray,
    slot: int,
    ranks: IntArray,
    pair: IntArray,
    seed: FloatArray,
) -> int:  # pragma: no cover - compiled by numba
    """BOW-FD scores of the candidates ``order[0], order[1], …`` in blocks of ``block``
    documents; returns how many it scored (``out[i]`` is the score of ``order[i]``).

    Per block: W'(e, d) for every live edge and document of the block — the SMT weight, plus
    v·Σ bm25 over the edge's target words on the edges the document's terms activate, summed
    in word order as the reference does — then one (max, +) inside pass over the live forest
    with the block's documents as the innermost (vectorised) loop. The arithmetic is the
    reference's, in the same order, so the scores are identical.

    ``bounded``: ``order`` is by descending upper bound ``upper``; θ, a lower bound on the k-th
    best score, is the larger of ``theta0`` and the k-th best score found so far; scoring stops
    at the first document whose upper bound is below θ (it and all after it cannot enter the
    top k).

    ``board`` (``slots × len(ranks)``; ``slot`` −1: none) is shared with searches of other
    documents running at the same time (the shards of a collection on one machine, one slot
    each; see :mod:`service.retrieval.bowfd.boards`). At every block this search posts, in row
    ``slot``, the ``ranks[r]``-th best score it has found (a cell only rises: a shard's earlier
    segments' posts stay valid), and at rank k also θ; θ rises to every score k documents are
    known to reach: a slot's rank-k cell, or for this slot and another ``s`` the smaller of
    this slot's ``k − ranks[r]``-th best (column ``pair[r]``) and ``s``'s ``ranks[r]``-th best
    (distinct documents: ``k`` of them reach it). Every cell is such a score whenever it is
    read, so a stale read only prunes less.

    ``seed`` (ascending, at most k): scores of other documents of the same slot (a shard's
    segments searched before), kept with the scores found here: θ and the posts are those of
    the slot's documents so far, not of this search's alone.
    """
    num_nodes = in_ptr.shape[0] - 1
    num_edges = w.shape[0]
    n_terms = term_edge_ptr.shape[0] - 1
    wp = np.empty((num_edges, block), dtype=np.float64)
    best = np.empty((num_nodes, block), dtype=np.float64)
    tmp = np.empty(block, dtype=np.float64)
    docw = np.zeros(n_terms + 1, dtype=np.float64)
    stamp = np.zeros(num_edges, dtype=np.int64)
    topk = np.zeros(max(k, 1), dtype=np.float64)  # min-heap of the best scores found
    n_top = seed.shape[0]  # an ascending array is a min-heap
    topk[:n_top] = seed
    theta = theta0
    n = order.shape[0]
    n_ranks = ranks.shape[0]
    blocks = 0
    start = 0
    done = n == 0
    while True:
        if bounded:
            if n_top == k and topk[0] > theta:
                theta = topk[0]
            if slot >= 0:  # post this search's scores, then read everyone's
                blocks += 1
                # the ranks below k matter to other slots only; sorting costs: every 8 blocks
                if board.shape[0] > 1 and n_top > 0 and (blocks % 8 == 1 or done):
                    found = np.sort(topk[:n_top])  # ascending
                    for r in range(n_ranks):
                        if ranks[r] <= n_top and found[n_top - ranks[r]] > board[slot, r]:
                            board[slot, r] = found[n_top - ranks[r]]
                if theta > board[slot, n_ranks - 1]:
                    board[slot, n_ranks - 1] = theta
                for other in range(board.shape[0]):
                    if board[other, n_ranks - 1] > theta:
                        theta = board[other, n_ranks - 1]
                    if other == slot:
                        continue
                    for r in range(n_ranks - 1):
                        f = min(board[slot, pair[r]], board[other, r])
                        if f > theta:
                            theta = f
        if done:
            break
        stop = min(start + block, n)
        if bounded:
            j = start
            while j < stop and upper[order[j]] >= theta - eps:
                j += 1
            stop = j
            if stop == start:  # no document left can enter: post once more, then stop
                done = True
                continue
        nb = stop - start
        for e in range(num_edges):
            for b in range(nb):
                wp[e, b] = w[e]
        for b in range(nb):
            d = order[start + b]
            mark = start + b + 1
            for p in range(doc_ptr[d], doc_ptr[d + 1]):
                docw[doc_terms[p]] = doc_weights[p]
            for p in range(doc_ptr[d], doc_ptr[d + 1]):
                t = doc_terms[p]
                for q in range(term_edge_ptr[t], term_edge_ptr[t + 1]):
                    e = term_edges[q]
                    if stamp[e] == mark:
                        continue
                    stamp[e] = mark
                    s = 0.0
                    for o in range(occ_ptr[e], occ_ptr[e + 1]):
                        s += docw[occ_term[o]]
                    wp[e, b] = w[e] + v * s
            for p in range(doc_ptr[d], doc_ptr[d + 1]):
                docw[doc_terms[p]] = 0.0
        for x in range(num_nodes):
            row = best[x]
            for b in range(nb):
                row[b] = -np.inf
            for p in range(in_ptr[x], in_ptr[x + 1]):
                e = in_edges[p]
                for b in range(nb):
                    tmp[b] = wp[e, b]
                for q in range(tail_ptr[e], tail_ptr[e + 1]):
                    tail = best[tail_nodes[q]]
                    for b in range(nb):
                        tmp[b] += tail[b]
                for b in range(nb):
                    if tmp[b] > row[b]:
                        row[b] = tmp[b]
        for b in range(nb):
            score = best[goal, b]
            out[start + b] = score
            if not bounded or k == 0:
                continue
            if n_top < k:  # keep the k best scores in a min-heap
                j = n_top
                n_top += 1
                while j > 0:
                    up = (j - 1) // 2
                    if topk[up] <= score:
                        break
                    topk[j] = topk[up]
                    j = up
                topk[j] = score
            elif score > topk[0]:
                j = 0
                while True:
                    c = 2 * j + 1
                    if c >= k:
                        break
                    if c + 1 < k and topk[c + 1] < topk[c]:
                        c += 1
                    if topk[c] >= score:
                        break
                    topk[j] = topk[c]
                    j = c
                topk[j] = score
        start = stop
        done = start == n
    return start


def _bounds_kernel(
    doc_ptr: IntArray,
    doc_terms: IntArray,
    rows: FloatArray,
    best_through: FloatArray,
    max_count: FloatArray,
    factor: float,
    viterbi: float,
    lower: FloatArray,
    upper: FloatArray,
) -> None:  # pragma: no cover - compiled by numba
    """Every candidate's lower and upper bound in one pass over its row (the formulas of
    :func:`~service.retrieval.bowfd.ranking.doc_bounds`; the row's terms are numbered by
    descending ``best_through``, so the running sum is the upper bound's C_i)."""
    for i in range(doc_ptr.shape[0] - 1):
        lo = viterbi
        up = viterbi
        c = 0.0
        for p in range(doc_ptr[i], doc_ptr[i + 1]):
            t = doc_terms[p]
            g = best_through[t]
            x = g + factor * rows[p]
            if x > lo:
                lo = x
            c += factor * max_count[t] * rows[p]
            y = g + c
            if y > up:
                up = y
        lower[i] = lo
        upper[i] = up


def _scatter_kernel(
    all_docs: Int32Array,
    all_terms: IntArray,
    all_w: FloatArray,
    slot: IntArray,
    doc_terms: IntArray,
    doc_weights: FloatArray,
) -> None:  # pragma: no cover - compiled by numba
    """Stable counting-sort scatter of postings into per-document rows."""
    for i in range(all_docs.shape[0]):
        d = all_docs[i]
        j = slot[d]
        doc_terms[j] = all_terms[i]
        doc_weights[j] = all_w[i]
        slot[d] = j + 1


_PY_KERNELS: dict[str, Any] = {
    "outside": _outside_kernel,
    "max_count": _max_count_kernel,
    "block": _block_kernel,
    "scatter": _scatter_kernel,
    "bounds": _bounds_kernel,
}


def kernel(name: str) -> Any:
    """The kernel ``name`` compiled by numba (lazily; cached on disk)."""
    return compiled(_PY_KERNELS[name])


DEFAULT_BLOCK = 32  # documents per inside pass (bench/bench_bowfd.py)
_EPS = 1e-9  # relative safety margin of the bound comparisons (rounding)
_QUANTILES = 8  # a slot posts its (j/8)·k-th best scores, j = 1..8 (and k minus those)


def board_ranks(k: int) -> tuple[IntArray, IntArray]:
    """The ranks a board posts for a top ``k`` (ascending, the last ``k``) and, for each but
    the last, the column of ``k`` minus it (see :func:`_block_kernel`)."""
    cut = {j * k // _QUANTILES for j in range(1, _QUANTILES)}
    ranks = sorted({m for m in cut | {k - m for m in cut} if 0 < m < k} | {k})
    col = {m: i for i, m in enumerate(ranks)}
    return np.array(ranks, dtype=np.int64), np.array([col[k - m] for m in ranks[:-1]], np.int64)


@dataclass(frozen=True)
class Board:
    """One sentence's board and this search's row of it (see :func:`_block_kernel`): ``cells``
    is ``slots × len(board_ranks(k)[0])``, shared by the searches running at the same time."""

    cells: FloatArray
    slot: int

    def post_lower_bounds(self, lower: FloatArray, k: int) -> float:
        """Post, at each rank m of the board, the m-th best of the candidates' lower bounds
        (m of this search's documents reach it before any is scored, so the other searches
        prune from the start); returns the ``k``-th best lower bound (−∞ below ``k``)."""
        n = len(lower)
        if n < k:
            return -np.inf
        ranks, _ = board_ranks(k)
        cols = range(len(ranks)) if self.cells.shape[0] > 1 else range(len(ranks) - 1, len(ranks))
        part = np.partition(lower, [n - int(ranks[r]) for r in cols])
        row = self.cells[self.slot]
        for r in cols:
            row[r] = max(row[r], part[n - int(ranks[r])])
        return float(part[n - k])

    def floor(self, k: int) -> float:
        """The best score the board says ``k`` documents reach (the rule of
        :func:`_block_kernel`: any slot's rank-``k`` cell, or this slot's ``k − m``-th best
        and another's m-th best)."""
        ranks, pair = board_ranks(k)
        cells, last = self.cells, len(ranks) - 1
        theta = float(cells[:, last].max()) if cells.shape[0] else -np.inf
        for other in range(cells.shape[0]):
            if other != self.slot:
                paired = np.minimum(cells[self.slot, pair], cells[other, :last])
                theta = max(theta, float(paired.max(initial=-np.inf)))
        return theta

    def args(self, k: int) -> tuple[FloatArray, int, IntArray, IntArray]:
        ranks, pair = board_ranks(k)
        if self.cells.ndim != 2 or self.cells.shape[1] != len(ranks):
            raise ValueError(f"a board for k={k} has {len(ranks)} columns")
        return self.cells, self.slot, ranks, pair


_NO_BOARD = (np.full((0, 1), -np.inf), -1, np.ones(1, dtype=np.int64), np.zeros(0, np.int64))


def bound_margin(viterbi: float) -> float:
    """How far below θ an upper bound may fall and still be scored (rounding of the sums)."""
    return _EPS * (1.0 + abs(viterbi))


def board_args(board: Board | None, k: int) -> tuple[FloatArray, int, IntArray, IntArray]:
    """The block kernel's board arguments: ``board``'s for a top ``k``, or none shared."""
    return _NO_BOARD if board is None else board.args(k)
