"""k-best derivations of a translation forest (Huang & Chiang 2005, Algorithm 3).

Lazy k-best extraction: a derivation of node ``v`` is written ``⟨e, j⟩`` — an incoming
hyperedge ``e`` and, per tail ``T_i(e)``, the rank ``j_i`` of the tail's derivation used. Each
node keeps the list ``D̂(v)`` of its derivations found so far, in score order (memoised), and
a heap ``cand[v]`` of candidates. The best is the Viterbi derivation; after ``⟨e, j⟩`` is
popped, its successors ``⟨e, j + b^i⟩`` (one rank further in one tail) are pushed, computing
the tails' further derivations only when asked for ("LazyNext"). Extracting the k best of the
goal costs ``O(|E| + |D| k log k)``.

The score of a derivation is ``Σ_{e ∈ h} W(e; w)`` (001 §3). :func:`unique_kbest` keeps the
first (best) derivation of each distinct target string, as n-best lists for tuning, PSQ and
translation retrieval need.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator

from service.mt.hypergraph import Derivation, DerivationNode, Hypergraph
from service.mt.inference import Weights, resolve_edge_weights, viterbi_backpointers
from service.mt.semiring import TROPICAL

# A derivation of a node: (score, edge, ranks of the tails' derivations).
_Entry = tuple[float, int, tuple[int, ...]]


class LazyKBest:
    """Lazily enumerates the derivations of every node in order of decreasing score.

    ``derivation(j)`` returns the ``j``-th best derivation of the goal (0-based) or ``None``
    when there are fewer; iterating yields all of them in order. Ties are broken by edge id,
    then by the tails' ranks, so the order is deterministic.
    """

    def __init__(self, hg: Hypergraph, weights: Weights) -> None:
        self.hg = hg
        self._w = resolve_edge_weights(hg, weights)
        # One Viterbi pass gives every node's 1-best derivation D̂_1(v) = ⟨back[v], 0⟩.
        self._viterbi, self._back = viterbi_backpointers(hg, self._w, TROPICAL)
        self._found: dict[int, list[_Entry]] = {}  # D̂(v), in score order
        self._cand: dict[int, list[_Entry]] = {}  # heaps of (-score, edge, ranks)
        self._pushed: dict[int, set[tuple[int, tuple[int, ...]]]] = {}
        self._exhausted: set[int] = set()
        self._trees: dict[tuple[int, int], DerivationNode] = {}
        self._yields: dict[tuple[int, int], tuple[str, ...]] = {}

    # --- Algorithm 3 -----------------------------------------------------------------------
    def _derivations(self, v: int) -> list[_Entry]:
        """D̂(v), created with the Viterbi derivation of ``v`` on first use."""
        found = self._found.get(v)
        if found is None:
            e = self._back[v]
            found = [] if e < 0 else [(self._viterbi[v], e, (0,) * self.hg.edges[e].arity)]
            self._found[v] = found
        return found

    def _get_candidates(self, v: int) -> list[_Entry]:
        """cand[v] ← {⟨e, 0⟩ : e ∈ in(v)} minus the 1-best, scored with the tails' 1-best."""
        heap: list[_Entry] = []
        for e in self.hg.incoming(v):
            tails = self.hg.edges[e].tails
            if e == self._back[v] or any(self._back[u] < 0 for u in tails):
                continue
            score = float(self._w[e])
            for u in tails:
                score += self._viterbi[u]
            heap.append((-score, e, (0,) * len(tails)))
        heapq.heapify(heap)
        self._pushed[v] = {(e, j) for _, e, j in heap}
        if self._back[v] >= 0:
            self._pushed[v].add((self._back[v], (0,) * self.hg.edges[self._back[v]].arity))
        self._cand[v] = heap
        return heap

    def _lazy_kth_best(self, v: int, k: int) -> None:
        """Extend D̂(v) until it holds ``k`` derivations or ``v`` has no more."""
        found = self._derivations(v)
        if len(found) >= k or v in self._exhausted or not found:
            return
        cand = self._cand.get(v)
        if cand is None:
            cand = self._get_candidates(v)
        while len(found) < k:
            _, e, j = found[-1]
            self._lazy_next(v, e, j)
            if not cand:
                self._exhausted.add(v)
                return
            neg, e, j = heapq.heappop(cand)
            found.append((-neg, e, j))

    def _lazy_next(self, v: int, e: int, j: tuple[int, ...]) -> None:
        """Push the successors ⟨e, j + b^i⟩ of ⟨e, j⟩ whose tail derivations exist."""
        tails = self.hg.edges[e].tails
        for i, u in enumerate(tails):
            jj = (*j[:i], j[i] + 1, *j[i + 1 :])
            if (e, jj) in self._pushed[v]:
                continue
            self._lazy_kth_best(u, jj[i] + 1)
            if jj[i] < len(self._found[u]):
                score = float(self._w[e])
                for t, r in zip(tails, jj, strict=True):
                    score += self._derivations(t)[r][0]
                heapq.heappush(self._cand[v], (-score, e, jj))
                self._pushed[v].add((e, jj))

    # --- public -----------------------------------------------------------------------------
    def entry(self, j: int, node: int | None = None) -> _Entry | None:
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
            tails = self.hg.edges[e].tails
            tree = DerivationNode(
                e, tuple(self.tree(u, r) for u, r in zip(tails, ranks, strict=True))
            )
            self._trees[key] = tree
        return tree

    def tokens(self, v: int, j: int) -> tuple[str, ...]:
        """The target string of the ``j``-th derivation of node ``v`` (memoised per node)."""
        key = (v, j)
        out = self._yields.get(key)
        if out is None:
            _, e, ranks = self._derivations(v)[j]
            edge = self.hg.edges[e]
            parts: list[str] = []
            for s in edge.target:
                if isinstance(s, str):
                    parts.append(s)
                else:
                    parts.extend(self.tokens(edge.tails[s], ranks[s]))
            out = tuple(parts)
            self._yields[key] = out
        return out

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


def unique_kbest(
    hg: Hypergraph, weights: Weights, k: int, max_derivations: int | None = None
) -> list[Derivation]:
    """The best derivation of each of the ``k`` best distinct target strings, in score order.

    Derivations are examined in score order and one whose string was already produced is
    skipped. At most ``max_derivations`` (default ``100 * k``) derivations are examined, so
    the list can hold fewer than ``k`` strings when many derivations share a string.
    """
    limit = 100 * k if max_derivations is None else max_derivations
    extractor = LazyKBest(hg, weights)
    seen: set[tuple[str, ...]] = set()
    out: list[Derivation] = []
    goal = hg.goal
    for j in range(limit):
        if len(out) >= k:
            break
        entry = extractor.entry(j)
        if entry is None:
            break
        tokens = extractor.tokens(goal, j)
        if tokens in seen:
            continue
        seen.add(tokens)
        out.append(hg.derivation(extractor.tree(goal, j), entry[0]))
    return out
