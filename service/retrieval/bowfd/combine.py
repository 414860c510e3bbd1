"""Multi-sentence queries: the product of experts over sentences (Hieber & Riezler 2015, §3).

Each sentence ranks its top ``K'`` documents; the product of experts multiplies the sentence
scores ``exp(score_s(d))``, i.e. **sums the log scores**; a document missing from sentence
``s``'s list takes the list's minimum score (the paper's smoothing) — or, when the list holds
every candidate of that sentence (fewer than ``K'``), the sentence's SMT Viterbi score, which is
then that document's exact score.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from service.forest.hypergraph import FloatArray
from service.index.inverted import Int32Array
from service.retrieval.bowfd.ranking import SentenceRanking


def combine_sentences(rankings: Sequence[SentenceRanking]) -> tuple[Int32Array, FloatArray]:
    """Product of experts over sentences in the log domain, with minimum-score smoothing.

    ``score(d) = Σ_s score_s(d)`` where a document missing from sentence ``s``'s list takes the
    list's minimum score, or the sentence's SMT Viterbi score when the list is complete (then
    that is the document's exact score). Returns the union of the lists, best first.
    """
    # document numbers keep their dtype (a collection's sequence numbers are int64)
    docs = np.unique(np.concatenate([r.docs for r in rankings]))
    total = np.zeros(len(docs), dtype=np.float64)
    for r in rankings:
        floor = r.viterbi if r.complete or len(r.scores) == 0 else float(r.scores.min())
        col = np.full(len(docs), floor, dtype=np.float64)
        col[np.searchsorted(docs, r.docs)] = r.scores
        total += col
    order = np.lexsort((docs, -total))
    return docs[order], total[order]
