"""Rule features of the Hiero grammar, pruning, and the glue rules (Chiang 2007 §5;
Chen et al. 2017, §2.2).

Per rule ``X -> <f, e>`` with fractional count ``c(f, e)`` (:mod:`service.mt.training.extract`):

* ``LogPEgivenF = log c(f, e) / c(f)`` and ``LogPFgivenE = log c(f, e) / c(e)``, the
  marginals summed over all extracted rules: before the min-count filter of rules with gaps
  (``ExtractionConfig.min_hierarchical_count``, applied by the extraction) and before the
  pruning, so neither changes the probabilities of the rules it keeps;
* ``LogLexEgivenF = log lex(e|f, a)`` (Koehn et al. 2003, §3.3): the product over the rule's
  target terminals ``e_j`` of the mean of ``w(e_j|f_i)`` over the source terminals aligned to
  it, or ``w(e_j|NULL)`` if it is unaligned; ``LogLexFgivenE`` likewise in the other direction.
  ``a`` is the rule's *most frequent* alignment (the one it carries), so the lexical weights
  can be recomputed from the rule alone. A factor is floored at :data:`MIN_LEX_PROB`, which only
  matters when the lexical table comes from other alignments than the rules;
* ``LogCount = log(1 + c)``, ``Singleton = 1`` if ``c <= 1`` (fractional counts), ``Arity``.

Pruning keeps the ``limit`` (:data:`RULE_TABLE_LIMIT`, 30) target sides with the highest
p(e|f) per source side; ties (counts equal after rounding to 1e-9) go to the target side that
sorts first as a tuple of strings, so the result does not depend on extraction order.

:func:`estimate_features` is the fast, columnar path (numpy + a numba kernel for the lexical
weights) and returns a :class:`RuleTable`; :func:`reference_rule_table` computes the same from
the definitions in pure Python. :func:`glue_rules` gives ``S -> <[S,1] [X,2], [S,1] [X,2]>``
with ``Glue = 1`` and ``S -> <[X,1], [X,1]>`` without features: every derivation uses the
latter exactly once, so a feature on it would be a constant that no weight could tune.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
from numba import njit

from service.core.csr import ptr_from_counts
from service.errors import ConfigurationError
from service.mt.lexical import LexicalTable
from service.mt.rules import (
    ARITY,
    DOMAIN_FEATURES,
    GLUE,
    LOG_COUNT,
    LOG_LEX_E_GIVEN_F,
    LOG_LEX_F_GIVEN_E,
    LOG_P_E_GIVEN_F,
    LOG_P_F_GIVEN_E,
    RULE_FEATURES,
    SINGLETON,
    Rule,
    S,
    X,
    is_nt,
    nt,
)
from service.mt.training.domain import (
    DEFAULT_PRIOR,
    domain_columns,
    reference_domain_features,
)
from service.mt.training.extract import (
    COUNT_DECIMALS,
    WORD_OFFSET,
    AlignedPair,
    ExtractionConfig,
    RuleCounts,
    Vocab,
    alignment_from_code,
    best_alignment,
    decode_side,
    extract_rules_reference,
    min_count_filter_reference,
    sentence_counts_reference,
)
from service.mt.training.lexical_counts import (
    lexical_counts_reference,
    lexical_id_maps,
    lexical_table_from_counts,
)

if TYPE_CHECKING:
    from service.mt.grammar import EncodedRules

MIN_LEX_PROB = 1e-7
RULE_TABLE_LIMIT = 30  # target sides kept per source side (the setting rule_table_limit's default)

I32 = npt.NDArray[np.int32]
I64 = npt.NDArray[np.int64]
U64 = npt.NDArray[np.uint64]
F32 = npt.NDArray[np.float32]
F64 = npt.NDArray[np.float64]


def glue_rules() -> list[Rule]:
    """The glue grammar: ``S -> S X`` (Glue = 1) and ``S -> X`` (no features)."""
    two = (nt(1, S), nt(2, X))
    return [
        Rule(S, two, two, {GLUE: 1.0}),
        Rule(S, (nt(1, X),), (nt(1, X),), {}),
    ]


# --- the reference ----------------------------------------------------------------------------


def lexical_weight(
    source: tuple[str, ...],
    target: tuple[str, ...],
    alignment: Iterable[tuple[int, int]],
    w: Callable[[str, str | None], float],
) -> float:
    """lex(e|f, a): product over target terminals of the mean w(e|f) of their links, or
    w(e|NULL) for an unaligned one (each factor floored at MIN_LEX_PROB)."""
    links = list(alignment)
    result = 1.0
    for j, e in enumerate(target):
        if is_nt(e):
            continue
        linked = [source[i] for i, jj in links if jj == j]
        factor = sum(w(e, f) for f in linked) / len(linked) if linked else w(e, None)
        result *= max(factor, MIN_LEX_PROB)
    return result


def reference_rule_table(
    pairs: Iterable[AlignedPair],
    config: ExtractionConfig | None = None,
    limit: int | None = None,
    *,
    in_domain: Sequence[bool] | None = None,
    prior: float = DEFAULT_PRIOR,
) -> list[Rule]:
    """All features of all rules, from the definitions; pruned to ``limit`` per source side.
    With ``in_domain`` (a flag per pair), the in-domain probabilities too
    (:func:`~service.mt.training.domain.reference_domain_features`)."""
    config = config or ExtractionConfig()
    pairs = list(pairs)
    by_rule = extract_rules_reference(pairs, config)
    lex = lexical_table_from_counts(lexical_counts_reference(pairs))
    count = {key: sum(by_alignment.values()) for key, by_alignment in by_rule.items()}
    c_f: dict[tuple[str, ...], float] = defaultdict(float)
    c_e: dict[tuple[str, ...], float] = defaultdict(float)
    for (src, tgt), c in count.items():
        c_f[src] += c
        c_e[tgt] += c
    # the marginals above include the rules that the min-count filter drops
    by_rule = min_count_filter_reference(by_rule, sentence_counts_reference(pairs, config), config)
    by_source: dict[tuple[str, ...], list[Rule]] = defaultdict(list)
    for (src, tgt), by_alignment in by_rule.items():
        c = count[src, tgt]
        a = best_alignment(by_alignment, config.max_initial_target)
        swapped = [(j, i) for i, j in a]
        features = {
            LOG_P_E_GIVEN_F: math.log(c / c_f[src]),
            LOG_P_F_GIVEN_E: math.log(c / c_e[tgt]),
            LOG_LEX_E_GIVEN_F: math.log(lexical_weight(src, tgt, a, lex.prob_e_given_f)),
            LOG_LEX_F_GIVEN_E: math.log(lexical_weight(tgt, src, swapped, lex.prob_f_given_e)),
            LOG_COUNT: math.log1p(c),
            SINGLETON: 1.0 if round(c, COUNT_DECIMALS) <= 1 else 0.0,
            ARITY: float(sum(1 for s in src if is_nt(s))),
        }
        by_source[src].append(Rule(X, src, tgt, features, a))
    if in_domain is not None:
        log_p = {
            (r.source, r.target): (r.features[LOG_P_E_GIVEN_F], r.features[LOG_P_F_GIVEN_E])
            for group in by_source.values()
            for r in group
        }
        adapted = reference_domain_features(pairs, in_domain, config, log_p, prior)
        for group in by_source.values():
            group[:] = [
                replace(r, features={**r.features, **adapted[r.source, r.target]}) for r in group
            ]
    out: list[Rule] = []
    for src in sorted(by_source):
        group = sorted(
            by_source[src], key=lambda r: (-round(count[r.source, r.target], 9), r.target)
        )
        out.extend(group[:limit] if limit is not None else group)
    return out


# --- the fast path ------------------------------------------------------------------------------


@dataclass(slots=True)
class RuleTable:
    """The pruned grammar in columns, grouped by source side, best p(e|f) first.

    Rule ``r`` is ``X -> <source_sides[source_id[r]], target_sides[target_id[r]]>`` (integer
    rows, see :class:`~service.mt.training.extract.RuleCounts`), with ``features[r]`` in the
    order of ``feature_names`` and its alignment as a 64-bit code of width ``alignment_width``.
    """

    source_vocab: Vocab
    target_vocab: Vocab
    source_sides: I32
    target_sides: I32
    source_id: I32
    target_id: I32
    count: F64
    alignment: U64
    features: F32
    alignment_width: int
    unpruned: int  # rules before pruning
    feature_names: tuple[str, ...] = RULE_FEATURES

    def __len__(self) -> int:
        return len(self.count)

    def to_encoded(self) -> EncodedRules:
        """The columnar form :func:`service.mt.grammar.write_encoded` stores (numpy only)."""
        from service.mt.grammar import EncodedRules, nt_symbol

        def flat(sides: I32, ids: I32) -> tuple[I32, I64]:
            rows = sides[ids]
            used = rows > 0
            # codes: 1, 2 -> gaps [X,1], [X,2]; word id w (code w + 2) -> terminal id w - 1
            symbols = rows[used]
            symbols = np.where(symbols <= 2, -symbols, symbols - (WORD_OFFSET + 1))
            return symbols, ptr_from_counts(used.sum(axis=1))

        assert nt_symbol(0, 1) == -1 and nt_symbol(0, 2) == -2
        source, source_offsets = flat(self.source_sides, self.source_id)
        target, target_offsets = flat(self.target_sides, self.target_id)
        width = self.alignment_width
        bits = np.arange(self.source_sides.shape[1] * width, dtype=np.uint64)
        points, per_rule = [], []
        for lo in range(0, len(self), 1 << 20):  # bounded temporaries
            chunk = self.alignment[lo : lo + (1 << 20)]
            has = ((chunk[:, None] >> bits[None, :]) & np.uint64(1)).astype(bool)
            _, bit = np.nonzero(has)  # row-major: by rule, then by (i, j)
            points.append(np.stack([bit // width, bit % width], axis=1).astype(np.int8))
            per_rule.append(has.sum(axis=1))
        alignment = np.concatenate(points) if points else np.zeros((0, 2), dtype=np.int8)
        alignment_offsets = ptr_from_counts(
            np.concatenate(per_rule) if per_rule else np.zeros(0, dtype=np.int64)
        )
        return EncodedRules(
            source_vocab=self.source_vocab.words[1:],
            target_vocab=self.target_vocab.words[1:],
            labels=[X],
            feature_names=list(self.feature_names),
            lhs=np.zeros(len(self), dtype=np.int64),
            source=source,
            source_offsets=source_offsets,
            target=target,
            target_offsets=target_offsets,
            features=self.features,
            alignment=alignment,
            alignment_offsets=alignment_offsets,
        )

    def rule(self, r: int) -> Rule:
        return Rule(
            X,
            decode_side(self.source_sides[self.source_id[r]], self.source_vocab),
            decode_side(self.target_sides[self.target_id[r]], self.target_vocab),
            dict(zip(self.feature_names, self.features[r].tolist(), strict=True)),
            alignment_from_code(int(self.alignment[r]), self.alignment_width),
        )

    def rules(self) -> Iterator[Rule]:
        """Every rule as a :class:`Rule` (features filled, alignment kept)."""
        source_cache: dict[int, tuple[str, ...]] = {}
        for r in range(len(self)):
            sid = int(self.source_id[r])
            src = source_cache.get(sid)
            if src is None:
                source_cache.clear()  # rules are grouped by source side
                src = source_cache[sid] = decode_side(self.source_sides[sid], self.source_vocab)
            yield Rule(
                X,
                src,
                decode_side(self.target_sides[self.target_id[r]], self.target_vocab),
                dict(zip(self.feature_names, self.features[r].tolist(), strict=True)),
                alignment_from_code(int(self.alignment[r]), self.alignment_width),
            )


@njit(cache=True, nogil=True)
def _pair_entry(f_indptr: I64, e_ids: I64, f: int, e: int) -> int:  # pragma: no cover - jitted
    if f < 0 or e < 0:
        return -1
    lo = f_indptr[f]
    hi = f_indptr[f + 1]
    while lo < hi:
        mid = (lo + hi) // 2
        if e_ids[mid] < e:
            lo = mid + 1
        else:
            hi = mid
    if lo < f_indptr[f + 1] and e_ids[lo] == e:
        return int(lo)
    return -1


@njit(cache=True, nogil=True)
def _lexical_weights(  # pragma: no cover - jitted
    source_sides: I32,
    target_sides: I32,
    source_id: I32,
    target_id: I32,
    alignment: U64,
    width: int,
    fmap: I64,
    emap: I64,
    f_indptr: I64,
    e_ids: I64,
    p_e_given_f: F64,
    p_f_given_e: F64,
    min_prob: float,
) -> tuple[F64, F64]:
    """log lex(e|f) and log lex(f|e) of every rule (see :func:`lexical_weight`)."""
    n = source_id.shape[0]
    n_src = source_sides.shape[1]
    n_tgt = target_sides.shape[1]
    out_ef = np.zeros(n, np.float64)
    out_fe = np.zeros(n, np.float64)
    sum_e = np.zeros(n_tgt, np.float64)
    cnt_e = np.zeros(n_tgt, np.int64)
    sum_f = np.zeros(n_src, np.float64)
    cnt_f = np.zeros(n_src, np.int64)
    for r in range(n):
        srow = source_sides[source_id[r]]
        trow = target_sides[target_id[r]]
        sum_e[:] = 0.0
        cnt_e[:] = 0
        sum_f[:] = 0.0
        cnt_f[:] = 0
        code = alignment[r]
        bit = 0
        while code != 0:
            if code & np.uint64(1):
                i = bit // width
                j = bit % width
                k = _pair_entry(f_indptr, e_ids, fmap[srow[i] - 2], emap[trow[j] - 2])
                if k >= 0:
                    sum_e[j] += p_e_given_f[k]
                    sum_f[i] += p_f_given_e[k]
                cnt_e[j] += 1
                cnt_f[i] += 1
            code >>= np.uint64(1)
            bit += 1
        log_ef = 0.0
        for j in range(n_tgt):
            if trow[j] == 0:
                break
            if trow[j] <= 2:
                continue
            if cnt_e[j] > 0:
                factor = sum_e[j] / cnt_e[j]
            else:
                k = _pair_entry(f_indptr, e_ids, 0, emap[trow[j] - 2])
                factor = p_e_given_f[k] if k >= 0 else 0.0
            log_ef += np.log(max(factor, min_prob))
        log_fe = 0.0
        for i in range(n_src):
            if srow[i] == 0:
                break
            if srow[i] <= 2:
                continue
            if cnt_f[i] > 0:
                factor = sum_f[i] / cnt_f[i]
            else:
                k = _pair_entry(f_indptr, e_ids, fmap[srow[i] - 2], 0)
                factor = p_f_given_e[k] if k >= 0 else 0.0
            log_fe += np.log(max(factor, min_prob))
        out_ef[r] = log_ef
        out_fe[r] = log_fe
    return out_ef, out_fe


def _string_order(sides: I32, vocab: Vocab) -> I64:
    """Rank of each given target side when the sides are sorted as tuples of strings."""
    strings = [nt(1, X), nt(2, X), *vocab.words[1:]]
    rank_of_string = {w: k for k, w in enumerate(sorted(set(strings)))}
    code_rank = np.empty(len(vocab) + WORD_OFFSET, dtype=np.int32)
    code_rank[0] = -1  # padding: a prefix sorts first
    code_rank[1:] = [rank_of_string[w] for w in strings]
    ranked = code_rank[sides]
    order = np.lexsort(tuple(ranked[:, k] for k in reversed(range(sides.shape[1]))))
    rank = np.empty(len(sides), dtype=np.int64)
    rank[order] = np.arange(len(sides))
    return rank


def _group_starts(sorted_ids: I32) -> I64:
    """Start of each run of equal values, and the run start of every position."""
    new = np.empty(len(sorted_ids), dtype=bool)
    new[0] = True
    new[1:] = sorted_ids[1:] != sorted_ids[:-1]
    starts = np.flatnonzero(new)
    return np.repeat(starts, np.diff(np.append(starts, len(sorted_ids))))


def _prune_order(counts: RuleCounts, limit: int | None) -> I64:
    """Rule indices grouped by source side, best count first, at most ``limit`` per group.

    Within a group, rules whose rounded count ties with the rule at the cut are ordered by
    their target side as a tuple of strings (so the kept set does not depend on extraction
    order); other ties keep extraction order, which only affects the order of kept rules.
    """
    src, tgt = counts.source_id, counts.target_id
    rounded = np.round(counts.count, COUNT_DECIMALS)
    order = np.lexsort((tgt, -rounded, src))
    if limit is None or not len(order):
        return order
    rank = np.arange(len(order)) - _group_starts(src[order])
    # groups where the rule at rank limit-1 and the one at rank limit have the same count
    at_cut = np.flatnonzero(rank == limit)
    r_sorted = rounded[order]
    tied = at_cut[r_sorted[at_cut] == r_sorted[at_cut - 1]]
    if len(tied):
        group_of = src[order]
        cut_value = np.full(len(counts.source_sides), np.nan)
        cut_value[group_of[tied]] = r_sorted[tied]
        tie_group = r_sorted == cut_value[group_of]  # NaN elsewhere: never equal
        block = order[tie_group]
        key = np.zeros(len(counts.count), dtype=np.int64)
        sides, inverse = np.unique(tgt[block], return_inverse=True)
        key[block] = _string_order(counts.target_sides[sides], counts.target_vocab)[inverse]
        order = np.lexsort((tgt, key, -rounded, src))
        rank = np.arange(len(order)) - _group_starts(src[order])
    return order[rank < limit]


def estimate_features(
    counts: RuleCounts,
    lexical: LexicalTable,
    limit: int | None = RULE_TABLE_LIMIT,
    *,
    domain: RuleCounts | None = None,
    prior: float = DEFAULT_PRIOR,
) -> RuleTable:
    """Features of every rule, then pruning to ``limit`` target sides per source side
    (``None`` keeps everything; ``clir train-model`` passes the setting ``rule_table_limit``).
    With ``domain`` (the in-domain pairs' counts, :func:`~service.mt.training.domain.
    in_domain_counts`), the in-domain probabilities of :mod:`service.mt.training.domain` too."""
    if limit is not None and limit < 1:
        raise ConfigurationError(f"rule table limit {limit} must be at least 1 (or None)")
    c = counts.count
    src, tgt = counts.source_id, counts.target_id
    c_f, c_e = counts.source_marginal, counts.target_marginal  # before the min-count filter
    # grouping and pruning first, so the lexical weights are computed for kept rules only
    order = _prune_order(counts, limit)
    c_k, src_k, tgt_k, a_k = c[order], src[order], tgt[order], counts.alignment[order]
    fmap, emap = lexical_id_maps(lexical, counts.source_vocab, counts.target_vocab)
    log_ef, log_fe = _lexical_weights(
        counts.source_sides,
        counts.target_sides,
        src_k,
        tgt_k,
        a_k,
        counts.config.max_initial_target,
        fmap,
        emap,
        lexical.f_indptr,
        lexical.e_ids,
        lexical.p_e_given_f,
        lexical.p_f_given_e,
        MIN_LEX_PROB,
    )
    arity = ((counts.source_sides > 0) & (counts.source_sides <= 2)).sum(axis=1)
    names = RULE_FEATURES + (DOMAIN_FEATURES if domain is not None else ())
    features = np.empty((len(order), len(names)), dtype=np.float32)
    columns = {
        LOG_P_E_GIVEN_F: np.log(c_k / c_f[src_k]),
        LOG_P_F_GIVEN_E: np.log(c_k / c_e[tgt_k]),
        LOG_LEX_E_GIVEN_F: log_ef,
        LOG_LEX_F_GIVEN_E: log_fe,
        LOG_COUNT: np.log1p(c_k),
        SINGLETON: (np.round(c_k, COUNT_DECIMALS) <= 1).astype(np.float64),
        ARITY: arity[src_k].astype(np.float64),
    }
    if domain is not None:
        columns.update(
            domain_columns(
                counts, order, domain, columns[LOG_P_E_GIVEN_F], columns[LOG_P_F_GIVEN_E], prior
            )
        )
    for k, name in enumerate(names):
        features[:, k] = columns[name]
    return RuleTable(
        source_vocab=counts.source_vocab,
        target_vocab=counts.target_vocab,
        source_sides=counts.source_sides,
        target_sides=counts.target_sides,
        source_id=src_k,
        target_id=tgt_k,
        count=c_k,
        alignment=a_k,
        features=features,
        alignment_width=counts.config.max_initial_target,
        unpruned=len(c),
        feature_names=names,
    )
