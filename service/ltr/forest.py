"""A query sentence's translation forest, kept compactly for learning to rank
(Hieber & Riezler 2015, §3–4).

Training reranks a **fixed +LM forest**: every query sentence is decoded once, with the
starting weights (cube pruning decides which translations the forest holds), and learning
changes only the edge weights on that forest. Two facts keep this cheap:

* only the *live* part of the forest — the nodes and edges on some derivation of the goal —
  can change a BOW-FD score, and which edges are live does not depend on the (finite) weights.
  :class:`CompactSentence` keeps just that part as flat arrays (5–35 % of the edges of the
  cube-pruned de-en forests we measured, and no Python objects: a decoded forest costs about
  1 KB per edge; a training query with ~100 candidates keeps about 1.2 MB);
* the SMT (and LEX) part of an edge's weight is ``F[e] · w`` for a sparse edge × feature
  matrix ``F`` built once, so a weight change is one sparse matrix–vector product; the sentence
  never has to be re-prepared.

:func:`best_derivations` runs, for each candidate document, the (max, +) inside pass with
backpointers over the live forest under ``W'(e, d) = F[e]·w + Σ_{t ∈ e} (v + δ_t)·bm25(t, d)``
(Hieber & Riezler 2015, eq. 4 with the per-term IR weights δ_t of the ``ir:<t>`` features; ties go
to the first incoming edge, as in :func:`service.forest.inference.viterbi_scores`) and returns
the edges of the best derivation; :meth:`CompactSentence.candidate_features` turns them into the
documents' feature vectors ``Φ(h*_d)`` (SMT and LEX features summed over the edges,
``IR_BM25`` = Σ bm25 over the derivation's words, ``ir:<t>`` = the part of it ``t`` earns), so that
``w · Φ(h*_d)`` is the document's BOW-FD score for the sentence. The obviously-correct reference is
:meth:`service.retrieval.bowfd.scorer.BowFdScorer.feature_vector` (one Viterbi pass over the whole
forest per document); the tests check they agree.

For ranking (dev evaluation) :meth:`CompactSentence.prepared` hands the live part, as an
array-backed hypergraph (:meth:`service.forest.hypergraph.Hypergraph.from_arrays`: no node or
edge objects unless asked for), to :func:`service.retrieval.bowfd.prepare.prepare_sentence`, so
dev rankings come from the service's own BOW-FD code.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray

from service.core.csr import gather_rows, ptr_from_counts
from service.core.jit import compiled
from service.forest.hypergraph import Hyperedge, Hypergraph, HypergraphArrays, Node
from service.index.inverted import InvertedIndex
from service.ltr.space import IR_COLUMN, FeatureSpace
from service.retrieval.bowfd import (
    PreparedSentence,
    ir_term_feature,
    prepare_sentence,
    term_bonus,
)
from service.retrieval.bowfd.prepare import LiveTopology
from service.retrieval.lex import LexFeatures

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
Int32Array = NDArray[np.int32]

_NO_FEATURES: dict[str, float] = {}


@dataclass(frozen=True, eq=False)
class CandidateRows:
    """The candidates' (local term, bm25) pairs in one sentence: candidate ``i`` has
    ``terms/weights[ptr[i]:ptr[i+1]]`` (local term ids of the sentence)."""

    ptr: IntArray
    terms: Int32Array
    weights: FloatArray

    @classmethod
    def of(cls, prep: PreparedSentence, docnos: IntArray) -> CandidateRows:
        rows = [prep.doc_row(int(d)) for d in docnos.tolist()]
        ptr = ptr_from_counts([len(t) for t, _ in rows])
        terms = np.concatenate([t for t, _ in rows]) if rows else np.zeros(0)
        weights = np.concatenate([w for _, w in rows]) if rows else np.zeros(0)
        return cls(ptr, terms.astype(np.int32), weights.astype(np.float64))

    def __len__(self) -> int:
        return len(self.ptr) - 1


@dataclass(frozen=True, eq=False)
class CompactSentence(LiveTopology[np.int32]):
    """The live forest of one sentence as arrays (see the module docstring).

    Its topology (``goal``, ``edge_head``, ``in_ptr``/``in_edges``, ``tail_ptr``/``tail_nodes``,
    ``occ_ptr``/``occ_term``: the fields of
    :class:`~service.retrieval.bowfd.prepare.LiveTopology`, in int32) is the weight-independent
    part of the prepared sentence's :class:`~service.retrieval.bowfd.prepare.LiveForest`,
    copied from it by :meth:`of`: nodes and edges are the live ones, renumbered in their
    original order; ``occ_term`` holds local terms (``n_terms``: no weight). ``terms`` maps
    local terms to index term ids. ``features`` is the sparse ``[edges × columns]`` matrix of
    SMT and LEX feature values over a :class:`FeatureSpace` (its width is the size the space
    had when it was built).
    """

    terms: IntArray
    ir_cols: IntArray  # the column of each local term's ``ir:<term>`` feature
    features: Any  # scipy.sparse.csr_matrix [edges × width]

    @property
    def num_edges(self) -> int:
        return len(self.edge_head)

    @property
    def num_nodes(self) -> int:
        return len(self.in_ptr) - 1

    @property
    def n_terms(self) -> int:
        return len(self.terms)

    @property
    def width(self) -> int:
        return int(self.features.shape[1])

    def nbytes(self) -> int:
        arrays = (self.edge_head, self.in_ptr, self.in_edges, self.tail_ptr, self.tail_nodes,
                  self.occ_ptr, self.occ_term, self.terms, self.ir_cols)  # fmt: skip
        f = self.features
        sparse = f.data.nbytes + f.indices.nbytes + f.indptr.nbytes
        return int(sum(a.nbytes for a in arrays) + sparse)

    @classmethod
    def of(
        cls,
        prep: PreparedSentence,
        space: FeatureSpace,
        index: InvertedIndex,
        lex: LexFeatures | None = None,
    ) -> CompactSentence:
        """The live part of a prepared sentence, with its edge features numbered in ``space``
        (new names are added to it: the SMT features, the ``ir:<term>`` feature of every
        weighted English term of the forest, and, with ``lex``, the LEX features of each
        edge)."""
        live = prep.live
        hg = prep.hypergraph
        a = hg.arrays()
        edges = live.edges
        ptr, idx = gather_rows(a.feat_ptr, edges)  # the live edges' features
        name_col = space.columns(a.feature_names)
        ir_cols = space.columns(ir_term_feature(t) for t in prep.term_names)
        rows = [np.repeat(np.arange(len(edges)), np.diff(ptr))]
        cols = [name_col[a.feat_ids[idx]] if len(idx) else np.zeros(0, dtype=np.int64)]
        vals = [a.feat_vals[idx]]
        if lex is not None:
            lr: list[int] = []
            lc: list[int] = []
            for i, e in enumerate(edges.tolist()):
                for f in lex.of_edge(hg.edges[e]):
                    lr.append(i)
                    lc.append(space.column(f))
            rows.append(np.array(lr, dtype=np.int64))
            cols.append(np.array(lc, dtype=np.int64))
            vals.append(np.ones(len(lr)))
        features = sp.coo_matrix(
            (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
            shape=(len(edges), len(space)),
        ).tocsr()  # duplicates (a LEX feature fired twice by one edge) are summed
        features.sum_duplicates()
        i32 = np.int32
        return cls(
            goal=live.goal,
            edge_head=live.edge_head.astype(i32),
            in_ptr=live.in_ptr.astype(i32),
            in_edges=live.in_edges.astype(i32),
            tail_ptr=live.tail_ptr.astype(i32),
            tail_nodes=live.tail_nodes.astype(i32),
            occ_ptr=live.occ_ptr.astype(i32),
            occ_term=live.occ_term.astype(i32),
            terms=prep.terms.astype(np.int64),
            ir_cols=ir_cols.astype(np.int64),
            features=features,
        )

    # --- scores and feature vectors -------------------------------------------------------
    def edge_weights(self, w: FloatArray) -> FloatArray:
        """``F[e] · w`` for every live edge (the SMT and LEX part of W'(e, d))."""
        out: FloatArray = np.asarray(self.features @ w[: self.width], dtype=np.float64)
        return out

    def term_delta(self, w: FloatArray) -> FloatArray | None:
        """δ_t of the local terms under ``w`` (their ``ir:`` weights), None if all are 0."""
        delta = w[self.ir_cols]
        return delta if np.any(delta != 0.0) else None

    @cached_property
    def occurrences(self) -> Any:
        """Sparse ``[edges × local terms]`` counts of the weighted target words of each edge
        (built once: every epoch reads it for every candidate list)."""
        keep = self.occ_term < self.n_terms
        edge_of_occ = np.repeat(np.arange(self.num_edges), np.diff(self.occ_ptr))
        return sp.csr_matrix(
            (np.ones(int(keep.sum())), (edge_of_occ[keep], self.occ_term[keep])),
            shape=(self.num_edges, self.n_terms),
            dtype=np.float64,
        )

    def candidate_features(self, cands: CandidateRows, w: FloatArray, size: int) -> Any:
        """``Φ(h*_d)`` of every candidate's best derivation under ``w`` as a sparse
        ``[candidates × size]`` matrix (``size`` ≥ this sentence's width): the SMT and LEX
        features of its edges, ``IR_BM25`` = Σ_{t ∈ h} bm25(t, d) and ``ir:<t>`` = the bm25
        weight the occurrences of ``t`` in ``h`` earn."""
        smt = self.edge_weights(w)
        delta = self.term_delta(w)
        ptr, edges = best_derivations(self, smt, float(w[IR_COLUMN]), cands, delta)
        n = len(cands)
        pick = sp.csr_matrix(
            (np.ones(len(edges)), edges, ptr), shape=(n, self.num_edges), dtype=np.float64
        )
        phi = (pick @ self.features).tocsr()
        phi.resize((n, size))
        # per candidate and term: occurrences in h* × bm25(t, d)
        counts = (pick @ self.occurrences).tocsr()
        bm25 = sp.csr_matrix(
            (cands.weights, cands.terms, cands.ptr), shape=(n, self.n_terms), dtype=np.float64
        )
        per_term = counts.multiply(bm25).tocsr()
        per_term.eliminate_zeros()
        ir_terms = sp.csr_matrix(
            (per_term.data, self.ir_cols[per_term.indices], per_term.indptr),
            shape=(n, size),
            dtype=np.float64,
        )
        total = np.asarray(per_term.sum(axis=1)).ravel()
        ir = sp.csr_matrix(
            (total, (np.arange(n), np.full(n, IR_COLUMN))), shape=(n, size), dtype=np.float64
        )
        return (phi + ir + ir_terms).tocsr()

    # --- ranking --------------------------------------------------------------------------
    def hypergraph(self, index: InvertedIndex) -> Hypergraph:
        """The live forest as an array-backed :class:`Hypergraph` whose edges carry only their
        weighted target words (what BOW-FD reads; features come from :attr:`features`).

        Its vocabulary holds the words of the local terms some live edge carries, in the order
        they are first seen over the edges (as a forest built from edge objects numbers them),
        so :func:`~service.retrieval.bowfd.prepare.prepare_sentence` breaks ties between terms
        the same way. Node and edge objects (labels ``X``, spans ``(0, 0)``, no features) are
        made only when asked for.
        """
        i64 = np.int64
        keep = self.occ_term < self.n_terms
        occ = self.occ_term[keep].astype(i64)
        kept_before = np.concatenate(([0], np.cumsum(keep, dtype=i64)))
        term_ptr = kept_before[self.occ_ptr]
        seen, first = np.unique(occ, return_index=True)
        seen = seen[np.argsort(first)]  # local terms in first-seen order
        word_of_local = np.empty(self.n_terms, dtype=i64)
        word_of_local[seen] = np.arange(len(seen), dtype=i64)
        term_ids = word_of_local[occ]
        vocabulary = tuple(index.term(int(t)) for t in self.terms[seen].tolist())
        arrays = HypergraphArrays(
            num_nodes=self.num_nodes,
            num_edges=self.num_edges,
            goal=int(self.goal),
            edge_head=self.edge_head.astype(i64),
            tail_ptr=self.tail_ptr.astype(i64),
            tail_nodes=self.tail_nodes.astype(i64),
            in_ptr=self.in_ptr.astype(i64),
            in_edges=self.in_edges.astype(i64),
            term_ptr=term_ptr,
            term_ids=term_ids,
            vocabulary=vocabulary,
            feat_ptr=np.zeros(self.num_edges + 1, dtype=i64),
            feat_ids=np.zeros(0, dtype=i64),
            feat_vals=np.zeros(0, dtype=np.float64),
            feature_names=(),
        )

        def node(v: int) -> Node:
            return Node(v, "X", (0, 0))

        def edge(e: int) -> Hyperedge:
            lo, hi = int(term_ptr[e]), int(term_ptr[e + 1])
            return Hyperedge(
                e,
                int(arrays.edge_head[e]),
                tuple(arrays.tail_nodes[arrays.tail_ptr[e] : arrays.tail_ptr[e + 1]].tolist()),
                tuple(vocabulary[i] for i in term_ids[lo:hi].tolist()),
                _NO_FEATURES,
                (0, 0),
            )

        return Hypergraph.from_arrays(arrays, node, edge)

    def prepared(self, w: FloatArray, index: InvertedIndex) -> PreparedSentence:
        """The sentence prepared for BOW-FD ranking under ``w`` (see the module docstring)."""
        prep = prepare_sentence(self.hypergraph(index), self.edge_weights(w), index)
        delta = self.term_delta(w)
        if delta is None:
            return prep
        by_term = dict(zip(self.terms.tolist(), delta.tolist(), strict=True))
        return replace(prep, term_delta=np.array([by_term[t] for t in prep.terms.tolist()]))


# --- the best derivation of every candidate ------------------------------------------------------
def _derivations_kernel(
    in_ptr: Int32Array,
    in_edges: Int32Array,
    tail_ptr: Int32Array,
    tail_nodes: Int32Array,
    occ_ptr: Int32Array,
    occ_term: Int32Array,
    smt: FloatArray,
    goal: int,
    n_terms: int,
    cand_ptr: IntArray,
    cand_terms: Int32Array,
    cand_weights: FloatArray,
    v: float,
    out_ptr: IntArray,
    out_edges: IntArray,
) -> int:  # pragma: no cover - compiled by numba
    """Per candidate: W'(e, d) = smt[e] + v·Σ cand_weights over the edge's words, the
    (max, +) inside pass with backpointers (first best incoming edge wins), and the edges of
    the goal's best derivation (preorder) into ``out_edges[out_ptr[c]:out_ptr[c+1]]``.
    Returns how many candidates were done (fewer when ``out_edges`` is full)."""
    num_nodes = in_ptr.shape[0] - 1
    num_edges = smt.shape[0]
    docw = np.zeros(n_terms + 1, dtype=np.float64)
    wp = np.empty(num_edges, dtype=np.float64)
    best = np.empty(num_nodes, dtype=np.float64)
    back = np.empty(num_nodes, dtype=np.int64)
    stack = np.empty(num_edges + 1, dtype=np.int64)
    cap = out_edges.shape[0]
    pos = 0
    out_ptr[0] = 0
    n_cand = cand_ptr.shape[0] - 1
    for c in range(n_cand):
        for p in range(cand_ptr[c], cand_ptr[c + 1]):
            docw[cand_terms[p]] = cand_weights[p]
        for e in range(num_edges):
            s = 0.0
            for o in range(occ_ptr[e], occ_ptr[e + 1]):
                s += docw[occ_term[o]]
            wp[e] = smt[e] + v * s
        for x in range(num_nodes):
            bx = -np.inf
            arg = -1
            for p in range(in_ptr[x], in_ptr[x + 1]):
                e = in_edges[p]
                t = wp[e]
                for q in range(tail_ptr[e], tail_ptr[e + 1]):
                    t += best[tail_nodes[q]]
                if t > bx:
                    bx = t
                    arg = e
            best[x] = bx
            back[x] = arg
        top = 1
        stack[0] = goal
        while top > 0:
            top -= 1
            e = back[stack[top]]
            if pos >= cap or e < 0:
                return c
            out_edges[pos] = e
            pos += 1
            for q in range(tail_ptr[e + 1] - 1, tail_ptr[e] - 1, -1):
                stack[top] = tail_nodes[q]
                top += 1
        out_ptr[c + 1] = pos
        for p in range(cand_ptr[c], cand_ptr[c + 1]):
            docw[cand_terms[p]] = 0.0
    return int(n_cand)


def best_derivations(
    cs: CompactSentence,
    smt: FloatArray,
    v: float,
    cands: CandidateRows,
    delta: FloatArray | None = None,
) -> tuple[IntArray, IntArray]:
    """For each candidate, the live edges of its best derivation (CSR ``ptr``/``edges``,
    preorder) under SMT edge weights ``smt``, IR weight ``v`` and per-term weights ``delta``
    (a term earns ``(v + δ_t)·bm25``; the arithmetic is BOW-FD's, see
    :func:`service.retrieval.bowfd.features.term_bonus`)."""
    n = len(cands)
    weights, factor = term_bonus(cands.weights, cands.terms, v, delta)
    cap = max(16, n * min(cs.num_edges, 4 * cs.num_nodes))
    while True:
        ptr = np.zeros(n + 1, dtype=np.int64)
        edges = np.empty(cap, dtype=np.int64)
        done = compiled(_derivations_kernel)(
            cs.in_ptr, cs.in_edges, cs.tail_ptr, cs.tail_nodes, cs.occ_ptr, cs.occ_term,
            np.ascontiguousarray(smt, dtype=np.float64), cs.goal, cs.n_terms,
            cands.ptr, cands.terms, np.ascontiguousarray(weights), float(factor), ptr, edges,
        )  # fmt: skip
        if done == n:
            return ptr, edges[: ptr[n]]
        if edges.size >= n * (cs.num_edges + 1):  # a derivation uses no edge twice
            raise AssertionError("the live forest has a node without a derivation")
        cap *= 2
