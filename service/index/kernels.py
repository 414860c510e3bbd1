"""Compiled (numba) scoring kernel of the inverted index: accumulate Σ_t w_t·bm25(t, d) over
the query terms' postings into a dense float32 array and select the top k.

It does the same arithmetic in the same order as the numpy reference
(:meth:`InvertedIndex.accumulate` + :func:`service.index.inverted.top_k`) and is tested
against it; it exists because per-term numpy calls cost more than the work itself on short
queries (bench/bench_index.py). Ties are broken by ascending document number. The kernel is
compiled on first use (:func:`service.jit.compiled`), so importing the index costs no numba.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from service.jit import compiled


def _accumulate_topk(
    offsets: npt.NDArray[np.int64],
    post_docs: npt.NDArray[np.int32],
    post_weight: npt.NDArray[np.float32],
    rsj: npt.NDArray[np.float32],
    term_ids: npt.NDArray[np.int64],
    term_weights: npt.NDArray[np.float32],
    n_docs: int,
    k: int,
) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.float32]]:
    scores = np.zeros(n_docs, dtype=np.float32)
    reached = np.zeros(n_docs, dtype=np.bool_)
    n_reached = 0
    for i in range(term_ids.shape[0]):
        t = term_ids[i]
        w = term_weights[i]
        if w == 0 or rsj[t] == 0:  # adds nothing and reaches no document
            continue
        for p in range(offsets[t], offsets[t + 1]):
            d = post_docs[p]
            if w == 1.0:
                scores[d] += post_weight[p]
            else:
                scores[d] += w * post_weight[p]
            if not reached[d]:
                reached[d] = True
                n_reached += 1
    cand = np.empty(n_reached, dtype=np.int32)
    cand_scores = np.empty(n_reached, dtype=np.float32)
    j = 0
    for d in range(n_docs):  # in document order
        if reached[d]:
            cand[j] = d
            cand_scores[j] = scores[d]
            j += 1
    if k < n_reached:
        threshold = -np.partition(-cand_scores, k - 1)[k - 1]
        n_above = 0
        for i in range(n_reached):
            if cand_scores[i] > threshold:
                n_above += 1
        ties_left = k - n_above  # ties at the threshold go to the smallest documents
        keep = np.empty(k, dtype=np.int32)
        keep_scores = np.empty(k, dtype=np.float32)
        j = 0
        for i in range(n_reached):
            s = cand_scores[i]
            if s > threshold or (s == threshold and ties_left > 0):
                if s == threshold:
                    ties_left -= 1
                keep[j] = cand[i]
                keep_scores[j] = s
                j += 1
        cand, cand_scores = keep, keep_scores
    order = np.argsort(-cand_scores, kind="mergesort")  # stable: document order within ties
    return cand[order], cand_scores[order]


def accumulate_topk(
    offsets: npt.NDArray[np.int64],
    post_docs: npt.NDArray[np.int32],
    post_weight: npt.NDArray[np.float32],
    rsj: npt.NDArray[np.float32],
    term_ids: npt.NDArray[np.int64],
    term_weights: npt.NDArray[np.float32],
    n_docs: int,
    k: int,
) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.float32]]:
    """Top-k documents and scores of Σ_i term_weights[i]·bm25(term_ids[i], d), best first,
    over the documents reached through a term with a non-zero weight and rsj. Term ids
    must be valid (the caller checks)."""
    result: tuple[Any, Any] = compiled(_accumulate_topk)(
        offsets, post_docs, post_weight, rsj, term_ids, term_weights, n_docs, k
    )
    return result
