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
join the document-independent SMT part.

Sparse IR features ("Decomposable Retrieval Features": the term weights fire *per term*, and
their weights "are interpretable as additional, general term weights"): besides ``IR_BM25``
(Σ_t bm25(t, d), weight ``v``) every English term ``t`` has the feature ``ir:<t>`` whose value
is the bm25 weight its occurrences in ``h`` earn; learning to rank gives it a weight δ_t, so
``t`` earns ``(v + δ_t)·bm25(t, d)`` and a term without a learned weight (an unseen named
entity) keeps the default ``v``. Without ``ir:`` weights the model is the one above.

Candidates (Hieber & Riezler 2015, §3 "Implementation and Complexity Analysis"): only documents that
share at least one target word of non-zero weight (rsj ≠ 0) with some edge of the forest are scored.
Every other document's score is exactly the SMT Viterbi score — a lower bound on every
document's score, carrying no evidence — so such documents are **not returned**: a ranking
may hold fewer than ``k`` hits. (They do take part in the multi-sentence combination, see
below.) Scores are in the log domain (max-plus), ties broken by ascending document number.

Two implementations return the same ranking:

* :func:`reference_scores` — the paper's procedure, obviously correct: per candidate document
  build W'(·, d) and run one Viterbi pass over the whole forest.
* :func:`rank_sentence` — fast and exact (bench/bench_bowfd.py records the measurements):
  1. the forest is cut to its *live* part (:class:`LiveForest`): nodes and edges on no
     derivation of the goal never change a goal score (the decoders already drop the +LM
     nodes cube pruning leaves unreachable, :func:`service.forest.hypergraph.prune_unreachable`;
     the cut still matters after ``beam`` pruning and for forests from elsewhere);
  2. documents are scored in blocks by one compiled (max, +) inside pass over the live forest
     with the documents as the innermost, vectorised loop (:func:`_block_kernel`), with the
     reference's arithmetic in the reference's order, so scores are identical to the bit;
  3. with v ≥ 0 (all bonuses ≥ 0) bounds skip documents that cannot enter the top k
     (:func:`doc_bounds`): lower bound = the best SMT derivation producing one of the
     document's terms plus that term's bonus; upper bound = max over the document's terms
     t_i, ordered by the best SMT score g_i of a derivation producing them, of
     g_i + v·Σ_{j≤i} max_count_j·bm25(t_j, d). Documents are scored by descending upper bound
     until it falls below the k-th best score known (about 1–2k of 16k candidates for k=1000).
  A per-document incremental pass (recomputing only nodes above activated edges, from a heap)
  was measured too: its branchy, random-access inner loop was 20× slower than the block pass.

Multi-sentence queries (Hieber & Riezler 2015, §3): each sentence ranks its top ``K'`` documents;
the product of experts multiplies the sentence scores ``exp(score_s(d))``, i.e. **sums the log
scores**; a document missing from sentence ``s``'s list takes the list's minimum score (the paper's
smoothing) — or, when the list holds every candidate of that sentence (fewer than ``K'``), the
sentence's SMT Viterbi score, which is then that document's exact score.

Beam (Hieber & Riezler 2015, §3, approximate decoding): ``beam=b`` keeps at every node the ``b``
incoming edges with the best SMT value ``w(e) + Σ inside(tails)`` (the max is "discontinued once the
number of considered incoming edges exceeds the size of the beam") and scores on that pruned forest.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from service.errors import ConfigurationError, InternalError, InvalidInputError
from service.forest.hypergraph import FloatArray, Hyperedge, Hypergraph, HypergraphBuilder, IntArray
from service.forest.inference import tree_from_backpointers, viterbi_scores
from service.index.inverted import InvertedIndex
from service.jit import compiled
from service.mt.bundle import ModelBundle
from service.retrieval.base import DecodedQuery, Hit, Ranking, Relation, Scorer, register
from service.retrieval.lex import LexFeatures, is_lex_feature

Int32Array = NDArray[np.int32]

IR_FEATURE = "IR_BM25"  # Σ_{t ∈ h} bm25(t, d): the feature whose weight is v
IR_TERM_PREFIX = "ir:"  # ir:<term>: bm25(term, d) per occurrence in h; weight δ_term (added to v)


def term_bonus(
    bm25: FloatArray, terms: NDArray[np.integer[Any]], v: float, delta: FloatArray | None
) -> tuple[FloatArray, float]:
    """What an edge's bonus sums, and the factor it is scaled by: ``(bm25, v)``, or with
    per-term weights ``delta`` (indexed by ``terms``) ``(bm25·(v + δ_t), 1)``. One rule for
    the fast search, explanations and learning to rank, so their arithmetic is identical."""
    if delta is None:
        return bm25, v
    return bm25 * (v + delta[terms]), 1.0


def ir_term_feature(term: str) -> str:
    """The name of the sparse IR feature of the English term ``term``."""
    return IR_TERM_PREFIX + term


def is_ir_term_feature(name: str) -> bool:
    """True for the names of the per-term IR features (``ir:<term>``)."""
    return name.startswith(IR_TERM_PREFIX)


DEFAULT_PER_SENTENCE_K = 1000


# --- forest preparation -----------------------------------------------------------------------
def smt_edge_weights(
    hg: Hypergraph,
    weights: Mapping[str, float],
    lex: LexFeatures | None = None,
    lex_weights: Mapping[str, float] | None = None,
) -> FloatArray:
    """``w_smt · φ(e)`` for every edge, plus the weighted LEX features when given."""
    w = hg.edge_weights(weights)
    if lex_weights:
        if lex is None:
            raise ConfigurationError(
                "LEX feature weights were given but no grammar to read rule alignments from; "
                "build the BOW-FD scorer with the model bundle"
            )
        w = w + lex.edge_weights(hg, lex_weights)
    return np.asarray(w, dtype=np.float64)


def beam_prune(hg: Hypergraph, smt: FloatArray, beam: int) -> tuple[Hypergraph, IntArray]:
    """The forest with, at every node, only the ``beam`` incoming edges of best SMT value.

    An edge's value is ``w(e) + Σ inside(tails)`` (its best derivation's SMT score); ties keep
    the earlier edge. Returns the pruned forest (same nodes, kept edges in their original
    order, renumbered) and the original ids of the kept edges.
    """
    if beam < 1:
        raise InvalidInputError(f"beam must be at least 1, got {beam}")
    inside, _ = viterbi_scores(hg, smt)
    a = hg.arrays()
    value = smt.copy()
    edge_of_tail = np.repeat(np.arange(a.num_edges), np.diff(a.tail_ptr))
    np.add.at(value, edge_of_tail, inside[a.tail_nodes])
    # rank the incoming edges of every node by value (descending; ties: earlier edge first)
    by_node = np.lexsort((np.arange(a.num_edges), -value, a.edge_head))
    group_start = a.in_ptr[a.edge_head[by_node]]
    keep = np.zeros(a.num_edges, dtype=np.bool_)
    keep[by_node] = np.arange(a.num_edges) - group_start < beam
    kept = np.flatnonzero(keep).astype(np.int64)
    if len(kept) == a.num_edges:
        return hg, kept
    edges = [
        Hyperedge(i, e.head, e.tails, e.target, e.features, e.span, e.rule_id)
        for i, e in enumerate(hg.edges[j] for j in kept.tolist())
    ]
    return Hypergraph(hg.nodes, edges, hg.goal), kept


@dataclass(frozen=True, eq=False)
class LiveForest:
    """The part of a forest on some derivation of the goal, renumbered, as flat arrays.

    Nodes and edges whose best SMT score through them is −∞ (not reachable from the goal, or
    without a derivation) never change a goal score, whatever the document (cube pruning
    leaves many, which the decoders drop before handing the forest on; beam pruning makes
    more). Ids keep their
    order (nodes stay topological, incoming edges keep their order); ``nodes``/``edges`` map
    back to the forest's ids. ``occ_term`` is the local term of each target word occurrence
    (see :class:`PreparedSentence`); ``parents[parent_ptr[v]:parent_ptr[v+1]]`` the heads of the
    edges with ``v`` as a tail; ``outside`` the SMT Viterbi outside scores,
    ``edge_through[e]``/``node_through[v]`` the best SMT score of a derivation through them.
    """

    goal: int
    nodes: IntArray
    edges: IntArray
    in_ptr: IntArray
    in_edges: IntArray
    tail_ptr: IntArray
    tail_nodes: IntArray
    edge_head: IntArray
    occ_ptr: IntArray
    occ_term: IntArray
    smt: FloatArray
    inside: FloatArray
    outside: FloatArray
    edge_through: FloatArray
    node_through: FloatArray
    parent_ptr: IntArray
    parents: IntArray


@dataclass(frozen=True, eq=False)
class PreparedSentence:
    """One sentence's forest joined with the index: everything a document's score needs.

    Local terms ``0..T-1`` are the forest's target words that are index terms with rsj ≠ 0
    (``terms`` holds their index term ids), numbered by descending ``best_through`` — the best
    SMT score of a derivation producing the term — so each document's terms, stored in
    ascending local id, come in that order; ``word_local`` maps the forest's vocabulary to
    local terms (``T``: no weight). ``max_count[t]`` is the most times one derivation can
    produce ``t``; ``term_edges[term_edge_ptr[t]:term_edge_ptr[t+1]]`` are the live edges
    carrying ``t``. ``docs`` are the candidate documents (ascending), each with its local
    terms and bm25 weights in ``doc_terms``/``doc_weights[doc_ptr[i]:doc_ptr[i+1]]``.
    ``hypergraph`` and ``smt`` are the (beam-pruned) forest and its SMT edge weights.
    ``term_delta`` holds the per-term IR weights δ_t (term ``t`` earns ``(v + δ_t)·bm25``) or
    is None when every δ_t is 0 (see :func:`with_term_weights`).
    """

    hypergraph: Hypergraph
    smt: FloatArray
    viterbi: float
    live: LiveForest
    word_local: IntArray
    terms: IntArray
    best_through: FloatArray
    max_count: FloatArray
    term_edge_ptr: IntArray
    term_edges: IntArray
    docs: Int32Array
    doc_ptr: IntArray
    doc_terms: IntArray
    doc_weights: FloatArray
    kept_edges: IntArray | None = None  # original edge ids when beam-pruned
    term_delta: FloatArray | None = None  # δ_t per local term (None: all 0)

    @property
    def num_terms(self) -> int:
        return len(self.terms)

    def ir_rows(self, v: float) -> tuple[FloatArray, float]:
        """The candidates' rows under :func:`term_bonus`: the bonus of an edge for a document
        is ``factor · Σ_{occurrences} row weight``."""
        return term_bonus(self.doc_weights, self.doc_terms, v, self.term_delta)

    def doc_row(self, docno: int) -> tuple[IntArray, FloatArray]:
        """The local terms and bm25 weights of ``docno`` (empty if it is no candidate)."""
        i = int(np.searchsorted(self.docs, docno))
        if i == len(self.docs) or int(self.docs[i]) != docno:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
        lo, hi = int(self.doc_ptr[i]), int(self.doc_ptr[i + 1])
        return self.doc_terms[lo:hi], self.doc_weights[lo:hi]

    def doc_edge_weights(self, docno: int, v: float) -> FloatArray:
        """``W'(e, d)`` for every edge of ``hypergraph`` (equation 4)."""
        a = self.hypergraph.arrays()
        terms, bm25 = self.doc_row(docno)
        weights, v = term_bonus(bm25, terms, v, self.term_delta)
        docw = np.zeros(self.num_terms + 1, dtype=np.float64)
        docw[terms] = weights
        edge_of_occ = np.repeat(np.arange(a.num_edges), np.diff(a.term_ptr))
        occ = self.word_local[a.term_ids] if len(a.term_ids) else a.term_ids
        bonus = np.bincount(edge_of_occ, weights=docw[occ], minlength=a.num_edges)
        return self.smt + v * bonus


def _csr(keys: IntArray, values: IntArray, n: int) -> tuple[IntArray, IntArray]:
    """CSR rows ``0..n-1`` from (row, value) pairs, duplicates removed, values ascending."""
    if len(keys) == 0:
        return np.zeros(n + 1, dtype=np.int64), np.zeros(0, dtype=np.int64)
    width = int(values.max()) + 1
    pairs = np.unique(keys * width + values)
    rows, vals = pairs // width, pairs % width
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=n), out=ptr[1:])
    return ptr, vals.astype(np.int64)


def _segments(lengths: IntArray) -> IntArray:
    ptr = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=ptr[1:])
    return ptr


def _gather(ptr: IntArray, values: IntArray, rows: IntArray) -> tuple[IntArray, IntArray]:
    """The CSR sub-matrix of ``rows`` (in the given order)."""
    lengths = (ptr[rows + 1] - ptr[rows]).astype(np.int64)
    new_ptr = _segments(lengths)
    idx = np.repeat(ptr[rows] - new_ptr[:-1], lengths) + np.arange(int(new_ptr[-1]))
    return new_ptr, values[idx]


def live_forest(hg: Hypergraph, smt: FloatArray, word_local: IntArray) -> LiveForest:
    """The live part of ``hg`` under ``smt`` (see :class:`LiveForest`)."""
    a = hg.arrays()
    inside, _ = viterbi_scores(hg, smt)
    outside = np.empty(a.num_nodes, dtype=np.float64)
    through = np.empty(a.num_edges, dtype=np.float64)
    _kernel("outside")(
        a.in_ptr, a.in_edges, a.tail_ptr, a.tail_nodes, smt, inside, a.goal, outside, through
    )
    if inside[a.goal] == -np.inf:
        raise InternalError(
            f"the forest has no derivation of its goal node {a.goal}: nothing to score"
        )
    node_through = inside + outside
    edges = np.flatnonzero(np.isfinite(through)).astype(np.int64)
    nodes = np.flatnonzero(np.isfinite(node_through)).astype(np.int64)
    node_new = np.full(a.num_nodes, -1, dtype=np.int64)
    node_new[nodes] = np.arange(len(nodes))
    edge_new = np.full(a.num_edges, -1, dtype=np.int64)
    edge_new[edges] = np.arange(len(edges))
    head = node_new[a.edge_head[edges]]
    in_ptr = _segments(np.bincount(head, minlength=len(nodes)))
    in_edges = np.argsort(head, kind="stable").astype(np.int64)  # live ids, original order
    tail_ptr, tails = _gather(a.tail_ptr, a.tail_nodes, edges)
    tail_nodes = node_new[tails]
    occ_ptr, occ_words = _gather(a.term_ptr, a.term_ids, edges)
    occ_term = word_local[occ_words] if len(occ_words) else occ_words
    edge_of_tail = np.repeat(np.arange(len(edges), dtype=np.int64), np.diff(tail_ptr))
    parent_ptr, parents = _csr(tail_nodes, head[edge_of_tail], len(nodes))
    goal = int(node_new[a.goal])
    return LiveForest(
        goal=goal,
        nodes=nodes,
        edges=edges,
        in_ptr=in_ptr,
        in_edges=in_edges,
        tail_ptr=tail_ptr,
        tail_nodes=np.ascontiguousarray(tail_nodes),
        edge_head=np.ascontiguousarray(head),
        occ_ptr=occ_ptr,
        occ_term=np.ascontiguousarray(occ_term, dtype=np.int64),
        smt=np.ascontiguousarray(smt[edges]),
        inside=np.ascontiguousarray(inside[nodes]),
        outside=np.ascontiguousarray(outside[nodes]),
        edge_through=np.ascontiguousarray(through[edges]),
        node_through=np.ascontiguousarray(node_through[nodes]),
        parent_ptr=parent_ptr,
        parents=parents,
    )


def _candidates(
    index: InvertedIndex, term_ids: IntArray
) -> tuple[Int32Array, IntArray, IntArray, FloatArray]:
    """The documents containing any of the terms, each with its (local term, bm25) pairs in
    ascending local term order: the union of the postings, grouped by a counting sort."""
    n = len(term_ids)
    if n == 0:
        return (np.zeros(0, dtype=np.int32), np.zeros(1, dtype=np.int64),
                np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64))  # fmt: skip
    postings = [index.postings(int(t)) for t in term_ids]
    all_docs = np.concatenate([p.docs for p in postings])
    all_w = np.concatenate([p.weights for p in postings]).astype(np.float64)
    lengths = np.array([len(p.docs) for p in postings], dtype=np.int64)
    all_terms = np.repeat(np.arange(n, dtype=np.int64), lengths)
    counts = np.bincount(all_docs, minlength=index.n_docs)
    docs = np.flatnonzero(counts).astype(np.int32)
    doc_ptr = _segments(counts[docs].astype(np.int64))
    slot = np.zeros(index.n_docs, dtype=np.int64)
    slot[docs] = doc_ptr[:-1]
    doc_terms = np.empty(len(all_docs), dtype=np.int64)
    doc_weights = np.empty(len(all_docs), dtype=np.float64)
    _kernel("scatter")(all_docs, all_terms, all_w, slot, doc_terms, doc_weights)
    return docs, doc_ptr, doc_terms, doc_weights


def _scatter_kernel(
    all_docs: Int32Array,
    all_terms: IntArray,
    all_w: FloatArray,
    slot: IntArray,
    doc_terms: IntArray,
    doc_weights: FloatArray,
) -> None:  # pragma: no cover - compiled by numba
    """Stable counting-sort scatter of postings into per-document rows."""
    for i in range(all_docs.shape[0]):
        d = all_docs[i]
        j = slot[d]
        doc_terms[j] = all_terms[i]
        doc_weights[j] = all_w[i]
        slot[d] = j + 1


def prepare_sentence(
    hg: Hypergraph, smt: FloatArray, index: InvertedIndex, beam: int | None = None
) -> PreparedSentence:
    """Join a forest with the index: local terms, live forest, bounds and candidates."""
    kept: IntArray | None = None
    if beam is not None:
        hg, kept = beam_prune(hg, smt, beam)
        if len(kept) == len(smt):
            kept = None
        else:
            smt = smt[kept]
    smt = np.require(smt, dtype=np.float64, requirements=["C", "W"])
    a = hg.arrays()
    # local terms: the forest's words that are index terms of non-zero weight
    word_tid = np.full(len(a.vocabulary), -1, dtype=np.int64)
    for i, word in enumerate(a.vocabulary):
        tid = index.term_id(word)
        if tid is not None and index.rsj[tid] != 0:
            word_tid[i] = tid
    weighted_words = np.flatnonzero(word_tid >= 0)
    n_terms = len(weighted_words)
    first = np.full(len(a.vocabulary), n_terms, dtype=np.int64)
    first[weighted_words] = np.arange(n_terms)
    live0 = live_forest(hg, smt, first)
    # number the terms by descending best_through (ties: first seen); dead terms: −∞
    best0 = np.full(n_terms, -np.inf)
    edge_of_occ = np.repeat(np.arange(len(live0.edges), dtype=np.int64), np.diff(live0.occ_ptr))
    hit = live0.occ_term < n_terms
    np.maximum.at(best0, live0.occ_term[hit], live0.edge_through[edge_of_occ[hit]])
    order = np.argsort(-best0, kind="stable")
    renumber = np.empty(n_terms + 1, dtype=np.int64)
    renumber[order] = np.arange(n_terms)
    renumber[n_terms] = n_terms
    word_local = renumber[first]
    live = replace(live0, occ_term=np.ascontiguousarray(renumber[live0.occ_term]))
    term_ids = word_tid[weighted_words][order]
    best_through = np.ascontiguousarray(best0[order])
    hit = live.occ_term < n_terms
    term_edge_ptr, term_edges = _csr(live.occ_term[hit], edge_of_occ[hit], n_terms)
    max_count = np.zeros(n_terms, dtype=np.float64)
    if n_terms and len(live.edges):
        _kernel("max_count")(
            live.in_ptr, live.in_edges, live.tail_ptr, live.tail_nodes, live.occ_ptr,
            live.occ_term, live.goal, max_count,
        )  # fmt: skip
    docs, doc_ptr, doc_terms, doc_weights = _candidates(index, term_ids)
    return PreparedSentence(
        hypergraph=hg,
        smt=smt,
        viterbi=float(live.inside[live.goal]),
        live=live,
        word_local=word_local,
        terms=term_ids.astype(np.int64),
        best_through=best_through,
        max_count=max_count,
        term_edge_ptr=term_edge_ptr,
        term_edges=term_edges,
        docs=docs.astype(np.int32),
        doc_ptr=doc_ptr,
        doc_terms=doc_terms,
        doc_weights=doc_weights,
        kept_edges=kept,
    )


def term_deltas(terms: Sequence[str], weights: Mapping[str, float]) -> FloatArray | None:
    """δ_t of each term (its ``ir:<t>`` weight, 0 if none), or None if all are 0."""
    delta = np.array([float(weights.get(IR_TERM_PREFIX + t, 0.0)) for t in terms])
    if not np.all(np.isfinite(delta)):
        bad = [t for t, x in zip(terms, delta.tolist(), strict=True) if not math.isfinite(x)]
        raise ConfigurationError(f"per-term IR weights must be finite; not for {bad[:5]}")
    return delta if np.any(delta != 0.0) else None


def with_term_weights(
    prep: PreparedSentence, index: InvertedIndex, weights: Mapping[str, float]
) -> PreparedSentence:
    """``prep`` with the per-term IR weights (``ir:<term>``) of ``weights`` attached
    (``weights`` may hold other features too; an empty map reads no term names)."""
    if not weights and prep.term_delta is None:
        return prep
    delta = term_deltas([index.term(int(t)) for t in prep.terms.tolist()], weights)
    return prep if delta is None and prep.term_delta is None else replace(prep, term_delta=delta)


# --- the reference: one Viterbi pass over the whole forest per candidate document ------------
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


# --- the fast version: compiled kernels -------------------------------------------------------
def _outside_kernel(
    in_ptr: IntArray,
    in_edges: IntArray,
    tail_ptr: IntArray,
    tail_nodes: IntArray,
    w: FloatArray,
    inside: FloatArray,
    goal: int,
    outside: FloatArray,
    edge_through: FloatArray,
) -> None:  # pragma: no cover - compiled by numba
    """Max-plus outside scores and, per edge, the best score of a derivation using it."""
    outside[:] = -np.inf
    outside[goal] = 0.0
    for x in range(inside.shape[0] - 1, -1, -1):
        for p in range(in_ptr[x], in_ptr[x + 1]):
            e = in_edges[p]
            through = outside[x] + w[e]
            for q in range(tail_ptr[e], tail_ptr[e + 1]):
                through += inside[tail_nodes[q]]
            edge_through[e] = through
            if through == -np.inf:
                continue
            for q in range(tail_ptr[e], tail_ptr[e + 1]):
                u = tail_nodes[q]
                s = through - inside[u]  # siblings' inside + W(e) + outside(head)
                if s > outside[u]:
                    outside[u] = s


def _max_count_kernel(
    in_ptr: IntArray,
    in_edges: IntArray,
    tail_ptr: IntArray,
    tail_nodes: IntArray,
    occ_ptr: IntArray,
    occ_term: IntArray,
    goal: int,
    out: FloatArray,
) -> None:  # pragma: no cover - compiled by numba
    """Per term, the most occurrences of it in one derivation of the goal ((max, +) counts
    over a live forest, where every node has a derivation)."""
    n_terms = out.shape[0]
    num_nodes = in_ptr.shape[0] - 1
    best = np.zeros((num_nodes, n_terms), dtype=np.int32)
    tmp = np.zeros(n_terms, dtype=np.int32)
    for x in range(num_nodes):
        row = best[x]
        for p in range(in_ptr[x], in_ptr[x + 1]):
            e = in_edges[p]
            tmp[:] = 0
            for q in range(tail_ptr[e], tail_ptr[e + 1]):
                tmp += best[tail_nodes[q]]
            for o in range(occ_ptr[e], occ_ptr[e + 1]):
                t = occ_term[o]
                if t < n_terms:
                    tmp[t] += 1
            for t in range(n_terms):
                if tmp[t] > row[t]:
                    row[t] = tmp[t]
    for t in range(n_terms):
        out[t] = best[goal, t]


def _block_kernel(
    in_ptr: IntArray,
    in_edges: IntArray,
    tail_ptr: IntArray,
    tail_nodes: IntArray,
    occ_ptr: IntArray,
    occ_term: IntArray,
    term_edge_ptr: IntArray,
    term_edges: IntArray,
    w: FloatArray,
    goal: int,
    doc_ptr: IntArray,
    doc_terms: IntArray,
    doc_weights: FloatArray,
    v: float,
    order: IntArray,
    block: int,
    bounded: bool,
    upper: FloatArray,
    theta0: float,
    k: int,
    eps: float,
    out: FloatArray,
) -> int:  # pragma: no cover - compiled by numba
    """BOW-FD scores of the candidates ``order[0], order[1], …`` in blocks of ``block``
    documents; returns how many it scored (``out[i]`` is the score of ``order[i]``).

    Per block: W'(e, d) for every live edge and document of the block — the SMT weight, plus
    v·Σ bm25 over the edge's target words on the edges the document's terms activate, summed
    in word order as the reference does — then one (max, +) inside pass over the live forest
    with the block's documents as the innermost (vectorised) loop. The arithmetic is the
    reference's, in the same order, so the scores are identical.

    ``bounded``: ``order`` is by descending upper bound ``upper``; θ, a lower bound on the k-th
    best score, is the larger of ``theta0`` and the k-th best score found so far; scoring stops
    at the first document whose upper bound is below θ (it and all after it cannot enter the
    top k).
    """
    num_nodes = in_ptr.shape[0] - 1
    num_edges = w.shape[0]
    n_terms = term_edge_ptr.shape[0] - 1
    wp = np.empty((num_edges, block), dtype=np.float64)
    best = np.empty((num_nodes, block), dtype=np.float64)
    tmp = np.empty(block, dtype=np.float64)
    docw = np.zeros(n_terms + 1, dtype=np.float64)
    stamp = np.zeros(num_edges, dtype=np.int64)
    topk = np.zeros(max(k, 1), dtype=np.float64)  # min-heap of the best scores found
    n_top = 0
    theta = theta0
    n = order.shape[0]
    start = 0
    while start < n:
        stop = min(start + block, n)
        if bounded:
            if n_top == k and topk[0] > theta:
                theta = topk[0]
            j = start
            while j < stop and upper[order[j]] >= theta - eps:
                j += 1
            stop = j
            if stop == start:
                break
        nb = stop - start
        for e in range(num_edges):
            for b in range(nb):
                wp[e, b] = w[e]
        for b in range(nb):
            d = order[start + b]
            mark = start + b + 1
            for p in range(doc_ptr[d], doc_ptr[d + 1]):
                docw[doc_terms[p]] = doc_weights[p]
            for p in range(doc_ptr[d], doc_ptr[d + 1]):
                t = doc_terms[p]
                for q in range(term_edge_ptr[t], term_edge_ptr[t + 1]):
                    e = term_edges[q]
                    if stamp[e] == mark:
                        continue
                    stamp[e] = mark
                    s = 0.0
                    for o in range(occ_ptr[e], occ_ptr[e + 1]):
                        s += docw[occ_term[o]]
                    wp[e, b] = w[e] + v * s
            for p in range(doc_ptr[d], doc_ptr[d + 1]):
                docw[doc_terms[p]] = 0.0
        for x in range(num_nodes):
            row = best[x]
            for b in range(nb):
                row[b] = -np.inf
            for p in range(in_ptr[x], in_ptr[x + 1]):
                e = in_edges[p]
                for b in range(nb):
                    tmp[b] = wp[e, b]
                for q in range(tail_ptr[e], tail_ptr[e + 1]):
                    tail = best[tail_nodes[q]]
                    for b in range(nb):
                        tmp[b] += tail[b]
                for b in range(nb):
                    if tmp[b] > row[b]:
                        row[b] = tmp[b]
        for b in range(nb):
            score = best[goal, b]
            out[start + b] = score
            if not bounded or k == 0:
                continue
            if n_top < k:  # keep the k best scores in a min-heap
                j = n_top
                n_top += 1
                while j > 0:
                    up = (j - 1) // 2
                    if topk[up] <= score:
                        break
                    topk[j] = topk[up]
                    j = up
                topk[j] = score
            elif score > topk[0]:
                j = 0
                while True:
                    c = 2 * j + 1
                    if c >= k:
                        break
                    if c + 1 < k and topk[c + 1] < topk[c]:
                        c += 1
                    if topk[c] >= score:
                        break
                    topk[j] = topk[c]
                    j = c
                topk[j] = score
        start = stop
    return start


_PY_KERNELS: dict[str, Any] = {
    "outside": _outside_kernel,
    "max_count": _max_count_kernel,
    "block": _block_kernel,
    "scatter": _scatter_kernel,
}


def _kernel(name: str) -> Any:
    """The kernel ``name`` compiled by numba (lazily; cached on disk)."""
    return compiled(_PY_KERNELS[name])


DEFAULT_BLOCK = 32  # documents per inside pass (bench/bench_bowfd.py)
_EPS = 1e-9  # relative safety margin of the bound comparisons (rounding)


def _run(
    prep: PreparedSentence,
    v: float,
    order: IntArray,
    *,
    upper: FloatArray | None = None,
    theta0: float = -np.inf,
    k: int = 0,
    block: int = DEFAULT_BLOCK,
) -> tuple[FloatArray, int]:
    f = prep.live
    order = np.ascontiguousarray(order, dtype=np.int64)
    out = np.empty(len(order), dtype=np.float64)
    bounded = upper is not None
    ub = upper if upper is not None else np.zeros(len(prep.docs), dtype=np.float64)
    eps = _EPS * (1.0 + abs(prep.viterbi))
    rows, factor = prep.ir_rows(v)
    scored = _kernel("block")(
        f.in_ptr, f.in_edges, f.tail_ptr, f.tail_nodes, f.occ_ptr, f.occ_term,
        prep.term_edge_ptr, prep.term_edges, f.smt, f.goal,
        prep.doc_ptr, prep.doc_terms, rows, float(factor), order, int(block), bounded,
        ub, float(theta0), int(k), eps, out,
    )  # fmt: skip
    return out, int(scored)


def fast_scores(
    prep: PreparedSentence, v: float, which: IntArray | None = None, block: int = DEFAULT_BLOCK
) -> FloatArray:
    """Exact scores of the candidates ``prep.docs[which]`` (default: all), without pruning;
    equal to :func:`reference_scores`."""
    if which is None:
        which = np.arange(len(prep.docs), dtype=np.int64)
    return _run(prep, v, which, block=block)[0]


def doc_bounds(prep: PreparedSentence, v: float) -> tuple[FloatArray, FloatArray]:
    """Lower and upper bounds of every candidate's score (valid when every term's bonus —
    v·bm25, or (v + δ_t)·bm25 with per-term weights — is ≥ 0).

    Lower: max(Viterbi, max_t g_t + v·bm25(t, d)) — the best derivation producing t earns at
    least t's weight. Upper: max(Viterbi, max_i g_i + C_i) with terms by descending g and
    C_i = v·Σ_{j≤i} max_count_j·bm25(t_j, d) — a derivation whose last term (in that order)
    is t_i scores at most g_i in SMT and C_i in bonus.
    """
    n = len(prep.docs)
    vit = prep.viterbi
    if n == 0:
        return np.zeros(0), np.zeros(0)
    g = prep.best_through[prep.doc_terms]
    starts = prep.doc_ptr[:-1]
    rows, v = prep.ir_rows(v)
    lower = np.maximum(np.maximum.reduceat(g + v * rows, starts), vit)
    bonus = v * prep.max_count[prep.doc_terms] * rows
    csum = np.cumsum(bonus)
    before = np.concatenate([[0.0], csum])[starts]
    seg = csum - np.repeat(before, np.diff(prep.doc_ptr))
    upper = np.maximum(np.maximum.reduceat(g + seg, starts), vit)
    return lower, upper


def top_k_order(docs: Int32Array, scores: FloatArray, k: int) -> IntArray:
    """Positions of the ``k`` best (score descending, document number ascending)."""
    order = np.lexsort((docs, -scores))
    return order[:k].astype(np.int64)


@dataclass(frozen=True)
class SentenceRanking:
    """One sentence's top list (best first) with its SMT Viterbi score and diagnostics."""

    docs: Int32Array
    scores: FloatArray
    viterbi: float
    complete: bool  # True if the list holds every candidate (fewer than k)
    info: dict[str, Any]


def rank_sentence(
    prep: PreparedSentence, v: float, k: int, *, bounds: bool = True, block: int = DEFAULT_BLOCK
) -> SentenceRanking:
    """The top ``k`` candidates of one sentence by BOW-FD score (fast and exact).

    With ``bounds`` (used when every term bonus is ≥ 0, so that W' ≥ W) the
    candidates are scored by descending upper bound (:func:`doc_bounds`) until the bound falls
    below θ, the larger of the k-th best lower bound and the k-th best score found so far:
    no document left can enter the top k. Otherwise every candidate is scored.
    """
    t0 = time.perf_counter()
    n = len(prep.docs)
    rows, factor = prep.ir_rows(v)
    use_bounds = bounds and factor >= 0 and n > k and bool(np.all(rows >= 0))
    if use_bounds:
        lower, upper = doc_bounds(prep, v)
        theta0 = float(np.partition(lower, n - k)[n - k])
        order = np.argsort(-upper, kind="stable")
        out, scored = _run(prep, v, order, upper=upper, theta0=theta0, k=k, block=block)
        cand, scores = order[:scored], out[:scored]
    else:
        cand = np.arange(n, dtype=np.int64)
        scores, scored = _run(prep, v, cand, block=block)
    docs = prep.docs[cand]
    pos = top_k_order(docs, scores, k)
    info = {
        "candidates": n,
        "scored": scored,
        "bounds": use_bounds,
        "live_edges": len(prep.live.edges),
        "seconds": time.perf_counter() - t0,
    }
    return SentenceRanking(docs[pos], scores[pos], prep.viterbi, n <= k, info)


def warm_up() -> float:
    """Compile (or load from numba's on-disk cache) every kernel on a tiny forest and index,
    to keep that cost (about 1 s; several the first time ever) off the request path.
    Returns the seconds it took."""
    from service.index.build import build_in_memory
    from service.records import Doc

    t0 = time.perf_counter()
    docs = [Doc("w0", "", "a"), Doc("w1", "", "b"), Doc("w2", "", "c")]
    index = build_in_memory(docs, str.split)
    builder = HypergraphBuilder()
    x = builder.add_node("X", (0, 1))
    builder.add_edge(x, [], ["a"], {"f": 1.0})
    builder.add_edge(x, [], ["b", "a"], {"f": 0.5})
    hg = builder.build(x)
    prep = prepare_sentence(hg, hg.edge_weights({"f": 1.0}), index)
    rank_sentence(prep, 1.0, 1)
    return time.perf_counter() - t0


# --- multi-sentence combination -----------------------------------------------------------------
def combine_sentences(rankings: Sequence[SentenceRanking]) -> tuple[Int32Array, FloatArray]:
    """Product of experts over sentences in the log domain, with minimum-score smoothing.

    ``score(d) = Σ_s score_s(d)`` where a document missing from sentence ``s``'s list takes the
    list's minimum score, or the sentence's SMT Viterbi score when the list is complete (then
    that is the document's exact score). Returns the union of the lists, best first.
    """
    docs = np.unique(np.concatenate([r.docs for r in rankings])).astype(np.int32)
    total = np.zeros(len(docs), dtype=np.float64)
    for r in rankings:
        floor = r.viterbi if r.complete or len(r.scores) == 0 else float(r.scores.min())
        col = np.full(len(docs), floor, dtype=np.float64)
        col[np.searchsorted(docs, r.docs)] = r.scores
        total += col
    order = np.lexsort((docs, -total))
    return docs[order], total[order]


# --- explanations and feature vectors -----------------------------------------------------------
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

    def to_json(self) -> dict[str, Any]:
        return {
            "translation": " ".join(self.tokens),
            "matched": [{"term": t, "count": c, "bm25": w} for t, c, w in self.matched],
            "smt": self.smt,
            "ir": self.ir,
            "score": self.score,
        }


def best_derivation(
    prep: PreparedSentence,
    docno: int,
    v: float,
    index: InvertedIndex,
    lex: LexFeatures | None = None,
) -> DocDerivation:
    """The best derivation of the sentence for ``docno`` under W'(·, d), with its parts."""
    hg = prep.hypergraph
    wp = prep.doc_edge_weights(docno, v)
    _, back = viterbi_scores(hg, wp)
    tree = tree_from_backpointers(hg, back)
    deriv = hg.derivation(tree, 0.0)
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


# --- the scorer ---------------------------------------------------------------------------------
@register("bowfd")
class BowFdScorer(Scorer):
    """Bag-of-words forced decoding (Hieber & Riezler 2015, §3) over one index.

    Parameters: ``v`` the default IR weight (≥ 0 lets the search prune with bounds),
    ``beam`` incoming edges kept per node (None: exact), ``per_sentence_k`` the depth ``K'`` of
    each sentence's list in multi-sentence queries (None: ``max(k, 1000)``), ``lex_weights``
    weights of LEX features (merged over any in the query's weight vector; they need the
    ``bundle``, whose grammar holds the rules' word alignments), ``engine`` ``"fast"`` or
    ``"reference"`` (same numbers).
    """

    def __init__(
        self,
        index: InvertedIndex,
        *,
        v: float = 1.0,
        beam: int | None = None,
        per_sentence_k: int | None = None,
        lex_weights: Mapping[str, float] | None = None,
        engine: str = "fast",
        bundle: ModelBundle | None = None,
    ) -> None:
        if not math.isfinite(v):
            raise ConfigurationError(f"BOW-FD weight v must be a finite number, got {v!r}")
        if beam is not None and beam < 1:
            raise ConfigurationError(f"BOW-FD beam must be at least 1 (or None), got {beam}")
        if per_sentence_k is not None and per_sentence_k < 1:
            raise ConfigurationError(f"per_sentence_k must be at least 1, got {per_sentence_k}")
        if engine not in ("fast", "reference"):
            raise ConfigurationError(f"BOW-FD engine must be 'fast' or 'reference', not {engine!r}")
        lex_w = dict(lex_weights or {})
        bad = [n for n in lex_w if not is_lex_feature(n)]
        if bad:
            raise ConfigurationError(
                f"lex_weights must name LEX features (lex:/ins:/del:); got {bad[:5]}"
            )
        super().__init__(index, bundle=bundle, v=float(v), beam=beam, per_sentence_k=per_sentence_k)
        self.v = float(v)
        self.beam = beam
        self.per_sentence_k = per_sentence_k
        self.lex_weights = lex_w
        self.lex = LexFeatures(bundle.grammar) if bundle is not None else None
        self.engine = engine

    def signature_parts(self) -> dict[str, Any]:
        parts: dict[str, Any] = {
            "v": self.v,
            "beam": self.beam if self.beam is not None else "exact",
            "sentence_k": self.per_sentence_k if self.per_sentence_k is not None else "auto",
        }
        if self.lex_weights:
            blob = repr(sorted(self.lex_weights.items())).encode()
            parts["lex"] = hashlib.sha256(blob).hexdigest()[:10]
        return parts

    def v_for(self, weights: Mapping[str, float]) -> float:
        """The IR weight for a weight vector: its ``IR_BM25`` entry (learning to rank writes
        one), else the scorer's default ``v``."""
        v = float(weights.get(IR_FEATURE, self.v))
        if not math.isfinite(v):
            raise ConfigurationError(f"the weight of {IR_FEATURE} must be finite, got {v!r}")
        return v

    @staticmethod
    def _term_weights(query: DecodedQuery) -> dict[str, float]:
        return {n: float(w) for n, w in query.weights.items() if is_ir_term_feature(n)}

    def _lex_weights(self, query: DecodedQuery) -> dict[str, float]:
        out = {n: float(w) for n, w in query.weights.items() if is_lex_feature(n)}
        out.update(self.lex_weights)
        return out

    def prepare(self, query: DecodedQuery) -> list[PreparedSentence]:
        """Every sentence's forest joined with the index (reusable across ``v`` and ``k``)."""
        lex_w = self._lex_weights(query)
        term_w = self._term_weights(query)  # read once per query, not per sentence
        out = []
        for forest in query.forests:
            hg = forest.hypergraph
            smt = smt_edge_weights(hg, query.weights, self.lex, lex_w)
            prep = prepare_sentence(hg, smt, self.index, self.beam)
            out.append(with_term_weights(prep, self.index, term_w))
        return out

    def rank_prepared(
        self, preps: Sequence[PreparedSentence], k: int, v: float | None = None
    ) -> tuple[Int32Array, FloatArray, list[SentenceRanking]]:
        """Top ``k`` (documents, scores) of prepared sentences, and each sentence's list
        (``v``: the IR weight, default the scorer's).

        A document whose score is no better than the sum of the sentences' SMT Viterbi scores
        earned no BM25 weight (a forest word made it a candidate, but its best derivation does
        not use it): like DT for a document without a query term, it is not retrieved, so a
        query of only "???" retrieves nothing rather than ties ranked by document number. Every
        caller (search, evaluation, learning to rank) gets the same ranking from here."""
        v = self.v if v is None else v
        depth = k if len(preps) == 1 else max(k, self.per_sentence_k or DEFAULT_PER_SENTENCE_K)
        # K' is at least k (a smaller per_sentence_k is raised to k)
        lists = [self._rank_one(p, depth, v) for p in preps]
        if len(lists) == 1:
            docs, scores = lists[0].docs, lists[0].scores
        else:
            docs, scores = combine_sentences(lists)
            docs, scores = docs[:k], scores[:k]
        floor = float(sum(p.viterbi for p in preps))
        keep = scores > floor + 1e-9 * max(1.0, abs(floor))
        return docs[keep], scores[keep], lists

    def _rank_one(self, prep: PreparedSentence, depth: int, v: float) -> SentenceRanking:
        if self.engine == "fast":
            return rank_sentence(prep, v, depth)
        t0 = time.perf_counter()
        deltas = (
            {}
            if prep.term_delta is None
            else {
                ir_term_feature(self.index.term(int(t))): float(x)
                for t, x in zip(prep.terms.tolist(), prep.term_delta.tolist(), strict=True)
            }
        )
        docs, scores = reference_scores(prep.hypergraph, prep.smt, self.index, v, deltas)
        pos = top_k_order(docs, scores, depth)
        info = {"candidates": len(docs), "scored": len(docs),
                "seconds": time.perf_counter() - t0}  # fmt: skip
        return SentenceRanking(docs[pos], scores[pos], prep.viterbi, len(docs) <= depth, info)

    def _rank(self, query: DecodedQuery, k: int, explain: bool) -> tuple[list[Hit], dict[str, Any]]:
        t0 = time.perf_counter()
        v = self.v_for(query.weights)
        preps = self.prepare(query)
        t1 = time.perf_counter()
        docs, scores, lists = self.rank_prepared(preps, k, v)
        t2 = time.perf_counter()
        hits = []
        for d, s in zip(docs.tolist(), scores.tolist(), strict=True):
            expl = self.explain(preps, d, lists, v) if explain else None
            hits.append(Hit(d, self.index.doc_id(d), s, expl))
        info: dict[str, Any] = {
            "sentences": len(preps),
            "v": v,
            "candidates": [p.docs.size for p in preps],
            "viterbi": [p.viterbi for p in preps],
            "edges": [p.hypergraph.num_edges for p in preps],
            "seconds": {"prepare": t1 - t0, "score": t2 - t1},
            "per_sentence": [r.info for r in lists],
        }
        return hits, info

    def explain(
        self,
        preps: Sequence[PreparedSentence],
        docno: int,
        lists: Sequence[SentenceRanking] | None = None,
        v: float | None = None,
    ) -> dict[str, Any]:
        """Per sentence, the document's best derivation with the words that matched it."""
        v = self.v if v is None else v
        parts = []
        for i, prep in enumerate(preps):
            part = best_derivation(prep, docno, v, self.index, self.lex).to_json()
            part["sentence"] = i
            if lists is not None and len(preps) > 1:
                part["in_sentence_list"] = bool(np.isin(docno, lists[i].docs))
            parts.append(part)
        return {"sentences": parts}

    def matched_terms(self, explanation: Mapping[str, Any]) -> list[str]:
        """The words of each sentence's best derivation that matched the document."""
        return [str(m["term"]) for s in explanation.get("sentences", ()) for m in s["matched"]]

    def retrieved(self, ranking: Ranking, depth: int, query: DecodedQuery) -> tuple[int, Relation]:
        """Every retrieved document is a candidate of some sentence; the scorer stops once no
        other candidate can enter the top ``depth`` (bounds), so beyond that the count is a
        lower bound unless the candidates are no more than the ranking holds."""
        n = len(ranking.hits)
        candidates = ranking.info.get("candidates")
        if n < depth or (isinstance(candidates, list) and sum(candidates) <= n):
            return n, "eq"
        return n, "gte"

    def feature_vector(
        self,
        query: DecodedQuery | Sequence[PreparedSentence],
        docno: int,
        v: float | None = None,
    ) -> dict[str, float]:
        """Features of ``docno``'s best derivations, summed over the sentences.

        SMT features summed over the derivation edges, ``IR_BM25`` = Σ_{t ∈ h} bm25(t, d)
        (weight ``v``) and the LEX feature counts (when the scorer has a grammar). For a
        single sentence, ``w · Φ`` is the document's score; the hinge-loss subgradient of
        learning to rank is the difference of two such vectors.
        """
        if v is None:
            v = self.v_for(query.weights) if isinstance(query, DecodedQuery) else self.v
        preps = self.prepare(query) if isinstance(query, DecodedQuery) else query
        total: dict[str, float] = {}
        for prep in preps:
            deriv = best_derivation(prep, docno, v, self.index, self.lex)
            for n, x in deriv.features.items():
                total[n] = total.get(n, 0.0) + x
        return total
