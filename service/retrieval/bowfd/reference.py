"""The BOW-FD reference: the paper's procedure, obviously correct (Hieber & Riezler 2015, §3).

Per candidate document build the document-dependent edge weights W'(·, d) (equation 4) and run
one (max, +) Viterbi pass over the whole forest (:func:`service.forest.inference.viterbi_scores`).
Slow and simple: the oracle that the fast search (:mod:`service.retrieval.bowfd.ranking`) is
tested against, and the ``engine="reference"`` of the scorer.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from service.forest.hypergraph import FloatArray, Hypergraph
from service.forest.inference import viterbi_scores
from service.index.inverted import Int32Array, InvertedIndex
from service.retrieval.bowfd.features import term_deltas


def reference_scores(
    hg: Hypergraph,
    smt: FloatArray,
    index: InvertedIndex,
    v: float,
    weights: Mapping[str, float] | None = None,
) -> tuple[Int32Array, FloatArray]:
    """BOW-FD scores of every candidate document, the paper's way (Hieber & Riezler 2015, §3).

    Candidates are the documents containing a target word of the forest with rsj ≠ 0. For
    each, ``W'(e, d) = smt[e] + v · Σ_{occurrences of t on e} bm25(t, d)`` is built and one
    (max, +) Viterbi pass over the whole forest gives the goal's score. With per-term IR
    weights in ``weights`` (``ir:<t>``: δ_t, not all 0) the bonus is
    ``Σ (v + δ_t)·bm25(t, d)`` instead. Slow and simple: the oracle of the fast version.
    """
    a = hg.arrays()
    word_tid = [index.term_id(w) for w in a.vocabulary]
    # δ as the fast path reads it: only for the words that are weighted index terms
    weighted = [
        w if t is not None and index.rsj[t] != 0 else ""
        for w, t in zip(a.vocabulary, word_tid, strict=True)
    ]
    delta = term_deltas(weighted, weights or {})
    bm25: dict[int, dict[int, float]] = {}  # doc -> forest word -> bm25(word, doc)
    for word, tid in enumerate(word_tid):
        if tid is None:
            continue
        p = index.postings(tid)
        for d, w in zip(p.docs.tolist(), p.weights.tolist(), strict=True):
            bm25.setdefault(d, {})[word] = w
    candidates = index.docs_containing_any(t for t in word_tid if t is not None)
    edge_of_occ = np.repeat(np.arange(a.num_edges), np.diff(a.term_ptr))
    scores = np.empty(len(candidates), dtype=np.float64)
    for i, d in enumerate(candidates.tolist()):
        word_weight = np.zeros(len(a.vocabulary), dtype=np.float64)
        for word, w in bm25[d].items():
            word_weight[word] = w if delta is None else w * (v + float(delta[word]))
        bonus = np.bincount(edge_of_occ, weights=word_weight[a.term_ids], minlength=a.num_edges)
        best, _ = viterbi_scores(hg, smt + (v if delta is None else 1.0) * bonus)
        scores[i] = best[hg.goal]
    return candidates, scores
