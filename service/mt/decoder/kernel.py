"""Cube pruning as one compiled kernel per sentence (Chiang 2007 §5.3.3; Huang & Chiang 2007).

The same search as :class:`service.mt.decoder.reference.ReferenceDecoder`, the tested reference,
over flat arrays instead of Python objects: spans bottom-up, one cube per (−LM node, pattern match)
with its rules sorted by −LM score and its tails' +LM items sorted by score plus LM heuristic, every
rule's best corner in the heap at the start (or, with ``all_rules`` off, the rules as one more
axis), a binary heap ordered by (−priority, push sequence), up to ``pop_limit`` pops per −LM node,
the popped candidate's neighbours pushed in dimension order, and candidates recombined into +LM
nodes by their minimised LM boundary (:mod:`service.mt.lm.context`: left state, right state, whether
the item is full). Every choice that decides the shape of the forest — chart order, cube order, heap
tie-breaks, the stable sort of a cell's items, the boundary semantics of ``combine_ids`` and
``finish_ids`` and their order of additions — is the reference's, so the forests are identical node
for node and edge for edge (tests/mt/test_compiled_decoder.py).

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

import numpy as np
from numba import njit

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


@njit(cache=True, nogil=True, inline="always")
def _push_word(ctx: np.uint64, d: np.int64, mask: np.uint64) -> np.uint64:
    """The context after word ``d`` (the oldest word drops out beyond ``h`` words)."""
    return ((ctx << _B) | np.uint64(d + 1)) & mask


@njit(cache=True, nogil=True, inline="always")
def _field(packed, r):  # type: ignore[no-untyped-def]
    """The decoder word id in field ``r`` (0: the newest) of a packed context."""
    return np.int64((packed >> (_B * np.uint64(r))) & _FIELD) - 1


@njit(cache=True, nogil=True, inline="always")
def _lm_word(d, base, extra):  # type: ignore[no-untyped-def]
    nb = base.shape[0]
    return base[d] if d < nb else extra[d - nb]


@njit(cache=True, nogil=True, inline="always")
def _unpack(ctx, base, extra, buf):  # type: ignore[no-untyped-def]
    """LM ids of the words of packed context ``ctx`` into ``buf``, oldest first; how many."""
    n = 0
    x = ctx
    while x != np.uint64(0):
        n += 1
        x >>= _B
    for q in range(n):
        field = np.int64((ctx >> (_B * np.uint64(n - 1 - q))) & _FIELD) - 1
        buf[q] = _lm_word(field, base, extra)
    return n


@njit(cache=True, nogil=True)
def _step(ctx, d, mask, minimise, lm, base, extra, buf, memo_c, memo_w, memo_v, memo_x, memo_n):  # type: ignore[no-untyped-def]
    """Natural-log p(word ``d`` | packed context ``ctx``) and the minimised context after it
    (:meth:`service.mt.lm.context.ContextTable.step`), memoised for the sentence."""
    size = np.uint64(memo_c.shape[0] - 1)
    h = ctx * np.uint64(0x9E3779B97F4A7C15) ^ np.uint64(d + 1) * np.uint64(0xC2B2AE3D27D4EB4F)
    slot = np.int64((h ^ (h >> np.uint64(29))) & size)
    while memo_w[slot] != 0:
        if memo_w[slot] == d + 1 and memo_c[slot] == ctx:
            return memo_v[slot], memo_x[slot]
        slot = np.int64((np.uint64(slot) + np.uint64(1)) & size)
    keys, probs, backoffs, uni_probs, uni_backoffs = lm
    n = _unpack(ctx, base, extra, buf)
    p10 = logp10(keys, probs, backoffs, uni_probs, uni_backoffs, buf, n, _lm_word(d, base, extra))
    value = np.float64(p10) * _LN10
    nxt = _push_word(ctx, d, mask)
    if minimise:
        # drop the oldest word while the context is unlisted or listed without extension
        k = _unpack(nxt, base, extra, buf)
        while k > 0 and droppable(keys, backoffs, uni_backoffs, buf, k):
            for q in range(k - 1):
                buf[q] = buf[q + 1]
            k -= 1
            nxt &= (np.uint64(1) << (_B * np.uint64(k))) - np.uint64(1)
    if memo_n[0] * 10 < memo_c.shape[0] * 7:
        memo_n[0] += 1
        memo_w[slot] = d + 1
        memo_c[slot] = ctx
        memo_v[slot] = value
        memo_x[slot] = nxt
    return value, nxt


@njit(cache=True, nogil=True)
def _left_step(left, d, minimise, st, base, extra, buf, lm_c, lm_v, lm_n):  # type: ignore[no-untyped-def]
    """Whether left state ``left`` (fewer than ``h`` words) extends by word ``d``
    (:meth:`service.mt.lm.context.ContextTable.left_step`), memoised for the sentence."""
    if not minimise:
        return True
    key = (left << _B) | np.uint64(d + 1)
    size = np.uint64(lm_c.shape[0] - 1)
    hk = key * np.uint64(0x9E3779B97F4A7C15)
    slot = np.int64((hk ^ (hk >> np.uint64(29))) & size)
    while lm_v[slot] >= 0:
        if lm_c[slot] == key:
            return lm_v[slot] == 1
        slot = np.int64((np.uint64(slot) + np.uint64(1)) & size)
    keys, _, _, left_ext, uni_left_ext = st
    n = _unpack(key, base, extra, buf)
    ok = left_extends_ids(keys, left_ext, uni_left_ext, buf, n)
    if lm_n[0] * 10 < lm_c.shape[0] * 7:
        lm_n[0] += 1
        lm_c[slot] = key
        lm_v[slot] = 1 if ok else 0
    return ok


@njit(cache=True, nogil=True)
def _charge(ctx, j, st, base, extra, buf):  # type: ignore[no-untyped-def]
    """:func:`service.mt.lm.context.charge`: the backoffs of the suffixes of ``ctx`` longer
    than ``j`` words, shortest first, in natural log."""
    keys, backoffs, uni_backoffs, _, _ = st
    n = _unpack(ctx, base, extra, buf)
    total = 0.0
    for length in range(j + 1, n + 1):
        bo = backoff10(keys, backoffs, uni_backoffs, buf[n - length : n], length)
        total += np.float64(bo) * _LN10
    return total


@njit(cache=True, nogil=True, inline="always")
def _before(pa, sa, pb, sb):  # type: ignore[no-untyped-def]
    """Heap order: by priority key, then by push sequence."""
    return pa < pb or (pa == pb and sa < sb)


@njit(cache=True, nogil=True, inline="always")
def _heap_set(hp, hs, hv, i, p, s, v):  # type: ignore[no-untyped-def]
    """Put key ``(p, s)`` and value ``v`` at heap position ``i``."""
    hp[i] = p
    hs[i] = s
    hv[i] = v


@njit(cache=True, nogil=True)
def _heap_push(hp, hs, hv, n, p, s, v):  # type: ignore[no-untyped-def]
    """Push value ``v`` with key ``(p, s)`` onto the min-heap of size ``n``; the new size."""
    i = n
    while i > 0:
        par = (i - 1) >> 1
        if _before(p, s, hp[par], hs[par]):
            _heap_set(hp, hs, hv, i, hp[par], hs[par], hv[par])
            i = par
        else:
            break
    _heap_set(hp, hs, hv, i, p, s, v)
    return n + 1


@njit(cache=True, nogil=True)
def _heap_pop(hp, hs, hv, n):  # type: ignore[no-untyped-def]
    """Pop the smallest key; (its value, the new size)."""
    top = hv[0]
    n -= 1
    p, s, v = hp[n], hs[n], hv[n]
    i = 0
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        if c + 1 < n and _before(hp[c + 1], hs[c + 1], hp[c], hs[c]):
            c += 1
        if _before(hp[c], hs[c], p, s):
            _heap_set(hp, hs, hv, i, hp[c], hs[c], hv[c])
            i = c
        else:
            break
    _heap_set(hp, hs, hv, i, p, s, v)
    return top, n


@njit(cache=True, nogil=True)
def decode_chart(  # type: ignore[no-untyped-def]
    n,
    max_span,
    pop_limit,
    use_lm,
    m_start,
    m_end,
    m_gaps,
    m_optlo,
    m_nopt,
    opt_rule,
    opt_score,
    opt_oov,
    tsym,
    toff,
    rtarget,
    pass_sym,
    pass_oov,
    w_pass,
    w_glue,
    w_lm,
    w_oov,
    h,
    bos,
    eos,
    base,
    extra,
    lm,
    st,
    minimise,
    all_rules,
):
    """Cube pruning over one sentence's chart; the +LM forest as arrays.

    Matches (sorted by start, end, as :class:`service.mt.grammar.SentenceGrammar`) have
    ``m_nopt`` options from ``m_optlo`` in the option arrays (rule id, w·φ, LM OOV count),
    sorted by decreasing score (stable). ``pass_sym[i]``/``pass_oov[i]``: the pass-through word
    of source word ``i``. ``h`` is the LM order − 1 (0 without LM), ``base``/``extra`` map
    decoder word ids to LM ids, ``lm`` is :meth:`service.mt.lm.LmTable.arrays` and ``st``
    :meth:`~service.mt.lm.LmTable.structure_arrays`; ``minimise``: minimised LM states
    (:mod:`service.mt.lm.context`); ``all_rules``: every rule's best corner starts in the heap
    (``DecoderConfig.cube_rules``).

    Returns node arrays (label, i, j, left, right, full), edge arrays (head, tail 0, tail 1,
    rule or kind, LM log-probability, OOV count, i, j), the best score, the number of pops and
    the number of −LM nodes.
    """
    mask = np.uint64((1 << (BITS * h)) - 1) if h > 0 else np.uint64(0)
    W = n + 1
    # matches per span
    sp_lo = np.full(W * W, -1, np.int64)
    sp_hi = np.full(W * W, -1, np.int64)
    has_unary = np.zeros(max(n, 1), np.bool_)
    for m in range(m_start.shape[0]):
        key = m_start[m] * W + m_end[m]
        if sp_lo[key] < 0:
            sp_lo[key] = m
        sp_hi[key] = m + 1
        if m_end[m] == m_start[m] + 1 and m_gaps[m, 0] < 0:
            has_unary[m_start[m]] = True
    maxcubes = n + 1
    maxinit = n + 1  # candidates a cell starts with
    for key in range(W * W):
        if sp_lo[key] >= 0:
            if sp_hi[key] - sp_lo[key] + 1 > maxcubes:
                maxcubes = sp_hi[key] - sp_lo[key] + 1
            if all_rules:
                total = 1
                for m in range(sp_lo[key], sp_hi[key]):
                    total += m_nopt[m]
                maxinit = max(maxinit, total)
    maxinit = max(maxinit, maxcubes)
    ncells = n * min(n, max_span) + n
    cap = pop_limit * ncells + 1
    # +LM items (a cell's items are contiguous, sorted by priority once the cell is done)
    it_node = np.empty(cap, np.int64)
    it_score = np.empty(cap)
    it_est = np.empty(cap)
    it_left = np.empty(cap, np.uint64)
    it_leftlen = np.empty(cap, np.int64)
    it_right = np.empty(cap, np.uint64)
    it_full = np.empty(cap, np.bool_)
    it_rawest = np.empty(cap)
    # the forest
    nd_label = np.empty(cap, np.int8)
    nd_i = np.empty(cap, np.int32)
    nd_j = np.empty(cap, np.int32)
    nd_left = np.empty(cap, np.uint64)
    nd_right = np.empty(cap, np.uint64)
    nd_full = np.empty(cap, np.bool_)
    ecap = cap + pop_limit
    e_head = np.empty(ecap, np.int32)
    e_t0 = np.empty(ecap, np.int32)
    e_t1 = np.empty(ecap, np.int32)
    e_rule = np.empty(ecap, np.int64)
    e_lm = np.empty(ecap)
    e_oov = np.empty(ecap, np.int32)
    e_i = np.empty(ecap, np.int32)
    e_j = np.empty(ecap, np.int32)
    # candidates of one cell
    ccap = maxinit + 3 * pop_limit + 4
    c_cube = np.empty(ccap, np.int64)
    c_idx = np.empty((ccap, 3), np.int64)
    c_inside = np.empty(ccap)
    c_est = np.empty(ccap)
    c_left = np.empty(ccap, np.uint64)
    c_right = np.empty(ccap, np.uint64)
    c_full = np.empty(ccap, np.bool_)
    c_nleft = np.empty(ccap, np.int64)
    c_lm = np.empty(ccap)
    c_rawest = np.empty(ccap)
    c_rule = np.empty(ccap, np.int64)
    c_oov = np.empty(ccap, np.int64)
    hp = np.empty(ccap)
    hs = np.empty(ccap, np.int64)
    hv = np.empty(ccap, np.int64)
    pend = np.empty((max(maxinit, 3), 4), np.int64)
    # candidates pushed so far in this cell: (cube, i0, i1, i2) packed in base P
    P = pop_limit + 2  # a bound of every rank (tail items <= pop_limit; rules: their count)
    for m in range(m_nopt.shape[0]):
        P = max(P, m_nopt[m] + 2)
    ssize = 1
    while ssize < 2 * ccap:
        ssize *= 2
    seen = np.zeros(ssize, np.int64)
    seen_used = np.empty(ccap, np.int64)
    # +LM items of this cell by LM boundary
    isize = 1
    while isize < 2 * pop_limit + 2:
        isize *= 2
    im_l = np.empty(isize, np.uint64)
    im_r = np.empty(isize, np.uint64)
    im_n = np.empty(isize, np.bool_)
    im_v = np.full(isize, -1, np.int64)
    # cubes of one cell
    cb_kind = np.empty(maxcubes, np.int64)  # a match index, or PASS, UNARY, GLUE
    cb_nopt = np.empty(maxcubes, np.int64)
    cb_ar = np.empty(maxcubes, np.int64)
    cb_off = np.empty((maxcubes, 2), np.int64)
    cb_cnt = np.empty((maxcubes, 2), np.int64)
    # items per X span and per S prefix
    x_off = np.full(W * W, -1, np.int64)
    x_cnt = np.zeros(W * W, np.int64)
    s_off = np.full(W, -1, np.int64)
    s_cnt = np.zeros(W, np.int64)
    # LM scratch and memo
    buf = np.empty(8, np.int64)
    memo_c = np.empty(1 << _MEMO_BITS, np.uint64)
    memo_w = np.zeros(1 << _MEMO_BITS, np.int64)
    memo_v = np.empty(1 << _MEMO_BITS)
    memo_x = np.empty(1 << _MEMO_BITS, np.uint64)
    memo_n = np.zeros(1, np.int64)
    lmemo_c = np.empty(1 << _LEFT_MEMO_BITS, np.uint64)
    lmemo_v = np.full(1 << _LEFT_MEMO_BITS, -1, np.int8)
    lmemo_n = np.zeros(1, np.int64)
    unary_syms = np.array([-1], np.int32)
    glue_syms = np.array([-1, -2], np.int32)

    it = 0
    nd = 0
    ne = 0
    total_pops = 0
    minus_lm_nodes = 0
    pass_score = w_pass
    for phase in range(2):  # 0: X cells by span length; 1: S cells [0, j]
        jmax = n if phase == 1 else 0
        for length in range(1, n + 1 if phase == 0 else 2):
            for i in range(0, (n - length + 1) if phase == 0 else jmax):
                # --- the cubes of this cell --------------------------------------------------
                nc = 0
                if phase == 0:
                    ci = i
                    cj = i + length
                    label = LABEL_X
                    if length <= max_span:
                        key = ci * W + cj
                        if sp_lo[key] >= 0:
                            for m in range(sp_lo[key], sp_hi[key]):
                                ok = True
                                ar = 0
                                for g in range(2):
                                    gs = m_gaps[m, 2 * g]
                                    if gs >= 0:
                                        gk = gs * W + m_gaps[m, 2 * g + 1]
                                        if x_off[gk] < 0:
                                            ok = False
                                        else:
                                            cb_off[nc, ar] = x_off[gk]
                                            cb_cnt[nc, ar] = x_cnt[gk]
                                            ar += 1
                                if not ok:
                                    continue
                                cb_kind[nc] = m
                                cb_nopt[nc] = m_nopt[m]
                                cb_ar[nc] = ar
                                nc += 1
                    if length == 1 and not has_unary[ci]:
                        cb_kind[nc] = PASS
                        cb_nopt[nc] = 1
                        cb_ar[nc] = 0
                        nc += 1
                else:
                    ci = 0
                    cj = i + 1
                    label = LABEL_S
                    if x_off[cj] >= 0:
                        cb_kind[nc] = UNARY
                        cb_nopt[nc] = 1
                        cb_ar[nc] = 1
                        cb_off[nc, 0] = x_off[cj]
                        cb_cnt[nc, 0] = x_cnt[cj]
                        nc += 1
                    for k in range(1, cj):
                        if s_off[k] >= 0 and x_off[k * W + cj] >= 0:
                            cb_kind[nc] = GLUE
                            cb_nopt[nc] = 1
                            cb_ar[nc] = 2
                            cb_off[nc, 0] = s_off[k]
                            cb_cnt[nc, 0] = s_cnt[k]
                            cb_off[nc, 1] = x_off[k * W + cj]
                            cb_cnt[nc, 1] = x_cnt[k * W + cj]
                            nc += 1
                if nc == 0:
                    continue
                minus_lm_nodes += 1
                # --- fill the cell: pop up to pop_limit candidates ------------------------
                it_base = it
                nheap = 0
                ncand = 0
                seq = 0
                nseen = 0
                pops = 0
                npend = 0
                for c in range(nc):
                    for k in range(cb_nopt[c] if all_rules else 1):
                        pend[npend, 0] = c
                        pend[npend, 1] = k
                        pend[npend, 2] = 0
                        pend[npend, 3] = 0
                        npend += 1
                while True:
                    for q in range(npend):
                        c = pend[q, 0]
                        i0 = pend[q, 1]
                        i1 = pend[q, 2]
                        i2 = pend[q, 3]
                        ar = cb_ar[c]
                        if i0 >= cb_nopt[c]:
                            continue
                        if ar >= 1 and i1 >= cb_cnt[c, 0]:
                            continue
                        if ar >= 2 and i2 >= cb_cnt[c, 1]:
                            continue
                        skey = ((c * P + i0) * P + i1) * P + i2 + 1
                        slot = (skey * 0x9E3779B1) & (ssize - 1)
                        dup = False
                        while seen[slot] != 0:
                            if seen[slot] == skey:
                                dup = True
                                break
                            slot = (slot + 1) & (ssize - 1)
                        if dup:
                            continue
                        seen[slot] = skey
                        seen_used[nseen] = slot
                        nseen += 1
                        kind = cb_kind[c]
                        if kind >= 0:
                            k = m_optlo[kind] + i0
                            rule = opt_rule[k]
                            sc = opt_score[k]
                            oov = opt_oov[k]
                            tt = rtarget[rule]
                            syms = tsym[toff[tt] : toff[tt + 1]]
                        elif kind == PASS:
                            rule = PASS
                            sc = pass_score
                            oov = pass_oov[ci]
                            syms = pass_sym[ci : ci + 1]
                        elif kind == UNARY:
                            rule = UNARY
                            sc = 0.0
                            oov = 0
                            syms = unary_syms
                        else:
                            rule = GLUE
                            sc = w_glue
                            oov = 0
                            syms = glue_syms
                        t0 = cb_off[c, 0] + i1 if ar >= 1 else -1
                        t1 = cb_off[c, 1] + i2 if ar >= 2 else -1
                        inside = sc
                        if ar >= 1:
                            inside += it_score[t0]
                        if ar >= 2:
                            inside += it_score[t1]
                        lmv = 0.0
                        raw = 0.0
                        est = 0.0
                        left = np.uint64(0)
                        nleft = 0
                        full = False
                        ctx = np.uint64(0)
                        if use_lm:
                            # combine_ids: score the words that gain their context
                            for s in syms:
                                if s >= 0:
                                    t = -1
                                    nw = 1
                                else:
                                    t = t0 if ((-s - 1) % 2) == 0 else t1
                                    if nleft == 0 and not full:
                                        # nothing before it: the tail's own state
                                        left = it_left[t]
                                        nleft = it_leftlen[t]
                                        full = it_full[t]
                                        ctx = it_right[t]
                                        raw = it_rawest[t]
                                        continue
                                    nw = it_leftlen[t]
                                lw = it_left[t] if t >= 0 else np.uint64(0)
                                for r in range(nw - 1, -1, -1):
                                    d = np.int64(s) if t < 0 else _field(lw, r)
                                    lp, nxt = _step(
                                        ctx, d, mask, minimise, lm, base, extra, buf, memo_c,
                                        memo_w, memo_v, memo_x, memo_n,
                                    )  # fmt: skip
                                    joins = False
                                    if not full and nleft < h:
                                        joins = _left_step(
                                            left, d, minimise, st, base, extra, buf, lmemo_c,
                                            lmemo_v, lmemo_n,
                                        )  # fmt: skip
                                    if joins:
                                        left = (left << _B) | np.uint64(d + 1)
                                        nleft += 1
                                        raw += lp
                                    else:
                                        full = True
                                        lmv += lp
                                    ctx = nxt
                                if t >= 0 and it_full[t]:
                                    full = True
                                    lmv += _charge(ctx, nw, st, base, extra, buf)
                                    ctx = it_right[t]
                            inside += w_lm * lmv + w_oov * oov
                            est = w_lm * raw
                        c_cube[ncand] = c
                        c_idx[ncand, 0] = i0
                        c_idx[ncand, 1] = i1
                        c_idx[ncand, 2] = i2
                        c_inside[ncand] = inside
                        c_est[ncand] = est
                        c_left[ncand] = left
                        c_right[ncand] = ctx
                        c_full[ncand] = full
                        c_nleft[ncand] = nleft
                        c_lm[ncand] = lmv
                        c_rawest[ncand] = raw
                        c_rule[ncand] = rule
                        c_oov[ncand] = oov
                        nheap = _heap_push(hp, hs, hv, nheap, -(inside + est), seq, ncand)
                        seq += 1
                        ncand += 1
                    if nheap == 0 or pops >= pop_limit:
                        break
                    # --- pop the best candidate: an edge into its +LM node ----------------
                    v, nheap = _heap_pop(hp, hs, hv, nheap)
                    pops += 1
                    left = c_left[v]
                    right = c_right[v]
                    full = c_full[v]
                    inside = c_inside[v]
                    hk = (
                        left * np.uint64(0x9E3779B97F4A7C15)
                        ^ right * np.uint64(0xC2B2AE3D27D4EB4F)
                        ^ np.uint64(full)
                    )
                    slot = np.int64((hk ^ (hk >> np.uint64(31))) & np.uint64(isize - 1))
                    found = -1
                    while im_v[slot] >= 0:
                        if im_l[slot] == left and im_r[slot] == right and im_n[slot] == full:
                            found = im_v[slot]
                            break
                        slot = (slot + 1) & (isize - 1)
                    if found < 0:
                        found = it
                        im_l[slot] = left
                        im_r[slot] = right
                        im_n[slot] = full
                        im_v[slot] = it
                        nd_label[nd] = label
                        nd_i[nd] = ci
                        nd_j[nd] = cj
                        nd_left[nd] = left
                        nd_right[nd] = right
                        nd_full[nd] = full
                        it_node[it] = nd
                        it_score[it] = inside
                        it_est[it] = c_est[v]
                        it_left[it] = left
                        it_leftlen[it] = c_nleft[v]
                        it_right[it] = right
                        it_full[it] = full
                        it_rawest[it] = c_rawest[v]
                        nd += 1
                        it += 1
                    elif inside > it_score[found]:
                        it_score[found] = inside
                    c = c_cube[v]
                    ar = cb_ar[c]
                    e_head[ne] = it_node[found]
                    e_t0[ne] = it_node[cb_off[c, 0] + c_idx[v, 1]] if ar >= 1 else -1
                    e_t1[ne] = it_node[cb_off[c, 1] + c_idx[v, 2]] if ar >= 2 else -1
                    e_rule[ne] = c_rule[v]
                    e_lm[ne] = c_lm[v]
                    e_oov[ne] = c_oov[v]
                    e_i[ne] = ci
                    e_j[ne] = cj
                    ne += 1
                    # its neighbours, one rank further along each dimension in turn
                    first = 1 if all_rules else 0
                    npend = ar + 1 - first
                    for q in range(npend):
                        dim = first + q
                        pend[q, 0] = c
                        pend[q, 1] = c_idx[v, 0] + (1 if dim == 0 else 0)
                        pend[q, 2] = c_idx[v, 1] + (1 if dim == 1 else 0)
                        pend[q, 3] = c_idx[v, 2] + (1 if dim == 2 else 0)
                total_pops += pops
                # reset the cell's hash sets
                for q in range(nseen):
                    seen[seen_used[q]] = 0
                im_v[:] = -1
                # the cell's items, by decreasing priority (stable: creation order on ties)
                cnt = it - it_base
                if cnt > 1:
                    pri = np.empty(cnt)
                    for q in range(cnt):
                        pri[q] = -(it_score[it_base + q] + it_est[it_base + q])
                    order = np.argsort(pri, kind="mergesort")
                    for arr in (it_score, it_est, it_rawest):
                        tmp = arr[it_base:it].copy()
                        for q in range(cnt):
                            arr[it_base + q] = tmp[order[q]]
                    for arr in (it_node, it_leftlen):
                        tmpi = arr[it_base:it].copy()
                        for q in range(cnt):
                            arr[it_base + q] = tmpi[order[q]]
                    for arr in (it_left, it_right):
                        tmpu = arr[it_base:it].copy()
                        for q in range(cnt):
                            arr[it_base + q] = tmpu[order[q]]
                    tmpb = it_full[it_base:it].copy()
                    for q in range(cnt):
                        it_full[it_base + q] = tmpb[order[q]]
                if phase == 0:
                    x_off[ci * W + cj] = it_base
                    x_cnt[ci * W + cj] = cnt
                else:
                    s_off[cj] = it_base
                    s_cnt[cj] = cnt
    # --- the goal: <s> S[0, n] </s> -----------------------------------------------------------
    goal = nd
    nd_label[nd] = LABEL_TOP
    nd_i[nd] = 0
    nd_j[nd] = n
    nd_left[nd] = 0
    nd_right[nd] = 0
    nd_full[nd] = False
    nd += 1
    best = -np.inf
    for q in range(s_off[n], s_off[n] + s_cnt[n]):
        score = it_score[q]
        lmv = 0.0
        if use_lm:
            ctx = _push_word(np.uint64(0), bos, mask)
            lw = it_left[q]
            ll = it_leftlen[q]
            for r in range(ll - 1, -1, -1):
                d = np.int64((lw >> (_B * np.uint64(r))) & _FIELD) - 1
                lp, ctx = _step(
                    ctx, d, mask, minimise, lm, base, extra, buf, memo_c, memo_w, memo_v, memo_x,
                    memo_n,
                )  # fmt: skip
                lmv += lp
            if it_full[q]:
                lmv += _charge(ctx, ll, st, base, extra, buf)
                ctx = it_right[q]
            lmv += _step(
                ctx, eos, mask, minimise, lm, base, extra, buf, memo_c, memo_w, memo_v, memo_x,
                memo_n,
            )[0]  # fmt: skip
            score += w_lm * lmv
        e_head[ne] = goal
        e_t0[ne] = it_node[q]
        e_t1[ne] = -1
        e_rule[ne] = GOAL
        e_lm[ne] = lmv
        e_oov[ne] = 0
        e_i[ne] = 0
        e_j[ne] = n
        ne += 1
        best = max(best, score)
    return (
        nd_label[:nd].copy(),
        nd_i[:nd].copy(),
        nd_j[:nd].copy(),
        nd_left[:nd].copy(),
        nd_right[:nd].copy(),
        nd_full[:nd].copy(),
        e_head[:ne].copy(),
        e_t0[:ne].copy(),
        e_t1[:ne].copy(),
        e_rule[:ne].copy(),
        e_lm[:ne].copy(),
        e_oov[:ne].copy(),
        e_i[:ne].copy(),
        e_j[:ne].copy(),
        best,
        total_pops,
        minus_lm_nodes,
    )


@njit(cache=True, nogil=True)
def reachable(num_nodes, e_head, e_t0, e_t1):  # type: ignore[no-untyped-def]
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


@njit(cache=True, nogil=True)
def sort_options(m_rlo, m_rhi, scores, rule_oov):  # type: ignore[no-untyped-def]
    """Per match: its rules by decreasing score (stable), with scores and LM OOV counts.

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
    return m_optlo, m_nopt, opt_rule, opt_score, opt_oov


@njit(cache=True, nogil=True)
def edge_arrays(  # type: ignore[no-untyped-def]
    num_nodes,
    e_head,
    e_t0,
    e_t1,
    e_rule,
    e_lm,
    e_oov,
    e_i,
    tsym,
    toff,
    rtarget,
    features,
    nterm,
    pass_sym,
    use_lm,
):
    """The forest's CSR arrays from the kernel's edges, in the reference's layouts.

    Returns tails (``tail_ptr``, ``tail_nodes``), incoming edges in edge order (``in_ptr``,
    ``in_edges``), target words as decoder ids (``term_ptr``, ``term_words``) and features
    (``feat_ptr``, ``feat_cols``, ``feat_vals``): the column of a feature is its position in
    the grammar's feature names followed by RulePenalty, PassThrough, WordPenalty, Glue,
    LanguageModel, LanguageModel_OOV — the order in which the reference writes an edge's
    feature dict; rule features of value 0 are left out, the LM feature never is (with LM).
    """
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
