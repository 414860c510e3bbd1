"""Compiled (numba) scoring kernel of the inverted index: accumulate Σ_t w_t·bm25(t, d) over
the query terms' postings into a dense float32 array and select the top k.

It does the same arithmetic in the same order as the numpy reference
(:meth:`InvertedIndex.accumulate` + :func:`service.index.inverted.top_k`) and is tested
against it; it exists because per-term numpy calls cost more than the work itself on short
queries (bench/bench_index.py). Ties are broken by ascending document number. The kernel is
compiled on first use (:func:`service.core.jit.compiled`), so importing the index costs no numba.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from service.core.jit import compiled


def _accumulate_topk(
    offsets: npt.NDArray[np.int64],
    post_docs: npt.NDArray[np.int32],
    post_weight: npt.NDArray[np.float32],
    rsj: npt.NDArray[np.float32],
    term_ids: npt.NDArray[np.int64],
    term_weights: npt.NDArray[np.float32],
    n_docs: int,
    k: int,
) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.float32], int]:
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
    return cand[order], cand_scores[order], n_reached


def accumulate_topk(
    offsets: npt.NDArray[np.int64],
    post_docs: npt.NDArray[np.int32],
    post_weight: npt.NDArray[np.float32],
    rsj: npt.NDArray[np.float32],
    term_ids: npt.NDArray[np.int64],
    term_weights: npt.NDArray[np.float32],
    n_docs: int,
    k: int,
) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.float32], int]:
    """Top-k documents and scores of Σ_i term_weights[i]·bm25(term_ids[i], d), best first,
    over the documents reached through a term with a non-zero weight and rsj, and how many
    documents that is. Term ids must be valid (the caller checks)."""
    result: tuple[Any, Any, int] = compiled(_accumulate_topk)(
        offsets, post_docs, post_weight, rsj, term_ids, term_weights, n_docs, k
    )
    return result


def _gather_postings(
    offsets: npt.NDArray[np.int64],
    post_docs: npt.NDArray[np.int32],
    post_tf: npt.NDArray[Any],
    post_weight: npt.NDArray[np.float32],
    precomputed: bool,
    rsj64: npt.NDArray[np.float64],
    norm64: npt.NDArray[np.float64],
    live: npt.NDArray[np.bool_],
    use_live: bool,
    term_ids: npt.NDArray[np.int64],
    among: npt.NDArray[np.int32],
    use_among: bool,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int32], npt.NDArray[np.float32]]:
    n = term_ids.shape[0]
    size = 0
    for i in range(n):
        t = term_ids[i]
        if t >= 0:
            m = offsets[t + 1] - offsets[t]
            size += min(m, among.shape[0]) if use_among else m
    docs = np.empty(size, dtype=np.int32)
    weights = np.empty(size, dtype=np.float32)
    ptr = np.zeros(n + 1, dtype=np.int64)
    j = 0
    for i in range(n):
        t = term_ids[i]
        if t < 0:  # a term this index does not hold
            ptr[i + 1] = j
            continue
        lo, hi = offsets[t], offsets[t + 1]
        a = 0
        p = lo
        while p < hi:
            if use_among:  # both ascending: the next wanted document, searched from p
                if a == among.shape[0]:
                    break
                p += np.searchsorted(post_docs[p:hi], among[a])
                a += 1
                if p == hi or post_docs[p] != among[a - 1]:
                    continue
            d = post_docs[p]
            if precomputed:
                docs[j] = d
                weights[j] = post_weight[p]
                j += 1
            elif not use_live or live[d]:
                # the expression InvertedIndex.postings computes (the builder's), rounded alike
                tf = np.float64(post_tf[p])
                den = norm64[d] + tf
                x = tf / den if den > 0 else 0.0
                docs[j] = d
                weights[j] = np.float32(rsj64[t] * x)
                j += 1
            p += 1
        ptr[i + 1] = j
    return ptr, docs[:j], weights[:j]


def gather_postings(
    offsets: npt.NDArray[np.int64],
    post_docs: npt.NDArray[np.int32],
    post_tf: npt.NDArray[Any],
    post_weight: npt.NDArray[np.float32] | None,
    rsj64: npt.NDArray[np.float64] | None,
    norm64: npt.NDArray[np.float64] | None,
    live: npt.NDArray[np.bool_] | None,
    term_ids: npt.NDArray[np.int64],
    among: npt.NDArray[np.integer[Any]] | None,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int32], npt.NDArray[np.float32]]:
    """The postings of each of ``term_ids`` (−1: none) concatenated, as CSR rows (``ptr``,
    ``docs``, ``weights``): precomputed weights (``post_weight``), or computed on read from
    ``rsj64``, ``norm64`` and the tf without the documents not ``live``; with ``among``
    (ascending) only those documents. One compiled pass for what
    :meth:`~service.index.inverted.InvertedIndex.postings` does term by term (its reference)."""
    f64 = np.zeros(0, dtype=np.float64)
    result: tuple[Any, Any, Any] = compiled(_gather_postings)(
        offsets, post_docs, post_tf,
        post_weight if post_weight is not None else np.zeros(0, dtype=np.float32),
        post_weight is not None,
        rsj64 if rsj64 is not None else f64, norm64 if norm64 is not None else f64,
        live if live is not None else np.zeros(0, dtype=np.bool_), live is not None,
        np.ascontiguousarray(term_ids, dtype=np.int64),
        np.ascontiguousarray(among if among is not None else np.zeros(0), dtype=np.int32),
        among is not None,
    )  # fmt: skip
    return result
