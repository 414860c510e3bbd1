"""Sparse lexical (LEX) features of forest hyperedges, for bag-of-words forced decoding.

Hieber & Riezler 2015, §3 ("Decomposable Retrieval Features", last paragraph): besides the BM25 term
weights, BOW-FD can use sparse indicator features "for each alignment, insertion, or deletion of
words in source and target", which let learning to rank adapt lexical choice and the dropping of
function words for retrieval. They are local to a hyperedge, read from its rule's word
alignment (:attr:`service.mt.rules.Rule.alignment`, positions counting gaps):

* ``lex:<source>_<target>`` for every aligned pair of terminals;
* ``ins:<target>`` for every target terminal aligned to nothing (an inserted word);
* ``del:<source>`` for every source terminal aligned to nothing (a dropped word).

A pass-through edge (rule id ``-1`` with the ``PassThrough`` feature) copies an unknown source
word ``w`` and fires ``lex:w_w``; glue and goal edges (rule id ``-1``, no terminals) fire
nothing. The features are doc-independent, so their weighted sum joins the SMT part of the
edge weight W'(e, d) (Hieber & Riezler 2015, eq. 4); their weights come from learning to rank
(:mod:`service.ltr`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from service.forest.hypergraph import FloatArray, Hyperedge, Hypergraph
from service.mt.grammar import Grammar
from service.mt.rules import PASS_THROUGH, Rule, is_nt

LEX_PREFIXES = ("lex:", "ins:", "del:")


def is_lex_feature(name: str) -> bool:
    """True for the names of LEX features (``lex:…``, ``ins:…``, ``del:…``)."""
    return name.startswith(LEX_PREFIXES)


def rule_lex_features(rule: Rule) -> tuple[str, ...]:
    """The LEX features a rule fires, in alignment order, then insertions, then deletions."""
    aligned_src = {i for i, _ in rule.alignment}
    out: list[str] = []
    for i, j in rule.alignment:
        s, t = rule.source[i], rule.target[j]
        if not is_nt(s) and not is_nt(t):
            out.append(f"lex:{s}_{t}")
    out.extend(
        f"ins:{t}"
        for t, aligned in zip(rule.target_terminals, rule.terminals_aligned, strict=True)
        if not aligned
    )
    out.extend(
        f"del:{s}" for i, s in enumerate(rule.source) if i not in aligned_src and not is_nt(s)
    )
    return tuple(out)


class LexFeatures:
    """LEX features of the edges of forests built with one grammar (rules cached by id)."""

    def __init__(self, grammar: Grammar, cache_size: int = 200_000) -> None:
        self.grammar = grammar
        self._cache: dict[int, tuple[str, ...]] = {}
        self._cache_size = cache_size

    def of_rule(self, rule_id: int) -> tuple[str, ...]:
        feats = self._cache.get(rule_id)
        if feats is None:
            feats = rule_lex_features(self.grammar.rule(rule_id))
            if len(self._cache) >= self._cache_size:
                self._cache.clear()
            self._cache[rule_id] = feats
        return feats

    def of_edge(self, edge: Hyperedge) -> tuple[str, ...]:
        """The LEX features fired by one edge (see the module docstring)."""
        if edge.rule_id >= 0:
            return self.of_rule(edge.rule_id)
        if PASS_THROUGH in edge.features:
            return tuple(f"lex:{w}_{w}" for w in edge.target_terminals)
        return ()

    def edge_weights(self, hg: Hypergraph, weights: Mapping[str, float]) -> FloatArray:
        """Σ of the weights of the LEX features each edge fires (features without weight: 0).

        Computed once per distinct rule of the forest (a +LM forest repeats each rule on many
        edges), then gathered.
        """
        rule_ids = np.fromiter((e.rule_id for e in hg.edges), dtype=np.int64, count=hg.num_edges)
        if not weights or len(rule_ids) == 0:
            return np.zeros(len(rule_ids), dtype=np.float64)
        rules, inverse = np.unique(rule_ids, return_inverse=True)
        per_rule = np.array(
            [_weight(self.of_rule(r), weights) if r >= 0 else 0.0 for r in rules.tolist()],
            dtype=np.float64,
        )
        out = per_rule[inverse]
        for e in np.flatnonzero(rule_ids < 0).tolist():
            out[e] = _weight(self.of_edge(hg.edges[e]), weights)
        return out


def _weight(features: Sequence[str], weights: Mapping[str, float]) -> float:
    s = 0.0
    for f in features:
        s += weights.get(f, 0.0)
    return s
