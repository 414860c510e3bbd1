"""Compressed sparse rows (CSR): the row pointer of rows with given numbers of entries.

A CSR array keeps variable-length rows concatenated in one flat array and a pointer array
``ptr`` of ``len(rows) + 1`` offsets: row ``r`` is ``flat[ptr[r]:ptr[r + 1]]``. The forests'
tails, incoming edges, target words and features, the grammar's rule sides, the lexical table
and the inverted index are all stored this way (numba kernels build their pointers in their own
loops). :func:`gather_rows` picks some of the rows (the live edges of a forest, say) into a new
CSR array.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

IntArray = NDArray[np.int64]


def ptr_from_counts(counts: Sequence[int] | NDArray[Any]) -> IntArray:
    """The int64 pointer ``[0, c₀, c₀ + c₁, …, Σ c]`` of rows with ``counts[r]`` entries each
    (booleans count as 0 and 1)."""
    ptr = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=ptr[1:])
    return ptr


def gather_rows(ptr: IntArray, rows: IntArray) -> tuple[IntArray, IntArray]:
    """The CSR array of the rows ``rows`` (in that order) of the CSR array with pointer ``ptr``:
    its pointer, and for each of its entries the position of that entry in the old flat array
    (so ``flat[positions]`` is its flat array)."""
    lengths = (ptr[rows + 1] - ptr[rows]).astype(np.int64)
    new_ptr = ptr_from_counts(lengths)
    positions = np.repeat(ptr[rows] - new_ptr[:-1], lengths) + np.arange(int(new_ptr[-1]))
    return new_ptr, positions
