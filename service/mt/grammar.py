"""Binary storage of a Hiero grammar and its per-sentence lookup.

The decoder of Hieber & Riezler 2015, §3 (a CKY+ parser over the SCFG of Chiang 2007, §3 and §5.1)
starts each sentence by *filtering* the grammar to the rules whose source side matches a span of the
sentence. This module stores the grammar so that the filter is fast and the grammar loads in
seconds, and keeps the slow, obviously correct reference filter the fast one is tested against.

On-disk format: a directory with one ``.npy`` file per array and a ``manifest.json`` (format
name and version, counts, feature names, nonterminal labels, vocabulary sizes, and the dtype,
shape, size and SHA-256 of every array file). The manifest is written last, inside a temporary
directory beside the target that is fsynced and renamed into place, so a half-written grammar
never has the final name. Arrays (``n`` rules, ``P`` distinct source sides, ``T`` distinct
target sides, ``F`` features):

* ``source_vocab`` / ``target_vocab``: uint8, the terminals' UTF-8 text joined by ``\\n``; a
  terminal's id is its rank in code-point order (terminals never contain whitespace).
* Symbols are int32: a terminal is its id ``>= 0``; the gap ``[L,k]`` is ``-(2*l + k)`` where
  ``l`` indexes the manifest's sorted ``labels`` (with only ``X``: ``[X,1] = -1, [X,2] = -2``).
* ``pattern_symbols`` + ``pattern_offsets`` [P+1]: the distinct source sides, sorted
  lexicographically by symbol id (a prefix sorts before its extensions).
* ``pattern_rules`` [P+1]: rules are stored grouped by source side, in pattern order, so the
  rules of pattern ``p`` are the contiguous ids ``pattern_rules[p] : pattern_rules[p+1]``
  (rules with the same source side keep their input order). A rule's id is its position.
* ``target_symbols`` + ``target_offsets`` [T+1]: interned target sides (sorted, unique);
  ``rule_target`` [n] int32 points into them; ``rule_lhs`` [n] uint8 indexes ``labels``.
* ``features`` [n, F] float32, dense; a feature a rule does not have is 0.
* ``alignment`` [m, 2] int8 (source position, target position; positions count every symbol,
  as in :mod:`service.mt.rules`) with ``alignment_offsets`` [n+1].
* ``trie_keys`` [E] int64 and ``trie_pattern`` [E+1] int32: a prefix trie over the source
  sides. Node 0 is the root; edge ``e`` leads to node ``e + 1`` and its key is
  ``parent << 32 | (symbol + 2**31)``. Nodes are numbered breadth-first in pattern order, which
  makes the keys sorted, so a child is found by one binary search. ``trie_pattern[node]`` is
  the pattern that ends at the node, or -1.

Filtering (:meth:`Grammar.filter`) walks the trie breadth-first for all start positions of the
sentence at once, one vectorised step per source symbol: a terminal step follows the next word,
a gap step follows ``[L,k]`` and fans out over every gap length. Prefixes that no source side
has die at once, so the work is bounded by the matches, not by the grammar's size.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from service.core import arraydir
from service.core.arraydir import MANIFEST
from service.core.csr import ptr_from_counts
from service.errors import (
    ConfigurationError,
    DataFormatError,
    InvalidInputError,
)
from service.mt.rules import ALL_FEATURES, Rule, nt, nt_index

FORMAT_NAME = "clir-hiero-grammar"
FORMAT_VERSION = 1
DEFAULT_MAX_SPAN = 10
MAX_ALIGNED_POSITION = 127  # alignment positions are stored as int8

PAD = int(np.iinfo(np.int32).min)  # pads source sides in sort keys; sorts before every symbol
_BIAS = 1 << 31  # symbol + _BIAS is the low 32 bits of a trie key
_REWRITE = "rewrite the grammar"

I32 = npt.NDArray[np.int32]
I64 = npt.NDArray[np.int64]
F32 = npt.NDArray[np.float32]
Bools = npt.NDArray[np.bool_]

Span = tuple[int, int]
RuleMatch = tuple[int, int, int, tuple[Span, ...]]  # (rule id, start, end, gap spans by index)


class InvalidRuleError(InvalidInputError):
    """A rule that cannot be stored (bad gap indices, alignment out of range, bad terminal)."""


# --- symbols ---------------------------------------------------------------------------------


def nt_symbol(label_index: int, k: int) -> int:
    """The int32 code of the gap ``[labels[label_index],k]``."""
    return -(2 * label_index + k)


def _nt_parts(symbol: int) -> tuple[int, int]:
    """``(label index, gap index k)`` of a negative symbol code."""
    m = -symbol - 1
    return m // 2, m % 2 + 1


def _nt_label(symbol: str) -> str:
    return symbol[1 : symbol.index(",")]


def check_terminal(token: str) -> str | None:
    """Why ``token`` cannot be a terminal, or None if it can."""
    if not token:
        return "empty terminal"
    if token.split() != [token]:
        return f"terminal {token!r} contains whitespace"
    return None


# --- columnar rules: the writer's input ------------------------------------------------------


@dataclass(frozen=True)
class EncodedRules:
    """Rules as flat arrays, the form :func:`write_encoded` stores.

    Terminal ids index ``source_vocab`` / ``target_vocab`` (any order, each string once);
    gaps are :func:`nt_symbol` codes over ``labels``. Rule ``r``'s source side is
    ``source[source_offsets[r]:source_offsets[r+1]]``, likewise target and alignment.
    Extraction and the benchmark build this directly; :class:`GrammarBuilder` builds it from
    :class:`~service.mt.rules.Rule` objects.
    """

    source_vocab: Sequence[str]
    target_vocab: Sequence[str]
    labels: Sequence[str]
    feature_names: Sequence[str]
    lhs: npt.NDArray[np.integer[Any]]
    source: npt.NDArray[np.integer[Any]]
    source_offsets: npt.NDArray[np.integer[Any]]
    target: npt.NDArray[np.integer[Any]]
    target_offsets: npt.NDArray[np.integer[Any]]
    features: npt.NDArray[np.floating[Any]]
    alignment: npt.NDArray[np.integer[Any]]
    alignment_offsets: npt.NDArray[np.integer[Any]]

    def __len__(self) -> int:
        return len(self.lhs)


class GrammarBuilder:
    """Collects :class:`Rule` objects compactly and writes them as a binary grammar.

    ``feature_names`` fixes the feature columns and their order; a rule with another feature is
    an error. Without it, columns are added as names appear, ordered at the end with the
    project's feature names (:data:`~service.mt.rules.ALL_FEATURES`) first.
    """

    def __init__(self, feature_names: Sequence[str] | None = None) -> None:
        self._fixed = feature_names is not None
        names = list(feature_names or ())
        if len(set(names)) != len(names) or any(not n for n in names):
            raise ConfigurationError(f"feature names must be unique and non-empty: {names}")
        self._features: dict[str, int] = {n: i for i, n in enumerate(names)}
        self._src: dict[str, int] = {}
        self._tgt: dict[str, int] = {}
        self._labels: dict[str, int] = {}
        self._lhs: list[int] = []
        self._source: list[int] = []
        self._source_off: list[int] = [0]
        self._target: list[int] = []
        self._target_off: list[int] = [0]
        self._align: list[int] = []
        self._align_off: list[int] = [0]
        self._feat_rule: list[int] = []
        self._feat_col: list[int] = []
        self._feat_val: list[float] = []

    def __len__(self) -> int:
        return len(self._lhs)

    def _label(self, label: str) -> int:
        if label not in self._labels:
            if not label.isascii() or not label.isalpha():
                raise InvalidRuleError(f"nonterminal label {label!r} is not [A-Za-z]+")
            self._labels[label] = len(self._labels)
        return self._labels[label]

    def _encode(self, side: Sequence[str], vocab: dict[str, int]) -> tuple[list[int], list[str]]:
        ids: list[int] = []
        gaps: list[str] = []
        for s in side:
            k = nt_index(s)
            if k:
                ids.append(nt_symbol(self._label(_nt_label(s)), k))
                gaps.append(s)
                continue
            t = vocab.get(s)
            if t is None:
                why = check_terminal(s)
                if why:
                    raise InvalidRuleError(why)
                t = vocab[s] = len(vocab)
            ids.append(t)
        return ids, gaps

    def add(self, rule: Rule) -> int:
        """Add one rule; returns its position in input order. Raises InvalidRuleError."""
        n = len(self._lhs)
        try:
            lhs = self._label(rule.lhs)
            if not rule.source:
                raise InvalidRuleError("empty source side")
            src, src_gaps = self._encode(rule.source, self._src)
            tgt, tgt_gaps = self._encode(rule.target, self._tgt)
            ks = sorted(nt_index(g) for g in src_gaps)
            if ks not in ([], [1], [1, 2]):
                raise InvalidRuleError(
                    f"source gaps {src_gaps} must be [L,1] or [L,1] and [L,2], each once"
                )
            if sorted(src_gaps) != sorted(tgt_gaps):
                raise InvalidRuleError(f"target gaps {tgt_gaps} differ from source {src_gaps}")
            for i, j in rule.alignment:
                if not (0 <= i < len(src) and 0 <= j < len(tgt)):
                    raise InvalidRuleError(f"alignment point {i}-{j} outside the rule")
                if max(i, j) > MAX_ALIGNED_POSITION:
                    raise InvalidRuleError(f"alignment point {i}-{j}: positions must be <= 127")
            cols: list[tuple[int, float]] = []
            for name, value in rule.features.items():
                col = self._features.get(name)
                if col is None:
                    if self._fixed or not name or name.split() != [name]:
                        raise InvalidRuleError(f"unknown or invalid feature name {name!r}")
                    col = self._features[name] = len(self._features)
                v = float(value)
                if v != v:
                    raise InvalidRuleError(f"feature {name} is NaN")
                cols.append((col, v))
        except InvalidRuleError as exc:
            raise InvalidRuleError(f"rule {n} ({_show(rule)}): {exc}") from None
        self._lhs.append(lhs)
        self._source += src
        self._source_off.append(len(self._source))
        self._target += tgt
        self._target_off.append(len(self._target))
        for i, j in rule.alignment:
            self._align += (i, j)
        self._align_off.append(len(self._align) // 2)
        for col, v in cols:
            self._feat_rule.append(n)
            self._feat_col.append(col)
            self._feat_val.append(v)
        return n

    def add_all(self, rules: Iterable[Rule]) -> GrammarBuilder:
        for r in rules:
            self.add(r)
        return self

    def feature_names(self) -> list[str]:
        names = list(self._features)
        if self._fixed:
            return names
        known = [f for f in ALL_FEATURES if f in self._features]
        return known + [f for f in names if f not in set(known)]

    def encoded(self) -> EncodedRules:
        names = self.feature_names()
        col_of = np.array([names.index(n) for n in self._features], dtype=np.int64)
        feats = np.zeros((len(self._lhs), len(names)), dtype=np.float32)
        if self._feat_rule:
            feats[np.array(self._feat_rule), col_of[np.array(self._feat_col)]] = np.array(
                self._feat_val, dtype=np.float64
            )
        return EncodedRules(
            source_vocab=list(self._src),
            target_vocab=list(self._tgt),
            labels=list(self._labels),
            feature_names=names,
            lhs=np.array(self._lhs, dtype=np.int64),
            source=np.array(self._source, dtype=np.int32),
            source_offsets=np.array(self._source_off, dtype=np.int64),
            target=np.array(self._target, dtype=np.int32),
            target_offsets=np.array(self._target_off, dtype=np.int64),
            features=feats,
            alignment=np.array(self._align, dtype=np.int64).reshape(-1, 2),
            alignment_offsets=np.array(self._align_off, dtype=np.int64),
        )

    def write(self, path: str | Path) -> Path:
        return write_encoded(self.encoded(), path)


def _show(rule: Rule) -> str:
    return f"[{rule.lhs}] ||| {' '.join(rule.source)} ||| {' '.join(rule.target)}"


def write_grammar(
    rules: Iterable[Rule], path: str | Path, feature_names: Sequence[str] | None = None
) -> Path:
    """Store ``rules`` as a binary grammar directory at ``path`` (atomically)."""
    return GrammarBuilder(feature_names).add_all(rules).write(path)


# --- array helpers ---------------------------------------------------------------------------


def _padded(flat: I64, offsets: I64, fill: int = PAD) -> I64:
    """Variable-length rows (flat + offsets) as a matrix padded with ``fill``."""
    lens = np.diff(offsets)
    width = int(lens.max()) if len(lens) else 0
    mat = np.full((len(lens), width), fill, dtype=np.int64)
    starts = offsets[:-1]
    for c in range(width):
        has = lens > c
        mat[has, c] = flat[starts[has] + c]
    return mat


def _lexsort_rows(mat: I64) -> I64:
    """Stable order of the rows of ``mat``, lexicographic by column."""
    if mat.shape[1] == 0:
        return np.arange(mat.shape[0], dtype=np.int64)
    keys = tuple(mat[:, c] for c in range(mat.shape[1] - 1, -1, -1))
    return np.lexsort(keys).astype(np.int64)


def _row_starts(sorted_mat: I64) -> npt.NDArray[np.bool_]:
    """True where a row of a sorted matrix differs from the previous one."""
    new = np.ones(sorted_mat.shape[0], dtype=bool)
    if sorted_mat.shape[0] > 1:
        new[1:] = np.any(sorted_mat[1:] != sorted_mat[:-1], axis=1)
    return new


def _unpad(mat: I64, lens: I64) -> tuple[I64, I64]:
    offsets = ptr_from_counts(lens)
    cols = np.arange(mat.shape[1], dtype=np.int64)
    return mat[cols[None, :] < lens[:, None]].astype(np.int64), offsets


def _gather_segments(
    flat: npt.NDArray[Any], offsets: I64, order: I64
) -> tuple[npt.NDArray[Any], I64]:
    """Segments ``order[0], order[1], ...`` of ``flat`` concatenated, with new offsets."""
    lens = np.diff(offsets)[order]
    new_off = ptr_from_counts(lens)
    idx = np.repeat(offsets[:-1][order] - new_off[:-1], lens) + np.arange(
        int(new_off[-1]), dtype=np.int64
    )
    return flat[idx], new_off


def _vocab_remap(vocab: Sequence[str]) -> tuple[list[str], I64]:
    """Vocabulary in code-point order and the map old id -> new id."""
    order = sorted(range(len(vocab)), key=vocab.__getitem__)
    remap = np.empty(len(vocab), dtype=np.int64)
    remap[np.array(order, dtype=np.int64)] = np.arange(len(vocab), dtype=np.int64)
    return [vocab[i] for i in order], remap


def _remap_symbols(sym: I64, term_map: I64, label_map: I64) -> I64:
    out = sym.copy()
    t = sym >= 0
    out[t] = term_map[sym[t]]
    g = ~t
    m = -sym[g] - 1
    out[g] = -(2 * label_map[m // 2] + m % 2 + 1)
    return out


def _fail(what: str) -> None:
    raise InvalidRuleError(f"cannot write grammar: {what}")


def _check_offsets(name: str, offsets: I64, n: int, total: int) -> None:
    if (
        offsets.ndim != 1
        or len(offsets) != n + 1
        or offsets[0] != 0
        or offsets[-1] != total
        or np.any(np.diff(offsets) < 0)
    ):
        _fail(f"{name} offsets must rise from 0 to {total} over {n + 1} entries")


def _side_gap_stats(mat: I64) -> tuple[I64, I64, I64]:
    """Per row: number of gaps, sum and sum of squares of gap codes."""
    g = (mat < 0) & (mat != PAD)
    codes = np.where(g, mat, 0)
    return g.sum(1), codes.sum(1), (codes * codes).sum(1)


def _validate(enc: EncodedRules, n: int) -> None:
    n_labels = len(enc.labels)
    if n_labels > 127 or len(set(enc.labels)) != n_labels:
        _fail(f"labels {list(enc.labels)} must be at most 127 distinct names")
    for lab in enc.labels:
        if not lab.isascii() or not lab.isalpha():
            _fail(f"nonterminal label {lab!r} is not [A-Za-z]+")
    for vocab in (enc.source_vocab, enc.target_vocab):
        if len(set(vocab)) != len(vocab):
            _fail("a vocabulary lists a terminal twice")
        for tok in vocab:
            why = check_terminal(tok)
            if why:
                _fail(why)
    names = list(enc.feature_names)
    if len(set(names)) != len(names) or any(not x or x.split() != [x] for x in names):
        _fail(f"feature names must be unique words: {names}")
    if enc.features.shape != (n, len(names)):
        _fail(f"features have shape {enc.features.shape}, expected {(n, len(names))}")
    if np.isnan(enc.features).any():
        _fail("a feature value is NaN")
    if enc.lhs.ndim != 1 or (n and (enc.lhs.min() < 0 or enc.lhs.max() >= n_labels)):
        _fail("lhs must index labels")
    for name, flat, vocab in (
        ("source", enc.source, enc.source_vocab),
        ("target", enc.target, enc.target_vocab),
    ):
        if flat.ndim != 1:
            _fail(f"{name} symbols must be a flat array")
        if len(flat) and (flat.max() >= len(vocab) or flat.min() < -2 * n_labels):
            _fail(f"{name} symbol ids outside the vocabulary or labels")
    if enc.alignment.ndim != 2 or enc.alignment.shape[1] != 2:
        _fail("alignment must have shape (points, 2)")
    _check_offsets("source", np.asarray(enc.source_offsets, np.int64), n, len(enc.source))
    _check_offsets("target", np.asarray(enc.target_offsets, np.int64), n, len(enc.target))
    _check_offsets("alignment", np.asarray(enc.alignment_offsets, np.int64), n, len(enc.alignment))
    if n and np.any(np.diff(enc.source_offsets) == 0):
        _fail("a rule has an empty source side")


def _check_rules(src: I64, tgt: I64, src_len: I64, tgt_len: I64, enc: EncodedRules) -> None:
    """Gap and alignment constraints, vectorised over all rules."""
    s_n, s_sum, s_sq = _side_gap_stats(src)
    t_n, t_sum, t_sq = _side_gap_stats(tgt)
    ks = np.where((src < 0) & (src != PAD), (-src - 1) % 2 + 1, 0).sum(1)
    bad = (s_n > 2) | (ks != s_n * (s_n + 1) // 2)
    # two gaps determine their codes from count, sum and sum of squares
    bad |= (s_n != t_n) | (s_sum != t_sum) | (s_sq != t_sq)
    if bad.any():
        r = int(np.flatnonzero(bad)[0])
        _fail(f"rule {r}: source gaps must be [L,1] (and [L,2]) once each, as on the target")
    a = np.asarray(enc.alignment, dtype=np.int64)
    if len(a):
        rule_of = np.repeat(np.arange(len(src_len)), np.diff(enc.alignment_offsets))
        out = (a[:, 0] < 0) | (a[:, 1] < 0) | (a[:, 0] >= src_len[rule_of])
        out |= (a[:, 1] >= tgt_len[rule_of]) | (a.max(1) > MAX_ALIGNED_POSITION)
        if out.any():
            p = int(np.flatnonzero(out)[0])
            _fail(f"rule {int(rule_of[p])}: alignment point {a[p, 0]}-{a[p, 1]} out of range")


# --- writing -------------------------------------------------------------------------------


def _build_trie(pat: I64, lens: I64) -> tuple[I64, I32]:
    """Trie edges (sorted keys) and the pattern ending at each node, see the module doc."""
    n_pat, width = pat.shape
    if n_pat == 0:
        return np.zeros(0, dtype=np.int64), np.full(1, -1, dtype=np.int32)
    eq = np.ones((n_pat, width), dtype=bool)
    eq[1:] = pat[1:] == pat[:-1]
    eq[0] = False
    lcp = np.cumprod(eq, axis=1).sum(1)
    keys: list[I64] = []
    ends: list[tuple[I64, I64]] = []
    parent_of_row = np.zeros(n_pat, dtype=np.int64)  # node of each row at the previous depth
    next_id = 1
    for d in range(1, width + 1):
        alive = lens >= d
        created = alive & (lcp < d)
        node_of_row = next_id + np.cumsum(created) - 1
        rows = np.flatnonzero(created)
        keys.append((parent_of_row[rows] << 32) | (pat[rows, d - 1] + _BIAS))
        done = np.flatnonzero(lens == d)
        ends.append((node_of_row[done], done))
        next_id += len(rows)
        parent_of_row = node_of_row
    trie_keys = np.concatenate(keys)
    node_pattern = np.full(next_id, -1, dtype=np.int32)
    for nodes, rows in ends:
        node_pattern[nodes] = rows
    return trie_keys, node_pattern


def write_encoded(enc: EncodedRules, path: str | Path) -> Path:
    """Validate, canonicalise and store ``enc`` at ``path`` (a directory), atomically.

    The result depends only on the rules, not on vocabulary order: terminals are numbered in
    code-point order, so writing the rules read back from a grammar reproduces its arrays.
    """
    n = len(enc)
    _validate(enc, n)
    labels, label_map = _vocab_remap(list(enc.labels))
    src_vocab, src_map = _vocab_remap(list(enc.source_vocab))
    tgt_vocab, tgt_map = _vocab_remap(list(enc.target_vocab))
    src, tgt, src_len, tgt_len = _padded_sides(enc, src_map, tgt_map, label_map)

    # rules grouped by source side, patterns in lexicographic order
    order = _lexsort_rows(src)
    src = src[order]
    first = _row_starts(src)
    pat_rows = np.flatnonzero(first)
    pattern_rules = np.append(pat_rows, n).astype(np.int64)
    pat = src[pat_rows]
    pat_len = src_len[order][pat_rows]
    del src
    pattern_symbols, pattern_offsets = _unpad(pat, pat_len)
    trie_keys, trie_pattern = _build_trie(pat, pat_len)
    del pat

    target_id, target_symbols, target_offsets = _intern_targets(tgt, tgt_len)
    del tgt

    align, align_off = _gather_segments(
        np.asarray(enc.alignment), np.asarray(enc.alignment_offsets, np.int64), order
    )
    arrays: dict[str, npt.NDArray[Any]] = {
        "source_vocab": _text_blob(src_vocab),
        "target_vocab": _text_blob(tgt_vocab),
        "pattern_symbols": pattern_symbols.astype(np.int32),
        "pattern_offsets": _compact(pattern_offsets),
        "pattern_rules": _compact(pattern_rules),
        "target_symbols": target_symbols.astype(np.int32),
        "target_offsets": _compact(target_offsets),
        "rule_target": target_id[order].astype(np.int32),
        "rule_lhs": label_map[np.asarray(enc.lhs, np.int64)[order]].astype(np.uint8),
        "features": np.ascontiguousarray(np.asarray(enc.features, np.float32)[order]),
        "alignment": align.astype(np.int8).reshape(-1, 2),
        "alignment_offsets": _compact(align_off),
        "trie_keys": trie_keys,
        "trie_pattern": trie_pattern,
    }
    manifest: dict[str, Any] = {
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        "counts": {
            "rules": n,
            "patterns": len(pattern_rules) - 1,
            "targets": len(target_offsets) - 1,
            "alignment_points": len(align),
            "trie_nodes": len(trie_pattern),
        },
        "feature_names": list(enc.feature_names),
        "labels": labels,
        "source_vocab_size": len(src_vocab),
        "target_vocab_size": len(tgt_vocab),
        "max_source_length": int(src_len.max()) if n else 0,
        "arrays": {},
    }
    return _write_dir(Path(path), arrays, manifest)


def _padded_sides(
    enc: EncodedRules, src_map: I64, tgt_map: I64, label_map: I64
) -> tuple[I64, I64, I64, I64]:
    """``(source, target, source lengths, target lengths)``: both sides of every rule with
    terminals and labels renumbered by the maps, as matrices padded with ``PAD``; an
    :class:`InvalidRuleError` if a rule's gaps or alignment break :func:`_check_rules`."""
    src_flat = _remap_symbols(np.asarray(enc.source, np.int64), src_map, label_map)
    tgt_flat = _remap_symbols(np.asarray(enc.target, np.int64), tgt_map, label_map)
    src_off = np.asarray(enc.source_offsets, np.int64)
    tgt_off = np.asarray(enc.target_offsets, np.int64)
    src = _padded(src_flat, src_off)
    tgt = _padded(tgt_flat, tgt_off)
    src_len = np.diff(src_off)
    tgt_len = np.diff(tgt_off)
    _check_rules(src, tgt, src_len, tgt_len, enc)
    return src, tgt, src_len, tgt_len


def _intern_targets(tgt: I64, tgt_len: I64) -> tuple[I64, I64, I64]:
    """The distinct target sides, sorted: each rule's target id, and the sides' symbols and
    offsets."""
    t_order = _lexsort_rows(tgt)
    tgt_sorted = tgt[t_order]
    t_first = _row_starts(tgt_sorted)
    target_id = np.empty(len(tgt), dtype=np.int64)
    target_id[t_order] = np.cumsum(t_first) - 1
    t_rows = np.flatnonzero(t_first)
    target_symbols, target_offsets = _unpad(tgt_sorted[t_rows], tgt_len[t_order][t_rows])
    return target_id, target_symbols, target_offsets


def _compact(offsets: I64) -> npt.NDArray[np.int32] | I64:
    """Offsets as int32 when they fit (the usual case), else int64."""
    return offsets.astype(np.int32) if offsets[-1] < 2**31 else offsets


def _text_blob(words: list[str]) -> npt.NDArray[np.uint8]:
    return np.frombuffer("\n".join(words).encode("utf-8"), dtype=np.uint8).copy()


def _write_dir(path: Path, arrays: dict[str, npt.NDArray[Any]], manifest: dict[str, Any]) -> Path:
    if path.exists() and not (path.is_dir() and (not any(path.iterdir()) or _is_grammar(path))):
        raise ConfigurationError(
            f"{path}: exists and is not a grammar directory; refusing to replace it"
        )
    arraydir.write_array_dir(path, arrays, manifest, indent=1, ensure_ascii=False)
    return path


def _is_grammar(path: Path) -> bool:
    try:
        return bool(json.loads((path / MANIFEST).read_text("utf-8")).get("format") == FORMAT_NAME)
    except (OSError, ValueError, AttributeError):
        return False


# --- loading ------------------------------------------------------------------------------

_OFFSETS = ("pattern_offsets", "pattern_rules", "target_offsets", "alignment_offsets")
_ARRAYS = {  # name -> (dtype, number of dimensions); offsets may also be "<i4"
    "source_vocab": ("|u1", 1),
    "target_vocab": ("|u1", 1),
    "pattern_symbols": ("<i4", 1),
    "pattern_offsets": ("<i8", 1),
    "pattern_rules": ("<i8", 1),
    "target_symbols": ("<i4", 1),
    "target_offsets": ("<i8", 1),
    "rule_target": ("<i4", 1),
    "rule_lhs": ("|u1", 1),
    "features": ("<f4", 2),
    "alignment": ("|i1", 2),
    "alignment_offsets": ("<i8", 1),
    "trie_keys": ("<i8", 1),
    "trie_pattern": ("<i4", 1),
}


def _read_manifest(path: Path) -> dict[str, Any]:
    return arraydir.read_manifest(
        path,
        what="grammar",
        format_name=FORMAT_NAME,
        version_key="version",
        version=FORMAT_VERSION,
        hint=_REWRITE,
        required=("counts", "feature_names", "labels"),
    )


def _load_array(path: Path, manifest: dict[str, Any], name: str, verify: bool) -> npt.NDArray[Any]:
    arr = arraydir.load_array(path, name, manifest, verify=verify, hint=_REWRITE)
    dtype, ndim = _ARRAYS[name]
    if name in _OFFSETS and arr.dtype.str == "<i4":
        dtype = "<i4"
    if arr.dtype.str != dtype or arr.ndim != ndim:
        raise DataFormatError(
            path / f"{name}.npy",
            None,
            f"array is {arr.dtype.str}{list(arr.shape)}, expected {dtype} with {ndim} dimensions",
        )
    return arr


def load_grammar(path: str | Path, *, verify: bool = True) -> Grammar:
    """Open a binary grammar memory-mapped; see :meth:`Grammar.load`."""
    return Grammar.load(path, verify=verify)


class Match(NamedTuple):
    """Rules sharing one source side that match the sentence span ``[start, end)``.

    ``gaps[k-1]`` is the span covered by the gap ``[L,k]``; ``rules`` are contiguous ids.
    """

    pattern: int
    start: int
    end: int
    gaps: tuple[Span, ...]
    rules: range


class Grammar:
    """A memory-mapped binary grammar. Rule ids run over ``range(len(grammar))``."""

    def __init__(self, path: Path, manifest: dict[str, Any], arrays: dict[str, Any]) -> None:
        self.path = path
        self.manifest = manifest
        self.feature_names: tuple[str, ...] = tuple(manifest["feature_names"])
        self.labels: tuple[str, ...] = tuple(manifest["labels"])
        self.features: F32 = arrays["features"]
        self.pattern_symbols: I32 = arrays["pattern_symbols"]
        self.pattern_offsets: I64 = arrays["pattern_offsets"]
        self.pattern_rules: I64 = arrays["pattern_rules"]
        self.target_symbols: I32 = arrays["target_symbols"]
        self.target_offsets: I64 = arrays["target_offsets"]
        self.rule_target: I32 = arrays["rule_target"]
        self.rule_lhs: npt.NDArray[np.uint8] = arrays["rule_lhs"]
        self.alignment: npt.NDArray[np.int8] = arrays["alignment"]
        self.alignment_offsets: I64 = arrays["alignment_offsets"]
        self.trie_keys: I64 = arrays["trie_keys"]
        self.trie_pattern: I32 = arrays["trie_pattern"]
        self.source_vocab = _split_blob(arrays["source_vocab"])
        self.target_vocab = _split_blob(arrays["target_vocab"])
        self._source_ids = {w: i for i, w in enumerate(self.source_vocab)}
        self._nt_codes = [(nt_symbol(li, k), k) for li in range(len(self.labels)) for k in (1, 2)]

    @classmethod
    def load(cls, path: str | Path, *, verify: bool = True) -> Grammar:
        """Open the grammar at ``path``. ``verify`` also checks every array's SHA-256 (reads
        all files once); without it only sizes, dtypes and shapes are checked."""
        path = Path(path)
        manifest = _read_manifest(path)
        arrays = {name: _load_array(path, manifest, name, verify) for name in _ARRAYS}
        _check_consistency(path, manifest, arrays)
        return cls(path, manifest, arrays)

    def __len__(self) -> int:
        return len(self.rule_target)

    def __repr__(self) -> str:
        return f"Grammar({str(self.path)!r}, rules={len(self)}, patterns={self.num_patterns})"

    @property
    def num_patterns(self) -> int:
        return len(self.pattern_rules) - 1

    def knows_source(self, word: str) -> bool:
        """True if ``word`` is a terminal of some rule's source side (the decoder can
        translate it; any other word passes through untranslated)."""
        return word in self._source_ids

    # --- decoding symbols ---
    def _symbol(self, code: int, vocab: Sequence[str]) -> str:
        if code >= 0:
            return vocab[code]
        li, k = _nt_parts(code)
        return nt(k, self.labels[li])

    def source_pattern(self, pattern: int) -> tuple[str, ...]:
        """The source side of pattern ``pattern`` as strings."""
        lo, hi = self.pattern_offsets[pattern], self.pattern_offsets[pattern + 1]
        return tuple(self._symbol(int(c), self.source_vocab) for c in self.pattern_symbols[lo:hi])

    def pattern_of(self, rule: int) -> int:
        # the value in the array's dtype: an int64 value would make numpy cast the whole
        # (memory-mapped, ~10^7 entries) array first, ~15 ms per call
        key = self.pattern_rules.dtype.type(rule)
        return int(np.searchsorted(self.pattern_rules, key, side="right")) - 1

    def rules_of(self, pattern: int) -> range:
        return range(int(self.pattern_rules[pattern]), int(self.pattern_rules[pattern + 1]))

    def target_ids(self, rule: int) -> I32:
        t = int(self.rule_target[rule])
        return self.target_symbols[self.target_offsets[t] : self.target_offsets[t + 1]]

    def target(self, rule: int) -> tuple[str, ...]:
        return tuple(self._symbol(int(c), self.target_vocab) for c in self.target_ids(rule))

    def rule(self, i: int) -> Rule:
        """Materialise rule ``i`` (features dense: every feature name, 0 where absent)."""
        if not 0 <= i < len(self):
            raise IndexError(f"rule id {i} outside 0..{len(self) - 1}")
        lo, hi = self.alignment_offsets[i], self.alignment_offsets[i + 1]
        align = tuple((int(a), int(b)) for a, b in self.alignment[lo:hi])
        return Rule(
            lhs=self.labels[int(self.rule_lhs[i])],
            source=self.source_pattern(self.pattern_of(i)),
            target=self.target(i),
            features=dict(zip(self.feature_names, self.features[i].tolist(), strict=True)),
            alignment=align,
        )

    def rules(self) -> Iterator[Rule]:
        for i in range(len(self)):
            yield self.rule(i)

    # --- lookup ---
    def _child(self, nodes: I64, symbols: I64) -> I64:
        """Child node of each ``(node, symbol)`` pair, -1 where there is none."""
        keys = (nodes << 32) | (symbols + _BIAS)
        if len(self.trie_keys) == 0:
            return np.full(len(keys), -1, dtype=np.int64)
        pos = np.searchsorted(self.trie_keys, keys)
        np.minimum(pos, len(self.trie_keys) - 1, out=pos)
        return np.where(self.trie_keys[pos] == keys, pos + 1, -1).astype(np.int64)

    def _encode_source(self, source: Sequence[str]) -> list[int] | None:
        codes: list[int] = []
        for s in source:
            k = nt_index(s)
            if k:
                label = _nt_label(s)
                if label not in self.labels:
                    return None
                codes.append(nt_symbol(self.labels.index(label), k))
            elif s in self._source_ids:
                codes.append(self._source_ids[s])
            else:
                return None
        return codes

    def pattern_id(self, source: Sequence[str]) -> int | None:
        """The pattern id of the source side ``source``, or None if no rule has it."""
        codes = self._encode_source(source)
        if not codes:
            return None
        node = np.zeros(1, dtype=np.int64)
        for c in codes:
            node = self._child(node, np.array([c], dtype=np.int64))
            if node[0] < 0:
                return None
        p = int(self.trie_pattern[node[0]])
        return p if p >= 0 else None

    def rules_for_source(self, source: Sequence[str]) -> range:
        """The contiguous rule ids whose source side is ``source`` (empty if none)."""
        p = self.pattern_id(source)
        return range(0) if p is None else self.rules_of(p)

    def filter(self, tokens: Sequence[str], max_span: int = DEFAULT_MAX_SPAN) -> SentenceGrammar:
        """All rules matching a span of ``tokens``: terminals equal to the words, each gap
        covering at least one word, at most two gaps and never adjacent, at least one terminal,
        span at most ``max_span`` words. Equals :func:`reference_filter`."""
        if max_span < 1:
            raise InvalidInputError(f"max_span must be at least 1, got {max_span}")
        n = len(tokens)
        oov = len(self.source_vocab)
        words = np.array([self._source_ids.get(t, oov) for t in tokens], dtype=np.int64)
        node = np.zeros(n, dtype=np.int64)
        start = np.arange(n, dtype=np.int64)
        end = start.copy()
        ngaps = np.zeros(n, dtype=np.int64)
        last_gap = np.zeros(n, dtype=bool)
        has_term = np.zeros(n, dtype=bool)
        gaps = np.full((n, 4), -1, dtype=np.int64)
        out_pat: list[I64] = []
        out_start: list[I64] = []
        out_end: list[I64] = []
        out_gaps: list[I64] = []
        while len(node):
            can = (end < n) & (end - start < max_span)
            parts: list[tuple[I64, I64, I64, I64, Bools, Bools, I64]] = []
            # a terminal: the next word
            idx = np.flatnonzero(can)
            child = self._child(node[idx], words[end[idx]])
            ok = child >= 0
            idx = idx[ok]
            yes = np.ones(len(idx), dtype=bool)
            parts.append((child[ok], start[idx], end[idx] + 1, ngaps[idx], ~yes, yes, gaps[idx]))
            # a gap [L,k] over end .. e for every e within the span limit
            gap_ok = np.flatnonzero(can & ~last_gap & (ngaps < 2))
            for code, k in self._nt_codes:
                idx = gap_ok[gaps[gap_ok, 2 * k - 2] < 0]
                child = self._child(node[idx], np.full(len(idx), code, dtype=np.int64))
                ok = child >= 0
                idx, child = idx[ok], child[ok]
                if not len(idx):
                    continue
                widths = np.minimum(n, start[idx] + max_span) - end[idx]
                rep = np.repeat(np.arange(len(idx)), widths)
                step = np.arange(int(widths.sum()), dtype=np.int64) - np.repeat(
                    np.cumsum(widths) - widths, widths
                )
                src = idx[rep]
                g = gaps[src].copy()
                g[:, 2 * k - 2] = end[src]
                g[:, 2 * k - 1] = end[src] + 1 + step
                yes = np.ones(len(src), dtype=bool)
                parts.append(
                    (child[rep], start[src], g[:, 2 * k - 1], ngaps[src] + 1, yes,
                     has_term[src], g)
                )  # fmt: skip
            node, start, end, ngaps = (np.concatenate([p[c] for p in parts]) for c in range(4))
            last_gap, has_term = (np.concatenate([p[c] for p in parts]) for c in (4, 5))
            gaps = np.concatenate([p[6] for p in parts])
            pat = self.trie_pattern[node].astype(np.int64)
            hit = np.flatnonzero((pat >= 0) & has_term)
            out_pat.append(pat[hit])
            out_start.append(start[hit])
            out_end.append(end[hit])
            out_gaps.append(gaps[hit])
        return SentenceGrammar(
            self,
            tuple(tokens),
            max_span,
            np.concatenate(out_pat) if out_pat else np.zeros(0, np.int64),
            np.concatenate(out_start) if out_start else np.zeros(0, np.int64),
            np.concatenate(out_end) if out_end else np.zeros(0, np.int64),
            np.concatenate(out_gaps) if out_gaps else np.zeros((0, 4), np.int64),
        )


def _split_blob(blob: npt.NDArray[np.uint8]) -> list[str]:
    if len(blob) == 0:
        return []
    return bytes(blob).decode("utf-8").split("\n")


def _check_consistency(path: Path, manifest: dict[str, Any], a: dict[str, Any]) -> None:
    """Cheap cross-array checks (lengths and last offsets), so a mismatched file is caught."""
    counts = manifest["counts"]
    n, n_pat, n_tgt = counts.get("rules"), counts.get("patterns"), counts.get("targets")

    def need(ok: bool, name: str, what: str) -> None:
        if not ok:
            raise DataFormatError(path / f"{name}.npy", None, f"inconsistent grammar: {what}")

    need(a["features"].shape == (n, len(manifest["feature_names"])), "features", "shape")
    for name in ("rule_target", "rule_lhs"):
        need(len(a[name]) == n, name, f"length != {n} rules")
    need(len(a["pattern_rules"]) == n_pat + 1, "pattern_rules", "length")
    need(n_pat == 0 or int(a["pattern_rules"][-1]) == n, "pattern_rules", "last entry")
    need(len(a["pattern_offsets"]) == n_pat + 1, "pattern_offsets", "length")
    need(
        int(a["pattern_offsets"][-1]) == len(a["pattern_symbols"]),
        "pattern_offsets",
        "last offset",
    )
    need(len(a["target_offsets"]) == n_tgt + 1, "target_offsets", "length")
    need(int(a["target_offsets"][-1]) == len(a["target_symbols"]), "target_offsets", "last")
    need(len(a["alignment_offsets"]) == n + 1, "alignment_offsets", "length")
    need(int(a["alignment_offsets"][-1]) == len(a["alignment"]), "alignment_offsets", "last")
    need(len(a["trie_pattern"]) == len(a["trie_keys"]) + 1, "trie_pattern", "length")
    for name in ("source_vocab", "target_vocab"):
        blob = a[name]
        words = int(np.count_nonzero(blob == 10)) + 1 if len(blob) else 0
        need(words == manifest.get(f"{name}_size"), name, "vocabulary size")


# --- the result of filtering ---------------------------------------------------------------


class SentenceGrammar:
    """The rules of one sentence, by span, for a chart parser.

    Pattern matches are stored as arrays sorted by ``(start, end)``: ``pattern``, ``start``,
    ``end`` and ``gaps`` ([m, 4]: start and end of ``[L,1]``, then of ``[L,2]``; -1 if absent).
    Each match stands for the contiguous rule ids ``grammar.rules_of(pattern)``.
    """

    def __init__(
        self,
        grammar: Grammar,
        tokens: tuple[str, ...],
        max_span: int,
        pattern: I64,
        start: I64,
        end: I64,
        gaps: I64,
    ) -> None:
        order = np.lexsort((gaps[:, 3], gaps[:, 2], gaps[:, 1], gaps[:, 0], pattern, end, start))
        self.grammar = grammar
        self.tokens = tokens
        self.max_span = max_span
        self.pattern = pattern[order]
        self.start = start[order]
        self.end = end[order]
        self.gaps = gaps[order]
        self.rule_start = grammar.pattern_rules[self.pattern]
        self.rule_end = grammar.pattern_rules[self.pattern + 1]
        self._span_key = self.start * (len(tokens) + 1) + self.end

    def __len__(self) -> int:
        """Number of pattern matches."""
        return len(self.pattern)

    @property
    def num_rules(self) -> int:
        """Number of (rule, span, gaps) matches."""
        return int((self.rule_end - self.rule_start).sum())

    def _match(self, m: int) -> Match:
        g = self.gaps[m]
        gaps = tuple((int(g[c]), int(g[c + 1])) for c in (0, 2) if g[c] >= 0)
        return Match(
            int(self.pattern[m]),
            int(self.start[m]),
            int(self.end[m]),
            gaps,
            range(int(self.rule_start[m]), int(self.rule_end[m])),
        )

    def __iter__(self) -> Iterator[Match]:
        for m in range(len(self)):
            yield self._match(m)

    def spans(self) -> list[Span]:
        """The spans ``(i, j)`` with at least one match, sorted."""
        keys = np.unique(self._span_key)
        w = len(self.tokens) + 1
        return [(int(k) // w, int(k) % w) for k in keys]

    def matches(self, i: int, j: int) -> list[Match]:
        """Pattern matches over the span ``[i, j)``."""
        key = i * (len(self.tokens) + 1) + j
        lo = int(np.searchsorted(self._span_key, key, side="left"))
        hi = int(np.searchsorted(self._span_key, key, side="right"))
        return [self._match(m) for m in range(lo, hi)]

    def rule_matches(self, i: int, j: int) -> list[tuple[int, tuple[Span, ...]]]:
        """``(rule id, gap spans)`` for every rule matching ``[i, j)``."""
        return [(r, m.gaps) for m in self.matches(i, j) for r in m.rules]

    def source_pattern(self, pattern: int) -> tuple[str, ...]:
        return self.grammar.source_pattern(pattern)

    def rule_match_set(self) -> set[RuleMatch]:
        """Every ``(rule id, start, end, gaps)``, the form :func:`reference_filter` returns."""
        return {(r, m.start, m.end, m.gaps) for m in self for r in m.rules}


# --- the slow reference ------------------------------------------------------------------


def _assignments(
    source: Sequence[str], tokens: Sequence[str], pos: int, end: int, k: int
) -> Iterator[dict[int, Span]]:
    """Ways ``source[k:]`` covers exactly ``tokens[pos:end]`` (gap index -> span)."""
    if k == len(source):
        if pos == end:
            yield {}
        return
    sym = source[k]
    gap = nt_index(sym)
    if not gap:
        if pos < end and tokens[pos] == sym:
            yield from _assignments(source, tokens, pos + 1, end, k + 1)
        return
    for stop in range(pos + 1, end + 1):
        for rest in _assignments(source, tokens, stop, end, k + 1):
            yield {gap: (pos, stop), **rest}


def reference_filter(
    sources: Iterable[tuple[int, Sequence[str]]],
    tokens: Sequence[str],
    max_span: int = DEFAULT_MAX_SPAN,
) -> set[RuleMatch]:
    """Slow, obviously correct filter: try every rule on every span, by brute force.

    ``sources`` are ``(rule id, source side)`` pairs. A source side qualifies if it has at
    least one terminal, at most two gaps and no two adjacent gaps; it matches ``[i, j)``
    (``j - i <= max_span``) if its terminals equal the words and each gap covers >= 1 word.
    """
    found: set[RuleMatch] = set()
    for rid, source in sources:
        is_gap = [nt_index(s) > 0 for s in source]
        if all(is_gap) or sum(is_gap) > 2:
            continue
        if any(a and b for a, b in itertools.pairwise(is_gap)):
            continue
        for i in range(len(tokens)):
            for j in range(i + 1, min(len(tokens), i + max_span) + 1):
                for spans in _assignments(source, tokens, i, j, 0):
                    found.add((rid, i, j, tuple(spans[k] for k in sorted(spans))))
    return found
