"""The verification of the LM table against KenLM, bit for bit.

The table's scores (:func:`service.mt.lm.kernels.logp10`) must equal KenLM's ``BaseScore``
(Heafield 2011, "KenLM: Faster and Smaller Language Model Queries") exactly, sign of zero
included: the compiled decoder scores with the table where the reference decoder asks KenLM, and
the two must find the same translations. :func:`verify_table` loads the ARPA file in KenLM and
compares:

* every listed n-gram whose last word is not ``<s>``: ``logp10`` of its last word given the
  other words against KenLM's score from the state after them (``<s>``-initial contexts from
  KenLM's begin-sentence state, others from the null context). The scores come in batches
  from KenLM's ``full_scores`` over the n-grams that are no other n-gram's context, which
  scores every prefix of each, so each listed n-gram is checked at least once; unigrams are
  checked one ``BaseScore`` each;
* :data:`RANDOM_QUERIES` seeded random queries (contexts of 0 to ``order - 1`` words drawn from
  listed n-grams and the vocabulary, with unknown words, ``<unk>`` and sentence starts), which
  exercise the full backoff paths (Chen & Goodman 1998, §2).

Any mismatch is a :class:`~service.errors.DataFormatError` listing the first few; the table is
then not used.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from itertools import chain
from operator import itemgetter
from pathlib import Path
from typing import Any

import numba
import numpy as np
from numpy.typing import NDArray

from service.errors import DataFormatError
from service.mt.lm.arpa_scan import is_blank
from service.mt.lm.assemble import Built
from service.mt.lm.kernels import find_slot, logp10, logp10_batch, row_key
from service.mt.lm.read_arpa import ArpaFile
from service.mt.lm.symbols import BOS, EOS, UNK
from service.mt.lm.table import LmTable

RANDOM_QUERIES = 20_000  # random queries of the verification


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
                s = find_slot(keys, row_key(words, r, first, first + k + 1, mask))
                if s >= 0:
                    scored[s] = True
    return out


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
        while i < size and (is_blank(buf[i]) or buf[i] == 13):
            i += 1
        skip = 2 if skip_first else 1  # the probability and maybe <s>
        for _ in range(skip):
            while i < size and not is_blank(buf[i]):
                i += 1
            while i < size and is_blank(buf[i]):
                i += 1
        starts[q] = i
        for t in range(n - (1 if skip_first else 0)):
            if t > 0:
                while i < size and is_blank(buf[i]):
                    i += 1
            while i < size and not is_blank(buf[i]) and buf[i] != 10:
                i += 1
        while i > starts[q] and buf[i - 1] == 13:
            i -= 1  # a CRLF line end
        ends[q] = i
        for j in range(starts[q], i):
            if buf[j] == 11 or buf[j] == 12 or buf[j] == 13:
                odd[q] = True
    return starts, ends, odd


@dataclass(frozen=True)
class VerifyReport:
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
    model: Any, arpa: ArpaFile, rows: NDArray[np.int64], n: int, skip_first: bool
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
    table: LmTable, arpa: ArpaFile, count: int, seed: int
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


def verify_table(
    built: Built,
    arpa: ArpaFile,
    *,
    random_queries: int = RANDOM_QUERIES,
    seed: int = 0,
    chunk: int = 1 << 20,
) -> VerifyReport:
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
            "the LM table differs from KenLM (a bug in service.mt.lm; the table is not "
            "used): " + "; ".join(mismatches),
        )
    checked_count = ngrams + len(words) - 1
    return VerifyReport(checked_count, total, queries, load_seconds)


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
    ours_uni = logp10_batch(*table.arrays(), no_context, np.zeros(len(words), np.int64), ids)
    ours_uni[table.bos] = theirs_uni[table.bos]
    for i in np.flatnonzero(~_same(ours_uni, theirs_uni)).tolist():
        _mismatch(mismatches, f"p({words[i]})", float(ours_uni[i]), float(theirs_uni[i]))
    return len(words) - 1


def _verify_ngrams(
    model: Any, built: Built, arpa: ArpaFile, chunk: int, mismatches: list[str]
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
                    model, built, arpa, part, n, skip_first, scored, mismatches
                )
    listed_bos = arpa.ngram_words[:, order - 1] == table.bos
    checked = scored[built.row_slot]
    unchecked = np.flatnonzero(~checked & ~listed_bos)
    if unchecked.size:  # every listed n-gram is a prefix of a row that is nobody's context
        raise AssertionError(f"{unchecked.size} n-grams were not verified")
    return total, int(np.count_nonzero(checked & ~listed_bos))


def _verify_prefixes(
    model: Any,
    built: Built,
    arpa: ArpaFile,
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
    table = built.table
    order = table.order
    per_row = n - (1 if skip_first else 0)
    ours = _prefix_scores(
        *table.arrays(),
        arpa.ngram_words,
        part,
        n,
        skip_first,
        built.mask,
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
    model: Any, table: LmTable, arpa: ArpaFile, count: int, seed: int, mismatches: list[str]
) -> int:
    """:func:`_random_queries`, through the full backoff paths; the number of queries."""
    ctxs, nctxs, qwords, texts = _random_queries(table, arpa, count, seed)
    ours_q = logp10_batch(*table.arrays(), ctxs, nctxs, qwords)
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
