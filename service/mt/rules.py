"""Synchronous CFG rules and the names of the model's features.

A Hiero rule (Chiang 2007, §3) rewrites a nonterminal into a pair of strings over terminals and
co-indexed nonterminals. Nonterminals are written as in cdec: ``[X,1]`` and ``[X,2]`` on both
sides, the index linking a source gap to its target gap. A rule carries its feature values
(a sparse mapping name -> value) and the word alignment between its terminals, as pairs
``(i, j)`` of positions in ``source`` and ``target`` (positions count every symbol, gaps
included, as in cdec's grammar files).

Feature values are on the log scale so that a positive weight rewards a larger value
(Hieber & Riezler 2015, §3, eq. 2: ``F_smt = w_smt · Φ_smt``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

X = "X"  # the Hiero nonterminal
S = "S"  # the glue grammar's start symbol

_NT_RE = re.compile(r"^\[([A-Za-z]+),([12])\]$")


def nt(index: int, label: str = X) -> str:
    """The gap symbol ``[X,index]``."""
    return f"[{label},{index}]"


def nt_index(symbol: str) -> int:
    """1 or 2 for a gap symbol, 0 for a terminal."""
    m = _NT_RE.match(symbol)
    return int(m.group(2)) if m else 0


def is_nt(symbol: str) -> bool:
    return _NT_RE.match(symbol) is not None


def target_yield(target: Sequence[str]) -> tuple[str | int, ...]:
    """A rule's target side as a hyperedge's yield: gaps ``[X,k]`` replaced by tail positions
    ``k - 1`` (:meth:`service.forest.hypergraph.HypergraphBuilder.add_edge`)."""
    return tuple(k - 1 if (k := nt_index(s)) else s for s in target)


# --- feature names ---------------------------------------------------------------------------
# Rule features, estimated at extraction time (Chen et al. 2017, §2.2; Chiang 2007 §5).
LOG_P_E_GIVEN_F = "LogPEgivenF"  # log p(e|f), relative frequency of the target side
LOG_P_F_GIVEN_E = "LogPFgivenE"  # log p(f|e)
LOG_LEX_E_GIVEN_F = "LogLexEgivenF"  # log lexical weight lex(e|f) (Koehn et al. 2003)
LOG_LEX_F_GIVEN_E = "LogLexFgivenE"  # log lex(f|e)
LOG_COUNT = "LogCount"  # log(1 + fractional count of the rule)
SINGLETON = "Singleton"  # 1 if the rule's count is at most 1
ARITY = "Arity"  # number of gaps (0, 1, 2)
RULE_FEATURES = (
    LOG_P_E_GIVEN_F,
    LOG_P_F_GIVEN_E,
    LOG_LEX_E_GIVEN_F,
    LOG_LEX_F_GIVEN_E,
    LOG_COUNT,
    SINGLETON,
    ARITY,
)

# In-domain translation probabilities, present when the bundle was trained with in-domain
# origins (:mod:`service.mt.training.domain`; Koehn & Schroeder 2007, §3).
LOG_P_E_GIVEN_F_DOMAIN = "LogPEgivenFDomain"  # log p_dom(e|f), MAP-adapted to the domain
LOG_P_F_GIVEN_E_DOMAIN = "LogPFgivenEDomain"  # log p_dom(f|e)
DOMAIN_FEATURES = (LOG_P_E_GIVEN_F_DOMAIN, LOG_P_F_GIVEN_E_DOMAIN)

# Decoder features, computed per edge at decoding time.
WORD_PENALTY = "WordPenalty"  # number of target terminals
RULE_PENALTY = "RulePenalty"  # 1 per non-glue rule
GLUE = "Glue"  # 1 per glue rule S -> S X
PASS_THROUGH = "PassThrough"  # 1 per pass-through rule for an unknown source word
LANGUAGE_MODEL = "LanguageModel"  # natural-log LM probability of the edge's new n-grams
LM_OOV = "LanguageModel_OOV"  # words unknown to the LM
DECODER_FEATURES = (WORD_PENALTY, RULE_PENALTY, GLUE, PASS_THROUGH, LANGUAGE_MODEL, LM_OOV)

ALL_FEATURES = RULE_FEATURES + DOMAIN_FEATURES + DECODER_FEATURES


@dataclass(frozen=True, slots=True)
class Rule:
    """One SCFG rule ``lhs -> <source, target>`` with features and word alignment."""

    lhs: str
    source: tuple[str, ...]
    target: tuple[str, ...]
    features: dict[str, float] = field(default_factory=dict, hash=False, compare=False)
    alignment: tuple[tuple[int, int], ...] = ()

    @property
    def arity(self) -> int:
        return sum(1 for s in self.source if is_nt(s))

    @property
    def target_terminals(self) -> tuple[str, ...]:
        return tuple(t for t in self.target if not is_nt(t))

    @property
    def terminals_aligned(self) -> tuple[bool, ...]:
        """For each of :attr:`target_terminals`, in order: is it aligned to a source word?
        (False: a word the target has and the source lacks, an insertion.)"""
        aligned = {j for _, j in self.alignment}
        return tuple(j in aligned for j, t in enumerate(self.target) if not is_nt(t))
