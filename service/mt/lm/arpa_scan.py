"""The compiled half of the ARPA reader: the sections' lines scanned in one pass, in numba.

:func:`scan_section` reads the lines of one ``\\n-grams:`` section of an ARPA file (the
back-off format that SRILM and KenLM write; Chen & Goodman 1998, §2, for the model) from a
byte buffer: it splits each line into fields at spaces and tabs, parses the probability and the
backoff to float32 (:func:`parse_float32`, which says when it cannot be sure of the rounding and
leaves that number to the exact parser of :mod:`service.mt.lm.read_arpa`) and matches each
word of an n-gram to its unigram's id through a hash table of the unigrams' bytes
(:func:`vocab_table`). It stops at the next header and reports what it found wrong as a status
code; :func:`service.mt.lm.read_arpa.read_arpa` drives it section by section, turns the codes
into errors that name the line, and is the only caller.

KenLM parses numbers with ``StringToFloat`` (correct rounding to float32); converting through
float64 first would round some values twice, hence the fast path's margin (Heafield 2011,
"KenLM: Faster and Smaller Language Model Queries", §2.1, for the loader this follows).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numba
import numpy as np

from service.mt.lm.kernels import mix

_U0 = np.uint64(0)
_U1 = np.uint64(1)
_NEG_ZERO = np.float32(-0.0)
_POS_ZERO = np.float32(0.0)
_POW10 = np.array([float(10**i) for i in range(23)])  # exactly representable powers of ten
_POW10_NEG = np.array([float(Fraction(1, 10**i)) for i in range(23)])  # correctly rounded
_LOW29 = np.uint64((1 << 29) - 1)
_HALF29 = np.int64(1 << 28)

# status codes of scan_section
OK = 0
TOO_MANY = 1  # more lines in a section than its header declares
FIELDS = 2  # wrong number of fields on a line
UNKNOWN_WORD = 3  # an n-gram word that is not a unigram


@numba.njit(cache=True, nogil=True, inline="always")
def is_blank(c: int) -> bool:
    """Whether the byte ``c`` separates fields."""
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
def vocab_table(buf: Any, spans: Any) -> tuple[Any, bool, Any, Any]:
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
def parse_float32(buf: Any, start: int, end: int) -> tuple[np.float32, bool]:
    """The float32 nearest the decimal ``buf[start:end]``, and whether that is certain.

    The fast path reads at most 19 significant digits and a decimal exponent within ±22 into
    one float64 product (error < 1.6 float64 ulps) and rounds it to float32; it gives up
    (``False``) on anything else and whenever the float64 lies within 4 ulps of a float32
    rounding boundary, where the exact decimal must decide
    (:func:`service.mt.lm.read_arpa.exact_float32`).
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
def scan_section(
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
    returns at the line's ends (as :data:`service.mt.lm.read_arpa.FIELD_SEP` splits the
    line's text); blank lines are skipped. Writes per line the word ids (right-aligned in
    ``words_out``; for unigrams the word's byte span into ``uni_spans_out``), probability,
    backoff (``-0.0`` if none), which numbers need the exact parser (bit 1: probability,
    bit 2: backoff) and the line's byte offset. Returns ``(status, position, rows, detail)``.
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
            if is_blank(buf[i]):
                i += 1
                continue
            start = i
            h = _FNV_OFFSET
            while i < size and buf[i] != 10 and not is_blank(buf[i]):
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
            return OK, line, rows, 0
        if rows == capacity:
            return TOO_MANY, line, rows, 0
        if k != n + 1 and k != n + 2:
            return FIELDS, line, rows, k
        flags = 0
        v, exact = parse_float32(buf, tok_s[0], tok_e[0])
        probs_out[rows] = v
        if not exact:
            flags |= 1
        if k == n + 2:
            v, exact = parse_float32(buf, tok_s[n + 1], tok_e[n + 1])
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
                    return UNKNOWN_WORD, line, rows, j
                words_out[rows, order - n + j] = w
        rows += 1
    return OK, size, rows, 0
