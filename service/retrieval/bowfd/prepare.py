"""A sentence's forest joined with the index: everything BOW-FD needs to score documents
(Hieber & Riezler 2015, §3).

* **SMT edge weights** ``w_smt · φ(e)`` (:func:`smt_edge_weights`), plus the weighted sparse LEX
  features (:mod:`service.retrieval.lex`) when given: the document-independent part of W'.
* **Beam** (Hieber & Riezler 2015, §3, approximate decoding): ``beam=b`` keeps at every node the
  ``b`` incoming edges with the best SMT value ``w(e) + Σ inside(tails)`` (the max is
  "discontinued once the number of considered incoming edges exceeds the size of the beam") and
  scores on that pruned forest (:func:`beam_prune`).
* **The live forest** (:class:`LiveForest`): nodes and edges on no derivation of the goal never
  change a goal score (the decoders already drop the +LM nodes cube pruning leaves unreachable,
  :func:`service.forest.hypergraph.prune_unreachable`; the cut still matters after ``beam``
  pruning and for forests from elsewhere).
* **Candidates** (Hieber & Riezler 2015, §3 "Implementation and Complexity Analysis"): only
  documents that share at least one target word of non-zero weight (rsj ≠ 0) with some edge of
  the forest are scored. Every other document's score is exactly the SMT Viterbi score — a lower
  bound on every document's score, carrying no evidence — so such documents are not returned (a
  ranking may hold fewer than ``k`` hits; they do take part in the multi-sentence combination,
  :mod:`service.retrieval.bowfd.combine`).

:func:`prepare_sentence` puts these together into a :class:`PreparedSentence`, reusable across
``v`` and ``k``; the bounds' per-term statistics (best SMT score through a term, most
occurrences in one derivation) are computed here too. It runs in two steps: what depends on
the forest and on which words are weighted terms, not on the documents
(:func:`prepare_forest`, a :class:`PreparedForest`), then the join with one index's postings
(:func:`join_index`). A collection's segments score with the collection's statistics, so a
word is a weighted term for all of them alike: the forest is prepared once per query and
joined with each segment (:mod:`service.collection.searcher`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Generic, Protocol, TypeVar

import numpy as np
from numpy.typing import NDArray

from service.core.csr import gather_rows, ptr_from_counts
from service.errors import ConfigurationError, InternalError, InvalidInputError
from service.forest.hypergraph import FloatArray, Hyperedge, Hypergraph, IntArray
from service.forest.inference import viterbi_scores
from service.index.inverted import Int32Array, InvertedIndex
from service.retrieval.bowfd.features import term_bonus, term_deltas
from service.retrieval.bowfd.kernels import kernel
from service.retrieval.lex import LexFeatures


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


_Int = TypeVar("_Int", np.int32, np.int64)


@dataclass(frozen=True, eq=False)
class LiveTopology(Generic[_Int]):
    """The weight-independent part of a live forest: which live node each live edge enters,
    its tails and its target words, as flat arrays.

    Which nodes and edges of a forest are live does not depend on the (finite) weights; only
    the numbering of the local terms in ``occ_term`` does (by ``best_through`` under the
    weights the forest was prepared with). Nodes and edges are the live ones renumbered in
    their original order (nodes stay topological, every node's incoming edges keep their
    order, which breaks ties); ``goal`` is the goal node. Edge ``e`` enters ``edge_head[e]``
    from the tails ``tail_nodes[tail_ptr[e]:tail_ptr[e+1]]``; the incoming edges of node ``v``
    are ``in_edges[in_ptr[v]:in_ptr[v+1]]``; ``occ_term[occ_ptr[e]:occ_ptr[e+1]]`` is the
    local term (see :class:`PreparedSentence`) of each target word occurrence of ``e`` in
    order, the number of local terms for a word of no weight.

    There is one live-forest representation with two holders: :class:`LiveForest` (int64,
    inside a :class:`PreparedSentence`, with the SMT scores under the weights it was prepared
    with) and :class:`service.ltr.forest.CompactSentence` (int32, copied from a
    :class:`LiveForest`, kept per learning-to-rank query with the edges' sparse features so
    that any weights re-score it).
    """

    goal: int
    edge_head: NDArray[_Int]
    in_ptr: NDArray[_Int]
    in_edges: NDArray[_Int]
    tail_ptr: NDArray[_Int]
    tail_nodes: NDArray[_Int]
    occ_ptr: NDArray[_Int]
    occ_term: NDArray[_Int]


@dataclass(frozen=True, eq=False)
class LiveForest(LiveTopology[np.int64]):
    """The part of a forest on some derivation of the goal, renumbered, as flat arrays.

    Nodes and edges whose best SMT score through them is −∞ (not reachable from the goal, or
    without a derivation) never change a goal score, whatever the document (cube pruning
    leaves many, which the decoders drop before handing the forest on; beam pruning makes
    more). Its topology (the fields of :class:`LiveTopology`) does not depend on the weights;
    learning to rank keeps just that part, with the edge features and the local terms, as
    :class:`service.ltr.forest.CompactSentence`. ``nodes``/``edges`` map back to the forest's
    ids; ``parents[parent_ptr[v]:parent_ptr[v+1]]`` are the heads of the edges with ``v`` as a
    tail; ``smt`` the live edges' SMT weights, ``inside``/``outside`` the SMT Viterbi inside
    and outside scores, ``edge_through[e]``/``node_through[v]`` the best SMT score of a
    derivation through them.
    """

    nodes: IntArray
    edges: IntArray
    smt: FloatArray
    inside: FloatArray
    outside: FloatArray
    edge_through: FloatArray
    node_through: FloatArray
    parent_ptr: IntArray
    parents: IntArray


class TermWeighting(Protocol):
    """Which English words are index terms of non-zero weight (rsj ≠ 0): an index, or a
    collection's segments, which share the collection's statistics."""

    def weighted_term(self, token: str) -> str | None:
        """The index term of ``token`` if it has a non-zero weight, else None."""


@dataclass(frozen=True, eq=False)
class PreparedForest:
    """One sentence's forest with its local terms: the part of a :class:`PreparedSentence`
    that does not depend on the documents.

    Local terms ``0..T-1`` are the forest's target words that are index terms with rsj ≠ 0
    (``term_names`` holds their index terms; two words may share one), numbered by descending
    ``best_through`` — the best SMT score of a derivation producing the term — so each
    document's terms, stored in ascending local id, come in that order; ``word_local`` maps
    the forest's vocabulary to local terms (``T``: no weight). ``max_count[t]`` is the most
    times one derivation can produce ``t``; ``term_edges[term_edge_ptr[t]:term_edge_ptr[t+1]]``
    are the live edges carrying ``t``. ``hypergraph`` and ``smt`` are the (beam-pruned) forest
    and its SMT edge weights. ``term_delta`` holds the per-term IR weights δ_t (term ``t``
    earns ``(v + δ_t)·bm25``) or is None when every δ_t is 0 (see
    :func:`with_term_weights`).
    """

    hypergraph: Hypergraph
    smt: FloatArray
    viterbi: float
    live: LiveForest
    word_local: IntArray
    term_names: tuple[str, ...]
    best_through: FloatArray
    max_count: FloatArray
    term_edge_ptr: IntArray
    term_edges: IntArray
    kept_edges: IntArray | None = None  # original edge ids when beam-pruned
    term_delta: FloatArray | None = None  # δ_t per local term (None: all 0)

    @property
    def num_terms(self) -> int:
        return len(self.term_names)


@dataclass(frozen=True, eq=False, kw_only=True)
class PreparedSentence(PreparedForest):
    """One sentence's forest joined with an index: everything a document's score needs.

    The fields of :class:`PreparedForest`, and: ``terms`` the index term id of each local
    term (−1 for a term this index does not hold: a segment of a collection); ``docs`` the
    candidate documents (ascending), each with its local terms and bm25 weights in
    ``doc_terms``/``doc_weights[doc_ptr[i]:doc_ptr[i+1]]``.
    """

    terms: IntArray
    docs: Int32Array
    doc_ptr: IntArray
    doc_terms: IntArray
    doc_weights: FloatArray

    def ir_rows(self, v: float) -> tuple[FloatArray, float]:
        """The candidates' rows under :func:`~service.retrieval.bowfd.features.term_bonus`:
        the bonus of an edge for a document is ``factor · Σ_{occurrences} row weight``."""
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


_Prep = TypeVar("_Prep", bound=PreparedForest)


def with_term_weights(prep: _Prep, weights: Mapping[str, float]) -> _Prep:
    """``prep`` with the per-term IR weights (``ir:<term>``) of ``weights`` attached
    (``weights`` may hold other features too; an empty map reads no term names)."""
    if not weights and prep.term_delta is None:
        return prep
    delta = term_deltas(list(prep.term_names), weights)
    return prep if delta is None and prep.term_delta is None else replace(prep, term_delta=delta)


def _csr(keys: IntArray, values: IntArray, n: int) -> tuple[IntArray, IntArray]:
    """CSR rows ``0..n-1`` from (row, value) pairs, duplicates removed, values ascending."""
    if len(keys) == 0:
        return np.zeros(n + 1, dtype=np.int64), np.zeros(0, dtype=np.int64)
    width = int(values.max()) + 1
    pairs = np.unique(keys * width + values)
    rows, vals = pairs // width, pairs % width
    return ptr_from_counts(np.bincount(rows, minlength=n)), vals.astype(np.int64)


def live_forest(hg: Hypergraph, smt: FloatArray, word_local: IntArray) -> LiveForest:
    """The live part of ``hg`` under ``smt`` (see :class:`LiveForest`)."""
    a = hg.arrays()
    inside, _ = viterbi_scores(hg, smt)
    outside = np.empty(a.num_nodes, dtype=np.float64)
    through = np.empty(a.num_edges, dtype=np.float64)
    kernel("outside")(
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
    in_ptr = ptr_from_counts(np.bincount(head, minlength=len(nodes)))
    in_edges = np.argsort(head, kind="stable").astype(np.int64)  # live ids, original order
    tail_ptr, at = gather_rows(a.tail_ptr, edges)
    tail_nodes = node_new[a.tail_nodes[at]]
    occ_ptr, at = gather_rows(a.term_ptr, edges)
    occ_words = a.term_ids[at]
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
    index: InvertedIndex, term_ids: IntArray, restrict: Int32Array | None = None
) -> tuple[Int32Array, IntArray, IntArray, FloatArray]:
    """The documents containing any of the terms (ids; −1: none here; only those of
    ``restrict``, when given), each with its (local term, bm25) pairs in ascending local term
    order: the union of the postings, grouped by a counting sort."""
    n = len(term_ids)
    if n == 0:
        return (np.zeros(0, dtype=np.int32), np.zeros(1, dtype=np.int64),
                np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64))  # fmt: skip
    among = None if restrict is None else np.sort(restrict)
    ptr, all_docs, weights = index.gather_postings(term_ids, among)
    all_w = weights.astype(np.float64)
    all_terms = np.repeat(np.arange(n, dtype=np.int64), np.diff(ptr))
    counts = np.bincount(all_docs, minlength=index.n_docs)
    docs = np.flatnonzero(counts).astype(np.int32)
    doc_ptr = ptr_from_counts(counts[docs].astype(np.int64))
    slot = np.zeros(index.n_docs, dtype=np.int64)
    slot[docs] = doc_ptr[:-1]
    doc_terms = np.empty(len(all_docs), dtype=np.int64)
    doc_weights = np.empty(len(all_docs), dtype=np.float64)
    kernel("scatter")(all_docs, all_terms, all_w, slot, doc_terms, doc_weights)
    return docs, doc_ptr, doc_terms, doc_weights


def prepare_forest(
    hg: Hypergraph, smt: FloatArray, weighting: TermWeighting, beam: int | None = None
) -> PreparedForest:
    """The forest's side of :func:`prepare_sentence`: beam, local terms (the words
    ``weighting`` says are weighted terms), live forest and the bounds' per-term statistics."""
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
    names = [weighting.weighted_term(word) for word in a.vocabulary]
    weighted_words = np.array([i for i, n in enumerate(names) if n is not None], dtype=np.int64)
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
    term_names = tuple(str(names[int(weighted_words[j])]) for j in order.tolist())
    best_through = np.ascontiguousarray(best0[order])
    hit = live.occ_term < n_terms
    term_edge_ptr, term_edges = _csr(live.occ_term[hit], edge_of_occ[hit], n_terms)
    max_count = np.zeros(n_terms, dtype=np.float64)
    if n_terms and len(live.edges):
        kernel("max_count")(
            live.in_ptr, live.in_edges, live.tail_ptr, live.tail_nodes, live.occ_ptr,
            live.occ_term, live.goal, max_count,
        )  # fmt: skip
    return PreparedForest(
        hypergraph=hg,
        smt=smt,
        viterbi=float(live.inside[live.goal]),
        live=live,
        word_local=word_local,
        term_names=term_names,
        best_through=best_through,
        max_count=max_count,
        term_edge_ptr=term_edge_ptr,
        term_edges=term_edges,
        kept_edges=kept,
    )


_FOREST_FIELDS = tuple(f.name for f in fields(PreparedForest))


def join_index(
    forest: PreparedForest, index: InvertedIndex, restrict: Int32Array | None = None
) -> PreparedSentence:
    """The documents' side of :func:`prepare_sentence`: ``forest``'s terms looked up in
    ``index`` and its candidates (only the documents of ``restrict``, when given: a cascade's
    first stage). The forest's arrays are shared, not copied."""
    vocab_ids = [index.vocab.id(name) for name in forest.term_names]
    term_ids = np.array([-1 if t is None else t for t in vocab_ids], dtype=np.int64)
    docs, doc_ptr, doc_terms, doc_weights = _candidates(index, term_ids, restrict)
    return PreparedSentence(
        **{name: getattr(forest, name) for name in _FOREST_FIELDS},
        terms=term_ids,
        docs=docs.astype(np.int32),
        doc_ptr=doc_ptr,
        doc_terms=doc_terms,
        doc_weights=doc_weights,
    )


def prepare_sentence(
    hg: Hypergraph,
    smt: FloatArray,
    index: InvertedIndex,
    beam: int | None = None,
    restrict: Int32Array | None = None,
) -> PreparedSentence:
    """Join a forest with the index: local terms, live forest, bounds and candidates (only
    the documents of ``restrict``, when given: a cascade's first stage)."""
    return join_index(prepare_forest(hg, smt, index, beam), index, restrict)
