"""The ARPA reader: one parse of an ARPA file, for the LM table and for the reference ArpaLM.

An ARPA file lists, under a ``\\data\\`` header of counts, one ``\\n-grams:`` section per
order whose lines hold a log10 probability, the n-gram's words and, below the highest order, an
optional log10 backoff, fields separated by spaces or tabs (:data:`FIELD_SEP`), and ends with
``\\end\\`` (the back-off model of Chen & Goodman 1998, §2). :func:`read_arpa` parses and
validates a file (plain or gzip) as KenLM would load it (Heafield 2011, "KenLM: Faster and
Smaller Language Model Queries", §2.1): the header and the end line by line here, the sections
in compiled code (:mod:`service.mt.lm.arpa_scan`), and the numbers the compiled parser cannot
round with certainty exactly here (:func:`exact_float32`). The result, :class:`ArpaFile`, holds
the unigrams by id and the higher orders as rows of word ids, with the numbers as KenLM stores
them:

* rounded to float32 correctly from the decimal text (KenLM parses with ``StringToFloat``;
  converting through float64 first would round some values twice);
* a probability as ``-|p|`` (KenLM's probing model keeps a flag in the sign bit);
* a zero or missing backoff as ``-0.0`` (:mod:`service.mt.lm.assemble` makes it ``+0.0`` where the
  n-gram is the context of a longer one, as KenLM does).

Two readers take it from there: the build of the LM table (:mod:`service.mt.lm.assemble`) reads
the arrays, and the pure-Python reference :class:`service.mt.lm.ArpaLM` reads
:meth:`ArpaFile.entries`, the same n-grams with the numbers as written (float64, parsed from
the same lines split by the same :data:`FIELD_SEP`), so the two models always see one file.
"""

from __future__ import annotations

import gzip
import hashlib
import math
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from itertools import islice
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from service.errors import DataFormatError, MissingResourceError
from service.mt.lm.arpa_scan import FIELDS, TOO_MANY, UNKNOWN_WORD, scan_section, vocab_table
from service.mt.lm.symbols import BOS, EOS, UNK

FIELD_SEP = re.compile(r"[ \t]+")  # ARPA separators; words may contain other whitespace

_GZIP_MAGIC = b"\x1f\x8b"
_COUNT_LINE = re.compile(rb"ngram[ \t]+(\d+)[ \t]*=[ \t]*(\d+)")
_NEG_ZERO = np.float32(-0.0)


@dataclass(frozen=True, eq=False)
class ArpaFile:
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
        """The line number (from 1) of the byte ``offset`` of :attr:`data`."""
        return _line_no(self.data, offset)

    def ngram_text(self, row: int, start: int, length: int) -> str:
        """The words ``ngram_words[row, start : start + length]``, space-separated."""
        return " ".join(self.words[int(i)] for i in self.ngram_words[row, start : start + length])

    def entries(self) -> dict[tuple[str, ...], tuple[float, float]]:
        """Every listed n-gram (oldest word first) with its log10 probability and backoff as
        written: Python floats parsed from the n-gram's line split by :data:`FIELD_SEP`, not
        the float32 values of the arrays (and 0.0 where the line gives no backoff), in the
        order of the file. What the reference :class:`service.mt.lm.ArpaLM` computes with."""
        data, words, order = self.data, self.words, self.order
        entries: dict[tuple[str, ...], tuple[float, float]] = {
            (word,): _numbers(data, offset, 1)
            for word, offset in zip(words, self.uni_lines.tolist(), strict=True)
        }
        for n in range(2, order + 1):
            rows = slice(int(self.starts[n]), int(self.starts[n + 1]))
            ids = self.ngram_words[rows, order - n :].tolist()
            for row_ids, offset in zip(ids, self.ngram_lines[rows].tolist(), strict=True):
                entries[tuple(words[i] for i in row_ids)] = _numbers(data, offset, n)
        return entries


def _numbers(data: bytes, offset: int, n: int) -> tuple[float, float]:
    """The probability and backoff (0.0 if none) of the ``n``-gram line at ``offset``."""
    fields = FIELD_SEP.split(_line_text(data, offset))
    return float(fields[0]), float(fields[n + 1]) if len(fields) == n + 2 else 0.0


def exact_float32(text: str) -> np.float32:
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


def read_arpa(path: Path) -> ArpaFile:
    """Parse and validate an ARPA file (plain or gzip) as KenLM would load it.

    Validation, each a :class:`DataFormatError` naming the file and line: the ``\\data\\``
    header and its ``ngram N=count`` lines (orders 1, 2, ... in turn), one section per order
    in that order with exactly the declared number of lines, ``n + 1`` or ``n + 2`` fields per
    line, numbers (a probability may not be positive or NaN, a backoff must be finite, the
    highest order has none), every n-gram word a unigram, no unigram listed twice, ``<unk>``,
    ``<s>`` and ``</s>`` present, ``\\end\\`` and nothing after it (an n-gram of a higher order
    listed twice or without its context is an error of the build, :mod:`service.mt.lm.assemble`).
    The sections are read by :func:`~service.mt.lm.arpa_scan.scan_section` in compiled code;
    only the header and the end line by line. The words of n-grams are matched to unigrams by
    a 64-bit hash of their bytes (the bytes are compared only if two unigrams share a hash),
    so a word that is not a unigram could pass for one with probability about
    ``unigrams / 2**64``; KenLM, in the verification, would then refuse the file.
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
    return ArpaFile(
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
    """The arrays :func:`~service.mt.lm.arpa_scan.scan_section` fills: the unigrams by id,
    higher orders by row.

    Rows of order n are ``starts[n]:starts[n+1]`` (n >= 2), right-aligned in ``ngram_words``
    as in :class:`ArpaFile`; ``*_inexact`` flags the numbers the compiled parser leaves to
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
        """The output arguments of :func:`~service.mt.lm.arpa_scan.scan_section` for the
        section of order ``n``.

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
        status, pos, read, detail = scan_section(
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
    """The error of a section :func:`~service.mt.lm.arpa_scan.scan_section` stopped in, or of
    its line count."""
    if status == TOO_MANY:
        raise fail(pos, f"the \\{n}-grams: section has more than the {count} lines declared")
    if status == FIELDS:
        raise fail(pos, f"a {n}-gram line needs {n + 1} or {n + 2} fields, got {detail}")
    if status == UNKNOWN_WORD:
        word = FIELD_SEP.split(_line_text(data, pos))[1 + detail]
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
    table, shared, first, again = vocab_table(buf, spans)
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
        fields = FIELD_SEP.split(text)
        try:
            if inexact[row] & 1:
                probs[row] = exact_float32(fields[0])
            if inexact[row] & 2:
                backoffs[row] = exact_float32(fields[n + 1])
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
