"""Unique k-best through the compiled kernel (:mod:`.kernel`): its arrays and its calls.

The search is :func:`service.forest.kbest.reference.unique_kbest_reference`'s (Huang & Chiang
2005, Algorithm 3, keeping the first derivation of each distinct target string), run by
:func:`.kernel.extract`; this module prepares the kernel's arrays from the same preparation as
the reference (:mod:`.candidates`: edge scores, the Viterbi pass, the sorted initial candidates,
canonical term ids, patterns read from edges' targets), so the kernel adds the same floats,
grows the arrays when the kernel asks, fills the patterns it wants, reads the clock between its
calls and makes the derivations of the strings found. It never imports the reference.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from functools import cache
from typing import Any

import numpy as np
from numpy.typing import NDArray

from service.core.csr import ptr_from_counts
from service.errors import InternalError
from service.forest.hypergraph import Derivation, DerivationNode, Hypergraph
from service.forest.inference import Weights, resolve_edge_weights, viterbi_scores
from service.forest.kbest.candidates import (
    CLOCK_EVERY,
    UNIQUE_KBEST_TIME_BUDGET_S,
    canonical_term_ids,
    initial_candidates,
    target_pattern,
)
from service.forest.kbest.kernel import (
    C_ENT,
    C_J,
    C_NEED,
    C_PICKED,
    C_POOL,
    C_RANK,
    C_STR,
    COUNTERS,
    DONE,
    E_EDGE,
    E_STR,
    ENT_COLUMNS,
    EXHAUSTED,
    F_CAP,
    F_LEN,
    F_START,
    GROW,
    LIMIT,
    NEED,
    NODE_COLUMNS,
    PAT_KNOWN,
    RUN_NEXT,
    S_KIDS,
    W_ENT,
    W_HEAP,
    W_PICKED,
    W_POOL,
    W_RANK,
    W_STR,
    W_TABLE,
    W_WORDS,
    WANTS,
    FloatArray,
    Forest,
    IntArray,
    Lists,
    Patterns,
    Rows,
    Scratch,
    Strings,
    extract,
    rehash,
    tree_rows,
)

__all__ = ["DONE", "EXHAUSTED", "GROW", "LIMIT", "NEED", "WANTS", "Extraction", "load"]

# Entries, rows, ranks and list positions are stored as int32 (half the memory, and this
# search is bound by memory): far more than fit in memory within any time budget.
_MAX_ITEMS = 2**31 - 1
HASH_BITS = 64  # width of the string hash: tests lower it to force collisions
FIRST_SPARE: int | None = None  # first room for entries (default ~3|V|): tests set 0 to grow
# The search reads the clock between calls of its kernel: after CLOCK_EVERY derivations, then
# after twice as many each time, up to this many per call.
_MAX_CHUNK = 1 << 13


def _own(a: NDArray[Any], dtype: type) -> NDArray[Any]:
    """``a`` as ``dtype``, C-contiguous and writable (copied if need be): one compiled
    specialisation of :func:`extract` (numba types read-only arrays apart)."""
    return np.require(a, dtype=dtype, requirements=["C", "W"])


def _known_patterns(
    arity: IntArray, term_ptr: IntArray, term_ids: IntArray
) -> tuple[IntArray, IntArray, IntArray]:
    """``(pat_ptr, pat_sym, pat_state)`` with the patterns known from the arrays filled in:
    those of edges without tails (their words) and of one gap without words."""
    words = np.diff(term_ptr)
    pat_ptr = ptr_from_counts(arity + words)
    pat_sym = np.zeros(int(pat_ptr[-1]), dtype=np.int64)
    pat_state = np.zeros(len(arity), dtype=np.int64)
    leaf = arity == 0
    pat_state[leaf] = PAT_KNOWN
    if len(term_ids):
        at = np.repeat(pat_ptr[:-1] - term_ptr[:-1], words) + np.arange(len(term_ids))
        keep = np.repeat(leaf, words)
        pat_sym[at[keep]] = term_ids[keep]
    gap = (arity == 1) & (words == 0)
    pat_state[gap] = PAT_KNOWN
    pat_sym[pat_ptr[:-1][gap]] = ~0
    return pat_ptr, pat_sym, pat_state


def _first_nodes(back: IntArray, run_ptr: IntArray) -> IntArray:
    """The per-node state before the search: ``D̂(v)`` holds the Viterbi entry ``v`` (if the
    node has a derivation), no heap, the run's cursor at its start."""
    num_nodes = len(back)
    node = np.zeros((num_nodes, NODE_COLUMNS), dtype=np.int64)
    has = back >= 0
    node[:, F_START] = np.arange(num_nodes)
    node[:, F_LEN] = has
    node[:, F_CAP] = 1
    node[:, RUN_NEXT] = run_ptr[:-1]
    return node


def _first_entries(
    best: FloatArray, back: IntArray, size: int
) -> tuple[NDArray[np.int32], FloatArray, NDArray[np.int32]]:
    """``(pool, ent_score, ent)`` of room ``size``, the first ``|V|`` entries the Viterbi
    derivations (score, back-pointer edge, no string row yet)."""
    num_nodes = len(back)
    pool = np.arange(size, dtype=np.int32)
    ent_score = np.zeros(size, dtype=np.float64)
    ent_score[:num_nodes] = best
    ent = np.zeros((size, ENT_COLUMNS), dtype=np.int32)
    ent[:num_nodes, E_EDGE] = back
    ent[:num_nodes, E_STR] = -1
    return pool, ent_score, ent


def _grown(a: NDArray[Any], size: int) -> NDArray[Any]:
    """``a`` in a larger array (at least twice the size), its rows copied, the new ones left
    uninitialised (the kernel writes an item before reading it)."""
    out = np.empty((max(size, 2 * len(a)), *a.shape[1:]), dtype=a.dtype)
    out[: len(a)] = a
    return out


class Extraction:
    """The state of one unique k-best extraction, and the calls of :func:`extract`.

    ``step(limit)`` examines derivations until ``limit`` have been examined in all (or ``k``
    strings are found, or the goal has no more), growing arrays when the kernel asks and, when
    it wants patterns, filling them through ``pattern(e)`` (the edge's target as word ids
    ``>= 0`` and gaps ``~i``) and returning :data:`NEED` (``run`` goes on until another status);
    ``examined``, ``found``, ``picked_entries()`` and ``trees()`` report.
    """

    def __init__(
        self,
        tail_ptr: IntArray,
        tail_nodes: IntArray,
        w: FloatArray,
        best: FloatArray,
        back: IntArray,
        run_edges: IntArray,
        run_score: FloatArray,
        run_ptr: IntArray,
        term_ptr: IntArray,
        term_ids: IntArray,
        goal: int,
        k: int,
        pattern: Callable[[int], tuple[int, ...]],
        hash_bits: int | None = None,
    ) -> None:
        num_nodes = len(back)
        num_edges = len(tail_ptr) - 1
        self.tail_ptr = _own(tail_ptr, np.int64)
        self.tail_nodes = _own(tail_nodes, np.int64)
        self.w = _own(w, np.float64)
        self.run_edges = _own(run_edges, np.int64)
        self.run_score = _own(run_score, np.float64)
        self.run_end = _own(run_ptr[1:], np.int64)
        arity = np.diff(self.tail_ptr)
        self.pat_ptr, self.pat_sym, self.pat_state = _known_patterns(arity, term_ptr, term_ids)
        self.pattern = pattern
        self.goal = goal
        self.k = k
        bits = HASH_BITS if hash_bits is None else hash_bits
        self.mask = np.uint64((1 << bits) - 1)

        self.node = _first_nodes(back, run_ptr)
        self.counters = np.zeros(COUNTERS, dtype=np.int64)
        max_arity = int(arity.max()) if num_edges else 0
        self.counters[C_ENT] = num_nodes
        self.counters[C_POOL] = num_nodes
        self.counters[C_RANK] = max_arity  # ranks[:max_arity]: the zeros of ⟨e, 0⟩
        # first sizes: room for a few derivations per node beyond the Viterbi ones (arrays
        # grow, doubling, as the kernel asks)
        spare = max(3 * num_nodes, 1024) if FIRST_SPARE is None else FIRST_SPARE
        self.pool, self.ent_score, self.ent = _first_entries(best, back, num_nodes + spare)
        rows = max(num_nodes, 1024) if FIRST_SPARE is None else FIRST_SPARE
        self.srow = np.zeros((rows, S_KIDS + max_arity), dtype=np.int32)
        self.shash = np.zeros((rows, 2), dtype=np.uint64)
        self.ranks = np.zeros(max_arity + 2 * spare, dtype=np.int32)
        self.hs = np.zeros(spare, dtype=np.float64)
        self.hx = np.zeros((spare, 2), dtype=np.int32)
        picks = min(16, spare + 1)
        self.picked = np.zeros((picks, 2), dtype=np.int64)
        self.picked_hash = np.zeros(picks, dtype=np.uint64)
        self.picked_wptr = np.zeros(picks + 1, dtype=np.int64)
        self.picked_words = np.zeros(min(64, spare), dtype=np.int64)
        self.table = np.zeros(16 if spare else 2, dtype=np.int64)  # a power of two
        self.need = np.zeros(max(num_edges, 1), dtype=np.int64)  # each edge asked once
        self.want = np.zeros(WANTS, dtype=np.int64)
        # scratch: frames of LazyKthBest (a chain of tails: at most |V|), of the traversals
        self.stack = np.zeros((num_nodes + 1, 4), dtype=np.int64)
        self.dstack = np.zeros((num_nodes + 1) * (max_arity + 1), dtype=np.int64)
        self.wstack = np.zeros((num_nodes + 1, 4), dtype=np.int64)
        self.status = LIMIT
        self._bind()

    @property
    def examined(self) -> int:
        """Derivations of the goal examined so far."""
        return int(self.counters[C_J])

    @property
    def found(self) -> int:
        """Distinct strings found so far."""
        return int(self.counters[C_PICKED])

    def step(self, limit: int) -> int:
        """Examine derivations until ``limit`` in all, ``k`` strings or the goal's last one:
        calls of :func:`extract`, growing arrays as it asks. Returns the status; after
        :data:`NEED` the patterns wanted are filled in (call again to go on)."""
        while (status := extract(*self._args, limit)) == GROW:
            self._grow()
        self.status = int(status)
        if status == NEED:
            self._fill(self.need[: self.counters[C_NEED]].tolist())
        return self.status

    def _bind(self) -> None:
        """The arguments of :func:`extract` but ``limit`` (again after arrays grew): the
        arrays grouped as the kernel's named tuples, each spread (see :func:`extract`)."""
        self._args = (
            *Forest(
                self.tail_ptr, self.tail_nodes, self.w, self.run_edges, self.run_score,
                self.run_end,
            ),
            *Patterns(self.pat_ptr, self.pat_sym, self.pat_state),
            *Lists(self.node, self.pool, self.ent_score, self.ent, self.ranks, self.hs, self.hx),
            *Rows(self.srow, self.shash),
            *Strings(
                self.picked, self.picked_hash, self.picked_wptr, self.picked_words, self.table
            ),
            *Scratch(self.need, self.stack, self.dstack, self.wstack),
            self.counters, self.want, self.goal, self.k, self.mask,
        )  # fmt: skip

    def _grow(self) -> None:
        want = self.want.tolist()
        self.want[:] = 0
        if max(want) >= _MAX_ITEMS:
            raise InternalError(f"unique k-best: {max(want)} items exceed the 32-bit ids")
        if want[W_POOL]:
            self.pool = _grown(self.pool, want[W_POOL])
        if want[W_ENT]:
            self.ent_score = _grown(self.ent_score, want[W_ENT])
            self.ent = _grown(self.ent, want[W_ENT])
        if want[W_STR]:
            self.srow = _grown(self.srow, want[W_STR])
            self.shash = _grown(self.shash, want[W_STR])
        if want[W_RANK]:
            self.ranks = _grown(self.ranks, want[W_RANK])
        if want[W_HEAP]:
            self.hs = _grown(self.hs, want[W_HEAP])
            self.hx = _grown(self.hx, want[W_HEAP])
        if want[W_PICKED]:
            self.picked = _grown(self.picked, want[W_PICKED])
            self.picked_hash = _grown(self.picked_hash, want[W_PICKED])
            self.picked_wptr = _grown(self.picked_wptr, want[W_PICKED])
        if want[W_WORDS]:
            self.picked_words = _grown(self.picked_words, want[W_WORDS])
        if want[W_TABLE]:
            self.table = np.zeros(want[W_TABLE], dtype=np.int64)
            rehash(self.table, self.picked_hash, self.found)
        self._bind()

    def run(self, limit: int) -> int:
        """:meth:`step` until the status is not :data:`NEED`."""
        while (status := self.step(limit)) == NEED:
            pass
        return status

    def _fill(self, edges: list[int]) -> None:
        ptr = self.pat_ptr
        for e in edges:
            lo, hi = int(ptr[e]), int(ptr[e + 1])
            pattern = self.pattern(e)
            if len(pattern) != hi - lo:
                raise InternalError(
                    f"hyperedge {e}: its target has {len(pattern)} symbols, its arrays {hi - lo}"
                )
            self.pat_sym[lo:hi] = pattern
            self.pat_state[e] = PAT_KNOWN

    def picked_entries(self) -> list[tuple[int, int, float]]:
        """``(entry, rank among the goal's derivations, score)`` of each string found."""
        n = self.found
        entries = self.picked[:n, 0]
        return list(
            zip(
                entries.tolist(),
                self.picked[:n, 1].tolist(),
                self.ent_score[entries].tolist(),
                strict=True,
            )
        )

    def picked_words_of(self, i: int) -> list[int]:
        """The word ids of the ``i``-th string found."""
        out: list[int] = self.picked_words[self.picked_wptr[i] : self.picked_wptr[i + 1]].tolist()
        return out

    def trees(self) -> list[DerivationNode]:
        """The derivation tree of each string found (subtrees shared where entries are)."""
        roots = self.ent[self.picked[: self.found, 0], E_STR].astype(np.int64)
        out = np.empty((self.counters[C_STR], 2 + self.srow.shape[1] - S_KIDS), dtype=np.int64)
        n = tree_rows(roots, self.srow, self.tail_ptr, out)
        nodes: dict[int, DerivationNode] = {}
        for row, e, *kids in out[:n].tolist():
            nodes[row] = DerivationNode(e, tuple(nodes[r] for r in kids if r >= 0))
        return [nodes[r] for r in roots.tolist()]


@cache
def load() -> None:
    """Compile or load :func:`extract` (once per process) on a forest of two nodes."""
    ex = Extraction(
        tail_ptr=np.array([0, 0, 1], dtype=np.int64),
        tail_nodes=np.array([0], dtype=np.int64),
        w=np.array([-1.0, 0.0]),
        best=np.array([-1.0, -1.0]),
        back=np.array([0, 1], dtype=np.int64),
        run_edges=np.zeros(0, dtype=np.int64),
        run_score=np.zeros(0, dtype=np.float64),
        run_ptr=np.zeros(3, dtype=np.int64),
        term_ptr=np.array([0, 1, 2], dtype=np.int64),
        term_ids=np.array([0, 1], dtype=np.int64),
        goal=1,
        k=2,
        pattern=lambda e: (1, ~0),
    )
    ex.run(10)


def extraction(
    hg: Hypergraph, weights: Weights, k: int, hash_bits: int | None = None
) -> Extraction:
    """The state of a compiled unique k-best search of ``hg`` (set up, nothing examined yet).

    Edge scores, the Viterbi pass and the sorted initial candidates come from the shared
    preparation (:mod:`.candidates`), so the kernel adds the same floats as the reference.
    ``hash_bits`` narrows the hash of target strings (tests: collisions must not merge strings).
    """
    a = hg.arrays()
    w = resolve_edge_weights(hg, weights)
    best, back = viterbi_scores(hg, w)
    run, run_score, ptr = initial_candidates(a, w, best, back)
    term_ptr, term_ids = a.term_ptr, canonical_term_ids(a)
    words: list[int] | None = None

    def pattern(e: int) -> tuple[int, ...]:
        nonlocal words
        if words is None:
            words = term_ids.tolist()
        return target_pattern(hg.edges[e].target, words[term_ptr[e] : term_ptr[e + 1]])

    return Extraction(
        a.tail_ptr, a.tail_nodes, w, best, back, run, run_score, ptr, term_ptr, term_ids,
        hg.goal, k, pattern, hash_bits,
    )  # fmt: skip


def unique_kbest_compiled(
    hg: Hypergraph,
    weights: Weights,
    k: int,
    max_derivations: int | None = None,
    time_budget: float | None = None,
    hash_bits: int | None = None,
) -> list[Derivation]:
    """:func:`service.forest.kbest.unique_kbest` through :func:`.kernel.extract`.

    The kernel runs in calls of at most ``limit`` derivations of the goal in all: the first
    ends after :data:`~.candidates.CLOCK_EVERY`, each next one examines twice as many (at most
    :data:`_MAX_CHUNK`), and the clock is read between calls.
    """
    ex = extraction(hg, weights, k, hash_bits)
    load()  # the kernel is loaded (the first time in a process) before the clock starts
    if max_derivations is None and time_budget is None:
        time_budget = UNIQUE_KBEST_TIME_BUDGET_S
    deadline = None if time_budget is None else time.perf_counter() + time_budget
    limit = sys.maxsize if max_derivations is None else max(0, max_derivations)
    chunk = CLOCK_EVERY
    end = limit if deadline is None else min(limit, chunk)
    while True:
        status = ex.step(end)
        if status in (DONE, EXHAUSTED):
            break
        if status == LIMIT:
            if ex.examined >= limit:
                break
            chunk = min(2 * chunk, _MAX_CHUNK)
            end = min(limit, ex.examined + chunk)
        # after LIMIT, or after patterns were filled in (NEED)
        if deadline is not None and ex.examined >= CLOCK_EVERY and time.perf_counter() >= deadline:
            break

    scores = [score for _, _, score in ex.picked_entries()]
    return [hg.derivation(t, s) for t, s in zip(ex.trees(), scores, strict=True)]
