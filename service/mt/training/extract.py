"""Hiero rule extraction from word-aligned sentence pairs (Chiang 2007, §3.2;
Hieber & Riezler 2015, §3, §5).

Input: tokenised sentence pairs with a symmetrised word alignment, links ``(i, j)`` =
(source position, target position). Output: every Hiero rule with its fractional count, the
number of sentence pairs it was extracted from, and its most frequent word alignment.

Definitions and constraints (the defaults of :class:`ExtractionConfig`):

* **Initial phrase pairs** (Chiang 2007 Def. 1; Koehn et al. 2003): every box
  ``f[fs:fe] / e[es:ee]`` that contains at least one link and that no link leaves
  (``fs <= i < fe`` iff ``es <= j < ee`` for every link). Unaligned words at the boundaries
  are included on either side in every combination ("loose" phrases, the usual extension of
  phrase extraction). A phrase pair is *tight* if its first and last words on both sides are
  aligned; of several phrase pairs with the same set of links exactly one is tight, the
  smallest. Spans are at most ``max_initial_source`` = 10 source and ``max_initial_target``
  = 10 target words (Chiang 2007 §3.2: "initial phrases are limited to a length of 10 words
  on either side").
* **Tight phrases for rules with gaps** (``tight_hierarchical``, default on). Chiang 2007
  §3.2: "If there are multiple initial phrase pairs containing the same set of alignment
  points, we keep only the smallest." With the option on, rules with gaps are built only
  from tight initial phrase pairs and only tight phrase pairs become gaps, while every
  phrase pair, loose or tight, still gives its gap-free phrase rule — the unaligned-word
  extension of standard phrase extraction, which the issue asks for. This removes the
  combinatorial copies of each hierarchical rule that differ only in which unaligned words
  they swallow (first 50k de-en pairs, no minimum count: 33.7M → 13.8M rule instances,
  11.3M → 4.2M unique rules). Off, loose phrases are used everywhere (Def. 2 read literally).
* **Target-tight phrases** (``tight_target``, default off): every initial phrase pair's first
  and last target words are aligned, so no rule carries an unaligned English word at an edge
  of its phrase (a source word may still be unaligned there). A rule such as
  ``tabelle ein . → sheet as a link .`` (Chiang 2007's loose phrases: "as a link" is
  unaligned) is then not extracted; measured on retrieval in bench/README.md.
* **Rules** (Chiang 2007 Def. 2): an initial phrase pair is a rule; subtracting one or two
  initial phrase pairs that lie inside it (strictly smaller boxes, disjoint from each other
  on both sides) and replacing them by co-indexed gaps ``[X,1]``, ``[X,2]`` (numbered in
  source order) gives a rule with gaps. A gap is itself an initial phrase pair, so it covers
  at least one aligned word on each side. Filters (Chiang 2007 §3.2): at most
  ``max_rule_symbols`` = 5 source symbols (terminals + gaps) — so terminal-only rules have at
  most 5 source words while initial phrase pairs of 6–10 source words only yield rules with
  gaps; at most 2 gaps; no two gaps adjacent on the source side; at least one aligned
  terminal pair (this also makes every gap proper).
* **Rule alignment**: the links between terminals, as positions in the rule's source and
  target symbol sequences (gaps count as one position, as in cdec's grammar files).
* **Fractional counts** (Chiang 2007 §3.2: "distribute weight 1 equally among the rules
  extracted from each initial phrase"): each initial phrase pair gives weight ``1/N`` to each
  of its ``N`` extraction instances (one instance per choice of gaps; two choices that spell
  the same rule both count). Counts are summed over the corpus per rule and per alignment; a
  rule keeps its most frequent alignment (ties: the smallest :func:`alignment_code`).
* **Sentence counts and the minimum count of rules with gaps** (``min_hierarchical_count``,
  default 2). A rule's *sentence count* is the number of sentence pairs it was extracted
  from. A rule with gaps is kept only if its sentence count is at least
  ``min_hierarchical_count``; gap-free phrase rules are never dropped, so every source word
  the phrase table covered stays covered. We count sentence pairs rather than thresholding
  the fractional count because a gapped rule gets ``1/N`` with ``N`` often 10–50, so a
  threshold on the fractional count mostly measures the size of the phrase it came from;
  "seen in two different sentence pairs" removes the one-off rules (85% of the unique gapped
  rules on the full de-en corpus: 46.9M → 13.6M unique rules) and keeps every rule with
  independent evidence, where a fractional count ≥ 1 would keep only a tenth of those.
  The marginals ``c(f)`` and ``c(e)`` behind p(e|f) and p(f|e)
  (:mod:`service.mt.training.rule_features`)
  are summed over *all* extracted rules before this filter, like the pruning to the best
  target sides, so the filter removes rules but changes no probability of a kept rule.
  ``1`` disables it.

Two implementations: :func:`extract_rules_reference` (with
:func:`sentence_counts_reference` and :func:`min_count_filter_reference`) enumerates boxes
straight from the definitions in pure Python (slow, for tests), and :func:`extract_rules`
encodes the corpus to integer arrays and runs a numba kernel that interns rule sides in
open-addressing hash tables and aggregates counts with numpy sorts, chunk by chunk. To bound
memory on large corpora it works in ``shards`` passes over the corpus: pass ``k`` keeps only
the rules whose source side hashes to ``k``, so each pass aggregates, filters and computes
``c(f)`` for a disjoint part of the grammar with its own side tables, and only the kept rules
of a pass are carried over; one last pass sums ``c(e)`` over all rule instances for the
target sides of the kept rules only (looked up, never added). Tests check that the two
implementations agree for any number of shards.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import NamedTuple

import numpy as np
import numpy.typing as npt
from numba import njit

from service.core.csr import gather_rows, ptr_from_counts
from service.errors import ConfigurationError, InvalidInputError
from service.mt.rules import X, is_nt, nt

I32 = npt.NDArray[np.int32]
I64 = npt.NDArray[np.int64]
U64 = npt.NDArray[np.uint64]
U8 = npt.NDArray[np.uint8]
F64 = npt.NDArray[np.float64]

Alignment = tuple[tuple[int, int], ...]
RuleKey = tuple[tuple[str, ...], tuple[str, ...]]  # (source symbols, target symbols)

# Symbol codes in the integer rule rows: 0 pads a row, 1 and 2 are the gaps [X,1] and [X,2],
# a word with vocabulary id w >= 1 is w + 2 (vocabulary id 0 is reserved for NULL).
PAD, GAP1, GAP2, WORD_OFFSET = 0, 1, 2, 2
COUNT_DECIMALS = 9  # counts are compared after rounding, so float summation order cannot matter


@dataclass(frozen=True, slots=True)
class ExtractionConfig:
    """The extraction constraints (Chiang 2007 §3.2 defaults)."""

    max_initial_source: int = 10
    max_initial_target: int = 10
    max_rule_symbols: int = 5
    max_nonterminals: int = 2
    tight_hierarchical: bool = True  # rules with gaps from tight phrase pairs only
    tight_target: bool = False  # no unaligned target word at an initial phrase's edge
    min_hierarchical_count: int = 2  # sentence pairs a rule with gaps must be seen in

    def __post_init__(self) -> None:
        if min(self.max_initial_source, self.max_initial_target, self.max_rule_symbols) < 1:
            raise ConfigurationError(f"extraction limits must be at least 1: {self}")
        if self.min_hierarchical_count < 1:
            raise ConfigurationError(
                f"min_hierarchical_count={self.min_hierarchical_count}: it is a number of "
                "sentence pairs, at least 1 (1 keeps every rule)"
            )
        if self.max_nonterminals not in (0, 1, 2):
            raise ConfigurationError(
                f"max_nonterminals={self.max_nonterminals}: rules have 0, 1 or 2 gaps"
            )
        if self.max_rule_symbols * self.max_initial_target > 64:
            raise ConfigurationError(
                f"max_rule_symbols × max_initial_target = "
                f"{self.max_rule_symbols * self.max_initial_target} > 64: rule alignments are "
                "stored as 64-bit masks; lower one of the two limits"
            )


class AlignedPair(NamedTuple):
    """One tokenised sentence pair with its word alignment (source index, target index)."""

    source: Sequence[str]
    target: Sequence[str]
    alignment: Sequence[tuple[int, int]]


class PhrasePair(NamedTuple):
    """An initial phrase pair: half-open spans ``source[fs:fe]`` and ``target[es:ee]``."""

    fs: int
    fe: int
    es: int
    ee: int

    def contains(self, other: PhrasePair) -> bool:
        return (
            self.fs <= other.fs
            and other.fe <= self.fe
            and self.es <= other.es
            and other.ee <= self.ee
        )


def alignment_code(alignment: Iterable[tuple[int, int]], width: int) -> int:
    """The 64-bit mask of a rule alignment: bit ``i * width + j`` per link ``(i, j)``."""
    code = 0
    for i, j in alignment:
        code |= 1 << (i * width + j)
    return code


def alignment_from_code(code: int, width: int) -> Alignment:
    """Inverse of :func:`alignment_code`: links sorted by (i, j)."""
    links = []
    bit = 0
    while code:
        if code & 1:
            links.append(divmod(bit, width))
        code >>= 1
        bit += 1
    return tuple((int(i), int(j)) for i, j in links)


def _checked_links(pair: AlignedPair, index: int) -> set[tuple[int, int]]:
    m, n = len(pair.source), len(pair.target)
    links = set()
    for link in pair.alignment:
        i, j = int(link[0]), int(link[1])
        if not (0 <= i < m and 0 <= j < n):
            raise InvalidInputError(
                f"sentence pair {index}: alignment link {i}-{j} is outside the sentence "
                f"({m} source, {n} target tokens); check that the aligner ran on these pairs"
            )
        links.add((i, j))
    return links


# --- the reference: straight from the definitions ----------------------------------------------


def initial_phrase_pairs(
    m: int, n: int, links: set[tuple[int, int]], config: ExtractionConfig
) -> list[PhrasePair]:
    """Every box of at most the configured size that holds a link and that no link leaves
    (with ``tight_target``: whose first and last target words are aligned)."""
    aligned_e = {j for _, j in links}
    out = []
    for fs in range(m):
        for fe in range(fs + 1, min(m, fs + config.max_initial_source) + 1):
            for es in range(n):
                for ee in range(es + 1, min(n, es + config.max_initial_target) + 1):
                    if not any(fs <= i < fe and es <= j < ee for i, j in links):
                        continue
                    if config.tight_target and not {es, ee - 1} <= aligned_e:
                        continue
                    if all((fs <= i < fe) == (es <= j < ee) for i, j in links):
                        out.append(PhrasePair(fs, fe, es, ee))
    return out


def rule_instances(
    pair: AlignedPair,
    links: set[tuple[int, int]],
    phrase: PhrasePair,
    gap_candidates: list[PhrasePair],
    config: ExtractionConfig,
) -> list[tuple[RuleKey, Alignment]]:
    """All rules of one initial phrase pair, one entry per choice of gaps among the
    ``gap_candidates`` that lie strictly inside it."""
    subs = [q for q in gap_candidates if phrase.contains(q) and q != phrase]
    choices: list[tuple[PhrasePair, ...]] = [()]
    if config.max_nonterminals >= 1:
        choices += [(q,) for q in subs]
    if config.max_nonterminals >= 2:
        choices += [
            (a, b)
            for a in subs
            for b in subs
            if a.fe <= b.fs and (a.ee <= b.es or b.ee <= a.es)  # disjoint, a first in source
        ]
    out = []
    for gaps in choices:
        source: list[str] = []
        gap_flags: list[bool] = []
        source_pos: dict[int, int] = {}
        for i in range(phrase.fs, phrase.fe):
            gap = next((k for k, g in enumerate(gaps) if g.fs <= i < g.fe), None)
            if gap is None:
                source_pos[i] = len(source)
                source.append(pair.source[i])
                gap_flags.append(False)
            elif i == gaps[gap].fs:
                source.append(nt(gap + 1))
                gap_flags.append(True)
        target: list[str] = []
        target_pos: dict[int, int] = {}
        for j in range(phrase.es, phrase.ee):
            gap = next((k for k, g in enumerate(gaps) if g.es <= j < g.ee), None)
            if gap is None:
                target_pos[j] = len(target)
                target.append(pair.target[j])
            elif j == gaps[gap].es:
                target.append(nt(gap + 1))
        alignment = tuple(
            sorted((source_pos[i], target_pos[j]) for i, j in links if i in source_pos)
        )
        if len(source) > config.max_rule_symbols:
            continue
        if any(a and b for a, b in pairwise(gap_flags)):
            continue  # adjacent gaps on the source side
        if not alignment:
            continue  # no aligned terminal pair
        out.append(((tuple(source), tuple(target)), alignment))
    return out


def is_tight(phrase: PhrasePair, links: set[tuple[int, int]]) -> bool:
    """Whether the first and last words of both sides of ``phrase`` are aligned."""
    aligned_f = {i for i, _ in links}
    aligned_e = {j for _, j in links}
    return {phrase.fs, phrase.fe - 1} <= aligned_f and {phrase.es, phrase.ee - 1} <= aligned_e


def _reference(
    pairs: Iterable[AlignedPair], config: ExtractionConfig
) -> tuple[dict[RuleKey, dict[Alignment, float]], Counter[RuleKey]]:
    counts: dict[RuleKey, dict[Alignment, float]] = defaultdict(lambda: defaultdict(float))
    sentences: Counter[RuleKey] = Counter()
    for index, pair in enumerate(pairs):
        links = _checked_links(pair, index)
        phrases = initial_phrase_pairs(len(pair.source), len(pair.target), links, config)
        tight = [p for p in phrases if is_tight(p, links)]
        seen: set[RuleKey] = set()
        for phrase in phrases:
            gaps = phrases
            if config.tight_hierarchical:  # a loose phrase gives its phrase rule only
                gaps = tight if phrase in tight else []
            instances = rule_instances(pair, links, phrase, gaps, config)
            for key, alignment in instances:
                counts[key][alignment] += 1.0 / len(instances)
                seen.add(key)
        sentences.update(seen)
    return {key: dict(by_alignment) for key, by_alignment in counts.items()}, sentences


def extract_rules_reference(
    pairs: Iterable[AlignedPair], config: ExtractionConfig | None = None
) -> dict[RuleKey, dict[Alignment, float]]:
    """Fractional counts per rule and rule alignment, by brute force, *before* the min-count
    filter (see :func:`min_count_filter_reference`)."""
    return _reference(pairs, config or ExtractionConfig())[0]


def sentence_counts_reference(
    pairs: Iterable[AlignedPair], config: ExtractionConfig | None = None
) -> Counter[RuleKey]:
    """Per rule, the number of sentence pairs it is extracted from, by brute force."""
    return _reference(pairs, config or ExtractionConfig())[1]


def min_count_filter_reference(
    counts: dict[RuleKey, dict[Alignment, float]],
    sentences: Counter[RuleKey],
    config: ExtractionConfig | None = None,
) -> dict[RuleKey, dict[Alignment, float]]:
    """The rules that pass the filter: phrase rules, and rules with gaps seen in at least
    ``config.min_hierarchical_count`` sentence pairs."""
    config = config or ExtractionConfig()
    return {
        key: by_alignment
        for key, by_alignment in counts.items()
        if not any(is_nt(s) for s in key[0]) or sentences[key] >= config.min_hierarchical_count
    }


def best_alignment(by_alignment: dict[Alignment, float], width: int) -> Alignment:
    """The most frequent alignment; ties go to the smallest :func:`alignment_code`."""
    return min(
        by_alignment,
        key=lambda a: (-round(by_alignment[a], COUNT_DECIMALS), alignment_code(a, width)),
    )


# --- the corpus as integer arrays ---------------------------------------------------------------


class Vocab:
    """Words to ids; id 0 is reserved for NULL (the empty word of the lexical table)."""

    def __init__(self, words: Iterable[str] = ()) -> None:
        self.words: list[str] = [""]
        self.ids: dict[str, int] = {}
        for w in words:
            self.add(w)

    def add(self, word: str) -> int:
        wid = self.ids.get(word)
        if wid is None:
            wid = len(self.words)
            self.ids[word] = wid
            self.words.append(word)
        return wid

    def __len__(self) -> int:
        return len(self.words)


@dataclass(slots=True)
class EncodedCorpus:
    """Word-id arrays of a whole aligned corpus (flat, with offsets per sentence)."""

    source_vocab: Vocab
    target_vocab: Vocab
    source: I32  # all source tokens, concatenated
    source_offsets: I64  # sentence k is source[source_offsets[k]:source_offsets[k + 1]]
    target: I32
    target_offsets: I64
    link_i: I32  # links, sorted per sentence, positions relative to the sentence
    link_j: I32
    link_offsets: I64

    def __len__(self) -> int:
        return len(self.source_offsets) - 1

    def subset(self, keep: npt.NDArray[np.bool_]) -> EncodedCorpus:
        """The sentence pairs where ``keep`` is true, in order, sharing the vocabularies."""
        if len(keep) != len(self):
            raise ConfigurationError(f"{len(keep)} flags for a corpus of {len(self)} pairs")
        rows = np.flatnonzero(keep)

        def take(values: I32, offsets: I64) -> tuple[I32, I64]:
            ptr, positions = gather_rows(offsets, rows)
            return values[positions], ptr

        source, source_offsets = take(self.source, self.source_offsets)
        target, target_offsets = take(self.target, self.target_offsets)
        link_i, link_offsets = take(self.link_i, self.link_offsets)
        link_j, _ = take(self.link_j, self.link_offsets)
        return EncodedCorpus(
            self.source_vocab, self.target_vocab, source, source_offsets, target,
            target_offsets, link_i, link_j, link_offsets,
        )  # fmt: skip


def encode_corpus(
    pairs: Iterable[AlignedPair],
    source_vocab: Vocab | None = None,
    target_vocab: Vocab | None = None,
) -> EncodedCorpus:
    """Intern the tokens and flatten the corpus; checks every link and token."""
    sv, tv = source_vocab or Vocab(), target_vocab or Vocab()
    src: list[int] = []
    tgt: list[int] = []
    li: list[int] = []
    lj: list[int] = []
    so, to, lo = [0], [0], [0]
    for index, pair in enumerate(pairs):
        for side, tokens in (("source", pair.source), ("target", pair.target)):
            if any(not t or t.isspace() for t in tokens):
                raise InvalidInputError(
                    f"sentence pair {index}: empty or blank {side} token in {list(tokens)!r}; "
                    "tokenise with the project's tokenizer before extraction"
                )
        src.extend(sv.add(w) for w in pair.source)
        tgt.extend(tv.add(w) for w in pair.target)
        for i, j in sorted(_checked_links(pair, index)):
            li.append(i)
            lj.append(j)
        so.append(len(src))
        to.append(len(tgt))
        lo.append(len(li))
    return EncodedCorpus(
        sv,
        tv,
        np.asarray(src, dtype=np.int32),
        np.asarray(so, dtype=np.int64),
        np.asarray(tgt, dtype=np.int32),
        np.asarray(to, dtype=np.int64),
        np.asarray(li, dtype=np.int32),
        np.asarray(lj, dtype=np.int32),
        np.asarray(lo, dtype=np.int64),
    )


# --- the fast path: numba kernel ------------------------------------------------------------------

_DONE, _OUT_FULL, _SOURCE_FULL, _TARGET_FULL = 0, 1, 2, 3


@njit(cache=True, nogil=True)
def _row_hash(row: I32) -> int:  # pragma: no cover - jitted
    """64-bit FNV-1a of an integer row, with a final mix."""
    h = np.int64(1469598103934665603)
    for k in range(row.shape[0]):
        h = (h ^ np.int64(row[k])) * np.int64(1099511628211)
    h ^= h >> np.int64(29)
    h *= np.int64(-49064778989728563)
    h ^= h >> np.int64(32)
    return int(h)


@njit(cache=True, nogil=True)
def _shard_of(row: I32, n_shards: int) -> int:  # pragma: no cover - jitted
    """The shard of a rule side: high hash bits (the tables' slots use the low ones)."""
    return int(((_row_hash(row) >> np.int64(40)) & np.int64(0xFFFFFF)) % n_shards)


@njit(cache=True, nogil=True)
def _row_equal(store: I32, idx: int, row: I32) -> bool:  # pragma: no cover - jitted
    """True if table row ``idx`` holds ``row`` (an explicit loop: numba compiles no ``all``)."""
    for k in range(row.shape[0]):  # noqa: SIM110
        if store[idx, k] != row[k]:
            return False
    return True


@njit(cache=True, nogil=True)
def _intern(store: I32, count: I64, slots: I32, row: I32) -> int:  # pragma: no cover - jitted
    """Id of ``row`` in an open-addressing table; adds it; -1 if the table must grow first."""
    mask = np.int64(slots.shape[0] - 1)
    s = _row_hash(row) & mask
    while True:
        idx = slots[s]
        if idx < 0:
            n = count[0]
            if n >= store.shape[0] or 2 * (n + 1) > slots.shape[0]:
                return -1
            store[n, :] = row
            slots[s] = n
            count[0] = n + 1
            return int(n)
        if _row_equal(store, idx, row):
            return int(idx)
        s = (s + 1) & mask


@njit(cache=True, nogil=True)
def _lookup(store: I32, slots: I32, row: I32) -> int:  # pragma: no cover - jitted
    """Id of ``row`` in an open-addressing table, or -1 if it is not there."""
    mask = np.int64(slots.shape[0] - 1)
    s = _row_hash(row) & mask
    while True:
        idx = slots[s]
        if idx < 0:
            return -1
        if _row_equal(store, idx, row):
            return int(idx)
        s = (s + 1) & mask


@njit(cache=True, nogil=True)
def _intern_rows(  # pragma: no cover - jitted
    store: I32, count: I64, slots: I32, rows: I32, ids: I64, start: int
) -> int:
    """Intern ``rows[start:]`` into ``ids``; returns where it stopped (the table is full)."""
    for k in range(start, rows.shape[0]):
        idx = _intern(store, count, slots, rows[k])
        if idx < 0:
            return k
        ids[k] = idx
    return int(rows.shape[0])


@njit(cache=True, nogil=True)
def _rehash(store: I32, n: int, slots: I32) -> None:  # pragma: no cover - jitted
    count = np.zeros(1, dtype=np.int64)
    for k in range(n):
        _intern(store, count, slots, store[k])


@njit(cache=True, nogil=True)
def _mark_first(
    out_src: I32, out_tgt: I32, out_first: U8, lo: int, hi: int
) -> None:  # pragma: no cover - jitted
    """Flag one row per distinct rule among rows ``lo..hi-1`` (one sentence's rules)."""
    k = hi - lo
    if k == 0:
        return
    keys = np.empty(k, np.int64)
    for r in range(k):
        keys[r] = (np.int64(out_src[lo + r]) << np.int64(32)) | np.int64(out_tgt[lo + r])
    order = np.argsort(keys)
    prev = np.int64(-1)
    for r in range(k):
        idx = order[r]
        out_first[lo + idx] = 1 if keys[idx] != prev else 0
        prev = keys[idx]


@njit(cache=True, nogil=True)
def _extract_kernel(  # pragma: no cover - jitted
    src: I32,
    src_off: I64,
    tgt: I32,
    tgt_off: I64,
    link_i: I32,
    link_j: I32,
    link_off: I64,
    first: int,
    last: int,
    max_fs: int,
    max_es: int,
    max_sym: int,
    max_nt: int,
    tight_only: bool,
    tight_target: bool,
    n_shards: int,
    shard: int,
    lookup_targets: bool,
    s_store: I32,
    s_count: I64,
    s_slots: I32,
    t_store: I32,
    t_count: I64,
    t_slots: I32,
    out_src: I32,
    out_tgt: I32,
    out_mask: U64,
    out_w: F64,
    out_first: U8,
) -> tuple[int, int, int]:
    """Extract sentences ``first..last-1``; returns (next sentence, rows written, status).

    Only rules whose source side is in ``shard`` (of ``n_shards``) are written; the weight
    ``1/N`` of an instance counts all ``N`` instances of its phrase pair, written or not.
    With ``lookup_targets``, the target side is only looked up in the target table (rows
    of target sides not in it are skipped), the source side is not interned (id 0), and no
    sentence flags are set: the pass that sums the target marginals of the kept rules.
    """
    max_len = 1
    for k in range(first, last):
        max_len = max(max_len, src_off[k + 1] - src_off[k], tgt_off[k + 1] - tgt_off[k])
    cap = max_len * max_fs * max_es * max_es + 1
    p_fs = np.empty(cap, np.int64)
    p_fe = np.empty(cap, np.int64)
    p_es = np.empty(cap, np.int64)
    p_ee = np.empty(cap, np.int64)
    p_links = np.empty(cap, np.int64)
    p_tight = np.zeros(cap, np.bool_)
    tight_ids = np.empty(cap, np.int64)
    subs = np.empty(cap, np.int64)
    e_lo = np.empty(max_len, np.int64)  # per source position: min/max aligned target
    e_hi = np.empty(max_len, np.int64)
    f_lo = np.empty(max_len, np.int64)  # per target position: min/max aligned source
    f_hi = np.empty(max_len, np.int64)
    n_links_at = np.zeros(max_len + 1, np.int64)  # prefix sums of links per source position
    f_map = np.empty(max_len, np.int64)
    e_map = np.empty(max_len, np.int64)
    s_row = np.zeros(max_sym, np.int32)
    t_row = np.zeros(max_es, np.int32)
    gs = np.empty(2, np.int64)
    ge = np.empty(2, np.int64)
    gts = np.empty(2, np.int64)
    gte = np.empty(2, np.int64)
    n_out = 0
    n_cap = out_w.shape[0]
    for sent in range(first, last):
        start_out = n_out
        f0 = src_off[sent]
        m = src_off[sent + 1] - f0
        e0 = tgt_off[sent]
        n = tgt_off[sent + 1] - e0
        l0 = link_off[sent]
        l1 = link_off[sent + 1]
        if m == 0 or n == 0 or l1 == l0:
            continue
        e_lo[:m] = -1
        e_hi[:m] = -1
        f_lo[:n] = -1
        f_hi[:n] = -1
        n_links_at[: m + 1] = 0
        for t in range(l0, l1):
            i = link_i[t]
            j = link_j[t]
            if e_lo[i] < 0 or j < e_lo[i]:
                e_lo[i] = j
            if j > e_hi[i]:
                e_hi[i] = j
            if f_lo[j] < 0 or i < f_lo[j]:
                f_lo[j] = i
            if i > f_hi[j]:
                f_hi[j] = i
            n_links_at[i + 1] += 1
        for i in range(m):
            n_links_at[i + 1] += n_links_at[i]
        # initial phrase pairs; the tight one of each link set is the one with es = lo,
        # ee = hi + 1 and aligned words at fs and fe - 1
        n_ph = 0
        n_tight = 0
        for fs in range(m):
            lo = np.int64(-1)
            hi = np.int64(-1)
            for fe in range(fs + 1, min(m, fs + max_fs) + 1):
                i = fe - 1
                if e_lo[i] >= 0:
                    if lo < 0 or e_lo[i] < lo:
                        lo = e_lo[i]
                    if e_hi[i] > hi:
                        hi = e_hi[i]
                if hi < 0:
                    continue
                if hi - lo + 1 > max_es:
                    break
                ok = True
                for j in range(lo, hi + 1):
                    if f_lo[j] >= 0 and (f_lo[j] < fs or f_hi[j] >= fe):
                        ok = False
                        break
                if not ok:
                    continue
                es_min = lo
                ee_max = hi + 1
                if not tight_target:  # unaligned target words at the edges, in every combination
                    while es_min > 0 and f_lo[es_min - 1] < 0:
                        es_min -= 1
                    while ee_max < n and f_lo[ee_max] < 0:
                        ee_max += 1
                source_tight = e_lo[fs] >= 0 and e_lo[fe - 1] >= 0
                for es in range(lo, es_min - 1, -1):
                    for ee in range(hi + 1, ee_max + 1):
                        if ee - es > max_es:
                            break
                        p_fs[n_ph] = fs
                        p_fe[n_ph] = fe
                        p_es[n_ph] = es
                        p_ee[n_ph] = ee
                        p_links[n_ph] = n_links_at[fe] - n_links_at[fs]
                        tight = source_tight and es == lo and ee == hi + 1
                        p_tight[n_ph] = tight
                        if tight:
                            tight_ids[n_tight] = n_ph
                            n_tight += 1
                        n_ph += 1
        # rules of each initial phrase pair
        for p in range(n_ph):
            fs = p_fs[p]
            fe = p_fe[p]
            es = p_es[p]
            ee = p_ee[p]
            p_len = fe - fs
            n_sub = 0
            if max_nt >= 1 and tight_only:
                if p_tight[p]:
                    for t in range(n_tight):
                        q = tight_ids[t]
                        if (
                            q != p
                            and p_fs[q] >= fs
                            and p_fe[q] <= fe
                            and p_es[q] >= es
                            and p_ee[q] <= ee
                        ):
                            subs[n_sub] = q
                            n_sub += 1
            elif max_nt >= 1:
                for q in range(n_ph):
                    if (
                        q != p
                        and p_fs[q] >= fs
                        and p_fe[q] <= fe
                        and p_es[q] >= es
                        and p_ee[q] <= ee
                    ):
                        subs[n_sub] = q
                        n_sub += 1
            p_start = n_out
            n_inst = 0
            # choice c: 0 = no gap; 1..n_sub = one gap; then ordered pairs of sub-phrases
            n_choices = 1 + n_sub
            if max_nt >= 2:
                n_choices += n_sub * n_sub
            for c in range(n_choices):
                a_k = -1
                b_k = -1
                if c > n_sub:
                    a_k = (c - 1 - n_sub) // n_sub
                    b_k = (c - 1 - n_sub) % n_sub
                elif c > 0:
                    a_k = c - 1
                n_gaps = 0
                sym = p_len
                aligned = p_links[p]
                if a_k >= 0:
                    a = subs[a_k]
                    gs[0] = p_fs[a]
                    ge[0] = p_fe[a]
                    gts[0] = p_es[a]
                    gte[0] = p_ee[a]
                    n_gaps = 1
                    sym -= ge[0] - gs[0] - 1
                    aligned -= p_links[a]
                if b_k >= 0:
                    b = subs[b_k]
                    if p_fs[b] <= ge[0]:  # b must start after a, with a word between
                        continue
                    if not (gte[0] <= p_es[b] or p_ee[b] <= gts[0]):
                        continue  # the two gaps overlap on the target side
                    gs[1] = p_fs[b]
                    ge[1] = p_fe[b]
                    gts[1] = p_es[b]
                    gte[1] = p_ee[b]
                    n_gaps = 2
                    sym -= ge[1] - gs[1] - 1
                    aligned -= p_links[b]
                if sym > max_sym or aligned <= 0:
                    continue
                n_inst += 1
                # source row
                s_row[:] = 0
                k = 0
                for i in range(fs, fe):
                    f_map[i] = -1
                    g = -1
                    for gg in range(n_gaps):
                        if gs[gg] <= i < ge[gg]:
                            g = gg
                    if g < 0:
                        f_map[i] = k
                        s_row[k] = src[f0 + i] + 2
                        k += 1
                    elif i == gs[g]:
                        s_row[k] = g + 1
                        k += 1
                if n_shards > 1 and _shard_of(s_row, n_shards) != shard:
                    continue
                t_row[:] = 0
                k = 0
                for j in range(es, ee):
                    g = -1
                    for gg in range(n_gaps):
                        if gts[gg] <= j < gte[gg]:
                            g = gg
                    if g < 0:
                        e_map[j] = k
                        t_row[k] = tgt[e0 + j] + 2
                        k += 1
                    elif j == gts[g]:
                        t_row[k] = g + 1
                        k += 1
                code = np.uint64(0)
                for t in range(l0, l1):
                    i = link_i[t]
                    if fs <= i < fe and f_map[i] >= 0:
                        bit = f_map[i] * max_es + e_map[link_j[t]]
                        code |= np.uint64(1) << np.uint64(bit)
                if n_out >= n_cap:
                    return sent, start_out, _OUT_FULL
                if lookup_targets:
                    sid = 0
                    tid = _lookup(t_store, t_slots, t_row)
                    if tid < 0:
                        continue
                else:
                    sid = _intern(s_store, s_count, s_slots, s_row)
                    if sid < 0:
                        return sent, start_out, _SOURCE_FULL
                    tid = _intern(t_store, t_count, t_slots, t_row)
                    if tid < 0:
                        return sent, start_out, _TARGET_FULL
                out_src[n_out] = sid
                out_tgt[n_out] = tid
                out_mask[n_out] = code
                n_out += 1
            if n_out > p_start:
                w = 1.0 / n_inst
                for r in range(p_start, n_out):
                    out_w[r] = w
        if not lookup_targets:
            _mark_first(out_src, out_tgt, out_first, start_out, n_out)
    return last, n_out, _DONE


class _SideTable:
    """Growable interning table of integer rows (the rule sides)."""

    def __init__(self, width: int, capacity: int = 1 << 16) -> None:
        self.store = np.zeros((capacity, width), dtype=np.int32)
        self.count = np.zeros(1, dtype=np.int64)
        self.slots = np.full(2 * capacity, -1, dtype=np.int32)

    def grow(self) -> None:
        n = int(self.count[0])
        capacity = 2 * self.store.shape[0]
        if capacity >= 2**31 // 2:
            raise ConfigurationError("more than 2^30 distinct rule sides; extract with more shards")
        store = np.zeros((capacity, self.store.shape[1]), dtype=np.int32)
        store[:n] = self.store[:n]
        self.store = store
        self.slots = np.full(2 * capacity, -1, dtype=np.int32)
        _rehash(self.store, n, self.slots)

    @property
    def rows(self) -> I32:
        return self.store[: int(self.count[0])]


class _Part(NamedTuple):
    """Aggregated instance rows: per (rule key, alignment mask) the summed weight and the
    number of sentence pairs that first produced the rule with this mask."""

    keys: I64  # source id << 32 | target id
    masks: U64
    weights: F64
    sentences: I32


def _reduce(part: _Part) -> _Part:
    """Sum weights and sentence flags per (key, mask)."""
    if len(part.keys) == 0:
        return part
    order = np.lexsort((part.masks, part.keys))
    keys, masks = part.keys[order], part.masks[order]
    new = np.empty(len(keys), dtype=bool)
    new[0] = True
    new[1:] = (keys[1:] != keys[:-1]) | (masks[1:] != masks[:-1])
    starts = np.flatnonzero(new)
    return _Part(
        keys[starts],
        masks[starts],
        np.add.reduceat(part.weights[order], starts),
        np.add.reduceat(part.sentences[order], starts, dtype=np.int32),
    )


def _merge(parts: list[_Part]) -> _Part:
    if len(parts) == 1:
        return parts[0]
    merged = _Part(*(np.concatenate([p[k] for p in parts]) for k in range(4)))
    parts.clear()
    return _reduce(merged)


@dataclass(slots=True)
class RuleCounts:
    """Extracted rules in columns, grouped by source side.

    ``source_sides[source_id[r]]`` and ``target_sides[target_id[r]]`` are the integer rows of
    rule ``r`` (codes: 0 pad, 1/2 the gaps, ``word id + 2``); ``count`` its fractional count;
    ``sentences`` the number of sentence pairs it was extracted from; ``alignment`` its most
    frequent alignment as an :func:`alignment_code` of width ``config.max_initial_target``.
    Only rules that passed the min-count filter are here, but ``source_marginal[s]`` and
    ``target_marginal[t]`` are the summed counts of *all* extracted rules with source side
    ``s`` / target side ``t`` (the ``c(f)`` and ``c(e)`` of p(e|f) and p(f|e)).
    """

    config: ExtractionConfig
    source_vocab: Vocab
    target_vocab: Vocab
    source_sides: I32
    target_sides: I32
    source_id: I32
    target_id: I32
    count: F64
    sentences: I32
    alignment: U64
    source_marginal: F64
    target_marginal: F64
    instances: int  # extraction instances before aggregation
    unfiltered: int  # distinct rules before the min-count filter
    shards: int = 1  # passes over the corpus

    def __len__(self) -> int:
        return len(self.count)

    def key(self, r: int) -> RuleKey:
        return (
            decode_side(self.source_sides[self.source_id[r]], self.source_vocab),
            decode_side(self.target_sides[self.target_id[r]], self.target_vocab),
        )

    def as_dict(self) -> dict[RuleKey, tuple[float, Alignment]]:
        """rule -> (count, alignment); for tests and small grammars."""
        width = self.config.max_initial_target
        return {
            self.key(r): (float(self.count[r]), alignment_from_code(int(self.alignment[r]), width))
            for r in range(len(self))
        }


def decode_side(row: I32, vocab: Vocab) -> tuple[str, ...]:
    """The symbols of an integer rule side."""
    out = []
    for code in row.tolist():
        if code == PAD:
            break
        out.append(nt(code, X) if code <= GAP2 else vocab.words[code - WORD_OFFSET])
    return tuple(out)


SOURCE_TOKENS_PER_SHARD = 750_000


def default_shards(corpus: EncodedCorpus) -> int:
    """Passes :func:`extract_rules` makes by default: one per 750k source tokens.

    A pass holds the aggregated (rule, alignment) rows of its share of the grammar, about
    1 GB at peak per 750k source tokens of de-en text with the default configuration, so
    memory stays bounded as the corpus grows; an extra pass costs about a tenth of the
    extraction time of one pass (bench/results/extract_rules.json).
    """
    return 1 + len(corpus.source) // SOURCE_TOKENS_PER_SHARD


def extract_rules(
    corpus: EncodedCorpus,
    config: ExtractionConfig | None = None,
    *,
    shards: int | None = None,
    buffer_rows: int = 1 << 22,
    table_capacity: int = 1 << 16,
    progress: Callable[[int], None] | None = None,
) -> RuleCounts:
    """Extract, aggregate and filter all rules of an encoded corpus (fast path).

    The corpus is read in ``shards`` passes (default :func:`default_shards`), each keeping
    the rules whose source side hashes to it, and one more pass that sums the target
    marginals of the kept target sides; the result does not depend on ``shards``. Memory is
    bounded by ``buffer_rows`` instance rows (25 bytes each), the aggregated (rule,
    alignment) rows and side tables of one pass, and the kept rules; the side tables start
    at ``table_capacity`` rows and double when needed. ``progress`` is called with the
    number of sentences done, summed over the passes (it ends at
    ``(shards + 1) * len(corpus)``).
    """
    config = config or ExtractionConfig()
    n_shards = default_shards(corpus) if shards is None else shards
    if n_shards < 1:
        raise ConfigurationError(f"shards={shards}: need at least one pass")
    width = config.max_initial_target
    kept_targets = _SideTable(width, table_capacity)  # target sides of kept rules
    kept: list[_Kept] = []
    instances = unfiltered = 0
    buffers = _Buffers(buffer_rows)
    for shard in range(n_shards):
        shard_kept, n_inst, n_rules = _extract_shard(
            corpus, config, (n_shards, shard), kept_targets, buffers, table_capacity, progress
        )
        kept.append(shard_kept)
        instances += n_inst
        unfiltered += n_rules
    target_marginal = _target_marginals(corpus, config, kept_targets, buffers, n_shards, progress)
    del buffers
    source_sides = np.concatenate([k.source_sides for k in kept])
    offsets = ptr_from_counts([len(k.source_sides) for k in kept])
    source_id = np.concatenate([k.source_id + off for k, off in zip(kept, offsets, strict=False)])
    return RuleCounts(
        config=config,
        source_vocab=corpus.source_vocab,
        target_vocab=corpus.target_vocab,
        source_sides=source_sides,
        target_sides=kept_targets.rows.copy(),
        source_id=source_id.astype(np.int32),
        target_id=np.concatenate([k.target_id for k in kept]).astype(np.int32),
        count=np.concatenate([k.counts for k in kept]),
        sentences=np.concatenate([k.sentences for k in kept]),
        alignment=np.concatenate([k.alignment for k in kept]),
        source_marginal=np.concatenate([k.source_marginal for k in kept]),
        target_marginal=target_marginal,
        instances=instances,
        unfiltered=unfiltered,
        shards=n_shards,
    )


class _Kept(NamedTuple):
    """The rules one pass keeps, their source sides numbered within the pass."""

    source_sides: I32  # the source sides of the kept rules, as rows
    source_id: I64  # per rule: its source side's row in ``source_sides``
    target_id: I64  # per rule: its target side's id among the target sides of kept rules
    counts: F64
    sentences: I32
    alignment: U64  # the most frequent alignment mask
    source_marginal: F64  # per source side: the summed count of all its rules in the pass


def _extract_shard(
    corpus: EncodedCorpus,
    config: ExtractionConfig,
    shard: tuple[int, int],
    kept_targets: _SideTable,
    buffers: _Buffers,
    table_capacity: int,
    progress: Callable[[int], None] | None,
) -> tuple[_Kept, int, int]:
    """One pass of :func:`extract_rules` over the rules whose source side hashes to
    ``shard`` (number of shards, this shard): the rules kept by the min-count filter of rules
    with gaps (their target sides interned in ``kept_targets``), the instances extracted and
    the distinct rules before the filter."""
    src_table = _SideTable(config.max_rule_symbols, table_capacity)
    tgt_table = _SideTable(config.max_initial_target, table_capacity)
    part, n_inst = _one_pass(corpus, config, shard, src_table, tgt_table, buffers, progress)
    keys, masks, counts, sentences = _per_rule(part)
    del part
    unfiltered = len(keys)
    sid, tid = keys >> 32, keys & 0xFFFFFFFF
    del keys
    source_marginal = np.bincount(sid, weights=counts, minlength=int(src_table.count[0]))
    rows = src_table.rows
    gapped = ((rows == GAP1) | (rows == GAP2)).any(axis=1)
    keep = ~gapped[sid] | (sentences >= config.min_hierarchical_count)
    used, new_sid = np.unique(sid[keep], return_inverse=True)
    used_t, new_tid = np.unique(tid[keep], return_inverse=True)
    global_tid = _intern_all(kept_targets, tgt_table.rows[used_t])
    kept = _Kept(
        rows[used].copy(),
        new_sid.astype(np.int64),
        global_tid[new_tid],
        counts[keep],
        sentences[keep],
        masks[keep],
        source_marginal[used],
    )
    return kept, n_inst, unfiltered


def _intern_all(table: _SideTable, rows: I32) -> I64:
    """Ids of ``rows`` in ``table`` (added where missing; the table grows as needed)."""
    ids = np.empty(len(rows), dtype=np.int64)
    done = 0
    while done < len(rows):
        done = _intern_rows(table.store, table.count, table.slots, rows, ids, done)
        if done < len(rows):
            table.grow()
    return ids


def _target_marginals(
    corpus: EncodedCorpus,
    config: ExtractionConfig,
    targets: _SideTable,
    buffers: _Buffers,
    n_shards: int,
    progress: Callable[[int], None] | None,
) -> F64:
    """c(e) over all extracted rules, for the target sides in ``targets`` (one more pass)."""
    marginal = np.zeros(int(targets.count[0]), dtype=np.float64)
    unused = _SideTable(config.max_rule_symbols, 1)

    def add(out: _Buffers, n_out: int) -> None:
        marginal[:] += np.bincount(out.tgt[:n_out], out.w[:n_out], minlength=len(marginal))

    _run_kernel(corpus, config, (1, 0), unused, targets, buffers, add, progress, n_shards, True)
    return marginal


class _Buffers:
    """The kernel's output rows, reused by every pass."""

    def __init__(self, rows: int) -> None:
        self.src = np.empty(rows, dtype=np.int32)
        self.tgt = np.empty(rows, dtype=np.int32)
        self.mask = np.empty(rows, dtype=np.uint64)
        self.w = np.empty(rows, dtype=np.float64)
        self.first = np.empty(rows, dtype=np.uint8)


def _run_kernel(
    corpus: EncodedCorpus,
    config: ExtractionConfig,
    shard: tuple[int, int],
    src_table: _SideTable,
    tgt_table: _SideTable,
    out: _Buffers,
    consume: Callable[[_Buffers, int], None],
    progress: Callable[[int], None] | None,
    pass_index: int,
    lookup: bool = False,
) -> None:
    """Run the kernel over the corpus chunk by chunk, handing each filled buffer to
    ``consume``; ``shard`` is (number of shards, this shard); ``lookup`` selects the
    target-marginal pass (see :func:`_extract_kernel`)."""
    sent, total = 0, len(corpus)
    while sent < total:
        nxt, n_out, status = _extract_kernel(
            corpus.source,
            corpus.source_offsets,
            corpus.target,
            corpus.target_offsets,
            corpus.link_i,
            corpus.link_j,
            corpus.link_offsets,
            sent,
            min(total, sent + 20000),
            config.max_initial_source,
            config.max_initial_target,
            config.max_rule_symbols,
            config.max_nonterminals,
            config.tight_hierarchical,
            config.tight_target,
            shard[0],
            shard[1],
            lookup,
            src_table.store,
            src_table.count,
            src_table.slots,
            tgt_table.store,
            tgt_table.count,
            tgt_table.slots,
            out.src,
            out.tgt,
            out.mask,
            out.w,
            out.first,
        )
        if status == _SOURCE_FULL:
            src_table.grow()
        elif status == _TARGET_FULL:
            tgt_table.grow()
        elif status == _OUT_FULL and n_out == 0:
            raise ConfigurationError(
                f"sentence pair {nxt} yields more than buffer_rows={len(out.w)} rule "
                "instances; raise buffer_rows"
            )
        if n_out:
            consume(out, n_out)
        sent = nxt
        if progress is not None and status in (_DONE, _OUT_FULL):
            progress(pass_index * total + sent)


def _one_pass(
    corpus: EncodedCorpus,
    config: ExtractionConfig,
    shard: tuple[int, int],
    src_table: _SideTable,
    tgt_table: _SideTable,
    out: _Buffers,
    progress: Callable[[int], None] | None,
) -> tuple[_Part, int]:
    """Aggregated (rule, alignment) rows of one shard, and its number of instances."""
    buffer_rows = len(out.w)
    parts: list[_Part] = []
    pending = 0
    instances = 0

    def consume(out: _Buffers, n_out: int) -> None:
        nonlocal parts, pending, instances
        keys = (out.src[:n_out].astype(np.int64) << 32) | out.tgt[:n_out].astype(np.int64)
        chunk = _Part(
            keys, out.mask[:n_out].copy(), out.w[:n_out].copy(), out.first[:n_out].astype(np.int32)
        )
        parts.append(_reduce(chunk))
        instances += n_out
        pending += len(parts[-1].keys)
        if len(parts) > 1 and pending > 2 * len(parts[0].keys) + buffer_rows:
            parts = [_merge(parts)]
            pending = len(parts[0].keys)

    _run_kernel(corpus, config, shard, src_table, tgt_table, out, consume, progress, shard[1])
    return (_merge(parts) if parts else _empty()), instances


def _empty() -> _Part:
    return _Part(
        np.empty(0, np.int64),
        np.empty(0, np.uint64),
        np.empty(0, np.float64),
        np.empty(0, np.int32),
    )


def _per_rule(part: _Part) -> tuple[I64, U64, F64, I32]:
    """Per rule key: its most frequent mask (ties: smallest), total count and sentences."""
    if not len(part.keys):
        return part.keys, part.masks, part.weights, part.sentences
    rounded = np.round(part.weights, COUNT_DECIMALS)
    order = np.lexsort((part.masks, -rounded, part.keys))  # per key: best alignment first
    del rounded
    keys = part.keys[order]
    new = np.empty(len(keys), dtype=bool)
    new[0] = True
    new[1:] = keys[1:] != keys[:-1]
    starts = np.flatnonzero(new)
    del new
    totals = np.add.reduceat(part.weights[order], starts)
    sentences = np.add.reduceat(part.sentences[order], starts, dtype=np.int32)
    return keys[starts], part.masks[order[starts]], totals, sentences
