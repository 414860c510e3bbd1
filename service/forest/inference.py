"""Inside, outside and Viterbi over translation forests, generic over a semiring.

Hieber & Riezler 2015, §3 ("Dynamic Programming on Hypergraphs"): the inside score of the goal,
``α(g) = ⊕_{h} ⊗_{e ∈ h} W(e; w)``, is computed in one pass over the topologically sorted
forest; under the tropical semiring it is the score of the Viterbi translation, under the log
semiring the log partition function, under the counting semiring the number of derivations.
Outside scores and edge posteriors follow Goodman (1999) / Li & Eisner (2009).

``weights`` is either a weight vector (feature name → weight; edge weights then come from
:meth:`Hypergraph.edge_weights`, cached) or an array of per-edge weights ``W(e)`` — the form
bag-of-words forced decoding uses for its document-dependent weights ``W'(e, d)``
(Hieber & Riezler 2015, eq. 4).

:func:`viterbi_scores` is the vectorised Viterbi (numba, over :class:`HypergraphArrays`), for
one or a batch of weight vectors; it is tested against the generic :func:`viterbi`. Its first
call in a process costs about 0.5 s (numba start-up and loading the compiled kernel from the
on-disk cache); call it once at start-up to keep that off the request path.

A forest without a derivation of its goal is a bug, not bad input (the decoders' pass-through
rules cover every word): the functions that need one raise :class:`~service.errors.InternalError`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, TypeVar

import numpy as np
from numpy.typing import NDArray

from service.core.csr import gather_rows, ptr_from_counts
from service.core.jit import compiled
from service.errors import ConfigurationError, InternalError, InvalidInputError
from service.forest.hypergraph import (
    Derivation,
    DerivationNode,
    FloatArray,
    Hyperedge,
    Hypergraph,
    HypergraphArrays,
    Node,
    prune_unreachable,
    renumbered_edge,
    renumbered_node,
)
from service.forest.semiring import LOG, TROPICAL, Semiring

T = TypeVar("T")
Weights = Mapping[str, float] | FloatArray


def resolve_edge_weights(hg: Hypergraph, weights: Weights) -> FloatArray:
    """Per-edge weights ``W(e)``: from a weight vector (cached) or checked as given."""
    if isinstance(weights, np.ndarray):
        if weights.shape != (hg.num_edges,):
            raise InvalidInputError(
                f"edge weights have shape {weights.shape}; the forest has {hg.num_edges} edges"
            )
        if not np.isfinite(weights).all():
            raise InvalidInputError("edge weights must be finite; found NaN or infinity")
        return weights.astype(np.float64, copy=False)
    return hg.edge_weights(weights)


def edge_value(hg: Hypergraph, e: int, w: FloatArray, values: list[T], semiring: Semiring[T]) -> T:
    """``W(e) ⊗ ⊗_{u ∈ tails(e)} values[u]``: the value of hyperedge ``e`` given its tails."""
    k = semiring.from_weight(float(w[e]))
    for u in hg.edges[e].tails:
        k = semiring.times(k, values[u])
    return k


def inside(hg: Hypergraph, weights: Weights, semiring: Semiring[T]) -> list[T]:
    """Inside values ``α(v) = ⊕_{e ∈ in(v)} W(e) ⊗ ⊗_{u ∈ tails(e)} α(u)`` for every node."""
    w = resolve_edge_weights(hg, weights)
    alpha: list[T] = []
    for v in range(hg.num_nodes):
        alpha.append(semiring.sum(edge_value(hg, e, w, alpha, semiring) for e in hg.incoming(v)))
    return alpha


def outside(
    hg: Hypergraph, weights: Weights, semiring: Semiring[T], inside_values: list[T]
) -> list[T]:
    """Outside values: ``β(goal) = 1̄``; ``β(u) = ⊕_{e: u ∈ tails(e)} β(head) ⊗ W(e) ⊗ α(siblings)``.

    For a tail used twice by one edge, each occurrence contributes (expected counts).
    """
    w = resolve_edge_weights(hg, weights)
    beta = [semiring.zero] * hg.num_nodes
    beta[hg.goal] = semiring.one
    for v in reversed(range(hg.num_nodes)):
        for e in hg.incoming(v):
            tails = hg.edges[e].tails
            for i, u in enumerate(tails):
                k = semiring.times(beta[v], semiring.from_weight(float(w[e])))
                for j, s in enumerate(tails):
                    if j != i:
                        k = semiring.times(k, inside_values[s])
                beta[u] = semiring.plus(beta[u], k)
    return beta


def viterbi_backpointers(
    hg: Hypergraph, weights: Weights, semiring: Semiring[Any] = TROPICAL
) -> tuple[list[Any], list[int]]:
    """The inside values under a selective semiring and the best incoming edge of every node.

    Ties go to the first incoming edge; ``-1`` marks a node without derivations.
    """
    if not semiring.selective:
        raise ConfigurationError(
            f"Viterbi needs a selective semiring (max-plus); {semiring!r} is not"
        )
    w = resolve_edge_weights(hg, weights)
    best: list[Any] = []
    back: list[int] = []
    for v in range(hg.num_nodes):
        value, arg = semiring.zero, -1
        for e in hg.incoming(v):
            k = edge_value(hg, e, w, best, semiring)
            if semiring.plus(value, k) != value:
                value, arg = k, e
        best.append(value)
        back.append(arg)
    return best, back


def tree_from_backpointers(hg: Hypergraph, back: list[int] | NDArray[np.int64]) -> DerivationNode:
    """The derivation tree of the goal that follows ``back`` (shared subtrees are shared)."""
    memo: dict[int, DerivationNode] = {}

    def build(v: int) -> DerivationNode:
        node = memo.get(v)
        if node is None:
            e = int(back[v])
            if e < 0:
                raise InternalError(f"node {v} has no derivation")
            node = DerivationNode(e, tuple(build(u) for u in hg.edges[e].tails))
            memo[v] = node
        return node

    if int(back[hg.goal]) < 0:
        raise InternalError(
            f"the forest has no derivation of its goal node {hg.goal}: the parse failed"
        )
    return build(hg.goal)


def viterbi(hg: Hypergraph, weights: Weights, semiring: Semiring[Any] = TROPICAL) -> Derivation:
    """The best derivation of the goal, with its score, string and feature vector."""
    best, back = viterbi_backpointers(hg, weights, semiring)
    tree = tree_from_backpointers(hg, back)
    return hg.derivation(tree, float(best[hg.goal]))


def edge_posteriors(hg: Hypergraph, weights: Weights) -> FloatArray:
    """Expected number of uses of each edge under ``p(h) ∝ exp(score(h))``.

    ``μ(e) = exp(β(head) + W(e) + Σ α(tails) − α(goal))`` in the log semiring; when no edge is
    used twice in a derivation this is the posterior probability that ``e`` is used.
    """
    w = resolve_edge_weights(hg, weights)
    alpha = inside(hg, w, LOG)
    beta = outside(hg, w, LOG, alpha)
    z = alpha[hg.goal]
    if z == -math.inf:
        raise InternalError(f"the forest has no derivation of its goal node {hg.goal}")
    out = np.empty(hg.num_edges, dtype=np.float64)
    for e in range(hg.num_edges):
        out[e] = math.exp(beta[hg.edges[e].head] + edge_value(hg, e, w, alpha, LOG) - z)
    return out


def node_posteriors(hg: Hypergraph, weights: Weights) -> FloatArray:
    """Expected number of uses of each node: ``exp(α(v) + β(v) − α(goal))``."""
    w = resolve_edge_weights(hg, weights)
    alpha = inside(hg, w, LOG)
    beta = outside(hg, w, LOG, alpha)
    z = alpha[hg.goal]
    if z == -math.inf:
        raise InternalError(f"the forest has no derivation of its goal node {hg.goal}")
    return np.array([math.exp(a + b - z) for a, b in zip(alpha, beta, strict=True)])


def enumerate_derivations(hg: Hypergraph, node: int | None = None) -> Iterator[DerivationNode]:
    """Every derivation tree of ``node`` (default: the goal), by brute force.

    Exponential: the slow reference for tests of inside, k-best and forced decoding.
    """
    v = hg.goal if node is None else node
    for e in hg.incoming(v):
        subtrees = [list(enumerate_derivations(hg, u)) for u in hg.edges[e].tails]
        for children in itertools.product(*subtrees):
            yield DerivationNode(e, tuple(children))


# --- vectorised Viterbi ---------------------------------------------------------------------
def _viterbi_kernel(
    in_ptr: NDArray[np.int64],
    in_edges: NDArray[np.int64],
    tail_ptr: NDArray[np.int64],
    tail_nodes: NDArray[np.int64],
    w: FloatArray,
    best: FloatArray,
    back: NDArray[np.int64],
) -> None:  # pragma: no cover - compiled by numba; the Python body is the same algorithm
    num_nodes = in_ptr.shape[0] - 1
    batch = w.shape[1]
    for v in range(num_nodes):
        for b in range(batch):
            best[v, b] = -np.inf
            back[v, b] = -1
        for p in range(in_ptr[v], in_ptr[v + 1]):
            e = in_edges[p]
            for b in range(batch):
                s = w[e, b]
                for q in range(tail_ptr[e], tail_ptr[e + 1]):
                    s += best[tail_nodes[q], b]
                if s > best[v, b]:
                    best[v, b] = s
                    back[v, b] = e


def viterbi_scores(
    hg: Hypergraph, weights: Weights | FloatArray
) -> tuple[FloatArray, NDArray[np.int64]]:
    """Vectorised Viterbi: best inside score and best incoming edge of every node.

    ``weights`` is a weight vector, an ``[E]`` array of edge weights, or an ``[E, B]`` batch
    (e.g. one column per document); the result then has shape ``[V]`` or ``[V, B]``. Ties go
    to the first incoming edge, as in :func:`viterbi_backpointers`; ``-1`` marks a node without
    derivations (score ``-inf``).
    """
    a = hg.arrays()
    batched = isinstance(weights, np.ndarray) and weights.ndim == 2
    if batched:
        assert isinstance(weights, np.ndarray)
        if weights.shape[0] != hg.num_edges:
            raise InvalidInputError(
                f"edge weights have shape {weights.shape}; the forest has {hg.num_edges} edges"
            )
        if not np.isfinite(weights).all():
            raise InvalidInputError("edge weights must be finite; found NaN or infinity")
        w2 = weights
    else:
        w2 = resolve_edge_weights(hg, weights).reshape(-1, 1)
    # One compiled specialisation: C-contiguous, writable float64 (numba types read-only apart).
    w2 = np.require(w2, dtype=np.float64, requirements=["C", "W"])
    best = np.empty((hg.num_nodes, w2.shape[1]), dtype=np.float64)
    back = np.empty((hg.num_nodes, w2.shape[1]), dtype=np.int64)
    compiled(_viterbi_kernel)(a.in_ptr, a.in_edges, a.tail_ptr, a.tail_nodes, w2, best, back)
    if not batched:
        return best[:, 0], back[:, 0]
    return best, back


def fast_viterbi(hg: Hypergraph, weights: Weights) -> Derivation:
    """:func:`viterbi` computed with the vectorised kernel."""
    best, back = viterbi_scores(hg, weights)
    tree = tree_from_backpointers(hg, back)
    return hg.derivation(tree, float(best[hg.goal]))


# --- what an edge's own words translate, and sub-forests ------------------------------------
def _posteriors_kernel(
    in_ptr: NDArray[np.int64],
    in_edges: NDArray[np.int64],
    tail_ptr: NDArray[np.int64],
    tail_nodes: NDArray[np.int64],
    w: FloatArray,
    goal: int,
    alpha: FloatArray,
    beta: FloatArray,
    mu: FloatArray,
) -> None:  # pragma: no cover - compiled by numba; the Python body is the same algorithm
    num_nodes = in_ptr.shape[0] - 1
    num_edges = w.shape[0]
    inside_e = np.empty(num_edges)
    for v in range(num_nodes):  # inside, log semiring: log-sum-exp over incoming edges
        top = -np.inf
        for p in range(in_ptr[v], in_ptr[v + 1]):
            e = in_edges[p]
            s = w[e]
            for q in range(tail_ptr[e], tail_ptr[e + 1]):
                s += alpha[tail_nodes[q]]
            inside_e[e] = s
            if s > top:
                top = s
        if top == -np.inf:
            alpha[v] = -np.inf
            continue
        total = 0.0
        for p in range(in_ptr[v], in_ptr[v + 1]):
            total += np.exp(inside_e[in_edges[p]] - top)
        alpha[v] = top + np.log(total)
    for v in range(num_nodes):
        beta[v] = -np.inf
    beta[goal] = 0.0
    for v in range(num_nodes - 1, -1, -1):  # outside: heads before their tails
        if beta[v] == -np.inf:
            continue
        for p in range(in_ptr[v], in_ptr[v + 1]):
            e = in_edges[p]
            if inside_e[e] == -np.inf:
                continue
            for q in range(tail_ptr[e], tail_ptr[e + 1]):
                t = tail_nodes[q]
                c = beta[v] + inside_e[e] - alpha[t]  # w(e) + the other tails' inside
                if c > beta[t]:
                    beta[t] = c + np.log1p(np.exp(beta[t] - c))
                elif c > -np.inf:
                    beta[t] = beta[t] + np.log1p(np.exp(c - beta[t]))
    z = alpha[goal]
    for v in range(num_nodes):
        for p in range(in_ptr[v], in_ptr[v + 1]):
            e = in_edges[p]
            if inside_e[e] == -np.inf or beta[v] == -np.inf:
                mu[e] = 0.0
            else:
                mu[e] = np.exp(beta[v] + inside_e[e] - z)


def fast_edge_posteriors(hg: Hypergraph, weights: Weights) -> FloatArray:
    """:func:`edge_posteriors` computed by a compiled inside–outside pass over the arrays."""
    a = hg.arrays()
    w = np.require(resolve_edge_weights(hg, weights), dtype=np.float64, requirements=["C"])
    alpha = np.empty(hg.num_nodes)
    beta = np.empty(hg.num_nodes)
    mu = np.zeros(hg.num_edges)
    compiled(_posteriors_kernel)(
        a.in_ptr, a.in_edges, a.tail_ptr, a.tail_nodes, w, hg.goal, alpha, beta, mu
    )
    if alpha[hg.goal] == -math.inf:
        raise InternalError(f"the forest has no derivation of its goal node {hg.goal}")
    return mu


def _single_position_kernel(
    edge_span: NDArray[np.int64],
    tail_ptr: NDArray[np.int64],
    tail_nodes: NDArray[np.int64],
    node_span: NDArray[np.int64],
    out: NDArray[np.int64],
) -> None:  # pragma: no cover - compiled by numba; the Python body is the same algorithm
    for e in range(edge_span.shape[0]):
        i, j = edge_span[e, 0], edge_span[e, 1]
        own = j - i
        for q in range(tail_ptr[e], tail_ptr[e + 1]):
            t = tail_nodes[q]
            own -= node_span[t, 1] - node_span[t, 0]
        out[e] = -1
        if own != 1:
            continue
        for pos in range(i, j):
            gap = False
            for q in range(tail_ptr[e], tail_ptr[e + 1]):
                t = tail_nodes[q]
                if node_span[t, 0] <= pos < node_span[t, 1]:
                    gap = True
                    break
            if not gap:
                out[e] = pos
                break


def single_positions(hg: Hypergraph) -> NDArray[np.int64]:
    """For each edge, the one source position its own words translate, or −1 when they
    translate none or several (:func:`covered_positions`, compiled, for the one-word case)."""
    a = hg.arrays()
    node_span, edge_span = hg.spans()
    out = np.empty(hg.num_edges, dtype=np.int64)
    compiled(_single_position_kernel)(edge_span, a.tail_ptr, a.tail_nodes, node_span, out)
    return out


def covered_positions(hg: Hypergraph) -> list[tuple[int, ...]]:
    """The source positions each edge's own words translate: its span less its tails' spans
    (a derivation covers every source position with exactly one edge this way, so the
    posteriors of the edges covering a position sum to one)."""
    spans = [hg.nodes[v].span for v in range(hg.num_nodes)]
    out: list[tuple[int, ...]] = []
    for e in hg.edges:
        first, last = e.span
        gaps = [spans[t] for t in e.tails]
        out.append(tuple(i for i in range(first, last) if not any(a <= i < b for a, b in gaps)))
    return out


def restrict(hg: Hypergraph, keep: Sequence[bool] | NDArray[np.bool_]) -> Hypergraph | None:
    """The sub-forest of the derivations of the goal that use only edges with ``keep[e]``
    (nodes and edges renumbered in their order); None when no derivation of the goal is left.
    """
    if len(keep) != hg.num_edges:
        raise InvalidInputError(f"{len(keep)} edge flags for a forest of {hg.num_edges} edges")
    derivable = [False] * hg.num_nodes
    for v in range(hg.num_nodes):  # node ids are topological: tails come first
        derivable[v] = any(
            keep[e] and all(derivable[t] for t in hg.edges[e].tails) for e in hg.incoming(v)
        )
    if not derivable[hg.goal]:
        return None
    kept = [
        e for e in range(hg.num_edges)
        if keep[e] and derivable[hg.edges[e].head] and all(derivable[t] for t in hg.edges[e].tails)
    ]  # fmt: skip
    nodes = [hg.nodes[v] for v in range(hg.num_nodes)]
    edges = [
        Hyperedge(i, x.head, x.tails, x.target, x.features, x.span, x.rule_id)
        for i, x in enumerate(hg.edges[e] for e in kept)
    ]
    return prune_unreachable(Hypergraph(nodes, edges, hg.goal))


def covering_edges(hg: Hypergraph, position: int) -> NDArray[np.bool_]:
    """Which edges' own words translate source ``position`` (:func:`covered_positions` for one
    position, over the arrays): its span holds the position and none of its tails' spans does."""
    a = hg.arrays()
    node_span, edge_span = hg.spans()
    inside = (edge_span[:, 0] <= position) & (position < edge_span[:, 1])
    spans = node_span[a.tail_nodes]
    gap = (spans[:, 0] <= position) & (position < spans[:, 1])
    owner = np.repeat(np.arange(hg.num_edges), np.diff(a.tail_ptr))
    gapped = np.bincount(owner[gap], minlength=hg.num_edges) > 0
    return np.asarray(inside & ~gapped)


def _restrict_kernel(
    in_ptr: NDArray[np.int64],
    in_edges: NDArray[np.int64],
    tail_ptr: NDArray[np.int64],
    tail_nodes: NDArray[np.int64],
    keep: NDArray[np.bool_],
    goal: int,
    node_out: NDArray[np.bool_],
    edge_out: NDArray[np.bool_],
) -> bool:  # pragma: no cover - compiled by numba; the Python body is the same algorithm
    num_nodes = in_ptr.shape[0] - 1
    derivable = np.zeros(num_nodes, dtype=np.bool_)
    usable = np.zeros(keep.shape[0], dtype=np.bool_)  # kept, and every tail derivable
    for v in range(num_nodes):  # topological: tails first
        for p in range(in_ptr[v], in_ptr[v + 1]):
            e = in_edges[p]
            if not keep[e]:
                continue
            ok = True
            for q in range(tail_ptr[e], tail_ptr[e + 1]):
                if not derivable[tail_nodes[q]]:
                    ok = False
                    break
            if ok:
                usable[e] = True
                derivable[v] = True
    if not derivable[goal]:
        return False
    node_out[goal] = True
    for v in range(goal, -1, -1):  # reachable from the goal through usable edges
        if not node_out[v]:
            continue
        for p in range(in_ptr[v], in_ptr[v + 1]):
            e = in_edges[p]
            if usable[e]:
                edge_out[e] = True
                for q in range(tail_ptr[e], tail_ptr[e + 1]):
                    node_out[tail_nodes[q]] = True
    return True


def _kept(
    hg: Hypergraph, keep: NDArray[np.bool_] | Sequence[bool]
) -> tuple[NDArray[np.int64], NDArray[np.int64]] | None:
    """The nodes and edges of :func:`fast_restrict`'s sub-forest (old ids, in order), or None
    when the goal keeps no derivation."""
    keep = np.asarray(keep, dtype=np.bool_)
    if keep.shape != (hg.num_edges,):
        raise InvalidInputError(f"{len(keep)} edge flags for a forest of {hg.num_edges} edges")
    a = hg.arrays()
    node_in = np.zeros(hg.num_nodes, dtype=np.bool_)
    edge_in = np.zeros(hg.num_edges, dtype=np.bool_)
    if not compiled(_restrict_kernel)(
        a.in_ptr, a.in_edges, a.tail_ptr, a.tail_nodes, keep, hg.goal, node_in, edge_in
    ):
        return None
    return np.flatnonzero(node_in), np.flatnonzero(edge_in)


def derives(hg: Hypergraph, keep: NDArray[np.bool_] | Sequence[bool]) -> bool:
    """Whether the goal keeps a derivation that uses only edges with ``keep[e]`` (that
    :func:`restrict` would not be None), without making the sub-forest."""
    return _kept(hg, keep) is not None


class _Restricted:
    """Makes the nodes and edges of a restricted forest from its parent's, renumbered."""

    def __init__(self, hg: Hypergraph, nodes: NDArray[np.int64], edges: NDArray[np.int64],
                 new: NDArray[np.int64]) -> None:  # fmt: skip
        self.hg, self.old_nodes, self.old_edges = hg, nodes.tolist(), edges.tolist()
        self.new = new.tolist()

    def node(self, v: int) -> Node:
        return renumbered_node(self.hg.nodes[self.old_nodes[v]], self.new)

    def edge(self, e: int) -> Hyperedge:
        return renumbered_edge(e, self.hg.edges[self.old_edges[e]], self.new)


def _compact(ids: NDArray[np.int64], names: Sequence[str], sort: bool) -> tuple[
    NDArray[np.int64], tuple[str, ...]
]:  # fmt: skip
    """``ids`` into ``names`` renumbered over the names they use: in first-seen order, or in
    the names' sorted order (as :class:`HypergraphArrays` orders words and features)."""
    used, first = np.unique(ids, return_index=True)
    order = used[np.argsort(first, kind="stable")] if not sort else np.array(
        sorted(used.tolist(), key=names.__getitem__), dtype=np.int64)  # fmt: skip
    remap = np.full(len(names), -1, dtype=np.int64)
    remap[order] = np.arange(len(order))
    return remap[ids], tuple(names[i] for i in order.tolist())


def fast_restrict(hg: Hypergraph, keep: NDArray[np.bool_] | Sequence[bool]) -> Hypergraph | None:
    """:func:`restrict` over the arrays: the same sub-forest (nodes and edges in their order,
    words first-seen, features sorted), made without building the forest's objects; its
    nodes and edges are its parent's, renumbered, made when asked for."""
    kept = _kept(hg, keep)
    if kept is None:
        return None
    nodes, edges = kept
    a = hg.arrays()
    new = np.full(hg.num_nodes, -1, dtype=np.int64)
    new[nodes] = np.arange(len(nodes))
    heads = new[a.edge_head[edges]]
    tail_ptr, at = gather_rows(a.tail_ptr, edges)
    term_ptr, term_at = gather_rows(a.term_ptr, edges)
    term_ids, vocabulary = _compact(a.term_ids[term_at], a.vocabulary, sort=False)
    feat_ptr, feat_at = gather_rows(a.feat_ptr, edges)
    feat_ids, feature_names = _compact(a.feat_ids[feat_at], a.feature_names, sort=True)
    in_edges = np.argsort(heads, kind="stable")  # each node's edges in edge order
    arrays = HypergraphArrays(
        num_nodes=len(nodes),
        num_edges=len(edges),
        goal=int(new[hg.goal]),
        edge_head=heads,
        tail_ptr=tail_ptr,
        tail_nodes=new[a.tail_nodes[at]],
        in_ptr=ptr_from_counts(np.bincount(heads, minlength=len(nodes))),
        in_edges=in_edges.astype(np.int64),
        term_ptr=term_ptr,
        term_ids=term_ids,
        vocabulary=vocabulary,
        feat_ptr=feat_ptr,
        feat_ids=feat_ids,
        feat_vals=a.feat_vals[feat_at],
        feature_names=feature_names,
    )
    node_span, edge_span = hg.spans()
    made = _Restricted(hg, nodes, edges, new)
    return Hypergraph.from_arrays(
        arrays, made.node, made.edge, (node_span[nodes], edge_span[edges])
    )
