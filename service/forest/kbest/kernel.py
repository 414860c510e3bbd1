"""Unique k-best extraction as one compiled kernel (numba, ``nogil``) over flat arrays.

The same search as :func:`service.forest.kbest.reference.unique_kbest_reference` (lazy k-best,
Huang & Chiang 2005, Algorithm 3, keeping the first derivation of each distinct target string),
the tested reference: every choice that decides the output is the reference's, so with a count
bound the lists are identical, scores and ties included (tests/forest/test_kbest_kernel.py):

- a derivation of node ``v`` is an *entry* ``(score, edge, tail ranks)``; entries ``0 … |V|-1``
  are the nodes' Viterbi derivations (from :func:`~service.forest.inference.viterbi_scores`), the
  others are made as the search goes; ``D̂(v)`` is a list of entry ids per node;
- ``cand[v]`` is the node's sorted run of initial candidates ``⟨e, 0⟩`` (computed in numpy by
  :func:`service.forest.kbest.candidates.initial_candidates`, the reference's own code) merged with
  a binary heap of successors ordered by ``(−score, edge, tail ranks)``, the reference's heap
  key, which is a strict total order: the pop order does not depend on the heap's layout;
- successors ``⟨e, j + b^i⟩`` are pushed only for ``j_k = 0`` for all ``k > i``, their scores
  summed as ``W(e)`` then the tails' scores in tail order (the same float additions);
- the recursion of ``LazyKthBest``/``LazyNext`` runs on an explicit stack of frames
  ``(node, k, tail position, returning)``, visiting tails in the same order.

Distinct strings. The target string of an entry is hashed when a derivation of the goal that
contains it is examined (memoised per entry, in a *row* of ``srow``/``shash`` made then): a
polynomial rolling hash of word ids mod 2^64, ``H(xy) = H(x)·B^|y| + H(y)``, so an entry's hash
comes from its edge's pattern (word ids and gaps, see below) and its tails' hashes. Strings
found are kept in an open-addressing table keyed by the hash masked to ``mask`` (all 64 bits in
service; tests pass a few bits to force collisions). Every derivation examined is compared word
by word with each string found that has the same masked hash and length, so a collision never
merges two strings; the comparison walks the derivation's rows, but a row remembers one string
found whose words it holds and at which offset (set when a walk writes or matches the row
entirely: a fact, as rows and strings found never change), and a row met at that offset of
that string is skipped — under spurious ambiguity most rows of a derivation were in one
compared before, so the walk covers mostly the rows new to it. Comparing and writing out a new
string are one walk.

Patterns. The arrays give an edge's words in order but not where its gaps go among them; the
kernel knows the pattern of an edge without tails (its words) or without words and with one
tail, and stops with :data:`NEED` and the list of edges whose pattern it lacks (those on the
derivation about to be examined, each once) when it meets others; the caller reads those
edges' targets, fills ``pat_sym`` and calls again. So, as in the reference, only edges of
examined derivations are asked for their target (the same edges, tested).

Resumable. All state lives in arrays, grouped by what they hold as the named tuples
:class:`Forest`, :class:`Patterns`, :class:`Lists`, :class:`Rows`, :class:`Strings` and
:class:`Scratch` (the order of :func:`extract`'s arguments), and the kernel examines
derivations of the goal until ``k`` strings are found, the goal has no more derivations, or
``limit`` derivations have been examined in all: the caller reads the clock between calls (time
budget). The kernel never allocates: when an array is full it stops with :data:`GROW` and the
sizes it wants, before changing anything it cannot finish (a pass of LazyNext checks its room
first), and the caller grows the arrays and calls again; the frames left on the stack go on.

Speed. It is one loop with the steps of the algorithm written in it, and the arrays come flat:
numba counts references to the arrays a helper takes with atomic operations — at every call,
and at every execution of a helper it inlines (``inline="always"``: it assigns the caller's
arrays to the helper's variables) — which cost more than the search in its inner loops (a first
version with called helpers spent 40 % of its time on them; with every step an inlined helper
the search ran 1.2–2× slower, with only the word walk one 1.17×: bench/README.md, "k-best
kernel refactor"); and it types a named tuple argument in Python at every call, 4 µs more than
flat arrays for these, where the search is called hundreds of times per forest (once per batch
of patterns it asks for). So the word walk that comparing and writing out a string share is
written once in the loop, not as a helper, and only rare paths call (moving a full list or
heap, equal scores and edges). Entries, rows, ranks and list positions are int32: the search
is bound by memory (a few hundred bytes per derivation examined; at the default time budget
~10^5–10^6 derivations, ~100 MB). :class:`service.forest.kbest.compiled.Extraction` does the
bookkeeping on the Python side.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit
from numpy.typing import NDArray

IntArray = NDArray[np.int64]
FloatArray = NDArray[np.float64]
Int32Array = NDArray[np.int32]
HashArray = NDArray[np.uint64]

# statuses of :func:`extract`
DONE = 0  # k strings found
EXHAUSTED = 1  # the goal has no more derivations
LIMIT = 2  # ``limit`` derivations examined
NEED = 3  # patterns wanted: the edges are need[:counters[C_NEED]]
GROW = 4  # arrays must grow: to want[W_…] items (0: no need)
_GO = -1  # a step's status: carry on

# columns of ``node``
F_START = 0  # D̂(v): pool[F_START : F_START + F_LEN], capacity F_CAP
F_LEN = 1
F_CAP = 2
H_START = 3  # heap of pushed successors: hs, hx[H_START : H_START + H_LEN], capacity H_CAP
H_LEN = 4
H_CAP = 5
RUN_NEXT = 6  # cursor into the node's sorted run of initial candidates
EXHAUSTED_V = 7  # 1 once the node has no more derivations
NODE_COLUMNS = 8

# columns of ``ent``
E_EDGE = 0
E_RANKS = 1  # the tails' ranks: ranks[E_RANKS : E_RANKS + arity]
E_STR = 2  # the entry's row in ``srow``, ``shash`` (-1: none yet)
ENT_COLUMNS = 3

# columns of ``srow``: the strings of the entries under derivations of the goal examined (a row
# made when the entry is first visited there), so that hashing and writing out strings read
# one row per entry; ``shash[row]`` is the hash of the string and B^length
S_LEN = 0  # length of the target string, -1 until its hash is computed
S_SEEN = 1  # stamp of the last traversal that visited the entry
S_EDGE = 2  # the entry's edge
S_VSTR = 3  # a string found whose words at S_VOFF on are this row's (-1: none known)
S_VOFF = 4
S_KIDS = 5  # what tail q uses: S_KIDS + q, an entry until the string is hashed, then its row

# ``counters``
C_ENT = 0  # entries in use
C_POOL = 1  # pool in use
C_RANK = 2  # ranks in use
C_J = 3  # derivations of the goal examined
C_PICKED = 4  # distinct strings found
C_NEED = 5  # edges in ``need`` (status NEED)
C_STAMP = 6  # traversal stamp
C_HPOOL = 7  # heap pool in use
C_SP = 8  # frames of LazyKthBest left on the stack by GROW
C_STR = 9  # string rows in use
COUNTERS = 10

# ``want``: the sizes the arrays must grow to (GROW)
W_POOL = 0  # pool
W_ENT = 1  # ent_score, ent
W_RANK = 2  # ranks
W_HEAP = 3  # hs, hx
W_PICKED = 4  # picked, picked_hash (rows), picked_wptr
W_WORDS = 5  # picked_words
W_TABLE = 6  # table (rehashed)
W_STR = 7  # srow, shash
WANTS = 8

# ``Patterns.state[e]``: PAT_KNOWN, or the stamp of the last traversal that listed the edge in
# ``need`` (0: none), so an edge listed by a traversal cut short by GROW is listed again
PAT_KNOWN = -1

_B = np.uint64(0x9E3779B97F4A7C15)  # the hash's base (odd)
_U0 = np.uint64(0)
_U1 = np.uint64(1)
_S27 = np.uint64(27)
_S30 = np.uint64(30)
_S31 = np.uint64(31)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


class Forest(NamedTuple):
    """The forest as the search reads it (never written): tails, edge scores ``W(e)`` and the
    per-node sorted runs of initial candidates ``⟨e, 0⟩`` (``run_end[v]``: the end of ``v``'s)."""

    tail_ptr: IntArray
    tail_nodes: IntArray
    w: FloatArray
    run_edges: IntArray
    run_score: FloatArray
    run_end: IntArray


class Patterns(NamedTuple):
    """Each edge's target as word ids (``>= 0``) and gaps ``~i``: ``sym[ptr[e] : ptr[e + 1]]``,
    filled in where ``state[e]`` is :data:`PAT_KNOWN`."""

    ptr: IntArray
    sym: IntArray
    state: IntArray


class Lists(NamedTuple):
    """``D̂(v)`` and ``cand[v]`` of every node (``node``'s columns ``F_…``, ``H_…``), and the
    entries they hold: ``pool`` (the lists), ``ent_score``, ``ent`` and ``ranks`` (the entries),
    ``hs``, ``hx`` (the heaps: score, then edge and entry)."""

    node: IntArray
    pool: Int32Array
    ent_score: FloatArray
    ent: Int32Array
    ranks: Int32Array
    hs: FloatArray
    hx: Int32Array


class Rows(NamedTuple):
    """The string rows of entries (``srow``'s columns ``S_…``), their hash and B^length."""

    srow: Int32Array
    shash: HashArray


class Strings(NamedTuple):
    """The distinct strings found: ``picked[i]`` (entry, rank among the goal's derivations),
    their hashes, their words ``words[wptr[i] : wptr[i + 1]]`` and the open-addressing table
    (``i + 1`` per used slot; a power of two)."""

    picked: IntArray
    hash: HashArray
    wptr: IntArray
    words: IntArray
    table: IntArray


class Scratch(NamedTuple):
    """The edges whose pattern is wanted (:data:`NEED`) and the stacks: the frames of
    LazyKthBest (kept across calls after :data:`GROW`), of the traversals of rows."""

    need: IntArray
    stack: IntArray
    dstack: IntArray
    wstack: IntArray


@njit(cache=True, nogil=True)
def _mix(h: np.uint64) -> np.uint64:
    """splitmix64's finaliser: a table slot from a hash."""
    x = h ^ (h >> _S30)
    x = x * _M1
    x = x ^ (x >> _S27)
    x = x * _M2
    return x ^ (x >> _S31)


@njit(cache=True, nogil=True)
def _ranks_before(xa: int, xb: int, ent: Int32Array, ranks: Int32Array, tail_ptr: IntArray) -> bool:
    """Of two entries with equal score and edge, ``xa`` has the smaller tail ranks."""
    e = ent[xa, E_EDGE]
    ra = ent[xa, E_RANKS]
    rb = ent[xb, E_RANKS]
    for q in range(tail_ptr[e + 1] - tail_ptr[e]):
        if ranks[ra + q] != ranks[rb + q]:
            return bool(ranks[ra + q] < ranks[rb + q])
    return False


@njit(cache=True, nogil=True)
def _room(
    v: int, arity: int, node: IntArray, counters: IntArray, want: IntArray, pool: Int32Array,
    ent_score: FloatArray, ranks: Int32Array, hs: FloatArray, hx: Int32Array,
) -> bool:  # fmt: skip
    """Room for one pass of LazyNext and a pop at ``v`` (``arity``: its last entry's edge):
    entries, ranks, heap and list space, moving the heap or the list of ``v`` to a block
    twice as large when full. False (with ``want`` set) if an array must grow first."""
    ok = True
    need = counters[C_ENT] + arity + 1
    if need > ent_score.shape[0]:
        want[W_ENT] = need
        ok = False
    need = counters[C_RANK] + arity * arity
    if need > ranks.shape[0]:
        want[W_RANK] = need
        ok = False
    n = node[v, H_LEN]
    if n + arity > node[v, H_CAP]:
        cap = max(2 * (n + arity), 4)
        start = counters[C_HPOOL]
        if start + cap > hs.shape[0]:
            want[W_HEAP] = start + cap
            ok = False
        else:
            old = node[v, H_START]
            for q in range(n):
                hs[start + q] = hs[old + q]
                hx[start + q, 0] = hx[old + q, 0]
                hx[start + q, 1] = hx[old + q, 1]
            node[v, H_START] = start
            node[v, H_CAP] = cap
            counters[C_HPOOL] = start + cap
    n = node[v, F_LEN]
    if n == node[v, F_CAP]:
        cap = max(2 * n, 2)
        start = counters[C_POOL]
        if start + cap > pool.shape[0]:
            want[W_POOL] = start + cap
            ok = False
        else:
            old = node[v, F_START]
            for q in range(n):
                pool[start + q] = pool[old + q]
            node[v, F_START] = start
            node[v, F_CAP] = cap
            counters[C_POOL] = start + cap
    return ok


@njit(cache=True, nogil=True)
def rehash(table: IntArray, picked_hash: HashArray, n: int) -> None:
    """Insert strings ``0 … n-1`` of ``picked_hash`` in the empty ``table``."""
    cap = table.shape[0]
    m = np.uint64(cap - 1)
    for i in range(n):
        slot = np.int64(_mix(picked_hash[i]) & m)
        while table[slot] != 0:
            slot = (slot + 1) & (cap - 1)
        table[slot] = i + 1


# --- the search ---------------------------------------------------------------------------------
@njit(cache=True, nogil=True)
def extract(
    # Forest
    tail_ptr: IntArray, tail_nodes: IntArray, w: FloatArray, run_edges: IntArray,
    run_score: FloatArray, run_end: IntArray,
    # Patterns
    pat_ptr: IntArray, pat_sym: IntArray, pat_state: IntArray,
    # Lists
    node: IntArray, pool: Int32Array, ent_score: FloatArray, ent: Int32Array, ranks: Int32Array,
    hs: FloatArray, hx: Int32Array,
    # Rows
    srow: Int32Array, shash: HashArray,
    # Strings
    picked: IntArray, picked_hash: HashArray, wptr: IntArray, words: IntArray, table: IntArray,
    # Scratch
    need: IntArray, stack: IntArray, dstack: IntArray, wstack: IntArray,
    counters: IntArray, want: IntArray, goal: int, k: int, mask: np.uint64, limit: int,
) -> int:  # fmt: skip
    """Examine derivations of ``goal`` in order, keeping the first of each distinct string,
    until ``k`` strings are found (:data:`DONE`), the goal has no more (:data:`EXHAUSTED`),
    ``counters[C_J]`` reaches ``limit`` (:data:`LIMIT`); or stop for patterns (:data:`NEED`)
    or for an array to grow to ``want`` (:data:`GROW`), and resume on the next call.

    The arrays are those of the named tuples :class:`Forest`, :class:`Patterns`,
    :class:`Lists`, :class:`Rows`, :class:`Strings` and :class:`Scratch`, in their order
    (the caller passes each tuple spread: numba types a named tuple argument in Python at
    every call, 4 µs for these, and the search is called hundreds of times per forest).
    ``picked[i]`` is the entry and the rank among the goal's derivations of the ``i``-th string
    found, its words ``words[wptr[i] : wptr[i + 1]]``.

    One loop, the steps of Algorithm 3 written in it (see the module docstring, "Speed"); the
    walk over a derivation's rows that compares its string with a string found, or writes it
    out as a new one, is written once.
    """
    while True:
        if counters[C_PICKED] >= k:
            return DONE
        j = counters[C_J]
        if j >= limit:
            return LIMIT

        # --- LazyKthBest(goal, j + 1), on a stack of frames (node, k, tail position in
        # LazyNext or -1 before it, returning from a call); resumed after GROW ---------------
        sp = counters[C_SP]
        if sp == 0 and 0 < node[goal, F_LEN] <= j and node[goal, EXHAUSTED_V] == 0:
            stack[0, 0] = goal
            stack[0, 1] = j + 1
            stack[0, 2] = -1
            stack[0, 3] = 0
            sp = 1
        while sp > 0:
            t = sp - 1
            v = stack[t, 0]
            i = stack[t, 2]
            if i < 0:
                if node[v, F_LEN] >= stack[t, 1] or node[v, EXHAUSTED_V] != 0:
                    sp -= 1
                    continue
                i = 0
                stack[t, 3] = 0
            # LazyNext of the last derivation of v, from tail position i on
            d = pool[node[v, F_START] + node[v, F_LEN] - 1]
            e = ent[d, E_EDGE]
            lo = tail_ptr[e]
            arity = tail_ptr[e + 1] - lo
            if (
                counters[C_ENT] + arity + 1 > ent_score.shape[0]
                or counters[C_RANK] + arity * arity > ranks.shape[0]
                or node[v, H_LEN] + arity > node[v, H_CAP]
                or node[v, F_LEN] == node[v, F_CAP]
            ) and not _room(v, arity, node, counters, want, pool, ent_score, ranks, hs, hx):
                counters[C_SP] = sp
                return GROW
            roff = ent[d, E_RANKS]
            called = False
            while i < arity:
                later = False
                for q in range(i + 1, arity):
                    if ranks[roff + q] != 0:
                        later = True
                        break
                if later:
                    i += 1
                    continue
                u = tail_nodes[lo + i]
                r = ranks[roff + i] + 1
                # LazyKthBest(u, r + 1) unless u has r + 1 derivations or no more
                if stack[t, 3] == 0 and 0 < node[u, F_LEN] <= r and node[u, EXHAUSTED_V] == 0:
                    stack[t, 2] = i
                    stack[t, 3] = 1
                    stack[sp, 0] = u
                    stack[sp, 1] = r + 1
                    stack[sp, 2] = -1
                    stack[sp, 3] = 0
                    sp += 1
                    called = True
                    break
                stack[t, 3] = 0
                if r < node[u, F_LEN]:
                    # the successor ⟨e, j + b^i⟩: W(e), then the tails' scores in tail order
                    score = w[e]
                    for q in range(arity):
                        rq = ranks[roff + q] + 1 if q == i else ranks[roff + q]
                        score += ent_score[pool[node[tail_nodes[lo + q], F_START] + rq]]
                    ro = counters[C_RANK]
                    counters[C_RANK] = ro + arity
                    for q in range(arity):
                        ranks[ro + q] = ranks[roff + q]
                    ranks[ro + i] += 1
                    x = counters[C_ENT]
                    counters[C_ENT] = x + 1
                    ent_score[x] = score
                    ent[x, E_EDGE] = e
                    ent[x, E_RANKS] = ro
                    ent[x, E_STR] = -1
                    # push on the heap of v (sift up)
                    base = node[v, H_START]
                    hn = node[v, H_LEN]
                    node[v, H_LEN] = hn + 1
                    while hn > 0:
                        parent = (hn - 1) >> 1
                        p = base + parent
                        ps = hs[p]
                        pe = hx[p, 0]
                        if ps != score:
                            up = score > ps
                        elif pe != e:
                            up = e < pe
                        else:
                            up = _ranks_before(x, hx[p, 1], ent, ranks, tail_ptr)
                        if not up:
                            break
                        hs[base + hn] = ps
                        hx[base + hn, 0] = pe
                        hx[base + hn, 1] = hx[p, 1]
                        hn = parent
                    hs[base + hn] = score
                    hx[base + hn, 0] = e
                    hx[base + hn, 1] = x
                i += 1
            if called:
                continue
            # pop the best of cand[v]: the head of the sorted run or the top of the heap
            c = node[v, RUN_NEXT]
            hn = node[v, H_LEN]
            base = node[v, H_START]
            take_heap = hn > 0
            if c < run_end[v]:
                if take_heap:
                    # edges differ (⟨e, 0⟩ precedes every successor of e): no rank tie-break
                    ts = hs[base]
                    rs = run_score[c]
                    take_heap = ts > rs or (ts == rs and hx[base, 0] < run_edges[c])
                if not take_heap:
                    node[v, RUN_NEXT] = c + 1
                    x = counters[C_ENT]
                    counters[C_ENT] = x + 1
                    ent_score[x] = run_score[c]
                    ent[x, E_EDGE] = run_edges[c]
                    ent[x, E_RANKS] = 0  # ranks[:max_arity] are zeros
                    ent[x, E_STR] = -1
            elif not take_heap:
                node[v, EXHAUSTED_V] = 1
                sp -= 1
                continue
            if take_heap:
                # pop the top of the heap of v (sift down)
                x = hx[base, 1]
                hn -= 1
                node[v, H_LEN] = hn
                if hn > 0:
                    last = base + hn
                    ls = hs[last]
                    le = hx[last, 0]
                    lx = hx[last, 1]
                    at = 0
                    while True:
                        ch = 2 * at + 1
                        if ch >= hn:
                            break
                        a = base + ch
                        if ch + 1 < hn:
                            b = a + 1
                            if hs[b] != hs[a]:
                                right = hs[b] > hs[a]
                            elif hx[b, 0] != hx[a, 0]:
                                right = hx[b, 0] < hx[a, 0]
                            else:
                                right = _ranks_before(hx[b, 1], hx[a, 1], ent, ranks, tail_ptr)
                            if right:
                                ch += 1
                                a = b
                        if hs[a] != ls:
                            down = hs[a] > ls
                        elif hx[a, 0] != le:
                            down = hx[a, 0] < le
                        else:
                            down = _ranks_before(hx[a, 1], lx, ent, ranks, tail_ptr)
                        if not down:
                            break
                        hs[base + at] = hs[a]
                        hx[base + at, 0] = hx[a, 0]
                        hx[base + at, 1] = hx[a, 1]
                        at = ch
                    hs[base + at] = ls
                    hx[base + at, 0] = le
                    hx[base + at, 1] = lx
            n = node[v, F_LEN]
            pool[node[v, F_START] + n] = x
            node[v, F_LEN] = n + 1
            stack[t, 2] = -1
        counters[C_SP] = 0
        if node[goal, F_LEN] <= j:
            return EXHAUSTED
        d = pool[node[goal, F_START] + j]
        r = ent[d, E_STR]
        if r < 0 or srow[r, S_LEN] < 0:
            # --- rows for the entries under d whose strings are not hashed yet, and the
            # edges among them without a pattern (each listed once) ---------------------------
            counters[C_STAMP] += 1
            stamp = counters[C_STAMP]
            n_need = 0
            dstack[0] = d
            sp = 1
            while sp > 0:
                sp -= 1
                x = dstack[sp]
                r = ent[x, E_STR]
                if r >= 0 and (srow[r, S_LEN] >= 0 or srow[r, S_SEEN] == stamp):
                    continue
                if r < 0:
                    r = counters[C_STR]
                    if r >= srow.shape[0]:
                        want[W_STR] = r + 1
                        return GROW  # the rows made so far stay; the traversal starts over
                    counters[C_STR] = r + 1
                    ent[x, E_STR] = r
                    srow[r, S_LEN] = -1
                    srow[r, S_VSTR] = -1
                srow[r, S_SEEN] = stamp
                e = ent[x, E_EDGE]
                if pat_state[e] != PAT_KNOWN and pat_state[e] != stamp:
                    need[n_need] = e
                    n_need += 1
                    pat_state[e] = stamp
                srow[r, S_EDGE] = e
                lo = tail_ptr[e]
                arity = tail_ptr[e + 1] - lo
                roff = ent[x, E_RANKS]
                for q in range(arity - 1, -1, -1):
                    c = pool[node[tail_nodes[lo + q], F_START] + ranks[roff + q]]
                    srow[r, S_KIDS + q] = c  # an entry, until the row's string is hashed
                    dstack[sp] = c
                    sp += 1
            if n_need > 0:
                counters[C_NEED] = n_need
                return NEED
            # --- hash the strings of those rows, tails first --------------------------------
            dstack[0] = ent[d, E_STR]
            sp = 1
            while sp > 0:
                r = dstack[sp - 1]
                if srow[r, S_LEN] >= 0:
                    sp -= 1
                    continue
                e = srow[r, S_EDGE]
                arity = tail_ptr[e + 1] - tail_ptr[e]
                pending = False
                for q in range(arity):
                    rc = ent[srow[r, S_KIDS + q], E_STR]
                    if srow[rc, S_LEN] < 0:
                        dstack[sp] = rc
                        sp += 1
                        pending = True
                if pending:
                    continue
                for q in range(arity):
                    srow[r, S_KIDS + q] = ent[srow[r, S_KIDS + q], E_STR]  # now rows
                h = _U0
                hp = _U1
                length = 0
                for s_at in range(pat_ptr[e], pat_ptr[e + 1]):
                    sym = pat_sym[s_at]
                    if sym >= 0:
                        h = h * _B + np.uint64(sym + 1)
                        hp = hp * _B
                        length += 1
                    else:
                        rc = srow[r, S_KIDS + ~sym]
                        h = h * shash[rc, 1] + shash[rc, 0]
                        hp = hp * shash[rc, 1]
                        length += srow[rc, S_LEN]
                shash[r, 0] = h
                shash[r, 1] = hp
                srow[r, S_LEN] = length
                sp -= 1

        # --- a new string? Compared word by word with each string found with the same
        # (masked) hash and length, a row known to hold string i's words at the offset reached
        # skipped; if none, written out as the next string. One walk of the rows does both
        # (frames: row, position in its pattern, its end, its offset). ------------------------
        r = ent[d, E_STR]
        h = shash[r, 0] & mask
        length = srow[r, S_LEN]
        cap = table.shape[0]
        slot = np.int64(_mix(h) & np.uint64(cap - 1))
        write = False
        while True:
            if table[slot] != 0:
                i = table[slot] - 1
                if picked_hash[i] != h or wptr[i + 1] - wptr[i] != length:
                    slot = (slot + 1) & (cap - 1)
                    continue
            else:
                # a new string: its words go after the strings found
                i = counters[C_PICKED]
                if wptr[i] + length > words.shape[0]:
                    want[W_WORDS] = wptr[i] + length
                    return GROW
                if i + 2 > wptr.shape[0] or 2 * (i + 1) > cap:
                    want[W_PICKED] = i + 2
                    if 2 * (i + 1) > cap:
                        want[W_TABLE] = 2 * cap
                    return GROW
                write = True
            lo = wptr[i]
            e = srow[r, S_EDGE]
            wstack[0, 0] = r
            wstack[0, 1] = pat_ptr[e]
            wstack[0, 2] = pat_ptr[e + 1]
            wstack[0, 3] = 0
            sp = 1
            out = 0
            same = True
            while sp > 0:
                t = sp - 1
                s_at = wstack[t, 1]
                if s_at == wstack[t, 2]:
                    rr = wstack[t, 0]  # its words are string i's from its offset on
                    srow[rr, S_VSTR] = i
                    srow[rr, S_VOFF] = wstack[t, 3]
                    sp = t
                    continue
                wstack[t, 1] = s_at + 1
                sym = pat_sym[s_at]
                if sym >= 0:
                    if write:
                        words[lo + out] = sym
                    elif words[lo + out] != sym:
                        same = False
                        break
                    out += 1
                else:
                    rc = srow[wstack[t, 0], S_KIDS + ~sym]
                    if not write and srow[rc, S_VSTR] == i and srow[rc, S_VOFF] == out:
                        out += srow[rc, S_LEN]
                    else:
                        e = srow[rc, S_EDGE]
                        wstack[sp, 0] = rc
                        wstack[sp, 1] = pat_ptr[e]
                        wstack[sp, 2] = pat_ptr[e + 1]
                        wstack[sp, 3] = out
                        sp += 1
            if write:
                picked[i, 0] = d
                picked[i, 1] = j
                picked_hash[i] = h
                wptr[i + 1] = lo + length
                table[slot] = i + 1
                counters[C_PICKED] = i + 1
                break
            if same:
                break
            slot = (slot + 1) & (cap - 1)
        counters[C_J] = j + 1


@njit(cache=True, nogil=True)
def tree_rows(roots: IntArray, srow: Int32Array, tail_ptr: IntArray, out: IntArray) -> int:
    """The rows under ``roots`` (hashed: their kids are rows), each once, tails first: ``out``
    lines ``(row, edge, kid rows…)``, padded with -1. Returns the number of lines."""
    done = np.zeros(srow.shape[0], np.bool_)
    stack = np.empty((srow.shape[0] + 1) * max(1, srow.shape[1] - S_KIDS), np.int64)
    n = 0
    for root in roots:
        if done[root]:
            continue
        stack[0] = root
        sp = 1
        while sp > 0:
            r = stack[sp - 1]
            if done[r]:
                sp -= 1
                continue
            e = srow[r, S_EDGE]
            arity = tail_ptr[e + 1] - tail_ptr[e]
            pending = False
            for q in range(arity):
                c = srow[r, S_KIDS + q]
                if not done[c]:
                    stack[sp] = c
                    sp += 1
                    pending = True
            if pending:
                continue
            done[r] = True
            sp -= 1
            out[n, 0] = r
            out[n, 1] = e
            for q in range(out.shape[1] - 2):
                out[n, 2 + q] = srow[r, S_KIDS + q] if q < arity else -1
            n += 1
    return n
