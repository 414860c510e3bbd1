"""A binary sketch of the passage vectors that picks the candidates of a large exact search.

The exact MaxP search (:mod:`service.dense.kernels`) reads every int8 row: 1.1 GB for the 3 M
passages of 1.2 M documents, about 180 ms on two cores, bounded by memory bandwidth. Above a
size (:class:`SketchParams`), a first pass reads one bit per dimension instead (48 bytes a
passage for 384 dimensions, an eighth of the rows) and the exact kernel scores only the
passages of the documents it keeps; the answer's scores are always exact, only which
documents are considered is approximate.

The bit is the sign of the passage vector after the collection's mean vector is subtracted
(sign random projection, Charikar 2002, §3, with the identity as projection). Centring is
what makes the signs informative: E5's vectors share a large common direction (cosines
between unrelated texts are 0.7–0.9), and without it most signs are the same for every
passage — on our real vectors the first pass then kept the exact top 10 only 25 % of the time
with 10× candidates, against 88 % centred (``bench/README.md``, "Two readers"). A document's
sketch score is its best passage's agreement with the query's signs (minus the Hamming
distance: the number of equal bits, less the dimension), and the first pass keeps
``oversample × depth`` documents.

:func:`sketch_scores_reference` is the slow version (Python integers, one passage at a time);
:func:`sketch_scores` the compiled kernel (numba; the popcount written as the usual
bit-parallel sum, Warren's *Hacker's Delight* §5-1).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from service.core.jit import Engine, compiled
from service.dense.kernels import in_parts

Int8Array = npt.NDArray[np.int8]
Float32Array = npt.NDArray[np.float32]
Int64Array = npt.NDArray[np.int64]
Int32Array = npt.NDArray[np.int32]
WordArray = npt.NDArray[np.uint64]

_ROWS_PER_STEP = 1 << 18  # rows dequantised at once while sketching (bounded memory)


@dataclass(frozen=True)
class SketchParams:
    """When the first pass is used: on vectors of more than ``above`` passages (0: always),
    keeping ``oversample`` × depth candidate documents."""

    above: int = 500_000
    oversample: int = 50

    def signature(self) -> str:
        return f"sketch>{self.above}x{self.oversample}"

    def applies(self, n_passages: int, n_docs: int, depth: int) -> bool:
        """Whether the first pass has anything to skip on vectors of this size."""
        return n_passages > self.above and self.oversample * depth < n_docs


@dataclass(frozen=True)
class Sketch:
    """The sign bits of every passage after centring (rows of ``words`` 64-bit words)."""

    mean: Float32Array
    bits: WordArray

    @property
    def nbytes(self) -> int:
        return int(self.bits.nbytes + self.mean.nbytes)

    def query_bits(self, query: Float32Array) -> WordArray:
        row: WordArray = _pack(np.asarray(query, dtype=np.float32)[None, :] > self.mean)[0]
        return row


def _pack(signs: npt.NDArray[np.bool_]) -> WordArray:
    """Rows of booleans as little-endian bits in 64-bit words (zero bits pad the last)."""
    packed = np.packbits(signs, axis=1, bitorder="little")
    words = -(-packed.shape[1] // 8)
    if packed.shape[1] != words * 8:
        packed = np.pad(packed, ((0, 0), (0, words * 8 - packed.shape[1])))
    words_out: WordArray = np.ascontiguousarray(packed).view("<u8").astype(np.uint64, copy=False)
    return words_out


def build_sketch(codes: Int8Array, scales: Float32Array) -> Sketch:
    """The sketch of int8 rows (``codes · scales``): their mean, then each row's signs around it."""
    n, dim = codes.shape
    total = np.zeros(dim, dtype=np.float64)
    for start in range(0, n, _ROWS_PER_STEP):
        rows = codes[start : start + _ROWS_PER_STEP].astype(np.float32)
        total += (rows * scales[start : start + _ROWS_PER_STEP, None]).sum(axis=0)
    mean = (total / max(n, 1)).astype(np.float32)
    bits = np.empty((n, -(-dim // 64)), dtype=np.uint64)
    for start in range(0, n, _ROWS_PER_STEP):
        rows = codes[start : start + _ROWS_PER_STEP].astype(np.float32)
        rows *= scales[start : start + _ROWS_PER_STEP, None]
        bits[start : start + len(rows)] = _pack(rows > mean)
    return Sketch(mean, bits)


def _sketch_scores_kernel(
    bits: WordArray, doc_ptr: Int64Array, query: WordArray, first: int, last: int, out: Int32Array
) -> None:
    """Documents ``first..last-1``: minus the Hamming distance of each one's nearest passage."""
    m1 = np.uint64(0x5555555555555555)
    m2 = np.uint64(0x3333333333333333)
    m4 = np.uint64(0x0F0F0F0F0F0F0F0F)
    h01 = np.uint64(0x0101010101010101)
    words = bits.shape[1]
    for doc in range(first, last):
        best = -(1 << 30)
        for p in range(doc_ptr[doc], doc_ptr[doc + 1]):
            dist = 0
            for w in range(words):
                x = bits[p, w] ^ query[w]
                x = x - ((x >> np.uint64(1)) & m1)
                x = (x & m2) + ((x >> np.uint64(2)) & m2)
                x = (x + (x >> np.uint64(4))) & m4
                dist += int((x * h01) >> np.uint64(56))
            if -dist > best:
                best = -dist
        out[doc] = best


def sketch_scores(
    sketch: Sketch, doc_ptr: Int64Array, query: Float32Array, engine: Engine = "compiled"
) -> Int32Array:
    """Each document's sketch score for the query: minus the number of sign bits in which its
    nearest passage differs from the query (0: all equal)."""
    qbits = sketch.query_bits(query)
    if engine == "reference":
        return sketch_scores_reference(sketch.bits, doc_ptr, qbits)
    out = np.empty(len(doc_ptr) - 1, dtype=np.int32)
    kernel = compiled(_sketch_scores_kernel)
    in_parts(doc_ptr, lambda first, last: kernel(sketch.bits, doc_ptr, qbits, first, last, out))
    return out


def candidates(
    scores: Int32Array, count: int, live: npt.NDArray[np.bool_] | None = None
) -> Int64Array:
    """The live documents of the ``count`` best sketch scores and every one tied with the
    last, in document order. The scores are a few hundred integers, so the cut is found by
    counting (one pass) instead of by partitioning."""
    lowest = int(scores.min(initial=0)) - 1
    if live is not None:
        scores = np.where(live, scores, lowest).astype(np.int32)
    hist = np.bincount(-scores.astype(np.int64), minlength=1)  # index: bits that differ
    reached = np.cumsum(hist[:-lowest])  # without the dead documents' bin
    if len(reached) == 0 or reached[-1] <= count:
        return np.flatnonzero(scores > lowest).astype(np.int64)
    cut = int(np.searchsorted(reached, count))  # the first distance at which count are in
    return np.flatnonzero(scores >= -cut).astype(np.int64)


def sketch_scores_reference(bits: WordArray, doc_ptr: Int64Array, query: WordArray) -> Int32Array:
    """:func:`sketch_scores` one passage at a time, counting differing bits in Python."""
    q = [int(w) for w in query]
    out = np.empty(len(doc_ptr) - 1, dtype=np.int32)
    for doc in range(len(doc_ptr) - 1):
        out[doc] = max(
            -sum(bin(int(w) ^ qw).count("1") for w, qw in zip(bits[p].tolist(), q, strict=True))
            for p in range(int(doc_ptr[doc]), int(doc_ptr[doc + 1]))
        )
    return out
