"""The query kernels of the LM table: n-gram keys, scores and the structure queries, in numba.

The table (:class:`service.mt.lm.table.LmTable`) has the layout of KenLM's probing model
(Heafield 2011, "KenLM: Faster and Smaller Language Model Queries", §2.1): one open-addressing
hash table with linear probing whose slots hold a 64-bit hash of an n-gram (order >= 2), its
log10 probability and its log10 backoff, and two arrays indexed by word id for the unigrams.
These kernels read it; the compiled decoder (:mod:`service.mt.decoder.kernel`) calls them inside
its own numba code, where KenLM's Python API cannot be called.

Keys. The key of ``w1 .. wn`` (oldest first) is ``h = SEED; h = mix(h, w_j)`` for ``j = n .. 1``
(0 is the empty slot, so a key of 0 becomes 1). Hashing from the last word backwards lets
:func:`logp10` extend a match one context word to the left at a time, and the keys of a
context's suffixes come out of one pass the same way. Distinct n-grams with equal keys are an
error at build time (:mod:`service.mt.lm.assemble`), never a silent merge; a query for an unlisted
n-gram could still meet a listed one's key, with probability about ``n-grams / 2**64`` per probe
(the build's own lookups of suffixes and contexts trust keys in the same way; the verification,
:mod:`service.mt.lm.verify`, would see the consequences).

Scores. :func:`logp10` is the ARPA backoff computation (Chen & Goodman 1998, §2) exactly as
KenLM performs it in float32: the probability of the longest listed n-gram that ends in the
word, then the backoffs of the context's suffixes longer than the match, in increasing length,
each added in float32. It equals KenLM's ``BaseScore`` from the state reached after the context
bit for bit (including the sign of zero), because the reader and the build store the numbers as
KenLM does on load (:mod:`service.mt.lm.read_arpa`, :mod:`service.mt.lm.assemble`). KenLM also
minimises its states (Heafield 2011, §4.1): it drops a context word when no longer n-gram can
use it. The words dropped are exactly those whose backoff is ``-0.0`` (listed with zero backoff
and no extension) or that are not listed, so adding their backoff (``x + -0.0`` is ``x``) or
stopping at them gives the same float32 value; nothing here differs from the textbook
computation except that KenLM's arithmetic order and float32 rounding are followed.

Structure. For a decoder that minimises its LM states as KenLM does (Heafield 2011, §4.1;
Heafield, Koehn & Lavie 2011, left-state minimisation) the table answers three questions about
an n-gram given as LM ids (the queries of :class:`service.mt.lm.NgramStructure`, which
:class:`service.mt.lm.ArpaLM` answers from the ARPA text):

* :func:`droppable`: may a right state forget the oldest word of this context? Yes if the
  n-gram is not in the table or its backoff is ``-0.0``;
* :func:`left_extends_ids`: is it a proper suffix of a listed n-gram, so that a word to its
  left could still change a score? The build marks every proper suffix of every listed
  n-gram (blanks included) in ``left_ext`` (per slot) and ``uni_left_ext`` (per word id);
* :func:`backoff10`: its stored log10 backoff, 0 if it is not in the table.
"""

from __future__ import annotations

import math
from typing import Any

import numba
import numpy as np

SEED = np.uint64(0x2545F4914F6CDD1D)  # the hash seed of every n-gram key

_U0 = np.uint64(0)
_U1 = np.uint64(1)
_POS_ZERO = np.float32(0.0)


@numba.njit(cache=True, nogil=True, inline="always")
def mix(h: np.uint64, x: np.uint64) -> np.uint64:
    """Mix ``x`` into the hash ``h`` (the splitmix64 finaliser of ``h ^ (x + golden ratio)``)."""
    z = (np.uint64(h) ^ (np.uint64(x) + np.uint64(0x9E3779B97F4A7C15))) * np.uint64(
        0xBF58476D1CE4E5B9
    )
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@numba.njit(cache=True, nogil=True, inline="always")
def nonzero_key(h: np.uint64) -> np.uint64:
    """The key of the hash ``h``: 0 marks an empty slot, so a hash of 0 becomes 1."""
    return h if h != _U0 else _U1


@numba.njit(cache=True, nogil=True, inline="always")
def find_slot(keys: Any, key: np.uint64) -> np.int64:
    """The slot holding ``key``, or -1 (the table always has an empty slot)."""
    mask = np.uint64(keys.shape[0] - 1)
    i = key & mask
    while True:
        k = keys[i]
        if k == key:
            return np.int64(i)
        if k == _U0:
            return np.int64(-1)
        i = (i + _U1) & mask


@numba.njit(cache=True, nogil=True)
def logp10(
    keys: Any,
    probs: Any,
    backoffs: Any,
    uni_probs: Any,
    uni_backoffs: Any,
    ctx: Any,
    nctx: int,
    word: int,
) -> np.float32:
    """log10 p(word | ctx[0:nctx]) with ARPA backoff, in float32 exactly as KenLM.

    ``ctx`` holds LM word ids oldest first; only its first ``nctx`` (at most ``order - 1``)
    entries are read. The probability of the longest listed n-gram ending in ``word``, then
    the backoffs of the context's suffixes longer than that match, shortest first.
    """
    p = uni_probs[word]
    matched = 0
    h = mix(SEED, np.uint64(word))
    for j in range(1, nctx + 1):
        h = mix(h, np.uint64(ctx[nctx - j]))
        i = find_slot(keys, nonzero_key(h))
        if i < 0:
            break  # the table is closed under suffixes: nothing longer is listed
        p = probs[i]
        matched = j
    if matched < nctx:
        h = SEED
        for j in range(1, nctx + 1):
            c = ctx[nctx - j]
            h = mix(h, np.uint64(c))
            if j > matched:
                if j == 1:
                    p += uni_backoffs[c]
                else:
                    i = find_slot(keys, nonzero_key(h))
                    if i < 0:
                        break  # an unlisted context: backoff 0, and no longer one is listed
                    p += backoffs[i]
    return p  # type: ignore[no-any-return]


@numba.njit(cache=True, nogil=True)
def logp10_batch(
    keys: Any,
    probs: Any,
    backoffs: Any,
    uni_probs: Any,
    uni_backoffs: Any,
    ctxs: Any,
    nctxs: Any,
    words: Any,
) -> Any:
    """:func:`logp10` of query ``q`` = ``(ctxs[q, :nctxs[q]], words[q])`` for every ``q``."""
    out = np.empty(words.shape[0], np.float32)
    for q in range(words.shape[0]):
        out[q] = logp10(keys, probs, backoffs, uni_probs, uni_backoffs, ctxs[q], nctxs[q], words[q])
    return out


# ---- structure queries (KenLM's state minimisation) --------------------------------------


@numba.njit(cache=True, nogil=True, inline="always")
def _ngram_slot(keys: Any, ids: Any, n: int) -> np.int64:
    """The slot of the n-gram ``ids[0:n]`` (n >= 2), or -1; looked up as :func:`logp10` does."""
    h = SEED
    for j in range(n - 1, -1, -1):
        h = mix(h, np.uint64(ids[j]))
    return find_slot(keys, nonzero_key(h))


@numba.njit(cache=True, nogil=True)
def droppable(keys: Any, backoffs: Any, uni_backoffs: Any, ids: Any, n: int) -> bool:
    """Whether KenLM's right state drops the oldest word of the context ``ids[0:n]`` (n >= 1).

    True if the n-gram is not in the table or its backoff is ``-0.0``: a zero backoff and the
    context of no n-gram in the table, listed or blank (see :mod:`service.mt.lm.assemble`); a
    unigram
    through ``uni_backoffs``. ``ids`` holds LM ids, oldest first; ``n <= 0`` is False.
    """
    if n <= 0:
        return False
    if n == 1:
        b = uni_backoffs[ids[0]]
    else:
        i = _ngram_slot(keys, ids, n)
        if i < 0:
            return True
        b = backoffs[i]
    return b == 0 and math.copysign(1.0, b) < 0


@numba.njit(cache=True, nogil=True)
def left_extends_ids(keys: Any, left_ext: Any, uni_left_ext: Any, ids: Any, n: int) -> bool:
    """Whether the words ``ids[0:n]`` are a proper suffix of a listed n-gram (True for n = 0)."""
    if n <= 0:
        return True
    if n == 1:
        return uni_left_ext[ids[0]]  # type: ignore[no-any-return]
    i = _ngram_slot(keys, ids, n)
    if i < 0:
        return False
    return left_ext[i]  # type: ignore[no-any-return]


@numba.njit(cache=True, nogil=True)
def backoff10(keys: Any, backoffs: Any, uni_backoffs: Any, ids: Any, n: int) -> np.float32:
    """The stored log10 backoff of the n-gram ``ids[0:n]``; 0 if it is not in the table or
    ``n == 0``."""
    if n <= 0:
        return _POS_ZERO
    if n == 1:
        return uni_backoffs[ids[0]]  # type: ignore[no-any-return]
    i = _ngram_slot(keys, ids, n)
    if i < 0:
        return _POS_ZERO
    return backoffs[i]  # type: ignore[no-any-return]


# ---- keys of the rows of a parsed ARPA file (the build and the verification) ------------


@numba.njit(cache=True, nogil=True, inline="always")
def row_key(words: Any, row: int, start: int, end: int, mask: np.uint64) -> np.uint64:
    """The key of ``words[row, start:end]`` (hashed from the last word backwards), its bits
    narrowed to ``mask`` (all 64 but in a test that forces collisions)."""
    h = SEED
    for j in range(end - 1, start - 1, -1):
        h = mix(h, np.uint64(words[row, j]))
    return nonzero_key(h & mask)
