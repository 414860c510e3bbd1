"""The n-gram language model as flat arrays that a numba kernel can query.

The compiled decoder scores target words inside numba, where KenLM's Python API cannot be
called. This module reads the bundle's ARPA file into the layout KenLM's probing model uses
(Heafield 2011, "KenLM: Faster and Smaller Language Model Queries", §2.1): one open-addressing
hash table with linear probing whose slots hold a 64-bit hash of an n-gram (order >= 2), its
log10 probability and its log10 backoff, and two arrays indexed by word id for the unigrams.

Keys. The key of ``w1 .. wn`` (oldest first) is ``h = SEED; h = mix(h, w_j)`` for ``j = n .. 1``
(0 is the empty slot, so a key of 0 becomes 1). Hashing from the last word backwards lets
:func:`logp10` extend a match one context word to the left at a time, and the keys of a
context's suffixes come out of one pass the same way. Distinct n-grams with equal keys are an
error at build time, never a silent merge; a query for an unlisted n-gram could still meet a
listed one's key, with probability about ``n-grams / 2**64`` per probe (the build's own
lookups of suffixes and contexts trust keys in the same way; the verification would see the
consequences).

Scores. :func:`logp10` is the ARPA backoff computation (Chen & Goodman 1998, §2) exactly as
KenLM performs it in float32: the probability of the longest listed n-gram that ends in the
word, then the backoffs of the context's suffixes longer than the match, in increasing length,
each added in float32. It equals KenLM's ``BaseScore`` from the state reached after the
context bit for bit (including the sign of zero), because the build reproduces what KenLM
does on load:

* numbers are rounded to float32 correctly from the decimal text (KenLM parses with
  ``StringToFloat``; converting through float64 first would round some values twice);
* a probability is stored as ``-|p|`` (KenLM's probing model keeps a flag in the sign bit);
* a zero backoff is ``-0.0`` unless the n-gram is the context of a longer one, then ``+0.0``;
* where an ARPA file lists ``x a b`` but not its suffix ``a b`` (SRILM-style pruning), KenLM
  inserts a "blank" ``a b`` whose probability is the backed-off ``p(b | a)`` and whose backoff
  is 0, so that lookups can stop at the first missing suffix; the build does the same;
* an n-gram whose context is not listed is refused, as KenLM refuses it.

KenLM also minimises its states (Heafield 2011, §4.1): it drops a context word when no longer
n-gram can use it. The words dropped are exactly those whose backoff is ``-0.0`` (listed with
zero backoff and no extension) or that are not listed, so adding their backoff (``x + -0.0``
is ``x``) or stopping at them gives the same float32 value; nothing here differs from the
textbook computation except that KenLM's arithmetic order and float32 rounding are followed.

Structure. For a decoder that minimises its LM states as KenLM does (Heafield 2011, §4.1;
Heafield, Koehn & Lavie, left-state minimisation) the table answers three questions about an
n-gram given as LM ids (the queries of :class:`service.mt.lm.NgramStructure`, which
:class:`service.mt.lm.ArpaLM` answers from the ARPA text):

* :func:`droppable`: may a right state forget the oldest word of this context? Yes if the
  n-gram is not in the table or its backoff is ``-0.0`` (the sign set above);
* :func:`left_extends_ids`: is it a proper suffix of a listed n-gram, so that a word to its
  left could still change a score? The build marks every proper suffix of every listed
  n-gram (blanks included) in ``left_ext`` (per slot) and ``uni_left_ext`` (per word id);
* :func:`backoff10`: its stored log10 backoff, 0 if it is not in the table.

Verification (``verify=True``) loads the ARPA file in KenLM and compares, bit for bit:

* every listed n-gram whose last word is not ``<s>``: ``logp10`` of its last word given the
  other words against KenLM's score from the state after them (``<s>``-initial contexts from
  KenLM's begin-sentence state, others from the null context). The scores come in batches
  from KenLM's ``full_scores`` over the n-grams that are no other n-gram's context, which
  scores every prefix of each, so each listed n-gram is checked at least once; unigrams are
  checked one ``BaseScore`` each;
* 20,000 seeded random queries (contexts of 0 to ``order - 1`` words drawn from listed
  n-grams and the vocabulary, with unknown words, ``<unk>`` and sentence starts), which
  exercise the full backoff paths.

Any mismatch is a :class:`~service.errors.DataFormatError` listing the first few.

Cache. :func:`load_lm_table` keeps the arrays (scores and left-extension flags) as ``.npy``
files in ``<arpa stem>.table/`` beside the ARPA file with a ``manifest.json`` (format, the
ARPA's size, mtime and sha256, order, counts, table size, whether it was verified), written to
a temporary directory and renamed into place, and opens them memory-mapped; a stale, partial
or corrupt cache, or one of another format, is rebuilt.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import logging
import math
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from functools import partial
from itertools import chain, islice
from operator import itemgetter
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numba
import numpy as np
from numpy.typing import NDArray

from service import arraydir
from service.errors import DataFormatError, MissingResourceError
from service.mt.lm import BOS, EOS, LN10, UNK

Log = Callable[[str], None]

_logger = logging.getLogger(__name__)

SEED = np.uint64(0x2545F4914F6CDD1D)  # the hash seed of every n-gram key
TABLE_FORMAT = 2  # bump when the cache layout or the key function changes
MAX_LOAD = 2 / 3  # the table has at least 1.5 slots per listed n-gram
RANDOM_QUERIES = 20_000  # random queries of the verification
CACHE_SUFFIX = ".table"
MANIFEST = "manifest.json"
VOCAB_FILE = "vocab.txt"

_ARRAYS = ("keys", "probs", "backoffs", "left_ext", "uni_probs", "uni_backoffs", "uni_left_ext")
_SLOT_ARRAYS = ("keys", "probs", "backoffs", "left_ext")  # one entry per slot; others per word
_DTYPES = {
    "keys": np.dtype(np.uint64),
    "probs": np.dtype(np.float32),
    "backoffs": np.dtype(np.float32),
    "left_ext": np.dtype(np.bool_),
    "uni_probs": np.dtype(np.float32),
    "uni_backoffs": np.dtype(np.float32),
    "uni_left_ext": np.dtype(np.bool_),
}
_KEY_MASK = np.uint64(0xFFFFFFFFFFFFFFFF)  # all key bits; a test narrows it to force collisions
_STALE_TEMP_SECONDS = 3600.0  # a temporary cache directory older than this is a crash's leftover
_GZIP_MAGIC = b"\x1f\x8b"
_COUNT_LINE = re.compile(rb"ngram[ \t]+(\d+)[ \t]*=[ \t]*(\d+)")
_FIELD_SEP = re.compile(r"[ \t]+")

# --------------------------------------------------------------------------- numba kernels
_U0 = np.uint64(0)
_U1 = np.uint64(1)
_NEG_ZERO = np.float32(-0.0)
_POS_ZERO = np.float32(0.0)
_POW10 = np.array([float(10**i) for i in range(23)])  # exactly representable powers of ten
_POW10_NEG = np.array([float(Fraction(1, 10**i)) for i in range(23)])  # correctly rounded
_LOW29 = np.uint64((1 << 29) - 1)
_HALF29 = np.int64(1 << 28)

# status codes of the kernels
_OK = 0
_TOO_MANY = 1  # more lines in a section than its header declares
_FIELDS = 2  # wrong number of fields on a line
_UNKNOWN_WORD = 3  # an n-gram word that is not a unigram
_CLASH = 4  # a key that is in the table already: an n-gram listed twice, or a collision
_NO_CONTEXT = 5  # an n-gram whose context is not listed
_FULL = 6  # blanks filled the table past its load limit


@numba.njit(cache=True, nogil=True, inline="always")
def mix(h: np.uint64, x: np.uint64) -> np.uint64:
    """Mix ``x`` into the hash ``h`` (the splitmix64 finaliser of ``h ^ (x + golden ratio)``)."""
    z = (np.uint64(h) ^ (np.uint64(x) + np.uint64(0x9E3779B97F4A7C15))) * np.uint64(
        0xBF58476D1CE4E5B9
    )
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@numba.njit(cache=True, nogil=True, inline="always")
def _nonzero(h: np.uint64) -> np.uint64:
    return h if h != _U0 else _U1


@numba.njit(cache=True, nogil=True, inline="always")
def _find(keys: Any, key: np.uint64) -> np.int64:
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
        i = _find(keys, _nonzero(h))
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
                    i = _find(keys, _nonzero(h))
                    if i < 0:
                        break  # an unlisted context: backoff 0, and no longer one is listed
                    p += backoffs[i]
    return p  # type: ignore[no-any-return]


@numba.njit(cache=True, nogil=True)
def _logp10_batch(
    keys: Any,
    probs: Any,
    backoffs: Any,
    uni_probs: Any,
    uni_backoffs: Any,
    ctxs: Any,
    nctxs: Any,
    words: Any,
) -> Any:
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
    return _find(keys, _nonzero(h))


@numba.njit(cache=True, nogil=True)
def droppable(keys: Any, backoffs: Any, uni_backoffs: Any, ids: Any, n: int) -> bool:
    """Whether KenLM's right state drops the oldest word of the context ``ids[0:n]`` (n >= 1).

    True if the n-gram is not in the table or its backoff is ``-0.0``: a zero backoff and the
    context of no n-gram in the table, listed or blank (see :func:`_extend`); a unigram
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


# ---- ARPA text -----------------------------------------------------------------------


@numba.njit(cache=True, nogil=True, inline="always")
def _is_blank(c: int) -> bool:
    return c == 32 or c == 9  # space, tab: the field separators


_FNV_OFFSET = np.uint64(0xCBF29CE484222325)
_FNV_PRIME = np.uint64(0x100000001B3)


@numba.njit(cache=True, nogil=True)
def _bytes_hash(buf: Any, start: int, end: int) -> np.uint64:
    """The hash of a word's bytes: FNV-1a, then mixed with the length (as the scanner does)."""
    h = _FNV_OFFSET
    for i in range(start, end):
        h = (h ^ np.uint64(buf[i])) * _FNV_PRIME
    return mix(h, np.uint64(end - start))


@numba.njit(cache=True, nogil=True, inline="always")
def _same_bytes(buf: Any, a: int, a_end: int, b: int, b_end: int) -> bool:
    if a_end - a != b_end - b:
        return False
    i = 0
    while i < a_end - a and buf[a + i] == buf[b + i]:
        i += 1
    return i == a_end - a


@numba.njit(cache=True, nogil=True)
def _vocab_table(buf: Any, spans: Any) -> tuple[Any, bool, Any, Any]:
    """Open addressing from the hash of each unigram's bytes to its id.

    ``table[2*i]`` is a slot's hash, ``table[2*i+1]`` its id + 1 (0: empty). Returns the
    table; whether two distinct words share a hash (then lookups compare bytes, otherwise
    the 64-bit hash decides); and the ids of a word listed twice, else ``(-1, -1)``.
    """
    size = 16
    while size < 2 * spans.shape[0]:
        size *= 2
    table = np.zeros(2 * size, np.uint64)
    mask = np.uint64(size - 1)
    shared = False
    for w in range(spans.shape[0]):
        h = _bytes_hash(buf, spans[w, 0], spans[w, 1])
        i = h & mask
        while table[2 * i + 1] != _U0:
            if table[2 * i] == h:
                o = np.int64(table[2 * i + 1]) - 1
                if _same_bytes(buf, spans[o, 0], spans[o, 1], spans[w, 0], spans[w, 1]):
                    return table, shared, o, w
                shared = True
            i = (i + _U1) & mask
        table[2 * i] = h
        table[2 * i + 1] = np.uint64(w + 1)
    return table, shared, -1, -1


@numba.njit(cache=True, nogil=True, inline="always")
def _vocab_find(
    buf: Any, start: int, end: int, h: np.uint64, table: Any, exact: bool, spans: Any
) -> Any:
    """The id of the word ``buf[start:end]`` (whose hash is ``h``), or -1."""
    mask = np.uint64(table.shape[0] // 2 - 1)
    i = h & mask
    while table[2 * i + 1] != _U0:
        if table[2 * i] == h:
            o = np.int64(table[2 * i + 1]) - 1
            if not exact or _same_bytes(buf, spans[o, 0], spans[o, 1], start, end):
                return o
        i = (i + _U1) & mask
    return -1


@numba.njit(cache=True, nogil=True)
def _parse_float32(buf: Any, start: int, end: int) -> tuple[np.float32, bool]:
    """The float32 nearest the decimal ``buf[start:end]``, and whether that is certain.

    The fast path reads at most 19 significant digits and a decimal exponent within ±22 into
    one float64 product (error < 1.6 float64 ulps) and rounds it to float32; it gives up
    (``False``) on anything else and whenever the float64 lies within 4 ulps of a float32
    rounding boundary, where the exact decimal must decide (see :func:`_exact_float32`).
    """
    i = start
    if i >= end:
        return _POS_ZERO, False
    neg = False
    if buf[i] == 45 or buf[i] == 43:  # - +
        neg = buf[i] == 45
        i += 1
    mant = _U0
    ndig = 0
    exp10 = 0
    digits = 0
    while i < end and 48 <= buf[i] <= 57:
        if ndig < 19:
            mant = mant * np.uint64(10) + np.uint64(buf[i] - 48)
            if mant != _U0:
                ndig += 1
        else:
            exp10 += 1
        digits += 1
        i += 1
    if i < end and buf[i] == 46:  # .
        i += 1
        while i < end and 48 <= buf[i] <= 57:
            if ndig < 19:
                mant = mant * np.uint64(10) + np.uint64(buf[i] - 48)
                if mant != _U0:
                    ndig += 1
                exp10 -= 1
            digits += 1
            i += 1
    if digits == 0:
        return _POS_ZERO, False
    if i < end and (buf[i] == 101 or buf[i] == 69):  # e E
        i += 1
        eneg = False
        if i < end and (buf[i] == 45 or buf[i] == 43):
            eneg = buf[i] == 45
            i += 1
        e = 0
        edig = 0
        while i < end and 48 <= buf[i] <= 57:
            if e < 100000:
                e = e * 10 + (buf[i] - 48)
            edig += 1
            i += 1
        if edig == 0:
            return _POS_ZERO, False
        exp10 += -e if eneg else e
    if i != end:
        return _POS_ZERO, False
    if mant == _U0:
        return (_NEG_ZERO if neg else _POS_ZERO), True
    if exp10 > 22 or exp10 < -22:
        return _POS_ZERO, False
    d = np.float64(mant)
    d = d * _POW10[exp10] if exp10 >= 0 else d * _POW10_NEG[-exp10]
    if d > 3.0e38 or d < 1.2e-38:  # float32 overflow or subnormal: the exact path
        return _POS_ZERO, False
    # float32 keeps 23 of float64's 52 mantissa bits: the 29 dropped bits say how far d is
    # from the float32 rounding boundary (the midpoint is 1 followed by 28 zeros)
    dropped = np.int64(np.float64(d).view(np.uint64) & _LOW29)
    if abs(dropped - _HALF29) <= 4:
        return _POS_ZERO, False
    f = np.float32(d)
    return (-f if neg else f), True


@numba.njit(cache=True, nogil=True)
def _scan_section(
    buf: Any,
    pos: int,
    n: int,
    vocab: Any,
    vocab_exact: bool,
    vocab_spans: Any,
    words_out: Any,
    probs_out: Any,
    backoffs_out: Any,
    inexact_out: Any,
    lines_out: Any,
    uni_spans_out: Any,
) -> tuple[int, int, int, int]:
    """Read the lines of an ``\\n-grams:`` section from byte ``pos``, in one pass.

    Stops before the first line that starts with a backslash (the next header) or at the
    end. A line's fields are the runs of bytes other than spaces and tabs, without carriage
    returns at the line's ends (as ``service.mt.lm.ArpaLM`` splits); blank lines are skipped.
    Writes per line the word ids (right-aligned in ``words_out``; for unigrams the word's
    byte span into ``uni_spans_out``), probability, backoff (``-0.0`` if none), which numbers
    need the exact parser (bit 1: probability, bit 2: backoff) and the line's byte offset.
    Returns ``(status, position, rows, detail)``.
    """
    size = buf.shape[0]
    capacity = probs_out.shape[0]
    order = words_out.shape[1]
    keep = n + 4  # fields kept: enough to tell n + 1 or n + 2 from any other count
    tok_s = np.empty(keep, np.int64)
    tok_e = np.empty(keep, np.int64)
    tok_h = np.empty(keep, np.uint64)
    rows = 0
    while pos < size:
        line = pos
        k = 0
        i = pos
        while i < size and buf[i] != 10:
            if _is_blank(buf[i]):
                i += 1
                continue
            start = i
            h = _FNV_OFFSET
            while i < size and buf[i] != 10 and not _is_blank(buf[i]):
                h = (h ^ np.uint64(buf[i])) * _FNV_PRIME
                i += 1
            if k < keep:
                tok_s[k] = start
                tok_e[k] = i
                tok_h[k] = mix(h, np.uint64(i - start))
            k += 1
        pos = i + 1
        if 0 < k <= keep:  # carriage returns at the ends of the line are not part of it
            last = k - 1
            if buf[tok_e[last] - 1] == 13:
                while tok_e[last] > tok_s[last] and buf[tok_e[last] - 1] == 13:
                    tok_e[last] -= 1
                if tok_e[last] == tok_s[last]:
                    k -= 1
                else:
                    tok_h[last] = _bytes_hash(buf, tok_s[last], tok_e[last])
            while k > 0 and buf[tok_s[0]] == 13:
                tok_s[0] += 1
                if tok_s[0] == tok_e[0]:  # a field of carriage returns only
                    for j in range(1, k):
                        tok_s[j - 1] = tok_s[j]
                        tok_e[j - 1] = tok_e[j]
                        tok_h[j - 1] = tok_h[j]
                    k -= 1
        if k == 0:
            continue
        if buf[tok_s[0]] == 92:  # a backslash: the next section header or \end\
            return _OK, line, rows, 0
        if rows == capacity:
            return _TOO_MANY, line, rows, 0
        if k != n + 1 and k != n + 2:
            return _FIELDS, line, rows, k
        flags = 0
        v, exact = _parse_float32(buf, tok_s[0], tok_e[0])
        probs_out[rows] = v
        if not exact:
            flags |= 1
        if k == n + 2:
            v, exact = _parse_float32(buf, tok_s[n + 1], tok_e[n + 1])
            backoffs_out[rows] = v
            if not exact:
                flags |= 2
        else:
            backoffs_out[rows] = _NEG_ZERO
        inexact_out[rows] = flags
        lines_out[rows] = line
        if n == 1:
            uni_spans_out[rows, 0] = tok_s[1]
            uni_spans_out[rows, 1] = tok_e[1]
        else:
            for j in range(n):
                w = _vocab_find(
                    buf,
                    tok_s[j + 1],
                    tok_e[j + 1],
                    tok_h[j + 1],
                    vocab,
                    vocab_exact,
                    vocab_spans,
                )
                if w < 0:
                    return _UNKNOWN_WORD, line, rows, j
                words_out[rows, order - n + j] = w
        rows += 1
    return _OK, size, rows, 0


# ---- the hash table --------------------------------------------------------------------

_BATCH = 64  # rows whose slots are loaded ahead, so that their cache misses overlap


@numba.njit(cache=True, nogil=True, inline="always")
def _key(words: Any, row: int, start: int, end: int, mask: np.uint64) -> np.uint64:
    """The key of ``words[row, start:end]`` (hashed from the last word backwards)."""
    h = SEED
    for j in range(end - 1, start - 1, -1):
        h = mix(h, np.uint64(words[row, j]))
    return _nonzero(h & mask)


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
                        batch[r - b0, 1] = _nonzero(h & mask)
                batch[r - b0, 0] = _nonzero(h & mask)
                batch[r - b0, 2] = _key(words, r, first, order - 1, mask)
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
                s = _find(keys, batch[r - b0, 1])
                if s >= 0:
                    basis = n - 1
                    p = tprobs[s]
                else:
                    for k in range(n - 2, 1, -1):
                        s = _find(keys, _key(words, r, order - k, order, mask))
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
                        s = _find(keys, _key(words, r, ctx, order - 1, mask))
                        if s >= 0:
                            p += _extend(tbacks, s)
                    if count >= limit:
                        status[0] = _FULL
                        return out
                    bkey = _key(words, r, ctx, order, mask)
                    s, _ = _empty_slot(keys, bkey)
                    keys[s] = bkey
                    tprobs[s] = p
                    tbacks[s] = _NEG_ZERO
                    count += 1
                    status[3] += 1
                # ActivateLowerMiddle: the context must be there, and it is extended
                s = _find(keys, batch[r - b0, 2])
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
                s = _find(keys, _nonzero(h & mask))
                if s < 0:
                    missing += 1
                else:
                    left_ext[s] = True
    return left_ext, uni_left_ext, missing


# ---- verification ----------------------------------------------------------------------


@numba.njit(cache=True, nogil=True)
def _prefix_scores(
    keys: Any,
    probs: Any,
    backoffs: Any,
    uni_probs: Any,
    uni_backoffs: Any,
    words: Any,
    rows: Any,
    n: int,
    skip_first: bool,
    mask: np.uint64,
    scored: Any,
) -> Any:
    """``logp10`` of every word of each n-gram row given the words before it.

    In the order of KenLM's ``full_scores`` over the same rows (without the leading ``<s>``
    when ``skip_first``: KenLM's begin-sentence state stands for it). Marks in ``scored`` the
    slot of the n-gram each score belongs to (the row's prefix that ends in the word).
    """
    order = words.shape[1]
    first = order - n
    k0 = 1 if skip_first else 0
    out = np.empty(rows.shape[0] * (n - k0), np.float32)
    ctx = np.empty(order, np.int64)
    q = 0
    for r in rows:
        for k in range(k0, n):
            for t in range(k):
                ctx[t] = words[r, first + t]
            out[q] = logp10(
                keys, probs, backoffs, uni_probs, uni_backoffs, ctx, k, words[r, first + k]
            )
            q += 1
            if k >= 1:
                s = _find(keys, _key(words, r, first, first + k + 1, mask))
                if s >= 0:
                    scored[s] = True
    return out


@numba.njit(cache=True, nogil=True)
def _suffix_with_key(
    words: Any, starts: Any, upto: int, key: np.uint64, mask: np.uint64
) -> tuple[int, int]:
    """A row before ``upto`` with a proper suffix of key ``key``: ``(row, start)``, or -1s."""
    order = words.shape[1]
    for n in range(3, order + 1):
        for r in range(starts[n], min(starts[n + 1], upto)):
            for k in range(2, n):
                if _key(words, r, order - k, order, mask) == key:
                    return r, order - k
    return -1, -1


@numba.njit(cache=True, nogil=True)
def _word_spans(buf: Any, lines: Any, n: int, skip_first: bool) -> tuple[Any, Any, Any]:
    """Byte spans of the words of n-gram lines (without the first one if ``skip_first``),
    and whether a word holds a byte that ``bytes.split()`` would split at."""
    starts = np.empty(lines.shape[0], np.int64)
    ends = np.empty(lines.shape[0], np.int64)
    odd = np.zeros(lines.shape[0], np.bool_)
    size = buf.shape[0]
    for q in range(lines.shape[0]):
        i = lines[q]
        while i < size and (_is_blank(buf[i]) or buf[i] == 13):
            i += 1
        skip = 2 if skip_first else 1  # the probability and maybe <s>
        for _ in range(skip):
            while i < size and not _is_blank(buf[i]):
                i += 1
            while i < size and _is_blank(buf[i]):
                i += 1
        starts[q] = i
        for t in range(n - (1 if skip_first else 0)):
            if t > 0:
                while i < size and _is_blank(buf[i]):
                    i += 1
            while i < size and not _is_blank(buf[i]) and buf[i] != 10:
                i += 1
        while i > starts[q] and buf[i - 1] == 13:
            i -= 1  # a CRLF line end
        ends[q] = i
        for j in range(starts[q], i):
            if buf[j] == 11 or buf[j] == 12 or buf[j] == 13:
                odd[q] = True
    return starts, ends, odd


# --------------------------------------------------------------------------- the table


@dataclass(frozen=True, eq=False)
class LmTable:
    """An ARPA n-gram model as arrays for :func:`logp10`; immutable (arrays are read-only)."""

    order: int
    # LM word -> id, in the unigram order of the ARPA file
    vocab: Mapping[str, int] = field(repr=False)
    # open addressing, power-of-two size, 0 = empty slot; per slot an n-gram of order >= 2
    keys: NDArray[np.uint64] = field(repr=False)
    probs: NDArray[np.float32] = field(repr=False)  # per slot: log10 probability
    backoffs: NDArray[np.float32] = field(repr=False)  # per slot: log10 backoff
    # per slot: the n-gram is a proper suffix of a listed one (KenLM's left extension)
    left_ext: NDArray[np.bool_] = field(repr=False)
    uni_probs: NDArray[np.float32] = field(repr=False)  # per word id
    uni_backoffs: NDArray[np.float32] = field(repr=False)  # per word id
    uni_left_ext: NDArray[np.bool_] = field(repr=False)  # per word id, as left_ext
    verified: bool = False  # compared with KenLM when it was built
    unk: int = field(init=False)
    bos: int = field(init=False)
    eos: int = field(init=False)

    def __post_init__(self) -> None:
        vocab = self.vocab
        if not isinstance(vocab, MappingProxyType):
            vocab = MappingProxyType(dict(vocab))
            object.__setattr__(self, "vocab", vocab)
        for name in _ARRAYS:
            arr = getattr(self, name)
            if arr.dtype != _DTYPES[name] or arr.ndim != 1:
                raise ValueError(f"{name} must be a 1-d {_DTYPES[name]} array, got {arr.dtype}")
            if arr.flags.writeable:
                arr = arr.view()
                arr.flags.writeable = False
                object.__setattr__(self, name, arr)
        size = self.keys.shape[0]
        if size < 2 or size & (size - 1):
            raise ValueError(f"the table needs a power-of-two size >= 2, got {size}")
        if len({getattr(self, name).shape for name in _SLOT_ARRAYS}) != 1:
            raise ValueError("keys, probs, backoffs and left_ext differ in length")
        words = {getattr(self, name).shape[0] for name in _ARRAYS if name not in _SLOT_ARRAYS}
        if words != {len(vocab)}:
            raise ValueError("the vocabulary and the unigram arrays differ in length")
        for attr, word in (("unk", UNK), ("bos", BOS), ("eos", EOS)):
            if word not in vocab:
                raise ValueError(f"the vocabulary has no {word}")
            object.__setattr__(self, attr, vocab[word])

    def arrays(
        self,
    ) -> tuple[
        NDArray[np.uint64],
        NDArray[np.float32],
        NDArray[np.float32],
        NDArray[np.float32],
        NDArray[np.float32],
    ]:
        """``(keys, probs, backoffs, uni_probs, uni_backoffs)``: :func:`logp10`'s first five."""
        return self.keys, self.probs, self.backoffs, self.uni_probs, self.uni_backoffs

    def structure_arrays(
        self,
    ) -> tuple[
        NDArray[np.uint64],
        NDArray[np.float32],
        NDArray[np.float32],
        NDArray[np.bool_],
        NDArray[np.bool_],
    ]:
        """``(keys, backoffs, uni_backoffs, left_ext, uni_left_ext)``: what :func:`droppable`,
        :func:`left_extends_ids` and :func:`backoff10` read."""
        return self.keys, self.backoffs, self.uni_backoffs, self.left_ext, self.uni_left_ext

    def word_id(self, word: str) -> int:
        """The LM id of ``word``; the id of ``<unk>`` for a word the LM does not know."""
        return self.vocab.get(word, self.unk)

    def is_oov(self, word: str) -> bool:
        """KenLM's ``word not in model``: unknown words and ``<unk>`` itself."""
        return word == UNK or word not in self.vocab

    def logp10(self, context: Sequence[str], word: str) -> float:
        """log10 p(word | the last ``order - 1`` words of ``context``), as a Python float."""
        keep = self.order - 1
        tail = list(context)[max(0, len(context) - keep) :] if keep > 0 else []
        ids = np.array([self.word_id(w) for w in tail], dtype=np.int64)
        return float(logp10(*self.arrays(), ids, len(ids), self.word_id(word)))

    def logp(self, context: Sequence[str], word: str) -> float:
        """Natural-log p(word | context), equal to ``service.mt.lm.KenLM.logp``.

        ``context`` may start with ``<s>``; only its last ``order - 1`` words are used.
        """
        return self.logp10(context, word) * LN10

    # the structure queries of service.mt.lm.NgramStructure (KenLM's state minimisation)

    def _ids(self, words: Sequence[str]) -> NDArray[np.int64]:
        return np.array([self.word_id(w) for w in words], dtype=np.int64)

    def right_minimal(self, context: tuple[str, ...]) -> tuple[str, ...]:
        """``context`` without the oldest words that no later word can use (KenLM's right
        state): drops them while :func:`droppable` says so; the remaining suffix, as given."""
        ids = self._ids(context)
        start, n = 0, len(context)
        while start < n and droppable(
            self.keys, self.backoffs, self.uni_backoffs, ids[start:], n - start
        ):
            start += 1
        return tuple(context[start:])

    def left_extends(self, words: tuple[str, ...]) -> bool:
        """Whether ``words`` are a proper suffix of a listed n-gram (True for no words)."""
        if len(words) >= self.order:
            return False
        ids = self._ids(words)
        return bool(left_extends_ids(self.keys, self.left_ext, self.uni_left_ext, ids, len(ids)))

    def backoff(self, context: tuple[str, ...]) -> float:
        """The natural-log backoff of the n-gram ``context`` (0 if it is not listed)."""
        ids = self._ids(context)
        return float(backoff10(self.keys, self.backoffs, self.uni_backoffs, ids, len(ids))) * LN10

    @property
    def nbytes(self) -> int:
        """Bytes of the arrays (the vocabulary's strings not counted)."""
        return sum(int(getattr(self, name).nbytes) for name in _ARRAYS)


# --------------------------------------------------------------------------- ARPA reading


@dataclass(frozen=True, eq=False)
class _Arpa:
    """A parsed ARPA file: unigrams by id, higher orders as right-aligned rows of ids."""

    path: Path
    data: bytes  # the (decompressed) text, for error messages and the verification
    size: int
    mtime_ns: int
    sha256: str
    order: int
    counts: tuple[int, ...]
    words: list[str]
    uni_probs: NDArray[np.float32]
    uni_backoffs: NDArray[np.float32]
    uni_lines: NDArray[np.int64]
    ngram_words: NDArray[np.int32]  # [rows, order], -1 before a row's first word
    starts: NDArray[np.int64]  # rows of order n: starts[n]:starts[n+1] (n >= 2)
    ngram_probs: NDArray[np.float32]
    ngram_backoffs: NDArray[np.float32]
    ngram_lines: NDArray[np.int64]  # byte offset of each row's line

    def line_no(self, offset: int) -> int:
        return _line_no(self.data, offset)

    def ngram_text(self, row: int, start: int, length: int) -> str:
        return " ".join(self.words[int(i)] for i in self.ngram_words[row, start : start + length])


def _exact_float32(text: str) -> np.float32:
    """The float32 nearest the decimal ``text`` (ties to even), as KenLM's ``StringToFloat``.

    Accepts what Python's ``float`` accepts; ValueError otherwise or if out of range.
    """
    value = float(text)
    if not math.isfinite(value):
        return np.float32(value)
    if abs(value) > float(np.finfo(np.float32).max):
        raise ValueError(f"{text!r} is out of the float32 range")
    try:
        exact = Fraction(Decimal(text.strip()))
    except (InvalidOperation, ValueError):
        exact = Fraction(value)
    guess = np.float32(value)
    best = guess
    best_key: tuple[Fraction, int] | None = None
    for cand in (
        np.nextafter(guess, np.float32(-np.inf)),
        guess,
        np.nextafter(guess, np.float32(np.inf)),
    ):
        if not np.isfinite(cand):
            continue
        odd = int(np.array(cand).view(np.int32)) & 1
        key = (abs(Fraction(float(cand)) - exact), odd)
        if best_key is None or key < best_key:
            best, best_key = np.float32(cand), key
    return best


def _line_text(data: bytes, offset: int) -> str:
    end = data.find(b"\n", offset)
    raw = data[offset : end if end >= 0 else len(data)]
    return raw.decode("utf-8", errors="replace").strip(" \t\r")


def _lines(data: bytes, pos: int) -> Iterator[tuple[int, bytes]]:
    """``(offset, stripped line)`` from ``pos`` on."""
    size = len(data)
    while pos < size:
        end = data.find(b"\n", pos)
        if end < 0:
            end = size
        yield pos, data[pos:end].strip(b" \t\r")
        pos = end + 1


def _read_arpa(path: Path) -> _Arpa:
    """Parse and validate an ARPA file (plain or gzip) as KenLM would load it.

    Validation, each a :class:`DataFormatError` naming the file and line: the ``\\data\\``
    header and its ``ngram N=count`` lines (orders 1, 2, ... in turn), one section per order
    in that order with exactly the declared number of lines, ``n + 1`` or ``n + 2`` fields per
    line, numbers (a probability may not be positive or NaN, a backoff must be finite, the
    highest order has none), every n-gram word a unigram, no word or n-gram listed twice,
    ``<unk>``, ``<s>`` and ``</s>`` present, ``\\end\\`` and nothing after it. The sections
    are read by :func:`_scan_section` in compiled code; only the header is read line by line.
    The words of n-grams are matched to unigrams by a 64-bit hash of their bytes (the bytes
    are compared only if two unigrams share a hash), so a word that is not a unigram could
    pass for one with probability about ``unigrams / 2**64``; KenLM, in the verification,
    would then refuse the file.
    """
    if not path.is_file():
        raise MissingResourceError(f"{path}: language model file not found")
    stat = path.stat()
    data = path.read_bytes()
    sha256 = hashlib.sha256(data).hexdigest()
    data = _gunzipped(path, data)

    def fail(offset: int | None, reason: str) -> DataFormatError:
        return DataFormatError(path, None if offset is None else _line_no(data, offset), reason)

    counts, pos = _read_counts(data, fail)
    order = len(counts)
    columns = _Columns.allocate(counts)
    words, pos = _read_sections(path, data, pos, counts, columns, fail)
    _read_end(data, pos, order, fail)
    _fix_all_numbers(path, data, columns, order)
    return _Arpa(
        path=path,
        data=data,
        size=stat.st_size,
        mtime_ns=stat.st_mtime_ns,
        sha256=sha256,
        order=order,
        counts=tuple(counts),
        words=words,
        uni_probs=columns.uni_probs,
        uni_backoffs=columns.uni_backoffs,
        uni_lines=columns.uni_lines,
        ngram_words=columns.ngram_words,
        starts=columns.starts,
        ngram_probs=columns.ngram_probs,
        ngram_backoffs=columns.ngram_backoffs,
        ngram_lines=columns.ngram_lines,
    )


def _gunzipped(path: Path, data: bytes) -> bytes:
    """``data`` decompressed if it is gzip (by its magic bytes), else as it is."""
    if data[:2] == _GZIP_MAGIC:
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as exc:
            raise DataFormatError(path, None, f"corrupt or truncated gzip file: {exc}") from exc
    return data


@dataclass(frozen=True, eq=False)
class _Columns:
    """The arrays :func:`_scan_section` fills: the unigrams by id, higher orders by row.

    Rows of order n are ``starts[n]:starts[n+1]`` (n >= 2), right-aligned in ``ngram_words``
    as in :class:`_Arpa`; ``*_inexact`` flags the numbers the compiled parser leaves to
    :func:`_fix_numbers`, ``uni_spans`` holds the byte span of each unigram's word.
    """

    starts: NDArray[np.int64]
    ngram_words: NDArray[np.int32]
    ngram_probs: NDArray[np.float32]
    ngram_backoffs: NDArray[np.float32]
    ngram_lines: NDArray[np.int64]
    ngram_inexact: NDArray[np.int8]
    uni_spans: NDArray[np.int64]
    uni_probs: NDArray[np.float32]
    uni_backoffs: NDArray[np.float32]
    uni_lines: NDArray[np.int64]
    uni_inexact: NDArray[np.int8]

    @classmethod
    def allocate(cls, counts: Sequence[int]) -> _Columns:
        """Uninitialised arrays for the declared counts (``counts[n - 1]`` n-grams of order n)."""
        order = len(counts)
        starts = np.zeros(order + 2, np.int64)
        for n in range(2, order + 1):
            starts[n + 1] = starts[n] + counts[n - 1]
        rows = int(starts[order + 1])
        return cls(
            starts=starts,
            ngram_words=np.full((rows, order), -1, dtype=np.int32),
            ngram_probs=np.empty(rows, np.float32),
            ngram_backoffs=np.empty(rows, np.float32),
            ngram_lines=np.empty(rows, np.int64),
            ngram_inexact=np.empty(rows, np.int8),
            uni_spans=np.empty((counts[0], 2), np.int64),
            uni_probs=np.empty(counts[0], np.float32),
            uni_backoffs=np.empty(counts[0], np.float32),
            uni_lines=np.empty(counts[0], np.int64),
            uni_inexact=np.empty(counts[0], np.int8),
        )

    def section(
        self, n: int
    ) -> tuple[
        NDArray[np.int32],
        NDArray[np.float32],
        NDArray[np.float32],
        NDArray[np.int8],
        NDArray[np.int64],
        NDArray[np.int64],
    ]:
        """The output arguments of :func:`_scan_section` for the section of order ``n``.

        ``(words, probs, backoffs, inexact, lines, spans)``: the unigrams have no words to
        match and give their spans; higher orders give views of their rows and no spans.
        """
        if n == 1:
            return (
                np.empty((0, self.ngram_words.shape[1]), np.int32),
                self.uni_probs,
                self.uni_backoffs,
                self.uni_inexact,
                self.uni_lines,
                self.uni_spans,
            )
        lo, hi = int(self.starts[n]), int(self.starts[n + 1])
        return (
            self.ngram_words[lo:hi],
            self.ngram_probs[lo:hi],
            self.ngram_backoffs[lo:hi],
            self.ngram_inexact[lo:hi],
            self.ngram_lines[lo:hi],
            np.empty((0, 2), np.int64),
        )


_Fail = Callable[[int | None, str], DataFormatError]  # the error at an offset (None: no line)


def _read_sections(
    path: Path, data: bytes, pos: int, counts: Sequence[int], columns: _Columns, fail: _Fail
) -> tuple[list[str], int]:
    """The ``\\n-grams:`` sections from ``pos`` on, into ``columns``.

    The unigrams' words (by id) and the offset after the last section. The unigrams are read
    first; their words then give the word -> id table the higher orders are matched with.
    """
    buf = np.frombuffer(data, dtype=np.uint8)
    vocab, vocab_exact = np.zeros(4, np.uint64), True
    words: list[str] = []
    for n in range(1, len(counts) + 1):
        pos = _read_section_header(data, pos, n, fail)
        status, pos, read, detail = _scan_section(
            buf, pos, n, vocab, vocab_exact, columns.uni_spans, *columns.section(n)
        )
        _check_section(data, fail, n, counts[n - 1], status, pos, read, detail)
        if n == 1:
            words = _decode_words(path, data, columns.uni_spans, columns.uni_lines)
            vocab, vocab_exact = _vocab(
                path, data, buf, words, columns.uni_spans, columns.uni_lines
            )
    return words, pos


def _read_section_header(data: bytes, pos: int, n: int, fail: _Fail) -> int:
    """The ``\\n-grams:`` line at the first non-empty line from ``pos``; the offset after it."""
    offset, line = next(((o, ln) for o, ln in _lines(data, pos) if ln), (len(data), b""))
    if line != f"\\{n}-grams:".encode():
        what = _show(line) if line else "the end of the file"
        raise fail(offset if line else None, f"expected the \\{n}-grams: header, got {what}")
    return _next_line(data, offset)


def _check_section(
    data: bytes,
    fail: _Fail,
    n: int,
    count: int,
    status: int,
    pos: int,
    read: int,
    detail: int,
) -> None:
    """The error of a section :func:`_scan_section` stopped in, or of its line count."""
    if status == _TOO_MANY:
        raise fail(pos, f"the \\{n}-grams: section has more than the {count} lines declared")
    if status == _FIELDS:
        raise fail(pos, f"a {n}-gram line needs {n + 1} or {n + 2} fields, got {detail}")
    if status == _UNKNOWN_WORD:
        word = _FIELD_SEP.split(_line_text(data, pos))[1 + detail]
        raise fail(pos, f"the word {word!r} of this {n}-gram is not listed as a unigram")
    if read != count:
        where = pos if pos < len(data) else None
        raise fail(where, f"the \\{n}-grams: section has {read} lines, its header declares {count}")


def _read_end(data: bytes, pos: int, order: int, fail: _Fail) -> None:
    """``\\end\\`` as the first non-empty line from ``pos``, and nothing after it."""
    tail = list(islice((item for item in _lines(data, pos) if item[1]), 2))
    if not tail or tail[0][1] != b"\\end\\":
        got = f"got {_show(tail[0][1])}" if tail else "the file ends"
        raise fail(tail[0][0] if tail else None, f"expected \\end\\ after the {order}-grams, {got}")
    if len(tail) > 1:
        raise fail(tail[1][0], "text after \\end\\")


def _fix_all_numbers(path: Path, data: bytes, columns: _Columns, order: int) -> None:
    """:func:`_fix_numbers` for the unigrams, then for each higher order in turn."""
    _fix_numbers(
        path,
        data,
        columns.uni_probs,
        columns.uni_backoffs,
        columns.uni_inexact,
        columns.uni_lines,
        1,
        order,
    )
    for n in range(2, order + 1):
        part = slice(int(columns.starts[n]), int(columns.starts[n + 1]))
        _fix_numbers(
            path,
            data,
            columns.ngram_probs[part],
            columns.ngram_backoffs[part],
            columns.ngram_inexact[part],
            columns.ngram_lines[part],
            n,
            order,
        )


def _read_counts(data: bytes, fail: _Fail) -> tuple[list[int], int]:
    """The ``\\data\\`` header: the counts by order, and the offset of the first section."""
    lines = _lines(data, 0)
    for offset, line in lines:
        if not line or line.startswith(b"#"):  # KenLM allows comments before \data\
            continue
        if line == b"\\data\\":
            break
        raise fail(offset, "text before the \\data\\ header (not an ARPA file?)")
    else:
        raise fail(None, "not an ARPA file (no \\data\\ header)")
    counts: list[int] = []
    for offset, line in lines:
        if not line:
            continue
        if line.startswith(b"\\"):
            if not counts:
                break
            return counts, offset
        match = _COUNT_LINE.fullmatch(line)
        if match is None:
            raise fail(offset, f"expected 'ngram N=count': {_show(line)}")
        if int(match[1]) != len(counts) + 1:
            raise fail(offset, f"expected the count of the {len(counts) + 1}-grams: {_show(line)}")
        counts.append(int(match[2]))
    raise fail(None, "the \\data\\ header declares no n-gram sections")


def _vocab(
    path: Path,
    data: bytes,
    buf: NDArray[np.uint8],
    words: list[str],
    spans: NDArray[np.int64],
    lines: NDArray[np.int64],
) -> tuple[NDArray[np.uint64], bool]:
    """The compiled word -> id table of the unigrams; every word once, the specials there."""
    table, shared, first, again = _vocab_table(buf, spans)
    if first >= 0:
        raise DataFormatError(
            path,
            _line_no(data, int(lines[again])),
            f"the unigram {words[again]!r} is listed twice (also on line "
            f"{_line_no(data, int(lines[first]))})",
        )
    for name in (UNK, BOS, EOS):
        if name not in words:
            raise DataFormatError(path, None, f"the ARPA file has no {name} unigram")
    return table, bool(shared)


def _next_line(data: bytes, offset: int) -> int:
    end = data.find(b"\n", offset)
    return len(data) if end < 0 else end + 1


def _show(line: bytes) -> str:
    text = line.decode("utf-8", errors="replace")
    return repr(text if len(text) <= 80 else text[:77] + "...")


def _line_no(data: bytes, offset: int) -> int:
    return data.count(b"\n", 0, offset) + 1


def _decode_words(
    path: Path, data: bytes, spans: NDArray[np.int64], lines: NDArray[np.int64]
) -> list[str]:
    words: list[str] = []
    for (a, b), line in zip(spans.tolist(), lines.tolist(), strict=True):
        try:
            words.append(data[a:b].decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise DataFormatError(
                path, _line_no(data, line), f"not valid UTF-8 ({exc.reason})"
            ) from None
    return words


def _fix_numbers(
    path: Path,
    data: bytes,
    probs: NDArray[np.float32],
    backoffs: NDArray[np.float32],
    inexact: NDArray[np.int8],
    lines: NDArray[np.int64],
    n: int,
    order: int,
) -> None:
    """Parse the numbers the fast path left (exactly), validate all, and store them as KenLM.

    In place: a probability becomes ``-|p|``, a zero backoff ``-0.0``.
    """
    for row in np.flatnonzero(inexact).tolist():
        text = _line_text(data, int(lines[row]))
        fields = _FIELD_SEP.split(text)
        try:
            if inexact[row] & 1:
                probs[row] = _exact_float32(fields[0])
            if inexact[row] & 2:
                backoffs[row] = _exact_float32(fields[n + 1])
        except ValueError:
            raise DataFormatError(
                path, _line_no(data, int(lines[row])), f"bad number in {text!r}"
            ) from None
    bad = np.flatnonzero(np.isnan(probs) | (probs > 0) | ~np.isfinite(backoffs))
    if n == order:
        bad = np.union1d(bad, np.flatnonzero(backoffs != 0))
    if bad.size:
        row = int(bad[0])
        p, b = float(probs[row]), float(backoffs[row])
        if math.isnan(p) or not math.isfinite(b):
            reason = "a probability must be a number and a backoff a finite number"
        elif p > 0:
            reason = f"positive log10 probability {p} (KenLM refuses it)"
        else:
            reason = f"the highest order ({order}) has no backoff weights, got {b}"
        text = _line_text(data, int(lines[row]))
        raise DataFormatError(path, _line_no(data, int(lines[row])), f"{reason}: {text!r}")
    np.negative(np.abs(probs), out=probs)
    backoffs[backoffs == 0] = _NEG_ZERO


# --------------------------------------------------------------------------- building


@dataclass(frozen=True, eq=False)
class _Built:
    """A table fresh from :func:`_fill_table`, with what the verification needs."""

    table: LmTable
    listed: int  # n-grams of order >= 2
    blanks: int  # suffixes inserted because the ARPA file lacks them
    row_slot: NDArray[np.int64]  # per row: its slot
    is_context: NDArray[np.bool_]  # per row: it is the context of a listed n-gram


def _table_size(entries: int) -> int:
    """The smallest power of two (>= 2) with a load of at most MAX_LOAD."""
    size = 2
    while size * MAX_LOAD < entries + 1:
        size *= 2
    return size


def _assemble(arpa: _Arpa) -> _Built:
    """The hash table of a parsed ARPA file (DataFormatError on duplicates and collisions)."""
    listed = int(arpa.ngram_words.shape[0])
    size = _table_size(listed)
    mask = np.uint64(_KEY_MASK)
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
        _raise_build_error(arpa, int(status[0]), int(status[1]), keys, row_slot, int(status[2]))
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
    return _Built(table, listed, int(status[3]), row_slot, is_context[row_slot])


def _raise_build_error(
    arpa: _Arpa,
    code: int,
    row: int,
    keys: NDArray[np.uint64],
    row_slot: NDArray[np.int64],
    slot: int,
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
        owner, start = _suffix_with_key(
            arpa.ngram_words, arpa.starts, row, keys[slot], np.uint64(_KEY_MASK)
        )
        suffix = arpa.ngram_text(owner, start, arpa.order - start)
        owner_line = arpa.line_no(int(arpa.ngram_lines[owner]))
        what = f"{suffix!r} (not listed, so inserted for line {owner_line})"
    raise DataFormatError(
        arpa.path,
        line,
        f"the n-grams {what} and {text!r} (of line {line}) have the same 64-bit key; change "
        "service.mt.lm_table.SEED and TABLE_FORMAT",
    )


# --------------------------------------------------------------------------- verification


@dataclass(frozen=True)
class _VerifyReport:
    ngrams: int  # listed n-grams checked (all except <s>)
    scores: int  # scores compared (an n-gram is scored again under each longer one over it)
    random_queries: int
    kenlm_load_seconds: float


def _kenlm_model(path: Path) -> Any:
    import kenlm

    config = kenlm.Config()
    config.arpa_complain = kenlm.ARPALoadComplain.NONE
    config.show_progress = False
    try:
        return kenlm.Model(str(path), config)
    except (OSError, RuntimeError) as exc:
        raise DataFormatError(path, None, f"KenLM cannot load this file: {exc}") from exc


def _kenlm_score(model: Any, context: Sequence[str], word: str) -> float:
    """KenLM's ``BaseScore`` after ``context`` (a leading ``<s>``: the begin-sentence state)."""
    import kenlm

    state = kenlm.State()
    if context and context[0] == BOS:
        model.BeginSentenceWrite(state)
        context = context[1:]
    else:
        model.NullContextWrite(state)
    for w in context:
        out = kenlm.State()
        model.BaseScore(state, w, out)
        state = out
    return float(model.BaseScore(state, word, kenlm.State()))


def _kenlm_prefix_scores(
    model: Any, arpa: _Arpa, rows: NDArray[np.int64], n: int, skip_first: bool
) -> NDArray[np.float32]:
    """KenLM's scores of every word of each row given the words before it (as _prefix_scores).

    ``full_scores`` over the row's text from the file, in C; a row whose words contain bytes
    that ``bytes.split`` splits at (vertical tab, form feed, carriage return) word by word.
    """
    per_row = n - (1 if skip_first else 0)
    buf = np.frombuffer(arpa.data, dtype=np.uint8)
    starts, ends, odd = _word_spans(buf, arpa.ngram_lines[rows], n, skip_first)
    out = np.empty((rows.shape[0], per_row), np.float64)
    plain = np.flatnonzero(~odd)
    data = arpa.data
    sentences = [
        data[a:b] for a, b in zip(starts[plain].tolist(), ends[plain].tolist(), strict=True)
    ]
    scores = chain.from_iterable(
        map(partial(model.full_scores, bos=skip_first, eos=False), sentences)
    )
    try:
        flat = np.fromiter(map(itemgetter(0), scores), np.float64, count=plain.size * per_row)
    except ValueError:
        raise DataFormatError(
            arpa.path, None, "KenLM splits some n-grams into other words"
        ) from None
    out[plain] = flat.reshape(plain.size, per_row)
    order = arpa.order
    for q in np.flatnonzero(odd).tolist():
        ngram = [arpa.words[i] for i in arpa.ngram_words[rows[q], order - n :].tolist()]
        for k in range(n - per_row, n):
            out[q, k - (n - per_row)] = _kenlm_score(model, ngram[:k], ngram[k])
    return out.ravel().astype(np.float32)


def _random_queries(
    table: LmTable, arpa: _Arpa, count: int, seed: int
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64], list[tuple[list[str], str]]]:
    """Seeded queries: contexts of 0 .. order-1 words around listed n-grams and random words.

    Each query starts from a listed n-gram (70 %) or a random word, padded on the left with
    random words; each word is then replaced with probability 0.1 by a random vocabulary
    word, 0.05 by an unknown word and 0.02 by ``<unk>``; a quarter of the non-empty contexts
    start with ``<s>`` (a sentence start).
    """
    rng = np.random.default_rng(seed)
    words, order = arpa.words, table.order
    vocab_size, rows = len(words), int(arpa.ngram_words.shape[0])
    width = max(order - 1, 1)
    ctxs = np.zeros((count, width), np.int64)
    nctxs = np.zeros(count, np.int64)
    qwords = np.zeros(count, np.int64)
    texts: list[tuple[list[str], str]] = []
    for q in range(count):
        length = int(rng.integers(0, order))
        if rows and rng.random() < 0.7:
            base = [w for w in arpa.ngram_words[int(rng.integers(rows))].tolist() if w >= 0]
        else:
            base = [int(rng.integers(vocab_size))]
        pad = [int(x) for x in rng.integers(vocab_size, size=max(0, length + 1 - len(base)))]
        tokens = [words[i] for i in (pad + base)[-(length + 1) :]]
        for t in range(len(tokens)):
            u = rng.random()
            if u < 0.1:
                tokens[t] = words[int(rng.integers(vocab_size))]
            elif u < 0.15:
                tokens[t] = f"<oov-{q}-{t}>"
            elif u < 0.17:
                tokens[t] = UNK
        if length and rng.random() < 0.25:
            tokens[0] = BOS
        context, word = tokens[:-1], tokens[-1] if tokens[-1] != BOS else EOS
        ctxs[q, : len(context)] = [table.word_id(w) for w in context]
        nctxs[q] = len(context)
        qwords[q] = table.word_id(word)
        texts.append((context, word))
    return ctxs, nctxs, qwords, texts


def _verify(
    built: _Built,
    arpa: _Arpa,
    *,
    random_queries: int = RANDOM_QUERIES,
    seed: int = 0,
    chunk: int = 1 << 20,
) -> _VerifyReport:
    """Compare the table with KenLM (see the module docstring); DataFormatError on mismatch."""
    table = built.table
    started = time.perf_counter()
    model = _kenlm_model(arpa.path)
    load_seconds = time.perf_counter() - started
    if int(model.order) != table.order:
        raise DataFormatError(
            arpa.path, None, f"KenLM reads order {model.order}, not {table.order}"
        )
    words = arpa.words
    mismatches: list[str] = []
    total = _verify_unigrams(model, table, words, mismatches)
    scores, ngrams = _verify_ngrams(model, built, arpa, chunk, mismatches)
    total += scores
    queries = _verify_random_queries(model, table, arpa, random_queries, seed, mismatches)
    if mismatches:
        raise DataFormatError(
            arpa.path,
            None,
            "the LM table differs from KenLM (a bug in service.mt.lm_table; the table is not "
            "used): " + "; ".join(mismatches),
        )
    checked_count = ngrams + len(words) - 1
    return _VerifyReport(checked_count, total, queries, load_seconds)


def _mismatch(mismatches: list[str], what: str, ours: float, theirs: float) -> None:
    """Note a difference, keeping the first five for the error message."""
    if len(mismatches) < 5:
        mismatches.append(f"{what}: table {ours!r}, KenLM {theirs!r}")


def _same(ours: NDArray[np.float32], theirs: NDArray[np.float32]) -> NDArray[np.bool_]:
    """Bit for bit equal (so ``-0.0`` differs from ``0.0``)."""
    return ours.view(np.int32) == theirs.view(np.int32)  # type: ignore[no-any-return]


def _verify_unigrams(model: Any, table: LmTable, words: list[str], mismatches: list[str]) -> int:
    """Every unigram but ``<s>`` from the null context; the number of scores compared."""
    import kenlm

    null, sink = kenlm.State(), kenlm.State()
    model.NullContextWrite(null)
    theirs_uni = np.array(
        [model.BaseScore(null, w, sink) if w != BOS else 0.0 for w in words], np.float64
    ).astype(np.float32)
    ids = np.arange(len(words), dtype=np.int64)
    no_context = np.zeros((len(words), 1), np.int64)
    ours_uni = _logp10_batch(*table.arrays(), no_context, np.zeros(len(words), np.int64), ids)
    ours_uni[table.bos] = theirs_uni[table.bos]
    for i in np.flatnonzero(~_same(ours_uni, theirs_uni)).tolist():
        _mismatch(mismatches, f"p({words[i]})", float(ours_uni[i]), float(theirs_uni[i]))
    return len(words) - 1


def _verify_ngrams(
    model: Any, built: _Built, arpa: _Arpa, chunk: int, mismatches: list[str]
) -> tuple[int, int]:
    """Orders >= 2: every prefix of the rows that are no other row's context.

    ``(scores compared, listed n-grams checked)``; AssertionError if a listed n-gram (other
    than one ending in ``<s>``) was not among the prefixes scored.
    """
    table = built.table
    order = table.order
    total = 0
    scored = np.zeros(table.keys.shape[0], np.bool_)
    for n in range(2, order + 1):
        lo, hi = int(arpa.starts[n]), int(arpa.starts[n + 1])
        rows = np.flatnonzero(~built.is_context[lo:hi]) + lo
        starts_bos = arpa.ngram_words[rows, order - n] == table.bos
        for skip_first in (False, True):
            group = rows[starts_bos == skip_first]
            for c0 in range(0, group.shape[0], chunk):
                part = group[c0 : c0 + chunk]
                total += _verify_prefixes(
                    model, table, arpa, part, n, skip_first, scored, mismatches
                )
    listed_bos = arpa.ngram_words[:, order - 1] == table.bos
    checked = scored[built.row_slot]
    unchecked = np.flatnonzero(~checked & ~listed_bos)
    if unchecked.size:  # every listed n-gram is a prefix of a row that is nobody's context
        raise AssertionError(f"{unchecked.size} n-grams were not verified")
    return total, int(np.count_nonzero(checked & ~listed_bos))


def _verify_prefixes(
    model: Any,
    table: LmTable,
    arpa: _Arpa,
    part: NDArray[np.int64],
    n: int,
    skip_first: bool,
    scored: NDArray[np.bool_],
    mismatches: list[str],
) -> int:
    """Compare the score of every word of some rows of order ``n`` given the words before it.

    ``skip_first``: the rows start with ``<s>``, which is not scored. Marks the slots of the
    prefixes scored in ``scored``; the number of scores compared (words other than ``<s>``).
    """
    order = table.order
    per_row = n - (1 if skip_first else 0)
    ours = _prefix_scores(
        *table.arrays(),
        arpa.ngram_words,
        part,
        n,
        skip_first,
        np.uint64(_KEY_MASK),
        scored,
    )
    theirs = _kenlm_prefix_scores(model, arpa, part, n, skip_first)
    targets = arpa.ngram_words[part][:, order - per_row :].ravel()
    bad = np.flatnonzero(~_same(ours, theirs) & (targets != table.bos))
    for q in bad[:5].tolist():
        row, k = int(part[q // per_row]), q % per_row + n - per_row
        ngram = arpa.ngram_text(row, order - n, k + 1)
        _mismatch(mismatches, f"{ngram!r}", float(ours[q]), float(theirs[q]))
    return int(np.count_nonzero(targets != table.bos))


def _verify_random_queries(
    model: Any, table: LmTable, arpa: _Arpa, count: int, seed: int, mismatches: list[str]
) -> int:
    """:func:`_random_queries`, through the full backoff paths; the number of queries."""
    ctxs, nctxs, qwords, texts = _random_queries(table, arpa, count, seed)
    ours_q = _logp10_batch(*table.arrays(), ctxs, nctxs, qwords)
    theirs_q = np.array([_kenlm_score(model, c, w) for c, w in texts], np.float64)
    theirs_q32 = theirs_q.astype(np.float32)
    for q in np.flatnonzero(~_same(ours_q, theirs_q32)).tolist():
        context, word = texts[q]
        _mismatch(
            mismatches,
            f"p({word} | {' '.join(context)})",
            float(ours_q[q]),
            float(theirs_q32[q]),
        )
    return len(texts)


# --------------------------------------------------------------------------- build and cache


def _build(path: Path, verify: bool, say: Log) -> tuple[LmTable, dict[str, Any]]:
    """Parse, build and (if asked) verify; the table and its cache manifest."""
    t0 = time.perf_counter()
    arpa = _read_arpa(path)
    t1 = time.perf_counter()
    built = _assemble(arpa)
    table = built.table
    t2 = time.perf_counter()
    total = sum(arpa.counts)
    say(
        f"{path}: {total:,} n-grams read in {t1 - t0:.1f}s; table of {len(table.keys):,} slots "
        f"({built.blanks} blanks, {table.nbytes / 1e6:.0f} MB) built in {t2 - t1:.1f}s"
    )
    report: _VerifyReport | None = None
    if verify:
        report = _verify(built, arpa)
        table = replace(table, verified=True)
        say(
            f"{path}: the table equals KenLM on all {report.ngrams:,} n-grams "
            f"({report.scores:,} scores) and {report.random_queries:,} random queries "
            f"({time.perf_counter() - t2:.1f}s, of which {report.kenlm_load_seconds:.1f}s "
            "loading KenLM)"
        )
    t3 = time.perf_counter()
    manifest: dict[str, Any] = {
        "format": TABLE_FORMAT,
        "seed": int(SEED),
        "arpa": {
            "name": path.name,
            "size": arpa.size,
            "mtime_ns": arpa.mtime_ns,
            "sha256": arpa.sha256,
        },
        "order": arpa.order,
        "counts": list(arpa.counts),
        "table_size": len(table.keys),
        "blanks": built.blanks,
        "verified": verify,
        "verification": None
        if report is None
        else {
            "ngrams": report.ngrams,
            "scores": report.scores,
            "random_queries": report.random_queries,
        },
        "seconds": {
            "parse": round(t1 - t0, 2),
            "table": round(t2 - t1, 2),
            "verify": round(t3 - t2, 2),
        },
    }
    return table, manifest


def build_lm_table(arpa: Path, *, verify: bool = True, log: Log | None = None) -> LmTable:
    """Parse the ARPA file at ``arpa``, build its table and (if ``verify``) check it with KenLM.

    DataFormatError for a malformed file (naming the line) or a table that differs from KenLM.
    """
    return _build(Path(arpa), verify, log or _logger.info)[0]


def cache_path(arpa: Path, cache_dir: Path | None = None) -> Path:
    """Where :func:`load_lm_table` keeps the table of ``arpa``: ``<stem>.table`` beside it or in
    ``cache_dir``."""
    arpa = Path(arpa)
    return (Path(cache_dir) if cache_dir is not None else arpa.parent) / (arpa.stem + CACHE_SUFFIX)


def load_lm_table(
    arpa: Path,
    *,
    cache_dir: Path | None = None,
    verify: bool = True,
    log: Log | None = None,
) -> LmTable:
    """The table of ``arpa``, memory-mapped from its cache, built (and cached) if need be.

    The cache (:func:`cache_path`) is used when its manifest matches the ARPA file's size and
    modification time, every file has the recorded size and the arrays their shapes, and (if
    ``verify``) it was verified; otherwise the table is rebuilt. If the cache cannot be
    written (a read-only directory), the table built in memory is returned.
    """
    say = log or _logger.info
    arpa = Path(arpa)
    if not arpa.is_file():
        raise MissingResourceError(f"{arpa}: language model file not found")
    cache = cache_path(arpa, cache_dir)
    table, why = _open_cache(cache, arpa, verify)
    if table is not None:
        return table
    say(f"{arpa}: building the LM table ({why})")
    table, manifest = _build(arpa, verify, say)
    now = arpa.stat()
    if (now.st_size, now.st_mtime_ns) != (manifest["arpa"]["size"], manifest["arpa"]["mtime_ns"]):
        say(f"{arpa}: the file changed while it was read; the table is not cached")
        return table
    try:
        _write_cache(cache, table, manifest)
    except OSError as exc:
        say(f"{cache}: cannot write the LM table cache ({exc}); using the table in memory")
        return table
    cached, why = _open_cache(cache, arpa, verify)
    if cached is None:  # pragma: no cover - another process replaced it with a bad one
        say(f"{cache}: the cache just written does not load ({why}); using the table in memory")
        return table
    return cached


def _open_cache(cache: Path, arpa: Path, verify: bool) -> tuple[LmTable | None, str]:
    """The cached table if it is current and whole, else None and the reason."""
    if not (cache / MANIFEST).is_file():
        return None, f"no cache in {cache}"
    try:
        manifest = json.loads((cache / MANIFEST).read_text(encoding="utf-8"))
        stat = arpa.stat()
        source = manifest["arpa"]
        if manifest["format"] != TABLE_FORMAT or manifest["seed"] != int(SEED):
            return None, "the cache has another format"
        if (source["size"], source["mtime_ns"]) != (stat.st_size, stat.st_mtime_ns):
            return None, f"{arpa.name} changed since the cache was built"
        if verify and not manifest["verified"]:
            return None, "the cache was not verified against KenLM"
        for name, size in manifest["files"].items():
            if (cache / name).stat().st_size != size:
                return None, f"{cache / name} has the wrong size"
        arrays = {
            name: np.load(cache / f"{name}.npy", mmap_mode="r", allow_pickle=False)
            for name in _ARRAYS
        }
        table_size, vocab_size = manifest["table_size"], manifest["counts"][0]
        for name, arr in arrays.items():
            want = table_size if name in _SLOT_ARRAYS else vocab_size
            if arr.shape != (want,) or arr.dtype != _DTYPES[name]:
                return None, f"{cache / name}.npy has the wrong shape or type"
        vocab_words = (cache / VOCAB_FILE).read_text(encoding="utf-8").split("\n")[:-1]
        if len(vocab_words) != vocab_size:
            return None, f"{cache / VOCAB_FILE} has the wrong length"
        table = LmTable(
            order=int(manifest["order"]),
            vocab=MappingProxyType({w: i for i, w in enumerate(vocab_words)}),
            verified=bool(manifest["verified"]),
            **arrays,
        )
    except (OSError, ValueError, KeyError, TypeError, EOFError) as exc:
        return None, f"the cache is unreadable ({type(exc).__name__}: {exc})"
    return table, "cached"


def _write_cache(cache: Path, table: LmTable, manifest: dict[str, Any]) -> None:
    """Write the cache atomically (:func:`service.arraydir.atomic_directory`), the manifest
    last, after removing what interrupted writers left beside it."""
    arraydir.remove_leftovers(cache, _STALE_TEMP_SECONDS)
    with arraydir.atomic_directory(cache) as tmp:
        files: dict[str, int] = {}
        for name in _ARRAYS:
            files[f"{name}.npy"] = arraydir.save_array(tmp / f"{name}.npy", getattr(table, name))
        text = "".join(w + "\n" for w in table.vocab).encode("utf-8")
        files[VOCAB_FILE] = arraydir.write_file(tmp / VOCAB_FILE, text)
        body = json.dumps({**manifest, "files": files}, indent=1, sort_keys=True) + "\n"
        arraydir.write_file(tmp / MANIFEST, body.encode("utf-8"))
