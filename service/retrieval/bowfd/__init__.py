"""Bag-of-words forced decoding (BOW-FD): retrieval by decoding towards each document.

Hieber & Riezler 2015, §3. The score of an English document ``d`` for a source sentence is the score
of the best derivation ``h`` of the sentence's +LM translation forest under the document-dependent
edge weights of equation 4,

    W'(e, d) = w_smt · φ(e) + v · Σ_{t ∈ target terminals of e} bm25(t, d),

i.e. ``score(q, d) = max_h w_smt·Φ_smt(h) + v · BM25(h, d)`` computed by the inside algorithm
in the (max, +) semiring. ``BM25(h, d) = Σ_{t ∈ h} bm25(t, d)`` decomposes over the
*occurrences* of terms in the derivation ("we fire the Okapi bm25 term weight for each
derivation term"): a word that ``h`` produces twice earns its weight twice, and every word an
edge adds earns its weight on that edge. ``v`` is the default IR weight (``w_ir = v·1``,
"Default Retrieval Weights"); the optional sparse LEX features (:mod:`service.retrieval.lex`)
join the document-independent SMT part, and per-term IR weights δ_t ("Decomposable Retrieval
Features") refine ``v`` term by term. Only documents sharing a weighted target word with the
forest are candidates (§3 "Implementation and Complexity Analysis"); the others are not
returned, so a ranking may hold fewer than ``k`` hits.

Two implementations return the same ranking, to the bit: the paper's procedure (one Viterbi
pass over the whole forest per candidate document) and a fast, exact one (the live forest,
a compiled block inside pass over many documents at once, bounds that skip documents which
cannot enter the top k). One module per concern:

* :mod:`.features` — the IR feature names (``IR_BM25``, ``ir:<term>``) and the per-term
  weights δ_t;
* :mod:`.prepare` — a sentence's forest joined with the index: SMT edge weights, beam, the
  live forest, the candidates (:class:`PreparedSentence`), the per-term weights attached;
* :mod:`.reference` — the paper's procedure, the oracle;
* :mod:`.kernels` — the compiled kernels over arrays (and the boards searches share);
* :mod:`.ranking` — the block search, the bounds and one sentence's top ``k``;
* :mod:`.combine` — multi-sentence queries (product of experts, §3);
* :mod:`.derivation` — a document's best derivation (explanations, feature vectors);
* :mod:`.scorer` — :class:`BowFdScorer`, the ``bowfd`` method of the scorer registry.

This package's namespace holds the names the rest of the service uses; :mod:`.reference` (the
slow engine the fast one is tested against) is loaded only when asked for.
"""

from typing import Any

from service.retrieval.bowfd.combine import combine_sentences
from service.retrieval.bowfd.features import (
    IR_FEATURE,
    ir_term_feature,
    is_ir_term_feature,
    term_bonus,
)
from service.retrieval.bowfd.prepare import (
    PreparedForest,
    PreparedSentence,
    TermWeighting,
    join_index,
    prepare_forest,
    prepare_sentence,
    smt_edge_weights,
    with_term_weights,
)
from service.retrieval.bowfd.ranking import (
    SentenceRanking,
    doc_bounds,
    fast_scores,
    rank_sentence,
    reference_bounds,
    top_k_order,
)
from service.retrieval.bowfd.scorer import DEFAULT_PER_SENTENCE_K, BowFdScorer


def __getattr__(name: str) -> Any:
    """:func:`reference_scores`, its module (the tested reference, never loaded by serving)
    imported when first asked for."""
    if name == "reference_scores":
        from service.retrieval.bowfd.reference import reference_scores

        return reference_scores
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "DEFAULT_PER_SENTENCE_K",
    "IR_FEATURE",
    "BowFdScorer",
    "PreparedForest",
    "PreparedSentence",
    "SentenceRanking",
    "TermWeighting",
    "combine_sentences",
    "doc_bounds",
    "fast_scores",
    "ir_term_feature",
    "is_ir_term_feature",
    "join_index",
    "prepare_forest",
    "prepare_sentence",
    "rank_sentence",
    "reference_bounds",
    "reference_scores",
    "smt_edge_weights",
    "term_bonus",
    "top_k_order",
    "with_term_weights",
]
