"""Cube pruning as one compiled kernel per sentence (Chiang 2007 §5.3.3; Huang & Chiang 2007).

The same search as :class:`service.mt.decoder.reference.ReferenceDecoder`, the tested reference,
over flat arrays instead of Python objects. :func:`decode_chart` reads as the algorithm does:

* the X cells by increasing span length, then the S cells ``[0, j]`` by increasing ``j``
  (Chiang 2007 §5.1; the glue rules); each cell's **cubes** (:func:`_x_cubes`,
  :func:`_s_cubes`): one per pattern match whose gaps are derived, with its rules sorted by −LM
  score and its tails' +LM items sorted by score plus LM heuristic, a pass-through cube for a
  word no rule translates alone, the unary and glue cubes of an S cell;
* :func:`_cube_pruning`: every rule's best corner in the heap at the start (or, with
  ``all_rules`` off, the rules as one more axis), a binary heap ordered by (−priority, push
  sequence), up to ``pop_limit`` pops; a candidate is scored once, when it is pushed (its rule,
  its tails, the LM of the words it gives their context: :func:`_step`, :func:`_left_step`,
  :func:`_charge`); a popped candidate becomes an edge into the +LM node of its minimised LM
  boundary (:mod:`service.mt.lm.states`: left state, right state, whether the item is full),
  and its neighbours, one rank further along each dimension in turn, are pushed;
* :func:`_sort_items`: the cell's items by decreasing priority (stable);
* :func:`_goal_edges`: ``<s>`` S[0, n] ``</s>`` (:func:`_sentence_lm`).

Every choice that decides the shape of the forest — chart order, cube order, heap tie-breaks,
the stable sort of a cell's items, the boundary semantics of ``combine_ids`` and ``finish_ids``
and their order of additions — is the reference's, so the forests are identical node for node and
edge for edge (tests/mt/test_compiled_decoder.py).

The arrays travel in named tuples (numba passes them as tuples): the inputs (:class:`Search`,
:class:`Matches`, :class:`Options`, :class:`RuleTargets`, :class:`PassWords`,
:class:`EdgeWeights`, :class:`ChartLm`), the output (:class:`Chart` of :class:`ChartNodes` and
:class:`ChartEdges`) and the kernel's own scratch (the +LM items, a cell's cubes and
candidates, the heap, the hash sets, the LM memos), and their fields are read in place
(``items.score[t]``). What the inner loops run per cell, candidate and pop stays in the body
of :func:`_cube_pruning`, and the LM helpers it calls per word take only the arrays they read: numba
counts a reference, with an atomic operation, to every array bound to a new name — each array
of a called function's arguments, of an ``inline="always"`` helper's, of a tuple unpacked into
names — while a field read in place costs none. A first version of this kernel with helpers
for the candidate's rule, its LM score and the popped item took 1.9 times the time of the one
before (bench/results/kernel_refactor_decoder.json has the final comparison). Only
branch-free helpers are inlined.

LM contexts are packed into one ``uint64``: up to three decoder word ids (the LM order is at
most 4) of 21 bits each, stored as id + 1, newest in the low bits, 0 the empty context. A
context and a word are scored through :func:`service.mt.lm.kernels.logp10`, and the next context
minimised through :func:`~service.mt.lm.kernels.droppable`, memoised per sentence in an
open-addressing table; left-state steps (:func:`~service.mt.lm.kernels.left_extends_ids`) have a
memo of their own, and a full item's backoff charge reads
:func:`~service.mt.lm.kernels.backoff10`. Word ids are the grammar's target vocabulary, then
``<s>`` and ``</s>``, then the sentence's pass-through words outside the vocabulary.

The kernel takes and returns only arrays and scalars; it allocates its scratch space per call
and releases the GIL (``nogil``), so several sentences decode in parallel threads.

Numba's on-disk cache keys a compiled function on its own source file only: after changing
:func:`service.mt.lm.kernels.logp10` without touching this file, delete this module's cache
(``service/mt/decoder/__pycache__/kernel*.nb*``) or the kernel keeps the old lookup inlined.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numba
import numpy as np

from service.mt.lm import backoff10, droppable, left_extends_ids, logp10

BITS = 21  # bits per word id in a packed context
MAX_CONTEXT = 3  # words per packed context: LM order at most 4
MAX_WORD_ID = (1 << BITS) - 2  # largest decoder word id that packs (id + 1 < 2^21)
_B = np.uint64(BITS)
_FIELD = np.uint64((1 << BITS) - 1)
_LN10 = math.log(10.0)

# edge kinds, stored in the rule column of an edge (rule ids are >= 0)
PASS = -1  # pass-through of one source word
UNARY = -2  # S -> X
GLUE = -3  # S -> S X
GOAL = -4  # TOP -> S, with <s> and </s>

# node labels
LABEL_X = 0
LABEL_S = 1
LABEL_TOP = 2

_MEMO_BITS = 17
_LEFT_MEMO_BITS = 14

# hash multipliers (Fibonacci hashing)
_H1 = np.uint64(0x9E3779B97F4A7C15)
_H2 = np.uint64(0xC2B2AE3D27D4EB4F)


# --- the kernel's inputs and output ---------------------------------------------------------
class Search(NamedTuple):
    """The sentence's length and the search's settings."""

    n: int  # source words
    max_span: int  # longest span of a non-glue rule
    pop_limit: int  # pops per −LM node
    all_rules: bool  # every rule's best corner starts in the heap (DecoderConfig.cube_rules)


class Matches(NamedTuple):
    """The sentence grammar's pattern matches, sorted by (start, end) as
    :class:`service.mt.grammar.SentenceGrammar`; each has ``nopt`` options from ``optlo`` in
    :class:`Options`."""

    start: Any  # int64
    end: Any  # int64
    gaps: Any  # int64 (matches, 4): the spans of up to two gaps, -1 for none
    optlo: Any  # int64
    nopt: Any  # int64


class Options(NamedTuple):
    """The rules of each match by decreasing −LM score (stable): :func:`sort_options`."""

    rule: Any  # int64: rule id
    score: Any  # float64: w · φ (no LM)
    oov: Any  # int64: target words unknown to the LM


class RuleTargets(NamedTuple):
    """The grammar's target sides: the symbols of target ``t`` are
    ``symbols[offsets[t]:offsets[t + 1]]`` (decoder word ids >= 0, gap ``k`` as ``-k - 1``,
    read mod 2); ``rule_target[r]`` is rule ``r``'s target."""

    symbols: Any  # int32
    offsets: Any  # int32
    rule_target: Any  # int32


class PassWords(NamedTuple):
    """Source word ``i``'s pass-through word: its decoder word id and LM OOV flag."""

    word: Any  # int32
    oov: Any  # int64


class EdgeWeights(NamedTuple):
    """The weights of the features the decoder adds itself."""

    pass_through: float  # a pass-through edge's score: w(PassThrough) + w(WordPenalty)
    glue: float
    lm: float
    oov: float


class ChartLm(NamedTuple):
    """The language model as the kernel reads it (:class:`service.mt.lm.LmTable`)."""

    use: bool  # False: no LM features, one +LM item per −LM node
    h: int  # LM order − 1 (0 without LM): the words of a context
    bos: int  # the decoder word ids of <s> and </s>
    eos: int
    base: Any  # int64: LM id of each decoder word id of the vocabulary, <s> and </s>
    extra: Any  # int64: LM ids of the sentence's pass-through words beyond those
    ngrams: Any  # LmTable.arrays(): keys, probs, backoffs, uni_probs, uni_backoffs
    structure: Any  # LmTable.structure_arrays(): keys, backoffs, uni_backoffs, left_ext, uni_…
    minimise: bool  # minimised LM states (service.mt.lm.states)


class ChartNodes(NamedTuple):
    """The +LM forest's nodes: label (``LABEL_*``), span, LM boundary."""

    label: Any  # int8
    i: Any  # int32
    j: Any  # int32
    left: Any  # uint64: packed left state
    right: Any  # uint64: packed right state
    full: Any  # bool


class ChartEdges(NamedTuple):
    """The +LM forest's edges: head, tails (-1: none), rule id or kind (``PASS`` …
    ``GOAL``), the LM feature, the LM OOV count and the span."""

    head: Any  # int32
    t0: Any  # int32
    t1: Any  # int32
    rule: Any  # int64
    lm: Any  # float64
    oov: Any  # int32
    i: Any  # int32
    j: Any  # int32


class ChartInputs(NamedTuple):
    """The arguments of :func:`decode_chart`, in order."""

    search: Search
    matches: Matches
    options: Options
    targets: RuleTargets
    pass_words: PassWords
    weights: EdgeWeights
    lm: ChartLm


class Chart(NamedTuple):
    """What :func:`decode_chart` returns."""

    nodes: ChartNodes
    edges: ChartEdges
    best: float  # the Viterbi score (the cube-pruning 1-best)
    pops: int
    minus_lm_nodes: int


# --- the kernel's scratch ------------------------------------------------------------------
class _Spans(NamedTuple):
    """The matches of span ``[i, j)`` are ``lo[k]..hi[k] - 1``, ``k = i * (n + 1) + j``
    (-1: none); ``unary[i]``: some gap-free rule translates word ``i`` alone."""

    lo: Any
    hi: Any
    unary: Any


class _Items(NamedTuple):
    """The +LM items of the finished cells, a cell's contiguous, by decreasing priority."""

    node: Any
    score: Any  # best inside score
    est: Any  # weighted LM estimate of the left state
    left: Any
    leftlen: Any
    right: Any
    full: Any
    rawest: Any  # unweighted estimate


class _Cells(NamedTuple):
    """Where each finished X span (``i * (n + 1) + j``) and S prefix (``j``) keeps its items
    (offset -1: no item)."""

    x_off: Any
    x_cnt: Any
    s_off: Any
    s_cnt: Any


class _Cubes(NamedTuple):
    """A cell's cubes: a match index or ``PASS``/``UNARY``/``GLUE``, the length of its rule
    axis, its arity and each tail's items (offset, count)."""

    kind: Any
    nopt: Any
    arity: Any
    off: Any  # (cubes, 2)
    cnt: Any  # (cubes, 2)


class _Cands(NamedTuple):
    """A cell's scored candidates: cube and ranks (rule, tail 0, tail 1), inside score, LM
    estimate, LM boundary, LM feature, rule, OOV count."""

    cube: Any
    idx: Any  # (candidates, 3)
    inside: Any
    est: Any
    left: Any
    right: Any
    full: Any
    nleft: Any
    lm: Any
    rawest: Any
    rule: Any
    oov: Any


class _Heap(NamedTuple):
    """A binary min-heap of candidates keyed by (``key``, ``seq``)."""

    key: Any
    seq: Any
    value: Any


class _CellSets(NamedTuple):
    """A cell's hash sets: the candidates pushed so far (``seen``, packed in base ``base``; the
    slots used, to clear them) and its +LM items by LM boundary."""

    seen: Any
    seen_used: Any
    base: int
    item_left: Any
    item_right: Any
    item_full: Any
    item: Any  # -1: empty slot


class _LmIds(NamedTuple):
    """Decoder word ids to LM ids (:class:`ChartLm`'s ``base`` and ``extra``) and a buffer
    for the LM ids of a context."""

    base: Any
    extra: Any
    buf: Any


class _StepMemo(NamedTuple):
    """The memo of LM steps: context, word + 1 (0: empty slot), value, next context;
    ``used[0]`` slots used."""

    ctx: Any
    word: Any
    value: Any
    next: Any
    used: Any


class _LeftMemo(NamedTuple):
    """The memo of left-state steps: key, 1/0 (-1: empty slot); ``used[0]`` slots used."""

    key: Any
    value: Any
    used: Any


class _LmScratch(NamedTuple):
    """The LM's per-sentence scratch: the mask of a packed context (``h`` words), the LM ids
    and the two memos."""

    mask: np.uint64
    ids: _LmIds
    step: _StepMemo
    left: _LeftMemo


# --- packed LM contexts ---------------------------------------------------------------------
@numba.njit(cache=True, nogil=True, inline="always")
def _push_word(ctx: np.uint64, d: int | np.int64, mask: np.uint64) -> np.uint64:
    """The context after word ``d`` (the oldest word drops out beyond ``h`` words)."""
    return ((ctx << _B) | np.uint64(d + 1)) & mask


@numba.njit(cache=True, nogil=True, inline="always")
def _field(packed: np.uint64, r: int) -> np.int64:
    """The decoder word id in field ``r`` (0: the newest) of a packed context."""
    return np.int64((packed >> (_B * np.uint64(r))) & _FIELD) - 1


@numba.njit(cache=True, nogil=True, inline="always")
def _lm_word(d: int | np.int64, ids: _LmIds) -> Any:
    """The LM id of decoder word id ``d``."""
    nb = ids.base.shape[0]
    return ids.base[d] if d < nb else ids.extra[d - nb]


@numba.njit(cache=True, nogil=True)
def _unpack(ctx: np.uint64, ids: _LmIds) -> int:
    """LM ids of the words of packed context ``ctx`` into ``ids.buf``, oldest first; how
    many."""
    n = 0
    x = ctx
    while x != np.uint64(0):
        n += 1
        x >>= _B
    for q in range(n):
        ids.buf[q] = _lm_word(_field(ctx, n - 1 - q), ids)
    return n


# --- LM steps (service.mt.lm.states.ContextTable) ------------------------------------------
# Called for every word a candidate scores: each takes only the arrays it reads (numba counts
# a reference to each array of its arguments on entry).
@numba.njit(cache=True, nogil=True)
def _step(
    ctx: np.uint64,
    d: int | np.int64,
    mask: np.uint64,
    minimise: bool,
    ngrams: Any,
    ids: _LmIds,
    memo: _StepMemo,
) -> tuple[float, np.uint64]:
    """Natural-log p(word ``d`` | packed context ``ctx``) and the minimised context after it
    (:meth:`service.mt.lm.states.ContextTable.step`), memoised for the sentence. ``ngrams``:
    :meth:`service.mt.lm.LmTable.arrays`."""
    size = np.uint64(memo.ctx.shape[0] - 1)
    h = ctx * _H1 ^ np.uint64(d + 1) * _H2
    slot = np.int64((h ^ (h >> np.uint64(29))) & size)
    while memo.word[slot] != 0:
        if memo.word[slot] == d + 1 and memo.ctx[slot] == ctx:
            return memo.value[slot], memo.next[slot]
        slot = np.int64((np.uint64(slot) + np.uint64(1)) & size)
    keys, probs, backoffs, uni_probs, uni_backoffs = ngrams  # on a miss only
    n = _unpack(ctx, ids)
    p10 = logp10(keys, probs, backoffs, uni_probs, uni_backoffs, ids.buf, n, _lm_word(d, ids))
    value = np.float64(p10) * _LN10
    nxt = _push_word(ctx, d, mask)
    if minimise:
        # drop the oldest word while the context is unlisted or listed without extension
        k = _unpack(nxt, ids)
        while k > 0 and droppable(keys, backoffs, uni_backoffs, ids.buf, k):
            for q in range(k - 1):
                ids.buf[q] = ids.buf[q + 1]
            k -= 1
            nxt &= (np.uint64(1) << (_B * np.uint64(k))) - np.uint64(1)
    if memo.used[0] * 10 < memo.ctx.shape[0] * 7:
        memo.used[0] += 1
        memo.word[slot] = d + 1
        memo.ctx[slot] = ctx
        memo.value[slot] = value
        memo.next[slot] = nxt
    return value, nxt


@numba.njit(cache=True, nogil=True)
def _left_step(
    left: np.uint64, d: np.int64, minimise: bool, structure: Any, ids: _LmIds, memo: _LeftMemo
) -> bool:
    """Whether left state ``left`` (fewer than ``h`` words) extends by word ``d``
    (:meth:`service.mt.lm.states.ContextTable.left_step`), memoised for the sentence.
    ``structure``: :meth:`service.mt.lm.LmTable.structure_arrays`."""
    if not minimise:
        return True
    key = (left << _B) | np.uint64(d + 1)
    size = np.uint64(memo.key.shape[0] - 1)
    hk = key * _H1
    slot = np.int64((hk ^ (hk >> np.uint64(29))) & size)
    while memo.value[slot] >= 0:
        if memo.key[slot] == key:
            known: bool = memo.value[slot] == 1
            return known
        slot = np.int64((np.uint64(slot) + np.uint64(1)) & size)
    keys, _, _, left_ext, uni_left_ext = structure
    n = _unpack(key, ids)
    ok: bool = left_extends_ids(keys, left_ext, uni_left_ext, ids.buf, n)
    if memo.used[0] * 10 < memo.key.shape[0] * 7:
        memo.used[0] += 1
        memo.key[slot] = key
        memo.value[slot] = 1 if ok else 0
    return ok


@numba.njit(cache=True, nogil=True)
def _charge(ctx: np.uint64, j: int, structure: Any, ids: _LmIds) -> float:
    """:func:`service.mt.lm.states.charge`: the backoffs of the suffixes of ``ctx`` longer
    than ``j`` words, shortest first, in natural log."""
    keys, backoffs, uni_backoffs, _, _ = structure
    n = _unpack(ctx, ids)
    total = 0.0
    for length in range(j + 1, n + 1):
        bo = backoff10(keys, backoffs, uni_backoffs, ids.buf[n - length : n], length)
        total += np.float64(bo) * _LN10
    return total


@numba.njit(cache=True, nogil=True)
def _sentence_lm(q: int, items: _Items, lm: ChartLm, scratch: _LmScratch) -> float:
    """:func:`service.mt.lm.states.finish_ids`: the LM score that ``<s>`` before item ``q``
    and ``</s>`` after it add."""
    mask, ids, memo, minimise = scratch.mask, scratch.ids, scratch.step, lm.minimise
    lmv = 0.0
    ctx = _push_word(np.uint64(0), lm.bos, mask)
    lw = items.left[q]
    ll = items.leftlen[q]
    for r in range(ll - 1, -1, -1):
        lp, ctx = _step(ctx, _field(lw, r), mask, minimise, lm.ngrams, ids, memo)
        lmv += lp
    if items.full[q]:
        lmv += _charge(ctx, ll, lm.structure, ids)
        ctx = items.right[q]
    lmv += _step(ctx, lm.eos, mask, minimise, lm.ngrams, ids, memo)[0]
    return lmv


# --- the heap -------------------------------------------------------------------------------
@numba.njit(cache=True, nogil=True, inline="always")
def _before(pa: float, sa: int, pb: float, sb: int) -> bool:
    """Heap order: by priority key, then by push sequence."""
    return pa < pb or (pa == pb and sa < sb)


@numba.njit(cache=True, nogil=True, inline="always")
def _heap_set(heap: _Heap, i: int, p: float, s: int, v: int) -> None:
    """Put key ``(p, s)`` and value ``v`` at heap position ``i``."""
    heap.key[i] = p
    heap.seq[i] = s
    heap.value[i] = v


@numba.njit(cache=True, nogil=True)
def _heap_push(heap: _Heap, n: int, p: float, s: int, v: int) -> int:
    """Push value ``v`` with key ``(p, s)`` onto the min-heap of size ``n``; the new size."""
    i = n
    while i > 0:
        par = (i - 1) >> 1
        if _before(p, s, heap.key[par], heap.seq[par]):
            _heap_set(heap, i, heap.key[par], heap.seq[par], heap.value[par])
            i = par
        else:
            break
    _heap_set(heap, i, p, s, v)
    return n + 1


@numba.njit(cache=True, nogil=True)
def _heap_pop(heap: _Heap, n: int) -> tuple[int, int]:
    """Pop the smallest key; (its value, the new size)."""
    top = heap.value[0]
    n -= 1
    p, s, v = heap.key[n], heap.seq[n], heap.value[n]
    i = 0
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        if c + 1 < n and _before(heap.key[c + 1], heap.seq[c + 1], heap.key[c], heap.seq[c]):
            c += 1
        if _before(heap.key[c], heap.seq[c], p, s):
            _heap_set(heap, i, heap.key[c], heap.seq[c], heap.value[c])
            i = c
        else:
            break
    _heap_set(heap, i, p, s, v)
    return top, n


# --- a cell ---------------------------------------------------------------------------------
@numba.njit(cache=True, nogil=True)
def _gap_key(matches: Matches, m: int, k: int, W: int) -> int:
    """The span key ``i * W + j`` of gap ``k`` of match ``m``, or -1 if it has none."""
    gs = matches.gaps[m, 2 * k]
    return gs * W + matches.gaps[m, 2 * k + 1] if gs >= 0 else -1


@numba.njit(cache=True, nogil=True, inline="always")
def _tail(cubes: _Cubes, c: int, a: int, off: int, cnt: int) -> None:
    """Tail ``a`` of cube ``c`` ranges over the ``cnt`` items from ``off``."""
    cubes.off[c, a] = off
    cubes.cnt[c, a] = cnt


@numba.njit(cache=True, nogil=True, inline="always")
def _cube(cubes: _Cubes, c: int, kind: int, nopt: int, arity: int) -> int:
    """Cube ``c`` is of ``kind`` with ``nopt`` rules and ``arity`` tails; the next cube."""
    cubes.kind[c] = kind
    cubes.nopt[c] = nopt
    cubes.arity[c] = arity
    return c + 1


@numba.njit(cache=True, nogil=True)
def _x_cubes(
    cubes: _Cubes, cells: _Cells, spans: _Spans, matches: Matches, search: Search, ci: int, cj: int
) -> int:
    """The cubes of X cell ``[ci, cj)``: one per match whose gaps are derived, and the
    pass-through of a word no gap-free rule translates; how many."""
    W = search.n + 1
    nc = 0
    key = ci * W + cj
    if cj - ci <= search.max_span and spans.lo[key] >= 0:
        for m in range(spans.lo[key], spans.hi[key]):
            derived = True
            ar = 0
            for k in range(2):
                g = _gap_key(matches, m, k, W)
                if g >= 0:
                    if cells.x_off[g] < 0:
                        derived = False
                    else:
                        _tail(cubes, nc, ar, cells.x_off[g], cells.x_cnt[g])
                        ar += 1
            if derived:
                nc = _cube(cubes, nc, m, matches.nopt[m], ar)
    if cj - ci == 1 and not spans.unary[ci]:
        nc = _cube(cubes, nc, PASS, 1, 0)
    return nc


@numba.njit(cache=True, nogil=True)
def _s_cubes(cubes: _Cubes, cells: _Cells, search: Search, cj: int) -> int:
    """The cubes of S cell ``[0, cj)``: ``S → X[0, cj]`` and each ``S → S[0, k] X[k, cj]``."""
    W = search.n + 1
    nc = 0
    if cells.x_off[cj] >= 0:
        _tail(cubes, nc, 0, cells.x_off[cj], cells.x_cnt[cj])
        nc = _cube(cubes, nc, UNARY, 1, 1)
    for k in range(1, cj):
        if cells.s_off[k] >= 0 and cells.x_off[k * W + cj] >= 0:
            _tail(cubes, nc, 0, cells.s_off[k], cells.s_cnt[k])
            _tail(cubes, nc, 1, cells.x_off[k * W + cj], cells.x_cnt[k * W + cj])
            nc = _cube(cubes, nc, GLUE, 1, 2)
    return nc


@numba.njit(cache=True, nogil=True)
def _first_push(sets: _CellSets, nseen: int, c: int, i0: int, i1: int, i2: int) -> int:
    """Mark candidate ``(c, i0, i1, i2)`` as pushed: the new count of marks, or -1 if it was
    pushed before."""
    P = sets.base
    ssize = sets.seen.shape[0]
    skey = ((c * P + i0) * P + i1) * P + i2 + 1
    slot = (skey * 0x9E3779B1) & (ssize - 1)
    while sets.seen[slot] != 0:
        if sets.seen[slot] == skey:
            return -1
        slot = (slot + 1) & (ssize - 1)
    sets.seen[slot] = skey
    sets.seen_used[nseen] = slot
    return nseen + 1


@numba.njit(cache=True, nogil=True, inline="always")
def _pend(pend: Any, q: int, c: int, i0: int, i1: int, i2: int) -> None:
    """Candidate ``(c, i0, i1, i2)`` is the ``q``-th to push."""
    pend[q, 0] = c
    pend[q, 1] = i0
    pend[q, 2] = i1
    pend[q, 3] = i2


@numba.njit(cache=True, nogil=True)
def _cell_order(n: int) -> Any:
    """The chart's cells bottom-up as rows (label, i, j): the X cells by increasing span
    length, then the S cells [0, j] by increasing j (Chiang 2007, §5.1; the glue rules)."""
    order = np.empty((n * (n + 1) // 2 + n, 3), np.int64)
    q = 0
    for length in range(1, n + 1):
        for i in range(n - length + 1):
            order[q, 0] = LABEL_X
            order[q, 1] = i
            order[q, 2] = i + length
            q += 1
    for j in range(1, n + 1):
        order[q, 0] = LABEL_S
        order[q, 1] = 0
        order[q, 2] = j
        q += 1
    return order


@numba.njit(cache=True, nogil=True)
def _cube_pruning(
    spans: _Spans,
    cells: _Cells,
    inputs: tuple[Search, Matches, Options, RuleTargets, PassWords, EdgeWeights, ChartLm],
    chart: tuple[_Items, ChartNodes, ChartEdges],
    cell: tuple[_Cubes, _Cands, _Heap, _CellSets, Any, Any],
    scratch: _LmScratch,
) -> tuple[int, int, int, int]:
    """Fill the chart's cells bottom-up: for each, its cubes, then up to ``pop_limit`` pops
    into the +LM forest, then its items sorted. The numbers of nodes, edges, pops and −LM
    nodes.

    A candidate is scored when it is pushed (its rule, its tails' scores, the LM of the words
    it gives their context); the heap pops the best priority (inside score plus LM estimate),
    ties in push order; a popped candidate becomes an edge into the +LM node of its LM
    boundary, and its neighbours, one rank further along each axis in turn, are pushed next.
    One function for the whole chart, the candidate's and the pop's work in its body: see the
    module docstring.
    """
    search, matches, options, targets, pass_words, weights, lm = inputs
    items, nodes, edges = chart
    cubes, cands, heap, sets, pend, (unary_syms, glue_syms) = cell
    mask, ids, step_memo, left_memo = scratch
    ngrams, structure, minimise = lm.ngrams, lm.structure, lm.minimise
    first_axis = 1 if search.all_rules else 0  # with every rule in the heap, rules are no axis
    W = search.n + 1
    it = 0
    nd = 0
    ne = 0
    total_pops = 0
    minus_lm_nodes = 0
    order = _cell_order(search.n)
    for cq in range(order.shape[0]):
        label = np.int8(order[cq, 0])
        ci = order[cq, 1]
        cj = order[cq, 2]
        # --- the cubes of this cell -------------------------------------------------------
        if label == LABEL_X:
            nc = _x_cubes(cubes, cells, spans, matches, search, ci, cj)
        else:
            nc = _s_cubes(cubes, cells, search, cj)
        if nc == 0:
            continue
        minus_lm_nodes += 1
        # --- pop up to pop_limit candidates -----------------------------------------------
        it_base = it
        nheap = 0
        ncand = 0
        seq = 0
        nseen = 0
        pops = 0
        npend = 0
        for c in range(nc):
            for k in range(cubes.nopt[c] if search.all_rules else 1):
                _pend(pend, npend, c, k, 0, 0)
                npend += 1
        while True:
            # --- push the pending candidates that are in their cube and new -------------------
            for q in range(npend):
                c = pend[q, 0]
                i0 = pend[q, 1]
                i1 = pend[q, 2]
                i2 = pend[q, 3]
                ar = cubes.arity[c]
                if i0 >= cubes.nopt[c]:
                    continue
                if ar >= 1 and i1 >= cubes.cnt[c, 0]:
                    continue
                if ar >= 2 and i2 >= cubes.cnt[c, 1]:
                    continue
                seen = _first_push(sets, nseen, c, i0, i1, i2)
                if seen < 0:
                    continue
                nseen = seen
                # its rule: w · φ, LM OOV count, target symbols
                kind = cubes.kind[c]
                if kind >= 0:
                    k = matches.optlo[kind] + i0
                    rule = options.rule[k]
                    sc = options.score[k]
                    oov = options.oov[k]
                    tt = targets.rule_target[rule]
                    syms = targets.symbols[targets.offsets[tt] : targets.offsets[tt + 1]]
                elif kind == PASS:
                    rule = PASS
                    sc = weights.pass_through
                    oov = pass_words.oov[ci]
                    syms = pass_words.word[ci : ci + 1]
                elif kind == UNARY:
                    rule = UNARY
                    sc = 0.0
                    oov = 0
                    syms = unary_syms
                else:
                    rule = GLUE
                    sc = weights.glue
                    oov = 0
                    syms = glue_syms
                t0 = cubes.off[c, 0] + i1 if ar >= 1 else -1
                t1 = cubes.off[c, 1] + i2 if ar >= 2 else -1
                inside = sc
                if ar >= 1:
                    inside += items.score[t0]
                if ar >= 2:
                    inside += items.score[t1]
                lmv = 0.0
                raw = 0.0
                est = 0.0
                left = np.uint64(0)
                nleft = 0
                full = False
                ctx = np.uint64(0)
                if lm.use:
                    # combine_ids: score the words that gain their context, the candidate's
                    # LM boundary
                    for s in syms:
                        if s >= 0:
                            t = -1
                            nw = 1
                        else:
                            t = t0 if ((-s - 1) % 2) == 0 else t1
                            if nleft == 0 and not full:
                                # nothing before it: the tail's own state
                                left = items.left[t]
                                nleft = items.leftlen[t]
                                full = items.full[t]
                                ctx = items.right[t]
                                raw = items.rawest[t]
                                continue
                            nw = items.leftlen[t]
                        lw = items.left[t] if t >= 0 else np.uint64(0)
                        for r in range(nw - 1, -1, -1):
                            d = np.int64(s) if t < 0 else _field(lw, r)
                            lp, nxt = _step(ctx, d, mask, minimise, ngrams, ids, step_memo)
                            joins = False
                            if not full and nleft < lm.h:
                                joins = _left_step(left, d, minimise, structure, ids, left_memo)
                            if joins:
                                left = (left << _B) | np.uint64(d + 1)
                                nleft += 1
                                raw += lp
                            else:
                                full = True
                                lmv += lp
                            ctx = nxt
                        if t >= 0 and items.full[t]:
                            full = True
                            lmv += _charge(ctx, nw, structure, ids)
                            ctx = items.right[t]
                    inside += weights.lm * lmv + weights.oov * oov
                    est = weights.lm * raw
                cands.cube[ncand] = c
                cands.idx[ncand, 0] = i0
                cands.idx[ncand, 1] = i1
                cands.idx[ncand, 2] = i2
                cands.inside[ncand] = inside
                cands.est[ncand] = est
                cands.left[ncand] = left
                cands.right[ncand] = ctx
                cands.full[ncand] = full
                cands.nleft[ncand] = nleft
                cands.lm[ncand] = lmv
                cands.rawest[ncand] = raw
                cands.rule[ncand] = rule
                cands.oov[ncand] = oov
                nheap = _heap_push(heap, nheap, -(inside + est), seq, ncand)
                seq += 1
                ncand += 1
            if nheap == 0 or pops >= search.pop_limit:
                break
            # --- pop the best candidate: an edge into its +LM node ----------------------------
            v, nheap = _heap_pop(heap, nheap)
            pops += 1
            left = cands.left[v]
            right = cands.right[v]
            full = cands.full[v]
            inside = cands.inside[v]
            # the cell's item with this LM boundary, or the empty slot where it goes
            size = sets.item.shape[0]
            hk = left * _H1 ^ right * _H2 ^ np.uint64(full)
            slot = np.int64((hk ^ (hk >> np.uint64(31))) & np.uint64(size - 1))
            while sets.item[slot] >= 0:
                if (
                    sets.item_left[slot] == left
                    and sets.item_right[slot] == right
                    and sets.item_full[slot] == full
                ):
                    break
                slot = (slot + 1) & (size - 1)
            found = sets.item[slot]
            if found < 0:
                found = it
                sets.item_left[slot] = left
                sets.item_right[slot] = right
                sets.item_full[slot] = full
                sets.item[slot] = it
                nodes.label[nd] = label
                nodes.i[nd] = ci
                nodes.j[nd] = cj
                nodes.left[nd] = left
                nodes.right[nd] = right
                nodes.full[nd] = full
                items.node[it] = nd
                items.score[it] = inside
                items.est[it] = cands.est[v]
                items.left[it] = left
                items.leftlen[it] = cands.nleft[v]
                items.right[it] = right
                items.full[it] = full
                items.rawest[it] = cands.rawest[v]
                nd += 1
                it += 1
            elif inside > items.score[found]:
                items.score[found] = inside
            c = cands.cube[v]
            ar = cubes.arity[c]
            edges.head[ne] = items.node[found]
            edges.t0[ne] = items.node[cubes.off[c, 0] + cands.idx[v, 1]] if ar >= 1 else -1
            edges.t1[ne] = items.node[cubes.off[c, 1] + cands.idx[v, 2]] if ar >= 2 else -1
            edges.rule[ne] = cands.rule[v]
            edges.lm[ne] = cands.lm[v]
            edges.oov[ne] = cands.oov[v]
            edges.i[ne] = ci
            edges.j[ne] = cj
            ne += 1
            # its neighbours, one rank further along each dimension in turn
            npend = ar + 1 - first_axis
            for q in range(npend):
                dim = first_axis + q
                _pend(
                    pend,
                    q,
                    c,
                    cands.idx[v, 0] + (1 if dim == 0 else 0),
                    cands.idx[v, 1] + (1 if dim == 1 else 0),
                    cands.idx[v, 2] + (1 if dim == 2 else 0),
                )
        # clear the cell's hash sets
        for q in range(nseen):
            sets.seen[sets.seen_used[q]] = 0
        sets.item[:] = -1
        total_pops += pops
        # --- the cell's items, by decreasing priority -------------------------------------
        _sort_items(items, it_base, it)
        if label == LABEL_X:
            cells.x_off[ci * W + cj] = it_base
            cells.x_cnt[ci * W + cj] = it - it_base
        else:
            cells.s_off[cj] = it_base
            cells.s_cnt[cj] = it - it_base
    return nd, ne, total_pops, minus_lm_nodes


@numba.njit(cache=True, nogil=True)
def _permute(a: Any, lo: int, order: Any) -> None:
    """``a[lo:lo + len(order)]`` in the order ``order`` of its positions."""
    tmp = a[lo : lo + order.shape[0]].copy()
    for q in range(order.shape[0]):
        a[lo + q] = tmp[order[q]]


@numba.njit(cache=True, nogil=True)
def _sort_items(items: _Items, lo: int, hi: int) -> None:
    """Items ``lo..hi-1`` (one cell's) by decreasing priority, stable: creation order on ties."""
    cnt = hi - lo
    if cnt > 1:
        pri = np.empty(cnt)
        for q in range(cnt):
            pri[q] = -(items.score[lo + q] + items.est[lo + q])
        order = np.argsort(pri, kind="mergesort")
        _permute(items.score, lo, order)
        _permute(items.est, lo, order)
        _permute(items.rawest, lo, order)
        _permute(items.node, lo, order)
        _permute(items.leftlen, lo, order)
        _permute(items.left, lo, order)
        _permute(items.right, lo, order)
        _permute(items.full, lo, order)


# --- the sentence ---------------------------------------------------------------------------
@numba.njit(cache=True, nogil=True)
def _index_spans(matches: Matches, search: Search) -> tuple[_Spans, int, int]:
    """The matches of each span, and the most cubes a cell has and candidates it starts
    with."""
    n = search.n
    W = n + 1
    lo = np.full(W * W, -1, np.int64)
    hi = np.full(W * W, -1, np.int64)
    unary = np.zeros(max(n, 1), np.bool_)
    for m in range(matches.start.shape[0]):
        key = matches.start[m] * W + matches.end[m]
        if lo[key] < 0:
            lo[key] = m
        hi[key] = m + 1
        if matches.end[m] == matches.start[m] + 1 and matches.gaps[m, 0] < 0:
            unary[matches.start[m]] = True
    maxcubes = n + 1
    maxinit = n + 1  # candidates a cell starts with
    for key in range(W * W):
        if lo[key] >= 0:
            if hi[key] - lo[key] + 1 > maxcubes:
                maxcubes = hi[key] - lo[key] + 1
            if search.all_rules:
                total = 1
                for m in range(lo[key], hi[key]):
                    total += matches.nopt[m]
                maxinit = max(maxinit, total)
    return _Spans(lo, hi, unary), maxcubes, max(maxinit, maxcubes)


@numba.njit(cache=True, nogil=True)
def _new_items(cap: int) -> _Items:
    return _Items(
        np.empty(cap, np.int64),
        np.empty(cap),
        np.empty(cap),
        np.empty(cap, np.uint64),
        np.empty(cap, np.int64),
        np.empty(cap, np.uint64),
        np.empty(cap, np.bool_),
        np.empty(cap),
    )


@numba.njit(cache=True, nogil=True)
def _new_nodes(cap: int) -> ChartNodes:
    return ChartNodes(
        np.empty(cap, np.int8),
        np.empty(cap, np.int32),
        np.empty(cap, np.int32),
        np.empty(cap, np.uint64),
        np.empty(cap, np.uint64),
        np.empty(cap, np.bool_),
    )


@numba.njit(cache=True, nogil=True)
def _new_edges(cap: int) -> ChartEdges:
    return ChartEdges(
        np.empty(cap, np.int32),
        np.empty(cap, np.int32),
        np.empty(cap, np.int32),
        np.empty(cap, np.int64),
        np.empty(cap),
        np.empty(cap, np.int32),
        np.empty(cap, np.int32),
        np.empty(cap, np.int32),
    )


@numba.njit(cache=True, nogil=True)
def _new_cell(
    search: Search, matches: Matches, maxcubes: int, maxinit: int
) -> tuple[_Cubes, _Cands, _Heap, _CellSets, Any, Any]:
    """A cell's scratch: cubes, candidates, heap, hash sets, pending pushes and the target
    sides of the unary and glue rules."""
    pop_limit = search.pop_limit
    ccap = maxinit + 3 * pop_limit + 4
    cubes = _Cubes(
        np.empty(maxcubes, np.int64),
        np.empty(maxcubes, np.int64),
        np.empty(maxcubes, np.int64),
        np.empty((maxcubes, 2), np.int64),
        np.empty((maxcubes, 2), np.int64),
    )
    cands = _Cands(
        np.empty(ccap, np.int64),
        np.empty((ccap, 3), np.int64),
        np.empty(ccap),
        np.empty(ccap),
        np.empty(ccap, np.uint64),
        np.empty(ccap, np.uint64),
        np.empty(ccap, np.bool_),
        np.empty(ccap, np.int64),
        np.empty(ccap),
        np.empty(ccap),
        np.empty(ccap, np.int64),
        np.empty(ccap, np.int64),
    )
    heap = _Heap(np.empty(ccap), np.empty(ccap, np.int64), np.empty(ccap, np.int64))
    # candidates pushed so far: (cube, i0, i1, i2) packed in base P
    P = pop_limit + 2  # a bound of every rank (tail items <= pop_limit; rules: their count)
    for m in range(matches.nopt.shape[0]):
        P = max(P, matches.nopt[m] + 2)
    ssize = 1
    while ssize < 2 * ccap:
        ssize *= 2
    isize = 1
    while isize < 2 * pop_limit + 2:
        isize *= 2
    sets = _CellSets(
        np.zeros(ssize, np.int64),
        np.empty(ccap, np.int64),
        P,
        np.empty(isize, np.uint64),
        np.empty(isize, np.uint64),
        np.empty(isize, np.bool_),
        np.full(isize, -1, np.int64),
    )
    pend = np.empty((max(maxinit, 3), 4), np.int64)
    fixed = (np.array([-1], np.int32), np.array([-1, -2], np.int32))  # S → X, S → S X
    return cubes, cands, heap, sets, pend, fixed


@numba.njit(cache=True, nogil=True)
def _new_lm_scratch(lm: ChartLm) -> _LmScratch:
    h = lm.h
    return _LmScratch(
        np.uint64((1 << (BITS * h)) - 1) if h > 0 else np.uint64(0),
        _LmIds(lm.base, lm.extra, np.empty(8, np.int64)),
        _StepMemo(
            np.empty(1 << _MEMO_BITS, np.uint64),
            np.zeros(1 << _MEMO_BITS, np.int64),
            np.empty(1 << _MEMO_BITS),
            np.empty(1 << _MEMO_BITS, np.uint64),
            np.zeros(1, np.int64),
        ),
        _LeftMemo(
            np.empty(1 << _LEFT_MEMO_BITS, np.uint64),
            np.full(1 << _LEFT_MEMO_BITS, -1, np.int8),
            np.zeros(1, np.int64),
        ),
    )


@numba.njit(cache=True, nogil=True)
def _goal_edges(
    n: int,
    cells: _Cells,
    items: _Items,
    nodes: ChartNodes,
    edges: ChartEdges,
    nd: int,
    ne: int,
    lm: ChartLm,
    weights: EdgeWeights,
    scratch: _LmScratch,
) -> tuple[int, int, float]:
    """The goal node, TOP → ``<s>`` S[0, n] ``</s>``, and its edges; the new numbers of nodes
    and edges and the best score."""
    goal = nd
    nodes.label[nd] = LABEL_TOP
    nodes.i[nd] = 0
    nodes.j[nd] = n
    nodes.left[nd] = 0
    nodes.right[nd] = 0
    nodes.full[nd] = False
    nd += 1
    best = -np.inf
    for q in range(cells.s_off[n], cells.s_off[n] + cells.s_cnt[n]):
        score = items.score[q]
        lmv = 0.0
        if lm.use:
            lmv = _sentence_lm(q, items, lm, scratch)
            score += weights.lm * lmv
        edges.head[ne] = goal
        edges.t0[ne] = items.node[q]
        edges.t1[ne] = -1
        edges.rule[ne] = GOAL
        edges.lm[ne] = lmv
        edges.oov[ne] = 0
        edges.i[ne] = 0
        edges.j[ne] = n
        ne += 1
        best = max(best, score)
    return nd, ne, best


@numba.njit(cache=True, nogil=True)
def decode_chart(
    search: Search,
    matches: Matches,
    options: Options,
    targets: RuleTargets,
    pass_words: PassWords,
    weights: EdgeWeights,
    lm: ChartLm,
) -> Chart:
    """Cube pruning over one sentence's chart (Chiang 2007, §5.3.3): the +LM forest as arrays.

    ``matches``: the sentence grammar's pattern matches, each with its rules in ``options``
    (sorted by w · φ, :func:`sort_options`); ``targets``: the grammar's target sides;
    ``pass_words``: each source word's pass-through word; ``weights``: those of the features
    the decoder adds; ``lm``: the language model as arrays. Returns the forest's nodes and
    edges (the goal last), the best score, the number of pops and of −LM nodes.
    """
    n = search.n
    W = n + 1
    spans, maxcubes, maxinit = _index_spans(matches, search)
    ncells = n * min(n, search.max_span) + n
    cap = search.pop_limit * ncells + 1
    items = _new_items(cap)  # a cell's are contiguous, sorted by priority once it is done
    nodes = _new_nodes(cap)
    edges = _new_edges(cap + search.pop_limit)
    cells = _Cells(
        np.full(W * W, -1, np.int64),
        np.zeros(W * W, np.int64),
        np.full(W, -1, np.int64),
        np.zeros(W, np.int64),
    )
    cell = _new_cell(search, matches, maxcubes, maxinit)
    scratch = _new_lm_scratch(lm)
    inputs = (search, matches, options, targets, pass_words, weights, lm)
    nd, ne, pops, minus_lm_nodes = _cube_pruning(
        spans, cells, inputs, (items, nodes, edges), cell, scratch
    )
    nd, ne, best = _goal_edges(n, cells, items, nodes, edges, nd, ne, lm, weights, scratch)
    return Chart(_trim_nodes(nodes, nd), _trim_edges(edges, ne), best, pops, minus_lm_nodes)


@numba.njit(cache=True, nogil=True)
def _trim_nodes(nodes: ChartNodes, nd: int) -> ChartNodes:
    """The first ``nd`` nodes, copied."""
    return ChartNodes(
        nodes.label[:nd].copy(),
        nodes.i[:nd].copy(),
        nodes.j[:nd].copy(),
        nodes.left[:nd].copy(),
        nodes.right[:nd].copy(),
        nodes.full[:nd].copy(),
    )


@numba.njit(cache=True, nogil=True)
def _trim_edges(edges: ChartEdges, ne: int) -> ChartEdges:
    """The first ``ne`` edges, copied."""
    return ChartEdges(
        edges.head[:ne].copy(),
        edges.t0[:ne].copy(),
        edges.t1[:ne].copy(),
        edges.rule[:ne].copy(),
        edges.lm[:ne].copy(),
        edges.oov[:ne].copy(),
        edges.i[:ne].copy(),
        edges.j[:ne].copy(),
    )


# --- after the search ------------------------------------------------------------------
@numba.njit(cache=True, nogil=True)
def reachable(num_nodes: int, edges: ChartEdges) -> tuple[Any, Any]:
    """The nodes and edges of :func:`decode_chart`'s forest that its goal reaches, as masks.

    The goal (the last node) is reachable; an edge is kept if its head is reachable, and then
    its tails are. One pass over the edges in reverse creation order suffices, because that is
    a reverse topological order of this kernel's forests: every edge is created in its head's
    cell, and every tail belongs to a cell finished before — X cells by increasing span length
    (gaps are shorter spans), then the S cells [0, j] by increasing j (``S → X[0, j]`` reads the
    X cell of the same span, finished in the first phase; ``S → S[0, k] X[k, j]`` has k < j),
    then the goal's edges. So all edges with a node as a tail come after every edge into that
    node, and a node's mark is final before its incoming edges are visited.
    :func:`service.forest.hypergraph.reachable` is the reference (tests/mt/test_prune.py).
    """
    e_head, e_t0, e_t1 = edges.head, edges.t0, edges.t1
    node_keep = np.zeros(num_nodes, np.bool_)
    edge_keep = np.zeros(e_head.shape[0], np.bool_)
    node_keep[num_nodes - 1] = True
    for e in range(e_head.shape[0] - 1, -1, -1):
        if node_keep[e_head[e]]:
            edge_keep[e] = True
            if e_t0[e] >= 0:
                node_keep[e_t0[e]] = True
            if e_t1[e] >= 0:
                node_keep[e_t1[e]] = True
    return node_keep, edge_keep


@numba.njit(cache=True, nogil=True)
def sort_options(m_rlo: Any, m_rhi: Any, scores: Any, rule_oov: Any) -> tuple[Any, Any, Options]:
    """Per match: its rules by decreasing score (stable), with scores and LM OOV counts; the
    first option and the number of options of each match.

    ``scores`` holds w·φ of the rules of every match in match order (``m_rhi - m_rlo`` each);
    ``rule_oov`` holds their OOV counts in the same layout.
    """
    total = 0
    for m in range(m_rlo.shape[0]):
        total += m_rhi[m] - m_rlo[m]
    opt_rule = np.empty(total, np.int64)
    opt_score = np.empty(total)
    opt_oov = np.empty(total, np.int64)
    m_optlo = np.empty(m_rlo.shape[0], np.int64)
    m_nopt = np.empty(m_rlo.shape[0], np.int64)
    k = 0
    for m in range(m_rlo.shape[0]):
        lo = m_rlo[m]
        cnt = m_rhi[m] - lo
        order = np.argsort(-scores[k : k + cnt], kind="mergesort")
        m_optlo[m] = k
        m_nopt[m] = cnt
        for q in range(cnt):
            opt_rule[k + q] = lo + order[q]
            opt_score[k + q] = scores[k + order[q]]
            opt_oov[k + q] = rule_oov[k + order[q]]
        k += int(cnt)
    return m_optlo, m_nopt, Options(opt_rule, opt_score, opt_oov)


@numba.njit(cache=True, nogil=True)
def edge_arrays(
    num_nodes: int,
    edges: ChartEdges,
    targets: RuleTargets,
    features: Any,
    nterm: Any,
    pass_words: PassWords,
    use_lm: bool,
) -> tuple[Any, Any, Any, Any, Any, Any, Any, Any, Any]:
    """The forest's CSR arrays from the kernel's edges, in the reference's layouts.

    Returns tails (``tail_ptr``, ``tail_nodes``), incoming edges in edge order (``in_ptr``,
    ``in_edges``), target words as decoder ids (``term_ptr``, ``term_words``) and features
    (``feat_ptr``, ``feat_cols``, ``feat_vals``): the column of a feature is its position in
    the grammar's feature names followed by RulePenalty, PassThrough, WordPenalty, Glue,
    LanguageModel, LanguageModel_OOV — the order in which the reference writes an edge's
    feature dict; rule features of value 0 are left out, the LM feature never is (with LM).
    """
    e_head, e_t0, e_t1, e_rule, e_lm, e_oov, e_i, _ = edges
    tsym, toff, rtarget = targets
    pass_sym = pass_words.word
    ne = e_head.shape[0]
    nf = features.shape[1]
    c_rp, c_pass, c_wp, c_glue, c_lm, c_oov = nf, nf + 1, nf + 2, nf + 3, nf + 4, nf + 5
    tail_ptr = np.zeros(ne + 1, np.int64)
    in_ptr = np.zeros(num_nodes + 1, np.int64)
    term_ptr = np.zeros(ne + 1, np.int64)
    feat_ptr = np.zeros(ne + 1, np.int64)
    nt = 0
    nw = 0
    nfe = 0
    for e in range(ne):
        nt += (e_t0[e] >= 0) + (e_t1[e] >= 0)
        tail_ptr[e + 1] = nt
        in_ptr[e_head[e] + 1] += 1
        r = e_rule[e]
        if r >= 0:
            t = rtarget[r]
            for q in range(toff[t], toff[t + 1]):
                if tsym[q] >= 0:
                    nw += 1
            for k in range(nf):
                if features[r, k] != 0.0:
                    nfe += 1
            nfe += 1 + (nterm[r] != 0)
        elif r == PASS:
            nw += 1
            nfe += 2
        elif r == GLUE:
            nfe += 1
        if use_lm:
            nfe += 1 + (e_oov[e] != 0)
        term_ptr[e + 1] = nw
        feat_ptr[e + 1] = nfe
    for v in range(num_nodes):
        in_ptr[v + 1] += in_ptr[v]
    tail_nodes = np.empty(nt, np.int64)
    in_edges = np.empty(ne, np.int64)
    fill = in_ptr[:-1].copy()
    term_words = np.empty(nw, np.int64)
    feat_cols = np.empty(nfe, np.int64)
    feat_vals = np.empty(nfe)
    for e in range(ne):
        p = tail_ptr[e]
        if e_t0[e] >= 0:
            tail_nodes[p] = e_t0[e]
            p += 1
        if e_t1[e] >= 0:
            tail_nodes[p] = e_t1[e]
        in_edges[fill[e_head[e]]] = e
        fill[e_head[e]] += 1
        w = term_ptr[e]
        f = feat_ptr[e]
        r = e_rule[e]
        if r >= 0:
            t = rtarget[r]
            for q in range(toff[t], toff[t + 1]):
                if tsym[q] >= 0:
                    term_words[w] = tsym[q]
                    w += 1
            for k in range(nf):
                x = features[r, k]
                if x != 0.0:
                    feat_cols[f] = k
                    feat_vals[f] = x
                    f += 1
            feat_cols[f] = c_rp
            feat_vals[f] = 1.0
            f += 1
            if nterm[r] != 0:
                feat_cols[f] = c_wp
                feat_vals[f] = nterm[r]
                f += 1
        elif r == PASS:
            term_words[w] = pass_sym[e_i[e]]
            feat_cols[f] = c_pass
            feat_vals[f] = 1.0
            feat_cols[f + 1] = c_wp
            feat_vals[f + 1] = 1.0
            f += 2
        elif r == GLUE:
            feat_cols[f] = c_glue
            feat_vals[f] = 1.0
            f += 1
        if use_lm:
            feat_cols[f] = c_lm
            feat_vals[f] = e_lm[e]
            f += 1
            if e_oov[e] != 0:
                feat_cols[f] = c_oov
                feat_vals[f] = e_oov[e]
    return (
        tail_ptr, tail_nodes, in_ptr, in_edges, term_ptr, term_words, feat_ptr, feat_cols, feat_vals
    )  # fmt: skip
