"""A document's best derivation: "the translation that retrieved it" (Hieber & Riezler 2015, §3).

:func:`best_derivation` runs one Viterbi pass over the (beam-pruned) forest under the
document's weights W'(·, d) (:func:`service.forest.inference.fast_viterbi`) and reads the
derivation's parts: its words that matched the document, its SMT and IR scores and its feature
vector Φ(h) (SMT features summed over the edges, the LEX feature counts, ``IR_BM25`` and
``ir:<t>``), which explanations and the learning-to-rank reference
(:meth:`service.retrieval.bowfd.scorer.BowFdScorer.feature_vector`) read.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from service.forest.inference import fast_viterbi
from service.index.inverted import InvertedIndex
from service.retrieval.bowfd.features import IR_FEATURE, ir_term_feature
from service.retrieval.bowfd.prepare import PreparedSentence
from service.retrieval.explain import MatchedTerm, SentenceDerivation
from service.retrieval.lex import LexFeatures


@dataclass(frozen=True)
class DocDerivation:
    """A document's best derivation for one sentence: "the translation that retrieved it"."""

    tokens: tuple[str, ...]
    matched: tuple[tuple[str, int, float], ...]  # (term, occurrences, bm25(term, d))
    smt: float  # Σ_e w_smt·φ(e) (+ LEX) over the derivation's edges
    ir: float  # Σ_{t ∈ h} (v + δ_t)·bm25(t, d)  (δ_t = 0 without per-term weights)
    bm25: float  # Σ_{t ∈ h} bm25(t, d) (the IR feature value)
    features: dict[str, float]  # SMT features summed over the edges (+ LEX counts, ir:<t>)

    @property
    def score(self) -> float:
        return self.smt + self.ir

    def explained(self, sentence: int, in_sentence_list: bool | None = None) -> SentenceDerivation:
        """The derivation as the explanation of a hit shows it (the ``sentence``-th of the
        query; ``in_sentence_list`` for queries of several sentences)."""
        matched = tuple(MatchedTerm(t, c, w) for t, c, w in self.matched)
        translation = " ".join(self.tokens)
        return SentenceDerivation(
            sentence, translation, matched, self.smt, self.ir, in_sentence_list
        )


def best_derivation(
    prep: PreparedSentence,
    docno: int,
    v: float,
    index: InvertedIndex,
    lex: LexFeatures | None = None,
) -> DocDerivation:
    """The best derivation of the sentence for ``docno`` under W'(·, d), with its parts."""
    hg = prep.hypergraph
    deriv = fast_viterbi(hg, prep.doc_edge_weights(docno, v))
    edges = list(deriv.edges)
    smt = float(sum(float(prep.smt[e]) for e in edges))
    terms, weights = prep.doc_row(docno)
    weight_of = dict(zip(prep.terms[terms].tolist(), weights.tolist(), strict=True))
    delta_of: dict[int, float] = {}
    if prep.term_delta is not None:
        delta_of = dict(zip(prep.terms.tolist(), prep.term_delta.tolist(), strict=True))
    counts = Counter(deriv.tokens)
    matched: list[tuple[str, int, float]] = []
    features = dict(deriv.features)
    total = 0.0
    ir = 0.0
    for word, c in counts.items():
        tid = index.term_id(word)
        w = weight_of.get(tid, 0.0) if tid is not None else 0.0
        if w != 0.0:
            matched.append((word, c, w))
            total += c * w
            ir += c * w * (v + (delta_of.get(tid, 0.0) if tid is not None else 0.0))
            features[ir_term_feature(word)] = c * w
    if lex is not None:
        for e in edges:
            for f in lex.of_edge(hg.edges[e]):
                features[f] = features.get(f, 0.0) + 1.0
    features[IR_FEATURE] = total
    return DocDerivation(deriv.tokens, tuple(matched), smt, ir, total, features)
