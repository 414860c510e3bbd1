"""k-best derivations of a translation forest (Huang & Chiang 2005, Algorithm 3), in Python.

Lazy k-best extraction: a derivation of node ``v`` is written ``⟨e, j⟩`` — an incoming
hyperedge ``e`` and, per tail ``T_i(e)``, the rank ``j_i`` of the tail's derivation used. Each
node keeps the list ``D̂(v)`` of its derivations found so far, in score order (memoised), and
a priority queue ``cand[v]`` of candidates. The best is the Viterbi derivation; after
``⟨e, j⟩`` is popped, its successors ``⟨e, j + b^i⟩`` (one rank further in one tail) are
pushed, computing the tails' further derivations only when asked for ("LazyNext"). Extracting
the k best of the goal costs ``O(|E| + |D| k log k)``.

The extractor reads the forest's arrays (:meth:`Hypergraph.arrays`: tails, incoming edges,
target words), not its node and edge objects, which an array-backed forest only makes when
asked for. The initial candidates ``⟨e, 0⟩`` of every node are scored and sorted once with
numpy (:func:`~.candidates.initial_candidates`: score, then edge id, the order the heap of
Algorithm 3 pops them in); ``cand[v]`` is that sorted run merged with a heap of the successors
pushed so far, so a node's incoming edges cost no Python work until they are popped.
Algorithm 3 keeps the set of candidates pushed so far, since ``⟨e, j⟩`` has a predecessor in
every tail with ``j_i > 0``; here ``⟨e, j⟩`` is pushed only from the one that differs in its
last non-zero rank (from ``⟨e, j⟩`` only the successors ``j + b^i`` with ``j_k = 0`` for all
``k > i``), which reaches every ``⟨e, j⟩`` exactly once without the set. The order is
unchanged, ties included: a successor's key ``(−score, e, j)`` is above its predecessor's (a
score only falls as a rank rises, and float addition is monotone), so either way the pops
follow that key. Target strings are built from the edges' word ids; only an edge whose gap
order the arrays do not give (a gap among words, or two gaps) is asked for its
:attr:`Hyperedge.target`, once, and only when it lies on an extracted derivation.

The score of a derivation is ``Σ_{e ∈ h} W(e; w)`` (Hieber & Riezler 2015, §3). This is the
engine of plain k-best lists (:func:`kbest`; PSQ's n-best derivations, served) and the ground
of the unique k-best reference (:mod:`.reference`); there is no compiled plain k-best.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Sequence

import numpy as np

from service.forest.hypergraph import Derivation, DerivationNode, Hypergraph
from service.forest.inference import Weights, resolve_edge_weights, viterbi_scores
from service.forest.kbest.candidates import (
    Entry,
    canonical_term_ids,
    initial_candidates,
    target_pattern,
)

_GAP = (~0,)  # the target of a unary edge without words: the tail's yield
_TWO_GAPS = (~0, ~1)  # a binary edge without words, gaps in order (glue rules)


def _fill(pattern: tuple[int, ...], subs: Sequence[tuple[int, ...]]) -> tuple[int, ...]:
    """``pattern`` with each gap ``~i`` replaced by ``subs[i]``."""
    out: list[int] = []
    for s in pattern:
        if s >= 0:
            out.append(s)
        else:
            out.extend(subs[~s])
    return tuple(out)


class LazyKBest:
    """Lazily enumerates the derivations of every node in order of decreasing score.

    ``derivation(j)`` returns the ``j``-th best derivation of the goal (0-based) or ``None``
    when there are fewer; iterating yields all of them in order. Ties are broken by edge id,
    then by the tails' ranks, so the order is deterministic.
    """

    def __init__(self, hg: Hypergraph, weights: Weights) -> None:
        self.hg = hg
        a = hg.arrays()
        self._num_nodes = a.num_nodes
        w = resolve_edge_weights(hg, weights)
        # One Viterbi pass gives every node's 1-best derivation D̂_1(v) = ⟨back[v], 0⟩.
        best, back = viterbi_scores(hg, w)
        self._w: list[float] = w.tolist()
        self._viterbi: list[float] = best.tolist()
        self._back: list[int] = back.tolist()
        self._tail_ptr: list[int] = a.tail_ptr.tolist()
        self._tail_nodes: list[int] = a.tail_nodes.tolist()
        arity = np.diff(a.tail_ptr)
        max_arity = int(arity.max()) if a.num_edges else 0
        self._zeros = [(0,) * n for n in range(max_arity + 1)]

        run, run_score, ptr = initial_candidates(a, w, best, back)
        self._run_edges: list[int] = run.tolist()
        self._run_neg: list[float] = (-run_score).tolist()
        self._run_next: list[int] = ptr[:-1].tolist()  # cursor into the run of each node
        self._run_end: list[int] = ptr[1:].tolist()

        self._vocabulary = a.vocabulary
        self._term_ptr: list[int] = a.term_ptr.tolist()
        self._term_ids: list[int] = canonical_term_ids(a).tolist()

        self._found: dict[int, list[Entry]] = {}  # D̂(v), in score order
        self._cand: dict[int, list[Entry]] = {}  # heaps of pushed successors (-score, e, j)
        self._exhausted: set[int] = set()
        self._trees: dict[tuple[int, int], DerivationNode] = {}
        self._patterns: dict[int, tuple[int, ...]] = {}
        self._yields: dict[int, tuple[int, ...]] = {}  # key j·|V| + v

    def _tails(self, e: int) -> list[int]:
        tp = self._tail_ptr
        return self._tail_nodes[tp[e] : tp[e + 1]]

    # --- Algorithm 3 -----------------------------------------------------------------------
    def _derivations(self, v: int) -> list[Entry]:
        """D̂(v), created with the Viterbi derivation of ``v`` on first use."""
        found = self._found.get(v)
        if found is None:
            e = self._back[v]
            if e < 0:
                found = []
            else:
                found = [
                    (self._viterbi[v], e, self._zeros[self._tail_ptr[e + 1] - self._tail_ptr[e]])
                ]
            self._found[v] = found
        return found

    def _lazy_kth_best(self, v: int, k: int) -> None:
        """Extend D̂(v) until it holds ``k`` derivations or ``v`` has no more."""
        found = self._found.get(v)
        if found is None:
            found = self._derivations(v)
        if len(found) >= k or not found or v in self._exhausted:
            return
        heap = self._cand.get(v)
        if heap is None:
            heap = self._cand[v] = []
        run_edges, run_neg, run_next = self._run_edges, self._run_neg, self._run_next
        end = self._run_end[v]
        while len(found) < k:
            _, e, j = found[-1]
            self._lazy_next(v, e, j)
            # Pop the best of cand[v]: the head of the sorted run or the top of the heap.
            c = run_next[v]
            if c < end:
                neg, e = run_neg[c], run_edges[c]
                if heap:
                    top = heap[0]
                    # edges differ (⟨e, 0⟩ precedes every successor of e), so no rank tie-break
                    if top[0] < neg or (top[0] == neg and top[1] < e):
                        heapq.heappop(heap)
                        found.append((-top[0], top[1], top[2]))
                        continue
                run_next[v] = c + 1
                tp = self._tail_ptr
                found.append((-neg, e, self._zeros[tp[e + 1] - tp[e]]))
            elif heap:
                neg, e, j = heapq.heappop(heap)
                found.append((-neg, e, j))
            else:
                self._exhausted.add(v)
                return

    def _lazy_next(self, v: int, e: int, j: tuple[int, ...]) -> None:
        """Push the successors ⟨e, j + b^i⟩ of ⟨e, j⟩ whose tail derivations exist.

        Only those with ``j_k = 0`` for every ``k > i`` (see the module docstring), so each is
        pushed once; each derivation comes here once, for the next one of its node. A score is
        ``W(e)`` plus the tails' scores, summed in tail order.
        """
        tp = self._tail_ptr
        lo = tp[e]
        arity = tp[e + 1] - lo
        if arity == 0:
            return
        found = self._found
        tn = self._tail_nodes
        if arity == 1:
            u, r = tn[lo], j[0] + 1
            fu = found.get(u)
            if fu is None or len(fu) <= r:
                self._lazy_kth_best(u, r + 1)
                fu = found[u]
            if r < len(fu):
                heapq.heappush(self._cand[v], (-(self._w[e] + fu[r][0]), e, (r,)))
            return
        if arity == 2:
            u0, u1 = tn[lo], tn[lo + 1]
            a, b = j
            if b == 0:
                f0 = found.get(u0)
                if f0 is None or len(f0) <= a + 1:
                    self._lazy_kth_best(u0, a + 2)
                    f0 = found[u0]
                if a + 1 < len(f0):
                    f1 = found.get(u1) or self._derivations(u1)
                    score = self._w[e] + f0[a + 1][0] + f1[0][0]
                    heapq.heappush(self._cand[v], (-score, e, (a + 1, 0)))
            g1 = found.get(u1)
            if g1 is None or len(g1) <= b + 1:
                self._lazy_kth_best(u1, b + 2)
                g1 = found[u1]
            if b + 1 < len(g1):
                g0 = found.get(u0) or self._derivations(u0)
                score = self._w[e] + g0[a][0] + g1[b + 1][0]
                heapq.heappush(self._cand[v], (-score, e, (a, b + 1)))
            return
        tails = tn[lo : lo + arity]
        for i, u in enumerate(tails):
            if any(j[i + 1 :]):
                continue
            nj = (*j[:i], j[i] + 1, *j[i + 1 :])
            self._lazy_kth_best(u, nj[i] + 1)
            if nj[i] < len(found[u]):
                score = self._w[e]
                for t, r in zip(tails, nj, strict=True):
                    score += self._derivations(t)[r][0]
                heapq.heappush(self._cand[v], (-score, e, nj))

    # --- target strings ---------------------------------------------------------------------
    def _pattern(self, e: int) -> tuple[int, ...]:
        """The target of edge ``e`` as word ids (>= 0) and gaps ``~i`` (the yield of tail ``i``).

        The arrays give the words in order; where the gaps go among them is read from the
        edge's target only when the arrays leave it open (a gap next to words, or two gaps).
        """
        out = self._patterns.get(e)
        if out is None:
            words = self._term_ids[self._term_ptr[e] : self._term_ptr[e + 1]]
            arity = self._tail_ptr[e + 1] - self._tail_ptr[e]
            if arity == 0:
                out = tuple(words)
            elif arity == 1 and not words:
                out = _GAP
            else:
                out = target_pattern(self.hg.edges[e].target, words)
            self._patterns[e] = out
        return out

    def _yield_ids(self, v: int, j: int) -> tuple[int, ...]:
        """The target string of the ``j``-th derivation of ``v`` as word ids (memoised)."""
        yields = self._yields
        n = self._num_nodes
        key = j * n + v
        out = yields.get(key)
        if out is not None:
            return out
        _, e, ranks = self._derivations(v)[j]
        pattern = self._patterns.get(e)
        if pattern is None:
            pattern = self._pattern(e)
        if not ranks:
            out = pattern
        else:
            lo = self._tail_ptr[e]
            tn = self._tail_nodes
            if len(ranks) == 1:
                u, r = tn[lo], ranks[0]
                sub = yields.get(r * n + u)
                if sub is None:
                    sub = self._yield_ids(u, r)
                out = sub if pattern is _GAP else _fill(pattern, (sub,))
            else:
                subs = []
                for u, r in zip(tn[lo : lo + len(ranks)], ranks, strict=True):
                    sub = yields.get(r * n + u)
                    subs.append(self._yield_ids(u, r) if sub is None else sub)
                out = subs[0] + subs[1] if pattern == _TWO_GAPS else _fill(pattern, subs)
        yields[key] = out
        return out

    # --- public -----------------------------------------------------------------------------
    def entry(self, j: int, node: int | None = None) -> Entry | None:
        """The ``j``-th best ``(score, edge, tail ranks)`` of ``node`` (default: the goal)."""
        v = self.hg.goal if node is None else node
        self._lazy_kth_best(v, j + 1)
        found = self._found[v]
        if j >= len(found):
            return None
        score, e, ranks = found[j]
        return score, e, ranks

    def tree(self, v: int, j: int) -> DerivationNode:
        """The tree of the ``j``-th derivation of node ``v`` (which must exist)."""
        key = (v, j)
        tree = self._trees.get(key)
        if tree is None:
            _, e, ranks = self._derivations(v)[j]
            tails = self._tails(e)
            tree = DerivationNode(
                e, tuple(self.tree(u, r) for u, r in zip(tails, ranks, strict=True))
            )
            self._trees[key] = tree
        return tree

    def yield_ids(self, v: int, j: int) -> tuple[int, ...]:
        """The target string of the ``j``-th derivation of node ``v`` (which must exist) as
        canonical word ids: equal strings, equal tuples."""
        return self._yield_ids(v, j)

    def tokens(self, v: int, j: int) -> tuple[str, ...]:
        """The target string of the ``j``-th derivation of node ``v`` (which must exist)."""
        vocabulary = self._vocabulary
        return tuple(vocabulary[i] for i in self._yield_ids(v, j))

    def derivation(self, j: int) -> Derivation | None:
        """The ``j``-th best derivation of the goal (0-based), or ``None`` if there are fewer."""
        found = self.entry(j)
        if found is None:
            return None
        return self.hg.derivation(self.tree(self.hg.goal, j), found[0])

    def __iter__(self) -> Iterator[Derivation]:
        j = 0
        while (d := self.derivation(j)) is not None:
            yield d
            j += 1


def kbest(hg: Hypergraph, weights: Weights, k: int) -> list[Derivation]:
    """The ``k`` best derivations of the goal in order of decreasing score (fewer if fewer)."""
    extractor = LazyKBest(hg, weights)
    out: list[Derivation] = []
    for j in range(k):
        d = extractor.derivation(j)
        if d is None:
            break
        out.append(d)
    return out
