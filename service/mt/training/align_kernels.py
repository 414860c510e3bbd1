"""The compiled symmetrisation of :func:`service.mt.training.align.symmetrize` (Och & Ney 2003,
§4.1; Koehn, Och & Marcu 2003, §3, grow-diag-final): every sentence at once on one grid, the
same steps in the same order as :func:`~service.mt.training.align.symmetrize_reference`. Its
steps are kernels of their own, so this module imports numba (:mod:`service.core.jit`'s rule); only
training imports it, when it first symmetrises.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int32]
OffsetArray = npt.NDArray[np.int64]

# the codes of :data:`service.mt.training.align.SYMMETRIZATION_METHODS` (0: intersection)
UNION, GROW_DIAG, GROW_DIAG_FINAL, GROW_DIAG_FINAL_AND = 1, 2, 3, 4

# cell bits: 1 = forward link, 2 = reverse link, 4 = in the symmetrised alignment
_FWD, _REV, _IN = 1, 2, 4


@numba.njit(cache=True, nogil=True, inline="always")
def _mark(grid: Any, links: Any, off: Any, k: int, bit: int) -> None:
    """Set ``bit`` on the cells of sentence ``k``'s ``links``."""
    for p in range(off[k], off[k + 1]):
        grid[links[p, 0], links[p, 1]] |= bit


@numba.njit(cache=True, nogil=True, inline="always")
def _take(grid: Any, src_aligned: Any, tgt_aligned: Any, i: int, j: int) -> None:
    """Put cell ``(i, j)`` in the alignment; its words are aligned."""
    grid[i, j] |= _IN
    src_aligned[i] = True
    tgt_aligned[j] = True


@numba.njit(cache=True, nogil=True, inline="always")
def _start(grid: Any, fwd: Any, fwd_off: Any, k: int, m: int, t: int, mode: int,
           src_aligned: Any, tgt_aligned: Any) -> None:  # fmt: skip
    """The starting alignment: the union (whose words are not marked aligned, as the
    reference's), or the intersection."""
    if mode == UNION:
        for i in range(m):
            for j in range(t):
                if grid[i, j] & (_FWD | _REV):
                    grid[i, j] |= _IN
        return
    for p in range(fwd_off[k], fwd_off[k + 1]):
        i, j = fwd[p, 0], fwd[p, 1]
        if grid[i, j] == _FWD | _REV:
            _take(grid, src_aligned, tgt_aligned, i, j)


@numba.njit(cache=True, nogil=True, inline="always")
def _grow_diag(grid: Any, m: int, t: int, di: Any, dj: Any, src_aligned: Any,
               tgt_aligned: Any) -> None:  # fmt: skip
    """Add neighbours (the 8 around, in the order ``di``, ``dj``) of aligned cells that
    either direction links and whose source or target word is not aligned yet, until none
    is added."""
    changed = True
    while changed:
        changed = False
        for i in range(m):
            for j in range(t):
                if not grid[i, j] & _IN:
                    continue
                for d in range(8):
                    ni, nj = i + di[d], j + dj[d]
                    if ni < 0 or nj < 0 or ni >= m or nj >= t:
                        continue
                    cell = grid[ni, nj]
                    if (
                        cell & (_FWD | _REV)
                        and not cell & _IN
                        and (not src_aligned[ni] or not tgt_aligned[nj])
                    ):
                        _take(grid, src_aligned, tgt_aligned, ni, nj)
                        changed = True


@numba.njit(cache=True, nogil=True, inline="always")
def _final(grid: Any, links: Any, off: Any, k: int, both: bool, src_aligned: Any,
           tgt_aligned: Any) -> None:  # fmt: skip
    """The final step over one direction's links: add a link whose source or target word
    (``both``: source and target word, final-and) is not aligned yet."""
    for p in range(off[k], off[k + 1]):
        i, j = links[p, 0], links[p, 1]
        if grid[i, j] & _IN:
            continue
        if both:
            ok = not src_aligned[i] and not tgt_aligned[j]
        else:
            ok = not src_aligned[i] or not tgt_aligned[j]
        if ok:
            _take(grid, src_aligned, tgt_aligned, i, j)


@numba.njit(cache=True, nogil=True, inline="always")
def _emit(grid: Any, m: int, t: int, out: Any, pos: int, src_aligned: Any,
          tgt_aligned: Any) -> int:  # fmt: skip
    """Write the sentence's alignment to ``out`` from ``pos`` (row-major) and clear the
    grid and the flags for the next; the next position."""
    for i in range(m):
        for j in range(t):
            if grid[i, j] & _IN:
                out[pos, 0] = i
                out[pos, 1] = j
                pos += 1
            grid[i, j] = 0
        src_aligned[i] = False
    tgt_aligned[:t] = False
    return pos


@numba.njit(cache=True, nogil=True)
def symmetrize_kernel(
    fwd: IntArray,
    fwd_off: OffsetArray,
    rev: IntArray,
    rev_off: OffsetArray,
    src_lens: IntArray,
    tgt_lens: IntArray,
    mode: int,
    di: Any,
    dj: Any,
) -> tuple[IntArray, OffsetArray]:  # pragma: no cover - compiled; tested via symmetrize()
    """All sentences at once; the same steps and order as symmetrize_reference, on a grid
    (``di``, ``dj``: the neighbours' offsets in the reference's order)."""
    n = src_lens.shape[0]
    grid = np.zeros((max(1, src_lens.max()), max(1, tgt_lens.max())), dtype=np.uint8)
    src_aligned = np.zeros(grid.shape[0], dtype=np.bool_)
    tgt_aligned = np.zeros(grid.shape[1], dtype=np.bool_)
    out = np.empty((fwd.shape[0] + rev.shape[0], 2), dtype=np.int32)
    out_off = np.zeros(n + 1, dtype=np.int64)
    pos = 0
    for k in range(n):
        m, t = src_lens[k], tgt_lens[k]
        _mark(grid, fwd, fwd_off, k, _FWD)
        _mark(grid, rev, rev_off, k, _REV)
        _start(grid, fwd, fwd_off, k, m, t, mode, src_aligned, tgt_aligned)
        if mode >= GROW_DIAG:
            _grow_diag(grid, m, t, di, dj, src_aligned, tgt_aligned)
        if mode >= GROW_DIAG_FINAL:
            both = mode == GROW_DIAG_FINAL_AND
            _final(grid, fwd, fwd_off, k, both, src_aligned, tgt_aligned)
            _final(grid, rev, rev_off, k, both, src_aligned, tgt_aligned)
        pos = _emit(grid, m, t, out, pos, src_aligned, tgt_aligned)
        out_off[k + 1] = pos
    return out[:pos].copy(), out_off
