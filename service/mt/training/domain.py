"""In-domain translation probabilities: the rule table adapted to the pairs of one domain.

The parallel corpus mixes a small in-domain part (for the LibreOffice help queries: the help
pages' own paragraph pairs, 5 % of the de-en pairs) with a large general part (software
messages). Relative frequencies over the whole corpus let the general part decide a word's
translation — "Maßstab" → "scale" (messages) where the help says "zoom". Koehn & Schroeder
(2007, §3) give the in-domain part its own translation table as further log-linear features,
weighted by tuning; here the in-domain table is the maximum a posteriori estimate of
Gauvain & Lee (1994, §2) with the whole corpus's estimate as the prior's mean (the count
merging Bacchiani & Roark 2003, §3 use for language models), so a source side the in-domain
pairs never saw keeps the general probability and no floor is needed:

    p_dom(e|f) = (c_in(f, e) + τ·p(e|f)) / (c_in(f) + τ)
    p_dom(f|e) = (c_in(f, e) + τ·p(f|e)) / (c_in(e) + τ)

``c_in`` are the fractional rule counts (Chiang 2007, §3.2) extracted from the in-domain pairs
alone, their marginals summed over every rule extracted there (as for ``c(f)`` and ``c(e)``,
:mod:`service.mt.training.rule_features`), τ the prior's weight in pairs (``domain_prior``,
default 1). The features are ``LogPEgivenFDomain = log p_dom(e|f)`` and
``LogPFgivenEDomain = log p_dom(f|e)``, starting at weight 0 (the untuned model is
unchanged); tuning on in-domain dev sentences sets their weights. A pair is in the domain when
its origin (the first column of the parallel file) starts with one of the given prefixes.

:func:`domain_columns` is the columnar path over :class:`~service.mt.training.extract.RuleCounts`
(rules matched by their integer sides); :func:`reference_domain_features` computes the same
from the definitions, rule by rule, for the tests.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import replace

import numpy as np
import numpy.typing as npt

from service.errors import ConfigurationError
from service.mt.rules import LOG_P_E_GIVEN_F_DOMAIN, LOG_P_F_GIVEN_E_DOMAIN
from service.mt.training.extract import (
    AlignedPair,
    EncodedCorpus,
    ExtractionConfig,
    RuleCounts,
    RuleKey,
    extract_rules,
    extract_rules_reference,
)

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]
Flags = npt.NDArray[np.bool_]

DEFAULT_PRIOR = 1.0  # τ: the general estimate's weight, in sentence pairs' worth of counts


def check_prefixes(prefixes: Sequence[str]) -> tuple[str, ...]:
    if not prefixes or any(not p for p in prefixes):
        raise ConfigurationError(f"in-domain origin prefixes must be non-empty: {list(prefixes)}")
    return tuple(prefixes)


def domain_flags(origins: Iterable[str], prefixes: Sequence[str]) -> Flags:
    """Per pair: whether its origin starts with one of ``prefixes``."""
    start = check_prefixes(prefixes)
    return np.fromiter((o.startswith(start) for o in origins), dtype=np.bool_)


def check_prior(prior: float) -> float:
    if not (math.isfinite(prior) and prior > 0):
        raise ConfigurationError(f"domain_prior={prior}: the prior's weight must be above 0")
    return prior


def in_domain_counts(
    corpus: EncodedCorpus, flags: Flags, config: ExtractionConfig | None = None
) -> RuleCounts:
    """The rules of the in-domain pairs alone, in the corpus's vocabularies; every rule kept
    (no minimum count), so its count and both marginals are complete."""
    if len(flags) != len(corpus):
        raise ConfigurationError(
            f"{len(flags)} domain flags for a corpus of {len(corpus)} sentence pairs"
        )
    if not flags.any():
        raise ConfigurationError(
            "no sentence pair is in the domain: no origin starts with the in-domain prefixes"
        )
    config = replace(config or ExtractionConfig(), min_hierarchical_count=1)
    return extract_rules(corpus.subset(flags), config)


def _row_index(table: npt.NDArray[np.int32], rows: npt.NDArray[np.int32]) -> I64:
    """For each row of ``rows``: its index in ``table`` (rows unique), or -1."""
    if table.shape[1] != rows.shape[1]:
        raise ConfigurationError(f"rule sides of width {rows.shape[1]} and {table.shape[1]}")
    kind = np.dtype((np.void, table.dtype.itemsize * table.shape[1]))
    keys = np.ascontiguousarray(table).view(kind).ravel()
    wanted = np.ascontiguousarray(rows).view(kind).ravel()
    order = np.argsort(keys)
    found = np.searchsorted(keys[order], wanted).clip(0, max(len(keys) - 1, 0))
    out = np.full(len(rows), -1, dtype=np.int64)
    if len(keys):
        hit = keys[order][found] == wanted
        out[hit] = order[found[hit]]
    return out


def domain_columns(
    counts: RuleCounts,
    rules: I64,
    domain: RuleCounts,
    log_p_ef: F64,
    log_p_fe: F64,
    prior: float = DEFAULT_PRIOR,
) -> dict[str, F64]:
    """``LogPEgivenFDomain`` and ``LogPFgivenEDomain`` of the rules ``rules`` of ``counts``
    (indices), whose whole-corpus log p(e|f) and log p(f|e) are given; ``domain`` holds the
    in-domain counts (:func:`in_domain_counts`, same vocabularies)."""
    check_prior(prior)
    src, tgt = counts.source_id[rules], counts.target_id[rules]
    used_s, inv_s = np.unique(src, return_inverse=True)
    used_t, inv_t = np.unique(tgt, return_inverse=True)
    dom_s = _row_index(domain.source_sides, counts.source_sides[used_s])[inv_s]
    dom_t = _row_index(domain.target_sides, counts.target_sides[used_t])[inv_t]
    c_f = np.where(dom_s >= 0, domain.source_marginal[dom_s.clip(0)], 0.0)
    c_e = np.where(dom_t >= 0, domain.target_marginal[dom_t.clip(0)], 0.0)
    c_fe = np.zeros(len(rules), dtype=np.float64)
    both = (dom_s >= 0) & (dom_t >= 0)
    if len(domain):
        dom_keys = (domain.source_id.astype(np.int64) << 32) | domain.target_id.astype(np.int64)
        order = np.argsort(dom_keys)
        wanted = (dom_s[both] << 32) | dom_t[both]
        at = np.searchsorted(dom_keys[order], wanted).clip(0, len(dom_keys) - 1)
        hit = dom_keys[order][at] == wanted
        pos = np.flatnonzero(both)[hit]
        c_fe[pos] = domain.count[order[at[hit]]]
    return {
        LOG_P_E_GIVEN_F_DOMAIN: np.log((c_fe + prior * np.exp(log_p_ef)) / (c_f + prior)),
        LOG_P_F_GIVEN_E_DOMAIN: np.log((c_fe + prior * np.exp(log_p_fe)) / (c_e + prior)),
    }


def reference_domain_features(
    pairs: Sequence[AlignedPair],
    flags: Sequence[bool],
    config: ExtractionConfig,
    log_p: dict[RuleKey, tuple[float, float]],
    prior: float = DEFAULT_PRIOR,
) -> dict[RuleKey, dict[str, float]]:
    """The two features of every rule of ``log_p`` (rule -> its whole-corpus log p(e|f),
    log p(f|e)), from the definitions: the in-domain pairs' rules extracted by the reference
    extraction, counts and marginals summed in dictionaries."""
    check_prior(prior)
    inside = [p for p, flag in zip(pairs, flags, strict=True) if flag]
    by_rule = extract_rules_reference(inside, config)
    c: dict[RuleKey, float] = {k: sum(a.values()) for k, a in by_rule.items()}
    c_f: dict[tuple[str, ...], float] = defaultdict(float)
    c_e: dict[tuple[str, ...], float] = defaultdict(float)
    for (f, e), n in c.items():
        c_f[f] += n
        c_e[e] += n
    out = {}
    for (f, e), (lp_ef, lp_fe) in log_p.items():
        n = c.get((f, e), 0.0)
        out[f, e] = {
            LOG_P_E_GIVEN_F_DOMAIN: math.log((n + prior * math.exp(lp_ef)) / (c_f[f] + prior)),
            LOG_P_F_GIVEN_E_DOMAIN: math.log((n + prior * math.exp(lp_fe)) / (c_e[e] + prior)),
        }
    return out
