"""Compressed sparse rows (CSR): the row pointer of rows with given numbers of entries.

A CSR array keeps variable-length rows concatenated in one flat array and a pointer array
``ptr`` of ``len(rows) + 1`` offsets: row ``r`` is ``flat[ptr[r]:ptr[r + 1]]``. The forests'
tails, incoming edges, target words and features, the grammar's rule sides, the lexical table
and the inverted index are all stored this way (numba kernels build their pointers in their own
loops).
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
