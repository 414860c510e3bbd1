"""The CSR helpers (service.core.csr): pointers from counts, gathering rows."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray

from service.core.csr import gather_rows, ptr_from_counts


@pytest.mark.parametrize(
    "counts",
    [
        [],
        [0],
        [3, 0, 2],
        np.array([1, 2, 3], dtype=np.int32),
        np.array([True, False, True]),
        np.bincount(np.array([0, 2, 2, 5]), minlength=7),
    ],
)
def test_pointer_is_the_running_sum_from_zero(counts: Sequence[int] | NDArray[Any]) -> None:
    ptr = ptr_from_counts(counts)
    as_ints = [int(c) for c in counts]
    assert ptr.dtype == np.int64
    assert ptr.tolist() == [sum(as_ints[:r]) for r in range(len(as_ints) + 1)]


def test_rows_are_the_slices_between_pointers() -> None:
    rows = [[4, 5], [], [6], [7, 8, 9]]
    flat = np.array([x for row in rows for x in row])
    ptr = ptr_from_counts([len(row) for row in rows])
    assert [flat[ptr[r] : ptr[r + 1]].tolist() for r in range(len(rows))] == rows


@pytest.mark.parametrize("pick", [[], [2], [3, 0, 3], [1, 2], [0, 1, 2, 3]])
def test_gathered_rows_are_the_picked_rows_in_order(pick: list[int]) -> None:
    rows = [[4, 5], [], [6], [7, 8, 9]]
    flat = np.array([x for row in rows for x in row])
    ptr, positions = gather_rows(
        ptr_from_counts([len(row) for row in rows]), np.array(pick, dtype=np.int64)
    )
    assert ptr.dtype == np.int64
    got = flat[positions]
    assert [got[ptr[r] : ptr[r + 1]].tolist() for r in range(len(pick))] == [rows[r] for r in pick]
