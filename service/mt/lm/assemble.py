"""The build of the LM table: the n-grams of a parsed ARPA file hashed into KenLM's layout,
blanks inserted for missing suffixes, and the left-extension flags of state minimisation.

:func:`assemble` turns an :class:`~service.mt.lm.read_arpa.ArpaFile` into an
:class:`~service.mt.lm.table.LmTable` the way KenLM's probing model loads the file (Heafield
2011, "KenLM: Faster and Smaller Language Model Queries", §2.1; its ``ReadNGrams``): every
n-gram of order >= 2 is inserted in file order under its key (:mod:`service.mt.lm.kernels`)
into an open-addressing table of a power-of-two size with load at most :data:`MAX_LOAD`, and

* where an ARPA file lists ``x a b`` but not its suffix ``a b`` (SRILM-style pruning), a
  "blank" ``a b`` is inserted whose probability is the backed-off ``p(b | a)`` and whose
  backoff is 0, so that lookups can stop at the first missing suffix (KenLM's ``blank.hh``);
* a zero backoff stays ``-0.0`` unless the n-gram is the context of a longer one (listed or
  blank), then it becomes ``+0.0`` (KenLM's ``SetExtension``), which is what
  :func:`~service.mt.lm.kernels.droppable` reads when a state drops a word (Heafield 2011, §4.1);
* an n-gram whose context is not listed is refused, as KenLM refuses it; so are two n-grams
  with one key (a duplicate, or a collision of the 64-bit hash: never a silent merge).

Then every proper suffix of every listed n-gram is flagged as left-extending (Heafield, Koehn &
Lavie 2011, left-state minimisation). The insertion runs in numba (:func:`_fill_table`); errors
are explained, naming the lines, by the slow path :func:`_raise_build_error` only when it
fails. :class:`Built` keeps beside the table what the verification
(:mod:`service.mt.lm.verify`) needs.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import numba
import numpy as np
from numpy.typing import NDArray

from service.errors import DataFormatError
from service.mt.lm.kernels import SEED, find_slot, mix, nonzero_key, row_key
from service.mt.lm.read_arpa import ArpaFile
from service.mt.lm.table import LmTable

MAX_LOAD = 2 / 3  # the table has at least 1.5 slots per listed n-gram
KEY_MASK = np.uint64(0xFFFFFFFFFFFFFFFF)  # all key bits; a test narrows it to force collisions

_U0 = np.uint64(0)
_U1 = np.uint64(1)
_NEG_ZERO = np.float32(-0.0)
_POS_ZERO = np.float32(0.0)

# status codes of _fill_table
_OK = 0
_CLASH = 4  # a key that is in the table already: an n-gram listed twice, or a collision
_NO_CONTEXT = 5  # an n-gram whose context is not listed
_FULL = 6  # blanks filled the table past its load limit

_BATCH = 64  # rows whose slots are loaded ahead, so that their cache misses overlap


@numba.njit(cache=True, nogil=True, inline="always")
def _empty_slot(keys: Any, key: np.uint64) -> tuple[np.int64, bool]:
    """The empty slot where ``key`` goes, or the slot that has it already (and True)."""
    mask = np.uint64(keys.shape[0] - 1)
    i = key & mask
    while keys[i] != _U0:
        if keys[i] == key:
            return np.int64(i), True
        i = (i + _U1) & mask
    return np.int64(i), False


@numba.njit(cache=True, nogil=True, inline="always")
def _extend(backoffs: Any, i: Any) -> Any:
    """KenLM's ``SetExtension``: a zero backoff of a context becomes +0.0. The backoff."""
    if backoffs[i] == _POS_ZERO:
        backoffs[i] = _POS_ZERO
    return backoffs[i]


@numba.njit(cache=True, nogil=True)
def _fill_table(
    words: Any,
    starts: Any,
    probs: Any,
    backoffs: Any,
    uni_probs: Any,
    uni_backoffs: Any,
    size: int,
    mask: np.uint64,
) -> tuple[Any, Any, Any, Any, Any, Any]:
    """Insert every n-gram of order >= 2 in file order, as KenLM's probing build does.

    ``words[r]`` holds row ``r`` right-aligned (-1 before it); rows of order ``n`` are
    ``starts[n]:starts[n+1]``. Per row, as KenLM's ``ReadNGrams``: insert it (a key that is
    there already is an error: a duplicate or a collision, told apart by the caller); insert
    blanks for its missing suffixes (``FindLower``/``AdjustLower``: the backed-off
    probability; the contexts this uses are extended); extend its context, or fail if that is
    not listed (``ActivateLowerMiddle``). Lookups of suffixes and contexts trust the 64-bit
    key. ``uni_backoffs`` is updated in place. Returns keys, probabilities, backoffs, each
    row's slot, which slots are a listed n-gram's context, and a status ``[code, row, slot,
    blanks]``.
    """
    order = words.shape[1]
    keys = np.zeros(size, np.uint64)
    tprobs = np.zeros(size, np.float32)
    tbacks = np.zeros(size, np.float32)
    row_slot = np.empty(words.shape[0], np.int64)
    is_context = np.zeros(size, np.bool_)
    status = np.zeros(4, np.int64)
    out = (keys, tprobs, tbacks, row_slot, is_context, status)
    batch = np.empty((_BATCH, 3), np.uint64)  # per row: its key, its suffix's, its context's
    smask = np.uint64(size - 1)
    limit = (size * 4) // 5
    count = 0
    warm = _U0
    for n in range(2, order + 1):
        first = order - n
        for b0 in range(starts[n], starts[n + 1], _BATCH):
            b1 = min(b0 + _BATCH, starts[n + 1])
            for r in range(b0, b1):  # the keys, and a load of each home slot
                h = SEED
                for j in range(order - 1, first - 1, -1):
                    h = mix(h, np.uint64(words[r, j]))
                    if j == first + 1:
                        batch[r - b0, 1] = nonzero_key(h & mask)
                batch[r - b0, 0] = nonzero_key(h & mask)
                batch[r - b0, 2] = row_key(words, r, first, order - 1, mask)
                for t in range(3):
                    warm ^= keys[batch[r - b0, t] & smask]
            for r in range(b0, b1):
                slot, there = _empty_slot(keys, batch[r - b0, 0])
                if there or count >= limit:
                    status[0] = _CLASH if there else _FULL
                    status[1] = r
                    status[2] = slot
                    return out
                keys[slot] = batch[r - b0, 0]
                tprobs[slot] = probs[r]
                tbacks[slot] = backoffs[r]
                row_slot[r] = slot
                count += 1
                if n == 2:  # ActivateUnigram
                    _extend(uni_backoffs, words[r, first])
                    continue
                # FindLower: the longest proper suffix present (1: the unigram)
                basis = 1
                p = uni_probs[words[r, order - 1]]
                s = find_slot(keys, batch[r - b0, 1])
                if s >= 0:
                    basis = n - 1
                    p = tprobs[s]
                else:
                    for k in range(n - 2, 1, -1):
                        s = find_slot(keys, row_key(words, r, order - k, order, mask))
                        if s >= 0:
                            basis = k
                            p = tprobs[s]
                            break
                # AdjustLower: a blank for each suffix between the basis and the row
                for k in range(basis + 1, n):
                    ctx = order - k  # the blank is words[r, ctx:], its context words[r, ctx:-1]
                    if k == 2:
                        p += _extend(uni_backoffs, words[r, order - 2])
                    else:
                        s = find_slot(keys, row_key(words, r, ctx, order - 1, mask))
                        if s >= 0:
                            p += _extend(tbacks, s)
                    if count >= limit:
                        status[0] = _FULL
                        return out
                    bkey = row_key(words, r, ctx, order, mask)
                    s, _ = _empty_slot(keys, bkey)
                    keys[s] = bkey
                    tprobs[s] = p
                    tbacks[s] = _NEG_ZERO
                    count += 1
                    status[3] += 1
                # ActivateLowerMiddle: the context must be there, and it is extended
                s = find_slot(keys, batch[r - b0, 2])
                if s < 0:
                    status[0] = _NO_CONTEXT
                    status[1] = r
                    return out
                _extend(tbacks, s)
                is_context[s] = True
    status[2] = np.int64(warm & _U1)  # keeps the warming loads
    return out


@numba.njit(cache=True, nogil=True)
def _left_extensions(
    words: Any, starts: Any, keys: Any, vocab_size: int, mask: np.uint64
) -> tuple[Any, Any, int]:
    """Which n-grams extend to the left: the proper suffixes of every listed n-gram.

    Per row of order ``n >= 2`` (``words`` and ``starts`` as for :func:`_fill_table`, whose
    ``keys`` these are), its last word in the per-word flags and its suffixes of 2 to
    ``n - 1`` words in the per-slot flags (blanks are such suffixes too). Returns the per-slot
    flags, the per-word flags and how many suffixes were not in the table (0 after a
    successful build).
    """
    order = words.shape[1]
    left_ext = np.zeros(keys.shape[0], np.bool_)
    uni_left_ext = np.zeros(vocab_size, np.bool_)
    missing = 0
    for n in range(2, order + 1):
        for r in range(starts[n], starts[n + 1]):
            last = words[r, order - 1]
            uni_left_ext[last] = True
            h = mix(SEED, np.uint64(last))
            for j in range(order - 2, order - n, -1):  # the suffix words[r, j:]
                h = mix(h, np.uint64(words[r, j]))
                s = find_slot(keys, nonzero_key(h & mask))
                if s < 0:
                    missing += 1
                else:
                    left_ext[s] = True
    return left_ext, uni_left_ext, missing


@numba.njit(cache=True, nogil=True)
def _suffix_with_key(
    words: Any, starts: Any, upto: int, key: np.uint64, mask: np.uint64
) -> tuple[int, int]:
    """A row before ``upto`` with a proper suffix of key ``key``: ``(row, start)``, or -1s."""
    order = words.shape[1]
    for n in range(3, order + 1):
        for r in range(starts[n], min(starts[n + 1], upto)):
            for k in range(2, n):
                if row_key(words, r, order - k, order, mask) == key:
                    return r, order - k
    return -1, -1


@dataclass(frozen=True, eq=False)
class Built:
    """A table fresh from :func:`_fill_table`, with what the verification needs."""

    table: LmTable
    listed: int  # n-grams of order >= 2
    blanks: int  # suffixes inserted because the ARPA file lacks them
    row_slot: NDArray[np.int64]  # per row: its slot
    is_context: NDArray[np.bool_]  # per row: it is the context of a listed n-gram
    mask: np.uint64  # the key bits (KEY_MASK when the table was built)


def _table_size(entries: int) -> int:
    """The smallest power of two (>= 2) with a load of at most MAX_LOAD."""
    size = 2
    while size * MAX_LOAD < entries + 1:
        size *= 2
    return size


def assemble(arpa: ArpaFile) -> Built:
    """The hash table of a parsed ARPA file (DataFormatError on duplicates and collisions)."""
    listed = int(arpa.ngram_words.shape[0])
    size = _table_size(listed)
    mask = np.uint64(KEY_MASK)
    while True:
        uni_backoffs = arpa.uni_backoffs.copy()
        keys, probs, backoffs, row_slot, is_context, status = _fill_table(
            arpa.ngram_words,
            arpa.starts,
            arpa.ngram_probs,
            arpa.ngram_backoffs,
            arpa.uni_probs,
            uni_backoffs,
            size,
            mask,
        )
        if status[0] != _FULL:  # blanks may need room beyond the listed n-grams
            break
        size *= 2
    if status[0] != _OK:
        code, row, slot = int(status[0]), int(status[1]), int(status[2])
        _raise_build_error(arpa, code, row, keys, row_slot, slot, mask)
    left_ext, uni_left_ext, missing = _left_extensions(
        arpa.ngram_words, arpa.starts, keys, len(arpa.words), mask
    )
    if missing:  # pragma: no cover - the build inserts every suffix
        raise AssertionError(f"{missing} suffixes of listed n-grams are not in the table")
    table = LmTable(
        order=arpa.order,
        vocab=MappingProxyType({w: i for i, w in enumerate(arpa.words)}),
        keys=keys,
        probs=probs,
        backoffs=backoffs,
        left_ext=left_ext,
        uni_probs=arpa.uni_probs,
        uni_backoffs=uni_backoffs,
        uni_left_ext=uni_left_ext,
    )
    return Built(table, listed, int(status[3]), row_slot, is_context[row_slot], mask)


def _raise_build_error(
    arpa: ArpaFile,
    code: int,
    row: int,
    keys: NDArray[np.uint64],
    row_slot: NDArray[np.int64],
    slot: int,
    mask: np.uint64,
) -> None:
    """The DataFormatError for a failed :func:`_fill_table` (the slow part: only on error)."""
    n = arpa.order - int(np.count_nonzero(arpa.ngram_words[row] < 0))
    text = arpa.ngram_text(row, arpa.order - n, n)
    line = arpa.line_no(int(arpa.ngram_lines[row]))
    if code == _NO_CONTEXT:
        raise DataFormatError(
            arpa.path,
            line,
            f"the context {' '.join(text.split(' ')[:-1])!r} of this {n}-gram is not listed as "
            f"a {n - 1}-gram (KenLM refuses such files)",
        )
    # _CLASH: the slot holds a listed n-gram (a duplicate or a collision) or a blank
    earlier = np.flatnonzero(row_slot[:row] == slot)
    if earlier.size:
        other = int(earlier[0])
        m = arpa.order - int(np.count_nonzero(arpa.ngram_words[other] < 0))
        other_text = arpa.ngram_text(other, arpa.order - m, m)
        other_line = arpa.line_no(int(arpa.ngram_lines[other]))
        if other_text == text:
            raise DataFormatError(
                arpa.path, line, f"the n-gram {text!r} is listed twice (also on line {other_line})"
            )
        what = f"{other_text!r} (of line {other_line})"
    else:
        owner, start = _suffix_with_key(arpa.ngram_words, arpa.starts, row, keys[slot], mask)
        suffix = arpa.ngram_text(owner, start, arpa.order - start)
        owner_line = arpa.line_no(int(arpa.ngram_lines[owner]))
        what = f"{suffix!r} (not listed, so inserted for line {owner_line})"
    raise DataFormatError(
        arpa.path,
        line,
        f"the n-grams {what} and {text!r} (of line {line}) have the same 64-bit key; change "
        "service.mt.lm.kernels.SEED and service.mt.lm.cache.TABLE_FORMAT",
    )
