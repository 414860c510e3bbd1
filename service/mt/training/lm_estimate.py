"""Interpolated modified Kneser-Ney estimation of an n-gram language model, written as ARPA.

Implements Chen & Goodman (1998), "An empirical study of smoothing techniques for language
modeling", §3 (interpolated Kneser-Ney, eq. 26 for the discounts) as KenLM's ``lmplz`` does
it (Heafield, Pouzyrevsky, Clark & Koehn 2013, "Scalable modified Kneser-Ney language model
estimation", §3.1-3.4), for the model bundle's 4-gram LM:

* **Counting** (§3.1): every sentence is ``<s> w1 … wk </s>``; n-grams never cross sentences.
* **Adjusted counts** (§3.2): ``a(w_1^n) = c(w_1^n)`` if ``n = N`` or ``w_1 = <s>``, else the
  continuation count ``|{v : c(v w_1^n) > 0}|``. ``<s>`` and ``<unk>`` have unigram count 0.
* **Discounts** (§3.2; Chen & Goodman eq. 26): per order, from the count-of-counts ``t_k`` of
  the adjusted counts, ``Y = t1 / (t1 + 2 t2)`` and ``D_k = k − (k+1) Y t_{k+1} / t_k`` for
  k = 1, 2, 3 (``D_3`` is applied to every count ≥ 3).
* **Normalisation** (§3.3): ``u(w|h) = (a(hw) − D(a(hw))) / Σ_x a(hx)`` and the backoff mass
  ``b(h) = (D1 N1(h•) + D2 N2(h•) + D3 N3+(h•)) / Σ_x a(hx)``.
* **Interpolation** (§3.4): ``p(w|h) = u(w|h) + b(h) p(w|h')`` down to the unigrams, which are
  interpolated with the uniform distribution over the vocabulary without ``<s>`` (so ``<unk>``
  gets ``b(ε)/|V|``). The ARPA lists ``log10 p(w|h)`` and ``log10 b(h)``; a back-off query
  then reproduces the interpolated probability exactly.

Degenerate count statistics (some ``t_k = 0`` for k ≤ 3, or a discount outside ``[0, k]``,
which happens on tiny or artificial corpora) raise :class:`InvalidInputError` naming the order,
unless ``discount_fallback`` gives discounts to use instead (lmplz's ``--discount_fallback``,
same default values 0.5, 1, 1.5). Optional pruning (``prune_singletons``) drops n-grams of
order ≥ 3 seen once; their whole adjusted count goes to the backoff mass, so every
distribution still sums to 1 (as lmplz's ``--prune 0 0 1``).

The implementation is vectorised with numpy: tokens are integer-encoded into one array, the
n-grams of order n are numbered by ``np.unique`` over ``id(prefix) · V + last_word``, so each
order's table is sorted by (context, word), and every count is a ``bincount`` over those
numbers. Memory is a few arrays of the corpus length per order; the ARPA text is produced
order by order.
"""

from __future__ import annotations

import math
import shutil
import subprocess
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt

from service.core.csr import ptr_from_counts
from service.data.io import ErrorPolicy, MalformedLines, atomic_write, iter_lines, open_output
from service.errors import ConfigurationError, DataFormatError, InvalidInputError
from service.mt.lm import BOS, EOS, UNK

UNK_ID, BOS_ID, EOS_ID = 0, 1, 2
DEFAULT_ORDER = 4
LMPLZ_DISCOUNT_FALLBACK = (0.5, 1.0, 1.5)
ARPA_BOS_LOG10 = -99.0  # <s> is never predicted; lmplz and SRILM write -99

Ints = npt.NDArray[np.int64]
Floats = npt.NDArray[np.float64]
Bools = npt.NDArray[np.bool_]


@dataclass(frozen=True, slots=True)
class OrderStats:
    """Count statistics and discounts of one order."""

    order: int
    ngrams: int  # n-grams of this order in the model (after pruning)
    pruned: int  # n-grams dropped by pruning
    count_of_counts: tuple[int, int, int, int]  # t1..t4 of the adjusted counts
    discounts: tuple[float, float, float]  # D1, D2, D3+
    fallback: bool  # True if the discounts are the fallback values


@dataclass(slots=True)
class NGramTable:
    """The n-grams of one order, sorted by (context index, last word id)."""

    context: Ints  # index into the previous order's table (all zeros for unigrams)
    word: Ints  # id of the last word
    log10_prob: Floats
    log10_backoff: Floats  # NaN where the n-gram is not a context of the next order
    keep: Bools  # False for n-grams removed by pruning


@dataclass(slots=True)
class EncodedCorpus:
    """Sentences as one int array ``<s> w … </s> <s> …`` plus the vocabulary."""

    tokens: npt.NDArray[np.int32]
    vocab: list[str]
    sentences: int
    words: int  # tokens without <s>, </s>
    empty_lines: int = 0
    special_tokens_dropped: int = 0


@dataclass(slots=True)
class KneserNeyModel:
    """An estimated model: vocabulary, one table per order, statistics."""

    order: int
    vocab: list[str]
    tables: list[NGramTable]
    stats: list[OrderStats]
    sentences: int
    words: int
    empty_lines: int = 0
    special_tokens_dropped: int = 0
    notes: list[str] = field(default_factory=list)

    def counts(self) -> list[int]:
        """Number of n-grams per order written to the ARPA file."""
        return [int(t.keep.sum()) for t in self.tables]


# --- input -----------------------------------------------------------------------------------


def simple_tokenize(line: str) -> list[str]:
    """Lower-case and split on whitespace (for text that is tokenised already)."""
    return line.lower().split()


def read_lm_text(
    path: str | Path, tokenize: Callable[[str], list[str]] = simple_tokenize
) -> Iterator[list[str]]:
    """Token lists of a (gzip) text file, one sentence per line.

    Lines that are not valid UTF-8 are skipped, counted and reported on stderr.
    """
    path = Path(path)
    malformed = MalformedLines(path, ErrorPolicy.SKIP)
    for _, line in iter_lines(path, malformed):
        yield tokenize(line)
    malformed.report()


def encode_corpus(sentences: Iterable[Sequence[str]]) -> EncodedCorpus:
    """Integer-encode sentences; ids 0, 1, 2 are ``<unk>``, ``<s>``, ``</s>``.

    Empty sentences are skipped and literal ``<s>``, ``</s>``, ``<unk>`` tokens dropped
    (both counted), since they would clash with the model's own symbols.
    """
    vocab: dict[str, int] = {UNK: UNK_ID, BOS: BOS_ID, EOS: EOS_ID}
    specials = frozenset(vocab)
    ids = array("i")
    lengths = array("q")
    empty = dropped = 0
    for sentence in sentences:
        if not specials.isdisjoint(sentence):
            kept = [w for w in sentence if w not in specials]
            dropped += len(sentence) - len(kept)
            sentence = kept
        if not sentence:
            empty += 1
            continue
        ids.extend([vocab.setdefault(w, len(vocab)) for w in sentence])
        lengths.append(len(sentence))
    if not lengths:
        raise InvalidInputError(
            "the LM text has no usable sentence (every line is empty); give a text file "
            "with one sentence per line"
        )
    n_sent = len(lengths)
    lens = np.frombuffer(lengths, dtype=np.int64)
    words = np.frombuffer(ids, dtype=np.int32)
    total = int(lens.sum()) + 2 * n_sent
    tokens = np.empty(total, dtype=np.int32)
    starts = ptr_from_counts(lens + 2)[:-1]
    ends = starts + lens + 1
    is_word = np.ones(total, dtype=bool)
    is_word[starts] = False
    is_word[ends] = False
    tokens[starts] = BOS_ID
    tokens[ends] = EOS_ID
    tokens[is_word] = words
    inverse = [""] * len(vocab)
    for word, i in vocab.items():
        inverse[i] = word
    return EncodedCorpus(tokens, inverse, n_sent, int(lens.sum()), empty, dropped)


# --- estimation ------------------------------------------------------------------------------


@dataclass(slots=True)
class _Order:
    """Unique n-grams of one order, numbered in sorted order."""

    context: Ints  # id of the (n-1)-gram prefix
    suffix: Ints  # id of the (n-1)-gram suffix
    word: Ints
    raw: Ints  # raw counts
    starts_bos: Bools


def _count_orders(tokens: npt.NDArray[np.int32], order: int, vocab_size: int) -> list[_Order]:
    length = len(tokens)
    tok64 = tokens.astype(np.int64)
    uni_raw = np.bincount(tok64, minlength=vocab_size).astype(np.int64)
    all_ids = np.arange(vocab_size, dtype=np.int64)
    orders = [
        _Order(
            np.zeros(vocab_size, np.int64),
            np.zeros(vocab_size, np.int64),
            all_ids,
            uni_raw,
            all_ids == BOS_ID,
        )
    ]
    ids_prev = tok64  # id of the (n-1)-gram starting at each position (-1: none)
    valid_prev = np.ones(length, dtype=bool)
    for n in range(2, order + 1):
        m = length - n + 1
        if m <= 0:
            break
        valid = valid_prev[:m] & (tokens[n - 2 : n - 2 + m] != EOS_ID)
        pos = np.flatnonzero(valid)
        if len(pos) == 0:
            break
        key = ids_prev[pos] * vocab_size + tok64[pos + n - 1]
        uniq, first, inverse, raw = np.unique(
            key, return_index=True, return_inverse=True, return_counts=True
        )
        rep = pos[first]
        orders.append(
            _Order(
                context=uniq // vocab_size,
                suffix=ids_prev[rep + 1],
                word=uniq % vocab_size,
                raw=raw.astype(np.int64),
                starts_bos=tokens[rep] == BOS_ID,
            )
        )
        ids = np.full(m, -1, dtype=np.int64)
        ids[pos] = inverse.reshape(-1)
        ids_prev, valid_prev = ids, valid
        del key, uniq, first, inverse, pos
    return orders


def _discounts(
    n: int, adjusted: Ints, fallback: tuple[float, float, float] | None
) -> tuple[tuple[int, int, int, int], tuple[float, float, float], bool]:
    t = tuple(int(np.count_nonzero(adjusted == k)) for k in (1, 2, 3, 4))
    t1, t2, t3, t4 = t
    problem = ""
    if t1 == 0 or t2 == 0 or t3 == 0:
        missing = [k for k, tk in zip((1, 2, 3), (t1, t2, t3), strict=True) if tk == 0]
        problem = (
            f"no {n}-grams with adjusted count {missing} (count-of-counts t1..t4 = {t}), so "
            f"the modified Kneser-Ney discounts of order {n} are undefined"
        )
        d: tuple[float, float, float] = (math.nan, math.nan, math.nan)
    else:
        y = t1 / (t1 + 2 * t2)
        d = (1 - 2 * y * t2 / t1, 2 - 3 * y * t3 / t2, 3 - 4 * y * t4 / t3)
        bad = [k for k, dk in enumerate(d, 1) if not 0 <= dk <= k]
        if bad:
            problem = (
                f"order {n}: discount D{bad[0]} = {d[bad[0] - 1]:.4f} is outside [0, {bad[0]}] "
                f"(count-of-counts t1..t4 = {t})"
            )
    if problem:
        if fallback is None:
            raise InvalidInputError(
                f"{problem}; the corpus is too small or artificial for modified Kneser-Ney. "
                f"Use more text, a lower order, or pass discount_fallback="
                f"{LMPLZ_DISCOUNT_FALLBACK} (lmplz's --discount_fallback)"
            )
        return t, fallback, True  # type: ignore[return-value]
    return t, d, False  # type: ignore[return-value]


def _discount_of(counts: Ints, d: tuple[float, float, float]) -> Floats:
    table = np.array([0.0, d[0], d[1], d[2]])
    return table[np.minimum(counts, 3)]


def estimate_from_encoded(
    corpus: EncodedCorpus,
    order: int = DEFAULT_ORDER,
    *,
    prune_singletons: bool = False,
    discount_fallback: tuple[float, float, float] | None = None,
) -> KneserNeyModel:
    """Estimate an interpolated modified Kneser-Ney model from an encoded corpus."""
    if order < 1:
        raise ConfigurationError(f"the LM order must be at least 1, got {order}")
    vocab_size = len(corpus.vocab)
    orders = _count_orders(corpus.tokens, order, vocab_size)
    if len(orders) < order:
        raise InvalidInputError(
            f"the LM text has no {len(orders) + 1}-gram (its sentences are too short for an "
            f"order-{order} model); use a lower order or more text"
        )
    adjusted = _adjusted_counts(orders)
    stats, discounts, keeps = _order_discounts(
        orders, adjusted, prune_singletons, discount_fallback
    )
    probs, gammas = _interpolate(orders, adjusted, discounts, keeps, vocab_size)
    return KneserNeyModel(
        order,
        corpus.vocab,
        _arpa_tables(orders, probs, gammas, keeps),
        stats,
        corpus.sentences,
        corpus.words,
        corpus.empty_lines,
        corpus.special_tokens_dropped,
    )


def _adjusted_counts(orders: Sequence[_Order]) -> list[Ints]:
    """The adjusted counts of every order (Heafield et al. 2013 §3.2): the raw counts for the
    highest order and n-grams starting with ``<s>``, else continuation counts."""
    order = len(orders)
    adjusted: list[Ints] = [np.empty(0, np.int64)] * order
    adjusted[order - 1] = orders[order - 1].raw
    for n in range(order - 1, 0, -1):
        cur = orders[n - 1]
        cont = np.bincount(orders[n].suffix, minlength=len(cur.raw)).astype(np.int64)
        adjusted[n - 1] = np.where(cur.starts_bos, cur.raw, cont)
    adjusted[0][BOS_ID] = 0
    adjusted[0][UNK_ID] = 0
    return adjusted


def _order_discounts(
    orders: Sequence[_Order],
    adjusted: Sequence[Ints],
    prune_singletons: bool,
    discount_fallback: tuple[float, float, float] | None,
) -> tuple[list[OrderStats], list[tuple[float, float, float]], list[Bools]]:
    """Per order, lowest first: its statistics, its discounts and the n-grams kept (all but
    the singletons of order >= 3 under ``prune_singletons``)."""
    stats: list[OrderStats] = []
    discounts: list[tuple[float, float, float]] = []
    keeps: list[Bools] = []
    for n in range(1, len(orders) + 1):
        a = adjusted[n - 1]
        t, d, fell_back = _discounts(n, a, discount_fallback)
        discounts.append(d)
        keep = np.ones(len(a), dtype=bool)
        if prune_singletons and n >= 3:
            keep = orders[n - 1].raw > 1
        keeps.append(keep)
        stats.append(OrderStats(n, int(keep.sum()), int((~keep).sum()), t, d, fell_back))
    return stats, discounts, keeps


def _interpolate(
    orders: Sequence[_Order],
    adjusted: Sequence[Ints],
    discounts: Sequence[tuple[float, float, float]],
    keeps: Sequence[Bools],
    vocab_size: int,
) -> tuple[list[Floats], list[Floats]]:
    """The interpolated probabilities of every order and the backoffs of every order but the
    highest (Heafield et al. 2013 §3.3-3.4); a backoff is NaN where the n-gram is no
    longer n-gram's context."""
    # unigrams, interpolated with the uniform distribution over V \ {<s>}
    a1 = adjusted[0].astype(np.float64)
    disc1 = np.where(adjusted[0] > 0, _discount_of(adjusted[0], discounts[0]), 0.0)
    denom1 = a1.sum()
    gamma0 = disc1.sum() / denom1
    prob = (a1 - disc1) / denom1 + gamma0 / (vocab_size - 1)
    probs: list[Floats] = [prob]

    gammas: list[Floats] = []
    for n in range(2, len(orders) + 1):
        cur = orders[n - 1]
        a = adjusted[n - 1]
        af = a.astype(np.float64)
        keep = keeps[n - 1]
        disc = _discount_of(a, discounts[n - 1])
        n_ctx = len(orders[n - 2].raw)
        denom = np.bincount(cur.context, weights=af, minlength=n_ctx)
        mass = np.bincount(cur.context, weights=np.where(keep, disc, af), minlength=n_ctx)
        with np.errstate(divide="ignore", invalid="ignore"):
            gamma = np.where(denom > 0, mass / denom, np.nan)
        gammas.append(gamma)
        prob = (af - disc) / denom[cur.context] + gamma[cur.context] * probs[-1][cur.suffix]
        probs.append(prob)
    return probs, gammas


def _arpa_tables(
    orders: Sequence[_Order],
    probs: Sequence[Floats],
    gammas: Sequence[Floats],
    keeps: Sequence[Bools],
) -> list[NGramTable]:
    """The tables as the ARPA file lists them: log10 probabilities (``<s>``: -99) and
    backoffs (NaN for the highest order)."""
    order = len(orders)
    tables: list[NGramTable] = []
    for n in range(1, order + 1):
        cur = orders[n - 1]
        with np.errstate(divide="ignore"):
            log10_prob = np.log10(probs[n - 1])
            backoff = np.log10(gammas[n - 1]) if n < order else np.full(len(cur.raw), np.nan)
        if n == 1:
            log10_prob[BOS_ID] = ARPA_BOS_LOG10
        tables.append(NGramTable(cur.context, cur.word, log10_prob, backoff, keeps[n - 1]))
    return tables


def estimate_kneser_ney(
    sentences: Iterable[Sequence[str]],
    order: int = DEFAULT_ORDER,
    *,
    prune_singletons: bool = False,
    discount_fallback: tuple[float, float, float] | None = None,
) -> KneserNeyModel:
    """Estimate an interpolated modified Kneser-Ney model from token lists."""
    return estimate_from_encoded(
        encode_corpus(sentences),
        order,
        prune_singletons=prune_singletons,
        discount_fallback=discount_fallback,
    )


# --- output ----------------------------------------------------------------------------------

_CHUNK = 1 << 18


def _fmt(x: float) -> str:
    return f"{x:.7g}"


def write_arpa(model: KneserNeyModel, path: str | Path) -> None:
    """Write the model as an ARPA file, atomically; a ``.gz`` path is gzip-compressed."""
    counts = model.counts()
    with open_output(path) as out:
        out.write("\\data\\\n")
        for n, count in enumerate(counts, 1):
            out.write(f"ngram {n}={count}\n")
        texts: list[str] = model.vocab
        for n, table in enumerate(model.tables, 1):
            out.write(f"\n\\{n}-grams:\n")
            if n > 1:
                words = model.vocab
                ctx_list = table.context.tolist()
                word_list = table.word.tolist()
                keep_list = table.keep.tolist()
                texts = [
                    f"{texts[c]} {words[w]}" if k else ""
                    for c, w, k in zip(ctx_list, word_list, keep_list, strict=True)
                ]
                del ctx_list, word_list
            for start in range(0, len(texts), _CHUNK):
                stop = start + _CHUNK
                probs = table.log10_prob[start:stop].tolist()
                backs = table.log10_backoff[start:stop].tolist()
                keep = table.keep[start:stop].tolist()
                lines = [
                    f"{_fmt(p)}\t{s}\t{_fmt(b)}\n" if b == b else f"{_fmt(p)}\t{s}\n"
                    for p, s, b, k in zip(probs, texts[start:stop], backs, keep, strict=True)
                    if k
                ]
                out.write("".join(lines))
        out.write("\n\\end\\\n")


def build_binary(arpa: str | Path, out: str | Path, exe: str | None = None) -> Path | None:
    """Convert ARPA to KenLM's binary format with ``build_binary`` (``exe`` or on PATH).

    Returns the binary's path, or None if ``build_binary`` is not installed (pip's kenlm
    has only the Python module; KenLM then loads the ARPA file directly).
    """
    exe = exe or shutil.which("build_binary")
    if exe is None:
        return None
    out = Path(out)
    with atomic_write(out) as tmp:
        result = subprocess.run(
            [exe, str(arpa), str(tmp)], capture_output=True, text=True, check=False
        )
        if result.returncode != 0:
            raise DataFormatError(
                arpa, None, f"build_binary failed ({result.returncode}): {result.stderr[-500:]}"
            )
    return out


def train_lm(
    text: str | Path,
    arpa: str | Path,
    order: int = DEFAULT_ORDER,
    *,
    tokenize: Callable[[str], list[str]] = simple_tokenize,
    prune_singletons: bool = False,
    discount_fallback: tuple[float, float, float] | None = None,
) -> KneserNeyModel:
    """Estimate a model from a text file (one sentence per line) and write it as ARPA."""
    try:
        model = estimate_kneser_ney(
            read_lm_text(text, tokenize),
            order,
            prune_singletons=prune_singletons,
            discount_fallback=discount_fallback,
        )
    except InvalidInputError as exc:
        raise DataFormatError(text, None, str(exc)) from exc
    write_arpa(model, arpa)
    return model
