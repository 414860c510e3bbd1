"""Exact maximum-inner-product search over int8 passage vectors, scored per document by its
best passage (MaxP, Dai & Callan 2019, §3.2), its opening preferred: every passage after a
page's first scores its cosine minus ``later`` (0: MaxP as the paper's; a large penalty: the
first passage only, FirstP), so a later paragraph outranks the page's opening only when it is
clearly closer to the query (bench/README.md, "A page's opening preferred", measures it).

Vectors are stored as int8 rows with one float scale each (symmetric quantisation: the row
divided by its largest magnitude over 127, rounded), and the query is quantised the same way.
A passage's score is then ``scale_row · scale_query · Σ_j q_j v_j`` with the sum taken in
integers, which the compiled kernel vectorises exactly (integer addition is associative), so
the fast path and the reference agree to the last bit. The per-query scale does not change
the order; it is kept so that scores are cosines (up to the quantisation error).

:func:`doc_scores_reference` is the slow, obviously correct version: one document and one
passage at a time in Python integers. :func:`doc_scores` is the compiled kernel (numba, on
first use; see :mod:`service.core.jit`), run in two halves on two threads for large collections.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import cache

import numpy as np
import numpy.typing as npt

from service.core.jit import Engine, compiled

Int8Array = npt.NDArray[np.int8]
Float32Array = npt.NDArray[np.float32]
Int64Array = npt.NDArray[np.int64]

#: Below this many passages one thread scores them all (a thread's start costs more).
PARALLEL_MIN_PASSAGES = 100_000


def quantize(rows: Float32Array) -> tuple[Int8Array, Float32Array]:
    """Symmetric int8 quantisation of each row: ``(codes, scales)``, ``row ≈ codes · scale``."""
    rows = np.atleast_2d(np.asarray(rows, dtype=np.float32))
    peak = np.abs(rows).max(axis=1) if rows.shape[1] else np.zeros(len(rows), np.float32)
    scales = np.where(peak > 0, peak / 127.0, 1.0).astype(np.float32)
    codes = np.clip(np.rint(rows / scales[:, None]), -127, 127).astype(np.int8)
    return codes, scales


def _doc_scores_kernel(
    codes: Int8Array,
    scales: Float32Array,
    doc_ptr: Int64Array,
    query: npt.NDArray[np.int16],
    query_scale: float,
    later: float,
    docs: Int64Array,
    first: int,
    last: int,
    out: Float32Array,
) -> None:
    """Documents ``docs[first..last-1]`` (positions ``first..last-1`` themselves when
    ``docs`` is empty): the best passage's score of each into ``out`` (at the same
    positions), each passage after a document's first less ``later``."""
    d = codes.shape[1]
    every = len(docs) == 0
    for i in range(first, last):
        doc = i if every else docs[i]
        best = -np.inf
        for p in range(doc_ptr[doc], doc_ptr[doc + 1]):
            acc = np.int32(0)
            for j in range(d):  # |code · q| <= 127 · 127: each product fits 16 bits
                acc += np.int32(np.int16(codes[p, j]) * query[j])
            s = np.float64(acc) * np.float64(scales[p]) * query_scale
            if p > doc_ptr[doc]:
                s -= later
            if s > best:
                best = s
        out[i] = best


@cache
def _pool() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(2, thread_name_prefix="clir-dense")


def in_parts(
    doc_ptr: Int64Array, run: Callable[[int, int], None], docs: Int64Array | None = None
) -> None:
    """``run(first, last)`` over the documents (all, or positions in ``docs``): at once when
    their passages are few, else in two halves of about equal passages on two threads (the
    kernels release the GIL)."""
    n = len(doc_ptr) - 1 if docs is None else len(docs)
    passages = int(doc_ptr[-1]) if docs is None else int(np.sum(doc_ptr[docs + 1] - doc_ptr[docs]))
    if passages < PARALLEL_MIN_PASSAGES or n < 2:
        run(0, n)
        return
    mid = int(np.searchsorted(doc_ptr, doc_ptr[-1] // 2)) if docs is None else n // 2
    list(_pool().map(lambda part: run(*part), [(0, mid), (mid, n)]))


def doc_scores(
    codes: Int8Array,
    scales: Float32Array,
    doc_ptr: Int64Array,
    query: Float32Array,
    engine: Engine = "compiled",
    docs: Int64Array | None = None,
    later: float = 0.0,
) -> Float32Array:
    """Each document's best passage score (a cosine, up to quantisation) for the L2-normalised
    ``query``, every passage after its first less ``later``; ``doc_ptr``: the passages of
    document ``i`` are rows ``doc_ptr[i]:doc_ptr[i+1]`` (every document has at least one).
    ``docs``: score only these documents (the result in their order)."""
    if engine == "reference":
        out = doc_scores_reference(codes, scales, doc_ptr, query, later)
        return out if docs is None else out[docs]
    qcodes, qscale = quantize(query)
    q16 = qcodes[0].astype(np.int16)
    n = len(doc_ptr) - 1 if docs is None else len(docs)
    which = np.zeros(0, np.int64) if docs is None else docs  # empty: every document
    out = np.empty(n, dtype=np.float32)
    kernel = compiled(_doc_scores_kernel)
    scale = float(qscale[0])

    def run(first: int, last: int) -> None:
        kernel(codes, scales, doc_ptr, q16, scale, float(later), which, first, last, out)

    in_parts(doc_ptr, run, docs)
    return out


def doc_scores_reference(
    codes: Int8Array,
    scales: Float32Array,
    doc_ptr: Int64Array,
    query: Float32Array,
    later: float = 0.0,
) -> Float32Array:
    """:func:`doc_scores` one passage at a time, in Python integers (the reference)."""
    qcodes, qscale = quantize(query)
    q = [int(x) for x in qcodes[0]]
    out = np.empty(len(doc_ptr) - 1, dtype=np.float32)
    for doc in range(len(doc_ptr) - 1):
        best = -float("inf")
        for p in range(int(doc_ptr[doc]), int(doc_ptr[doc + 1])):
            dot = sum(int(c) * qj for c, qj in zip(codes[p].tolist(), q, strict=True))
            score = dot * float(scales[p]) * float(qscale[0])
            best = max(best, score if p == doc_ptr[doc] else score - later)
        out[doc] = best
    return out


def top_docs(
    scores: Float32Array, depth: int, live: npt.NDArray[np.bool_] | None = None
) -> tuple[Int64Array, Float32Array]:
    """The ``depth`` best documents by ``scores`` (ties: the smaller document number first),
    only those ``live`` when given."""
    if live is not None:
        scores = np.where(live, scores, -np.inf).astype(np.float32)
    n = int(np.count_nonzero(np.isfinite(scores)))
    depth = min(depth, n)
    if depth <= 0:
        return np.zeros(0, np.int64), np.zeros(0, np.float32)
    if depth < len(scores):
        # every document scoring at least the depth-th best, then the exact order
        kth = np.partition(scores, len(scores) - depth)[len(scores) - depth]
        cand = np.flatnonzero(scores >= kth)
    else:
        cand = np.flatnonzero(np.isfinite(scores))
    order = np.lexsort((cand, -scores[cand]))[:depth]
    docs = cand[order].astype(np.int64)
    return docs, scores[docs]
