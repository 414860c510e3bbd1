"""Translation forests: ordered, directed, acyclic hypergraphs ⟨V, E, goal⟩.

Hieber & Riezler 2015, §3 ("Dynamic Programming on Hypergraphs"): decoding with a synchronous
CFG builds a hypergraph whose nodes are items (nonterminal, source span and, in the +LM forest,
an LM state) and whose hyperedges are rule applications. Each hyperedge ``e`` has a head node, an
ordered tuple of tail nodes (tail ``i`` fills the rule's gap ``[X,i+1]``), a target yield in
which gaps are referenced by tail position, and a sparse feature vector ``φ(e)``; its weight
is ``W(e; w) = w · φ(e)``. A derivation is a tree of hyperedges rooted at the goal node.

Nodes are stored in topological order (every tail precedes its head), so dynamic programmes
run as single loops. :class:`HypergraphBuilder` appends nodes and edges in any order and
sorts them at :meth:`HypergraphBuilder.build` when needed. :meth:`Hypergraph.arrays` gives a
numpy view (CSR tails, incoming edges, target terminals and features) for vectorised
algorithms, and :meth:`Hypergraph.edge_weights` computes all edge weights as one sparse
matrix–vector product, cached per weight vector.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain
from typing import Any, TypeVar, overload

import numpy as np
from numpy.typing import NDArray

from service.core.csr import ptr_from_counts
from service.errors import InvalidInputError
from service.records import Translation

Span = tuple[int, int]
# A target yield: terminals are strings, gaps are ints (the position of the tail that fills it).
Yield = tuple[str | int, ...]
FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]

_WEIGHT_CACHE_SIZE = 8


@dataclass(frozen=True, slots=True)
class Node:
    """An item of the forest: nonterminal ``label`` over source ``span`` (and an LM state)."""

    id: int
    label: str
    span: Span
    state: Hashable | None = None


@dataclass(frozen=True, slots=True)
class Hyperedge:
    """A rule application ``head -> tails`` with its target yield and features.

    ``target`` holds terminals (str) and gap references (int ``i``: the yield of ``tails[i]``).
    ``features`` is the sparse feature vector φ(e); treat it as read-only.
    """

    id: int
    head: int
    tails: tuple[int, ...]
    target: Yield
    features: dict[str, float] = field(hash=False, compare=False)
    span: Span
    rule_id: int = -1

    @property
    def arity(self) -> int:
        return len(self.tails)

    @property
    def target_terminals(self) -> tuple[str, ...]:
        return tuple(s for s in self.target if isinstance(s, str))


@dataclass(frozen=True, slots=True)
class DerivationNode:
    """A derivation tree: the hyperedge used here and one subtree per tail, in tail order."""

    edge: int
    children: tuple[DerivationNode, ...] = ()

    def preorder(self) -> Iterator[int]:
        """The edges of the tree, parent before children."""
        stack = [self]
        while stack:
            node = stack.pop()
            yield node.edge
            stack.extend(reversed(node.children))


@dataclass(frozen=True, slots=True)
class Derivation:
    """One derivation of the goal: tree, score, string, feature vector and rules used.

    ``edges``, ``rule_ids`` and ``spans`` list the hyperedges in preorder with the rule id and
    the source span of each.
    """

    tree: DerivationNode
    score: float
    tokens: tuple[str, ...]
    features: dict[str, float] = field(hash=False, compare=False)
    edges: tuple[int, ...]
    rule_ids: tuple[int, ...]
    spans: tuple[Span, ...]

    @property
    def text(self) -> str:
        return " ".join(self.tokens)

    def translation(self) -> Translation:
        """The n-best-list record of this derivation."""
        return Translation(self.tokens, self.score, dict(self.features))


@dataclass(frozen=True, slots=True)
class HypergraphArrays:
    """A numpy view of a hypergraph for vectorised algorithms (all index arrays int64).

    - ``edge_head[e]``; tails of ``e``: ``tail_nodes[tail_ptr[e]:tail_ptr[e+1]]``;
    - incoming edges of node ``v`` (in insertion order): ``in_edges[in_ptr[v]:in_ptr[v+1]]``;
    - target terminals of ``e`` in order: ``term_ids[term_ptr[e]:term_ptr[e+1]]``, ids into
      ``vocabulary`` (the forest's target words, first-seen order);
    - features of ``e``: ``feat_ids[feat_ptr[e]:feat_ptr[e+1]]`` (ids into ``feature_names``,
      sorted) with values ``feat_vals``.

    The arrays are made read-only on construction: views of one forest are shared.
    """

    num_nodes: int
    num_edges: int
    goal: int
    edge_head: IntArray
    tail_ptr: IntArray
    tail_nodes: IntArray
    in_ptr: IntArray
    in_edges: IntArray
    term_ptr: IntArray
    term_ids: IntArray
    vocabulary: tuple[str, ...]
    feat_ptr: IntArray
    feat_ids: IntArray
    feat_vals: FloatArray
    feature_names: tuple[str, ...]

    def __post_init__(self) -> None:
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            if isinstance(value, np.ndarray):
                value.setflags(write=False)

    @property
    def arity(self) -> IntArray:
        return np.diff(self.tail_ptr)


def _readonly(a: NDArray[np.generic]) -> None:
    a.setflags(write=False)


class _ArrayParts:
    """Flat lists behind :class:`HypergraphArrays`, extended edge by edge as edges are added,
    so that building the numpy view is a few C-level conversions rather than a loop over edges.
    """

    __slots__ = (
        "feat_len",
        "feat_names",
        "feat_vals",
        "heads",
        "tail_len",
        "tails",
        "term_len",
        "terms",
    )

    def __init__(self) -> None:
        self.heads: list[int] = []
        self.tail_len: list[int] = []
        self.tails: list[int] = []
        self.term_len: list[int] = []
        self.terms: list[str | int] = []  # only the target words (str), edge after edge
        self.feat_len: list[int] = []
        self.feat_names: list[str] = []
        self.feat_vals: list[float] = []

    def add(
        self, head: int, tails: tuple[int, ...], target: Yield, feats: dict[str, float]
    ) -> None:
        self.heads.append(head)
        self.tail_len.append(len(tails))
        self.tails.extend(tails)
        if tails:
            words = [t for t in target if type(t) is str]
            self.terms.extend(words)
            self.term_len.append(len(words))
        else:  # no gaps: every symbol is a word
            self.terms.extend(target)
            self.term_len.append(len(target))
        self.feat_names.extend(feats)
        self.feat_vals.extend(feats.values())
        self.feat_len.append(len(feats))

    def arrays(
        self, num_nodes: int, goal: int, incoming: Sequence[Sequence[int]], new: list[int] | None
    ) -> HypergraphArrays:
        heads = np.array(self.heads, dtype=np.int64)
        tails = np.array(self.tails, dtype=np.int64)
        if new is not None:
            renumber = np.array(new, dtype=np.int64)
            heads, tails = renumber[heads], renumber[tails]
        vocab = {w: i for i, w in enumerate(dict.fromkeys(self.terms))}  # first-seen order
        names = sorted(set(self.feat_names))
        name_id = {n: i for i, n in enumerate(names)}
        arrays = HypergraphArrays(
            num_nodes=num_nodes,
            num_edges=len(self.heads),
            goal=goal,
            edge_head=heads,
            tail_ptr=ptr_from_counts(self.tail_len),
            tail_nodes=tails,
            in_ptr=ptr_from_counts([len(x) for x in incoming]),
            in_edges=np.array(list(chain.from_iterable(incoming)), dtype=np.int64),
            term_ptr=ptr_from_counts(self.term_len),
            term_ids=np.array(list(map(vocab.__getitem__, self.terms)), dtype=np.int64),
            vocabulary=tuple(str(w) for w in vocab),
            feat_ptr=ptr_from_counts(self.feat_len),
            feat_ids=np.array(list(map(name_id.__getitem__, self.feat_names)), dtype=np.int64),
            feat_vals=np.array(self.feat_vals, dtype=np.float64),
            feature_names=tuple(names),
        )
        return arrays


T = TypeVar("T")


class LazySequence(Sequence[T]):
    """A read-only sequence whose items are made on first access and then kept.

    An array-backed forest (:meth:`Hypergraph.from_arrays`) shows its nodes and hyperedges
    through two of these, so that code asking for one edge builds one object, not the forest.
    """

    __slots__ = ("_items", "_make")

    def __init__(self, length: int, make: Callable[[int], T]) -> None:
        self._items: list[T | None] = [None] * length
        self._make = make

    @property
    def maker(self) -> Callable[[int], T]:
        """The function that makes item ``i``."""
        return self._make

    def __len__(self) -> int:
        return len(self._items)

    @overload
    def __getitem__(self, i: int) -> T: ...

    @overload
    def __getitem__(self, i: slice) -> Sequence[T]: ...

    def __getitem__(self, i: int | slice) -> T | Sequence[T]:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self._items)))]
        item = self._items[i]
        if item is None:
            if i < 0:
                i += len(self._items)
            item = self._items[i] = self._make(i)
        return item

    def __iter__(self) -> Iterator[T]:
        for i in range(len(self._items)):
            yield self[i]


class Hypergraph:
    """An immutable forest with nodes in topological order and a goal node.

    Build it with :class:`HypergraphBuilder`, or from arrays with :meth:`from_arrays` (the
    compiled decoder's forests: node and edge objects are made only when asked for).
    ``incoming(v)`` lists the edges whose head is ``v`` in insertion order; that order breaks
    ties in every algorithm.
    """

    __slots__ = (
        "_arrays",
        "_feature_matrices",
        "_incoming",
        "_parts",
        "_renumber",
        "_spans",
        "_weights_cache",
        "edges",
        "goal",
        "nodes",
    )

    def __init__(
        self,
        nodes: Sequence[Node],
        edges: Sequence[Hyperedge],
        goal: int,
        _parts: _ArrayParts | None = None,
        _renumber: list[int] | None = None,
    ) -> None:
        if not nodes:
            raise InvalidInputError("a hypergraph needs at least one node (the goal)")
        if not 0 <= goal < len(nodes):
            raise InvalidInputError(f"goal node {goal} is not one of the {len(nodes)} nodes")
        incoming: list[list[int]] = [[] for _ in nodes]
        if any(v.id != i for i, v in enumerate(nodes)) or any(
            e.id != i for i, e in enumerate(edges)
        ):
            raise InvalidInputError("node and edge ids must equal their positions")
        for e in edges:
            if any(t >= e.head for t in e.tails):
                raise InvalidInputError(
                    f"hyperedge {e.id} has a tail at or after its head {e.head}: the nodes are "
                    "not in topological order; build the forest with HypergraphBuilder"
                )
            incoming[e.head].append(e.id)
        self.nodes: Sequence[Node] = tuple(nodes)
        self.edges: Sequence[Hyperedge] = tuple(edges)
        self.goal = goal
        self._incoming: tuple[tuple[int, ...], ...] | None = tuple(tuple(x) for x in incoming)
        self._arrays: HypergraphArrays | None = None
        self._parts = _parts  # the builder's flat lists (node ids before ``_renumber``)
        self._renumber = _renumber
        self._feature_matrices: dict[tuple[str, ...], FloatArray] = {}
        self._weights_cache: OrderedDict[tuple[tuple[str, float], ...], FloatArray] = OrderedDict()
        self._spans: tuple[IntArray, IntArray] | None = None

    @classmethod
    def from_arrays(
        cls,
        arrays: HypergraphArrays,
        node: Callable[[int], Node],
        edge: Callable[[int], Hyperedge],
        spans: tuple[IntArray, IntArray] | None = None,
    ) -> Hypergraph:
        """A forest given by its arrays (trusted: nodes in topological order, ids dense).

        ``node(v)`` and ``edge(e)`` make the objects on first access; every algorithm that
        reads :meth:`arrays` never asks for them. ``spans``: the nodes' and the edges' source
        spans as ``[V, 2]`` and ``[E, 2]`` arrays (:meth:`spans`), when the maker has them.
        """
        hg = cls.__new__(cls)
        hg.nodes = LazySequence(arrays.num_nodes, node)
        hg.edges = LazySequence(arrays.num_edges, edge)
        hg.goal = arrays.goal
        hg._incoming = None
        hg._arrays = arrays
        hg._parts = None
        hg._renumber = None
        hg._feature_matrices = {}
        hg._weights_cache = OrderedDict()
        hg._spans = spans
        return hg

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickling (a decoded query sent to shard workers): an array-backed forest goes as
        its arrays with every node and hyperedge made (the functions that make them on demand
        belong to the decoder, which stays here); others as their nodes and edges."""
        if self.array_backed:
            nodes = tuple(self.nodes[i] for i in range(self.num_nodes))
            assert isinstance(self.edges, LazySequence)
            # the maker's own portable form (the compiled decoder's: its arrays, and the
            # yields of the rules used), else every edge made once
            portable = getattr(getattr(self.edges.maker, "__self__", None), "portable_edges", None)
            if portable is not None:
                maker: Callable[[int], Hyperedge] = portable()
            else:
                edges = [self.edges[i] for i in range(self.num_edges)]
                maker = _EdgeFromArrays(
                    self.arrays(),
                    tuple(e.target for e in edges),
                    np.asarray([e.span for e in edges], dtype=np.int64).reshape(-1, 2),
                    np.asarray([e.rule_id for e in edges], dtype=np.int64),
                )
            return (_rebuild_array_backed, (self.arrays(), nodes, maker))
        return (Hypergraph, (tuple(self.nodes), tuple(self.edges), self.goal))

    @property
    def array_backed(self) -> bool:
        """True for a forest made by :meth:`from_arrays` (objects made on demand)."""
        return isinstance(self.edges, LazySequence)

    @property
    def num_nodes(self) -> int:
        return len(self.nodes)

    @property
    def num_edges(self) -> int:
        return len(self.edges)

    def incoming(self, v: int) -> tuple[int, ...]:
        """Ids of the hyperedges whose head is node ``v``."""
        if self._incoming is None:
            a = self.arrays()
            ptr, edges = a.in_ptr.tolist(), a.in_edges.tolist()
            self._incoming = tuple(tuple(edges[ptr[u] : ptr[u + 1]]) for u in range(a.num_nodes))
        return self._incoming[v]

    def __repr__(self) -> str:
        return f"Hypergraph(|V|={self.num_nodes}, |E|={self.num_edges}, goal={self.goal})"

    # --- numpy view, features and weights -----------------------------------------------
    def arrays(self) -> HypergraphArrays:
        """The numpy view of this forest (built once)."""
        if self._arrays is None:
            parts = self._parts
            if parts is None:
                parts = _ArrayParts()
                for e in self.edges:
                    parts.add(e.head, e.tails, e.target, e.features)
            assert self._incoming is not None  # only array-backed forests lack it
            self._arrays = parts.arrays(self.num_nodes, self.goal, self._incoming, self._renumber)
            self._parts = None
        return self._arrays

    def spans(self) -> tuple[IntArray, IntArray]:
        """The source span of every node and of every edge, as ``[V, 2]`` and ``[E, 2]``
        int64 arrays (``[start, end)``; an edge's is its head's); built once."""
        if self._spans is None:
            node = np.array([v.span for v in self.nodes], dtype=np.int64).reshape(-1, 2)
            edge = np.array([e.span for e in self.edges], dtype=np.int64).reshape(-1, 2)
            _readonly(node)
            _readonly(edge)
            self._spans = (node, edge)
        return self._spans

    def feature_matrix(self, names: Sequence[str]) -> FloatArray:
        """The dense ``[E × len(names)]`` matrix of edge features (absent: 0), cached per list.

        Row ``e`` is the dense vector of hyperedge ``e`` over ``names``.
        """
        key = tuple(names)
        m = self._feature_matrices.get(key)
        if m is None:
            a = self.arrays()
            column = {n: i for i, n in enumerate(key)}
            col_of_id = np.array([column.get(n, -1) for n in a.feature_names], dtype=np.int64)
            rows = np.repeat(np.arange(a.num_edges), np.diff(a.feat_ptr))
            cols = col_of_id[a.feat_ids] if len(a.feat_ids) else a.feat_ids
            keep = cols >= 0
            m = np.zeros((a.num_edges, len(key)), dtype=np.float64)
            m[rows[keep], cols[keep]] = a.feat_vals[keep]
            _readonly(m)
            self._feature_matrices[key] = m
        return m

    def edge_weights(self, weights: Mapping[str, float]) -> FloatArray:
        """``W(e; w) = w · φ(e)`` for every edge (features missing from ``weights`` count 0).

        Computed as one sparse matrix–vector product and cached per weight vector (the key is
        the sorted (name, value) pairs); the returned array is read-only.
        """
        key = tuple(sorted(weights.items()))
        cached = self._weights_cache.get(key)
        if cached is not None:
            self._weights_cache.move_to_end(key)
            return cached
        bad = [f"{n}={v!r}" for n, v in key if not np.isfinite(v)]
        if bad:
            raise InvalidInputError(
                f"weights must be finite numbers; got {', '.join(bad)}: fix the weights file"
            )
        a = self.arrays()
        w = np.array([weights.get(n, 0.0) for n in a.feature_names], dtype=np.float64)
        rows = np.repeat(np.arange(a.num_edges), np.diff(a.feat_ptr))
        contrib = a.feat_vals * w[a.feat_ids] if len(a.feat_ids) else a.feat_vals
        result = np.bincount(rows, weights=contrib, minlength=a.num_edges).astype(np.float64)
        _readonly(result)
        self._weights_cache[key] = result
        if len(self._weights_cache) > _WEIGHT_CACHE_SIZE:
            self._weights_cache.popitem(last=False)
        return result

    # --- derivations -----------------------------------------------------------------------
    def derivation(self, tree: DerivationNode, score: float) -> Derivation:
        """The :class:`Derivation` record of ``tree`` (its string, features and rules used)."""
        edges = tuple(tree.preorder())
        features: dict[str, float] = {}
        for e in edges:
            for n, v in self.edges[e].features.items():
                features[n] = features.get(n, 0.0) + v
        return Derivation(
            tree=tree,
            score=score,
            tokens=self.yield_of(tree),
            features=features,
            edges=edges,
            rule_ids=tuple(self.edges[e].rule_id for e in edges),
            spans=tuple(self.edges[e].span for e in edges),
        )

    def yield_of(self, tree: DerivationNode) -> tuple[str, ...]:
        """The target string of a derivation tree (gaps filled by the tails' strings)."""
        out: list[str] = []
        for s in self.edges[tree.edge].target:
            if isinstance(s, str):
                out.append(s)
            else:
                out.extend(self.yield_of(tree.children[s]))
        return tuple(out)

    def check_derivation(self, tree: DerivationNode, node: int | None = None) -> None:
        """Raise unless ``tree`` is a derivation of ``node`` (default: the goal) in this forest."""
        v = self.goal if node is None else node
        e = self.edges[tree.edge]
        if e.head != v or len(tree.children) != e.arity:
            raise InvalidInputError(f"edge {e.id} does not derive node {v} with its children")
        for t, child in zip(e.tails, tree.children, strict=True):
            self.check_derivation(child, t)


def reachable(hg: Hypergraph) -> tuple[list[int], list[int]]:
    """Ids of the nodes reachable top-down from the goal, and of the edges into them (sorted).

    A node is reachable if it is the goal or a tail of an edge whose head is reachable; an
    edge is kept if its head is reachable. Every derivation of the goal uses only these nodes
    and edges. A depth-first search from the goal through the incoming edges' tails (the slow,
    obviously correct reference for the compiled decoder's pass,
    :func:`service.mt.decoder.kernel.reachable`).
    """
    seen = {hg.goal}
    stack = [hg.goal]
    while stack:
        v = stack.pop()
        for e in hg.incoming(v):
            for t in hg.edges[e].tails:
                if t not in seen:
                    seen.add(t)
                    stack.append(t)
    return sorted(seen), [e.id for e in hg.edges if e.head in seen]


def renumbered_node(v: Node, new: Mapping[int, int] | Sequence[int]) -> Node:
    """Node ``v`` with the id ``new[v.id]``."""
    return Node(new[v.id], v.label, v.span, v.state)


def renumbered_edge(eid: int, e: Hyperedge, new: Mapping[int, int] | Sequence[int]) -> Hyperedge:
    """Edge ``e`` as edge ``eid``, its head and tails renumbered by ``new`` (old id -> new id)."""
    return Hyperedge(
        eid, new[e.head], tuple(new[t] for t in e.tails), e.target, e.features, e.span, e.rule_id
    )


def prune_unreachable(hg: Hypergraph) -> Hypergraph:
    """The sub-forest of the nodes and edges reachable from the goal (:func:`reachable`).

    Nodes and edges keep their order and are renumbered by it (so nodes stay topological and
    every node's incoming edges keep their order, which breaks ties in every algorithm); the
    derivations of the goal, their scores, strings and features are unchanged. Cube pruning
    leaves many +LM nodes that no derivation of the goal uses (an item popped in its cell but
    never popped as a tail above it); cdec drops them too. Returns ``hg`` itself when
    everything is reachable.
    """
    nodes, edges = reachable(hg)
    if len(nodes) == hg.num_nodes and len(edges) == hg.num_edges:
        return hg
    new = {old: i for i, old in enumerate(nodes)}
    kept_nodes = [renumbered_node(hg.nodes[old], new) for old in nodes]
    kept_edges = [renumbered_edge(i, hg.edges[old], new) for i, old in enumerate(edges)]
    return Hypergraph(kept_nodes, kept_edges, new[hg.goal])


def topological_order(num_nodes: int, edges: Sequence[Hyperedge]) -> list[int]:
    """Node ids ordered so that every tail precedes its head (stable: ties keep id order).

    Raises :class:`InvalidInputError` naming a node on a cycle if the graph is cyclic.
    """
    import heapq

    indegree = [0] * num_nodes  # number of (edge, tail) pairs still unresolved per head
    users: list[list[int]] = [[] for _ in range(num_nodes)]  # tail -> heads, with multiplicity
    for e in edges:
        for t in e.tails:
            indegree[e.head] += 1
            users[t].append(e.head)
    ready = [v for v in range(num_nodes) if indegree[v] == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        v = heapq.heappop(ready)
        order.append(v)
        for h in users[v]:
            indegree[h] -= 1
            if indegree[h] == 0:
                heapq.heappush(ready, h)
    if len(order) != num_nodes:
        stuck = next(v for v in range(num_nodes) if indegree[v] > 0)
        raise InvalidInputError(
            f"the hypergraph has a cycle through node {stuck}: a forest must be acyclic"
        )
    return order


class HypergraphBuilder:
    """Appends nodes and hyperedges, then :meth:`build` sorts them topologically.

    If the nodes were not added in topological order, :meth:`build` renumbers them and sets
    ``renumbering[old_id] = new_id`` (otherwise ``renumbering`` stays ``None``). Edge ids never
    change.
    """

    def __init__(self) -> None:
        self._nodes: list[Node] = []
        self._edges: list[Hyperedge] = []
        self._parts = _ArrayParts()
        self._built = False
        self.renumbering: list[int] | None = None

    @property
    def num_nodes(self) -> int:
        return len(self._nodes)

    @property
    def num_edges(self) -> int:
        return len(self._edges)

    def add_node(self, label: str, span: Span, state: Hashable | None = None) -> int:
        """Append a node and return its id."""
        self._check_open()
        i, j = span
        if not 0 <= i <= j:
            raise InvalidInputError(f"node span {span} is not a source span (0 <= i <= j)")
        node = Node(len(self._nodes), label, (i, j), state)
        self._nodes.append(node)
        return node.id

    def add_edge(
        self,
        head: int,
        tails: Sequence[int],
        target: Sequence[str | int],
        features: Mapping[str, float],
        span: Span | None = None,
        rule_id: int = -1,
    ) -> int:
        """Append a hyperedge and return its id.

        ``target`` is the edge's yield: terminals (strings) and tail positions (ints; a rule's
        gap symbols ``[X,k]`` become ``k - 1`` with :func:`service.mt.rules.target_yield`);
        each tail must be referenced exactly once. ``span`` defaults to the head's span.
        """
        self._check_open()
        eid = len(self._edges)
        n = len(self._nodes)
        tails_t = tuple(tails)
        for v in (head, *tails_t):
            if not 0 <= v < n:
                raise InvalidInputError(f"hyperedge {eid} refers to node {v}, not one of {n}")
        tgt: Yield = tuple(target)
        if tails_t or any(isinstance(s, int) for s in tgt):
            gaps = sorted(s for s in tgt if isinstance(s, int))
            if gaps != list(range(len(tails_t))):
                raise InvalidInputError(
                    f"hyperedge {eid}: target {list(target)} must reference each of its "
                    f"{len(tails_t)} tails exactly once"
                )
        feats = dict(features)
        total = sum(feats.values())
        if total - total != 0.0:  # NaN or ±inf somewhere (or an overflowing sum)
            bad = [f"{k}={v!r}" for k, v in feats.items() if not math.isfinite(v)]
            raise InvalidInputError(
                f"hyperedge {eid}: feature values must be finite: {bad or list(feats.items())}"
            )
        edge = Hyperedge(
            id=eid,
            head=head,
            tails=tails_t,
            target=tgt,
            features=feats,
            span=self._nodes[head].span if span is None else (span[0], span[1]),
            rule_id=rule_id,
        )
        self._edges.append(edge)
        self._parts.add(head, tails_t, tgt, feats)
        return eid

    def add_edge_trusted(
        self,
        head: int,
        tails: tuple[int, ...],
        target: Yield,
        features: dict[str, float],
        span: Span,
        rule_id: int = -1,
    ) -> int:
        """:meth:`add_edge` without validation, for a decoder that builds well-formed edges.

        ``target`` must already be a :data:`Yield` (gaps as tail positions), ``tails`` must
        name existing nodes and ``features`` must be finite; ``features`` is stored as given
        (not copied), so the caller must not mutate it afterwards.
        """
        eid = len(self._edges)
        self._edges.append(Hyperedge(eid, head, tails, target, features, span, rule_id))
        self._parts.add(head, tails, target, features)
        return eid

    def _check_open(self) -> None:
        if self._built:
            raise InvalidInputError("the hypergraph was already built; start a new builder")

    def build(self, goal: int) -> Hypergraph:
        """The hypergraph with nodes in topological order (renumbered if needed).

        The builder is closed afterwards: adding to it raises.
        """
        if not 0 <= goal < len(self._nodes):
            raise InvalidInputError(f"goal node {goal} is not one of the {len(self._nodes)} nodes")
        order = topological_order(len(self._nodes), self._edges)
        self._built = True
        if order == list(range(len(order))):
            self.renumbering = None
            return Hypergraph(self._nodes, self._edges, goal, self._parts)
        new = [0] * len(order)
        for pos, old in enumerate(order):
            new[old] = pos
        self.renumbering = new
        nodes = [renumbered_node(self._nodes[o], new) for o in order]
        edges = [renumbered_edge(e.id, e, new) for e in self._edges]
        return Hypergraph(nodes, edges, new[goal], self._parts, new)


def edge_from_arrays(
    a: HypergraphArrays, e: int, target: Yield, span: Span, rule_id: int
) -> Hyperedge:
    """Hyperedge ``e`` of the forest with arrays ``a``: its head, tails and features read from
    the arrays, its target yield, span and rule as given (what an array-backed forest's edge
    maker knows and the arrays do not)."""
    lo, hi = int(a.feat_ptr[e]), int(a.feat_ptr[e + 1])
    names = a.feature_names
    features = {
        names[i]: v
        for i, v in zip(a.feat_ids[lo:hi].tolist(), a.feat_vals[lo:hi].tolist(), strict=True)
    }
    tails = tuple(a.tail_nodes[a.tail_ptr[e] : a.tail_ptr[e + 1]].tolist())
    return Hyperedge(e, int(a.edge_head[e]), tails, target, features, span, rule_id)


class _EdgeFromArrays:
    """Makes hyperedge ``e`` of an unpickled array-backed forest: its features from the
    arrays, its target yield, span and rule as pickled (a few bytes an edge)."""

    def __init__(
        self, arrays: HypergraphArrays, targets: tuple[Yield, ...], spans: IntArray, rules: IntArray
    ) -> None:
        self.arrays, self.targets, self.spans, self.rules = arrays, targets, spans, rules

    def __call__(self, e: int) -> Hyperedge:
        span = (int(self.spans[e, 0]), int(self.spans[e, 1]))
        return edge_from_arrays(self.arrays, e, self.targets[e], span, int(self.rules[e]))


class PortableEdges:
    """Makes hyperedge ``e`` of a forest sent to another process from its arrays: the rule
    (``rules[e]``, or ``pass_code``: the source word ``tokens[ei[e]]``, ``glue_code``:
    ``(0, 1)``, else ``(0,)``), the target yield of each rule used (``yields``), the span
    ``(ei[e], ej[e])`` and the features of the arrays. A few bytes an edge, and no objects
    made to send it."""

    def __init__(
        self,
        arrays: HypergraphArrays,
        rules: IntArray,
        ei: IntArray,
        ej: IntArray,
        tokens: tuple[str, ...],
        yields: dict[int, Yield],
        pass_code: int,
        glue_code: int,
    ) -> None:
        self.arrays, self.rules, self.ei, self.ej = arrays, rules, ei, ej
        self.tokens, self.yields = tokens, yields
        self.pass_code, self.glue_code = pass_code, glue_code

    def __call__(self, e: int) -> Hyperedge:
        r = int(self.rules[e])
        target: Yield
        if r >= 0:
            target = self.yields[r]
        elif r == self.pass_code:
            target = (self.tokens[int(self.ei[e])],)
        elif r == self.glue_code:
            target = (0, 1)
        else:
            target = (0,)
        span = (int(self.ei[e]), int(self.ej[e]))
        return edge_from_arrays(self.arrays, e, target, span, max(r, -1))


def _rebuild_array_backed(
    arrays: HypergraphArrays, nodes: tuple[Node, ...], edge: Callable[[int], Hyperedge]
) -> Hypergraph:
    """The forest :meth:`Hypergraph.__reduce__` pickled."""
    return Hypergraph.from_arrays(arrays, nodes.__getitem__, edge)
