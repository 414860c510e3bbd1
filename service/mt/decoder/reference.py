"""The reference decoder: CKY+ parsing and language-model integration by cube pruning in
Python, the obviously correct search that the compiled engine (:mod:`.compiled`) must equal.

Hieber & Riezler 2015, §3 ("Dynamic Programming on Hypergraphs") and Chiang 2007, §5: a
tokenised source sentence is parsed with the Hiero grammar filtered to its n-grams and gapped
patterns (:meth:`service.mt.grammar.Grammar.filter`) into the −LM forest: one node ``X[i,j]``
per source span that some rule derives (non-glue spans at most ``max_span`` words),
pass-through rules for words no rule translates alone (feature ``PassThrough``), and the glue
rules ``S → X`` and ``S → S X`` over prefixes ``[0, j]``.

The language model is integrated by cube pruning (Chiang 2007 §5.3.3; Huang & Chiang 2007):
spans are visited bottom-up; at each −LM node, for every rule that matches the span (and
every group of rules sharing one source side and one choice of gaps), the +LM items of each
gap, sorted by score plus LM heuristic, span a cube. By default (``DecoderConfig.cube_rules``
``"all"``, as Huang & Chiang 2007 and cdec) each rule's best corner — the rule with its gaps'
best items, scored with the LM — starts in a priority queue; with ``"lazy"`` (Chiang 2007) the
rules, sorted by their −LM score, are one more axis, and only the best rule starts. Up to
``pop_limit`` candidates are popped per −LM node and each popped candidate's neighbours are
pushed. A popped candidate becomes a hyperedge of the **+LM forest** into the +LM node keyed
by (label, span, LM boundary) — candidates with equal boundaries recombine into one node. The
boundaries are KenLM's minimised chart states (Heafield 2011, §4.1; ``minimise_lm_states``,
:mod:`service.mt.lm.states`), so more candidates recombine and the pop limit reaches further.
On cdec's own de-en example (bench/README.md, "LM states and cube rules") this search finds
cdec's model score on all 100 sentences at pop 200, where the lazy rule axis with unminimised
states lost on 37. Every edge carries its full feature vector: the rule's features,
``WordPenalty``, ``RulePenalty``/``Glue``/``PassThrough``, and the LM score of the words that
the edge gives their full history (``LanguageModel``, natural log) with ``LanguageModel_OOV``;
a final edge adds ``<s>`` and ``</s>``. So the Viterbi derivation of the +LM forest under the
decoder's weights is the cube-pruning 1-best, and every retrieval method can rescore the same
forest with other weights (Hieber & Riezler 2015, eq. 4).

With ``use_lm=False`` (the ``--no-lm`` ablation of Hieber & Riezler 2015, Table 2) the LM
features are left out and each −LM node keeps one +LM node.

Before the forest is handed on, the nodes and edges that no derivation of the goal uses are
dropped (:func:`service.forest.hypergraph.prune_unreachable`; ``DecoderConfig.prune_unreachable``):
most +LM items a cell pops are never popped as a tail in any cell above it (cdec drops them
too). No derivation of the goal changes, so no Viterbi, k-best or retrieval result does; the
forest that every retrieval method walks and the query cache holds shrinks (at pop 200 on the
full bundles to about 1/20 of the nodes and 1/10 of the edges, bench/README.md, "Pruning
unreachable +LM nodes"). ``DecodeStats.search_nodes``/``search_edges`` keep the search's own
counts.

Speed: candidates are scored with :func:`service.mt.lm.states.combine_ids`, the
tested fast form of ``combine`` over interned LM contexts whose steps are memoised per thread
across sentences; candidates are keyed by boundary ids and a :class:`Boundary` is only built for
a new +LM node; and the cyclic garbage collector is paused during the search
(``DecoderConfig.pause_gc``). The forest is the same as with the reference functions.

Serving runs the compiled engine and never imports this module
(tests/integration/test_import_graph.py); the bundle builds it only when
``DecoderConfig.engine`` is ``"reference"``.
"""

from __future__ import annotations

import gc
import heapq
import itertools
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from service.errors import ConfigurationError, InternalError
from service.forest.hypergraph import Hypergraph, HypergraphBuilder, prune_unreachable
from service.mt.decoder.base import (
    TOP,
    Decoder,
    DecoderConfig,
    DecodeStats,
    Forest,
    Span,
    YieldSym,
    has_lexical_unary,
    pass_features,
)
from service.mt.grammar import SentenceGrammar
from service.mt.lm import (
    BOS,
    EMPTY_TAIL,
    NO_STRUCTURE,
    Boundary,
    ContextTable,
    IdTail,
    LanguageModel,
    NgramStructure,
    combine_ids,
    finish_ids,
)
from service.mt.rules import GLUE, LANGUAGE_MODEL, LM_OOV, S, X

if TYPE_CHECKING:
    from service.mt.lm import LmTable


@dataclass(slots=True)
class _Item:
    """A +LM item: a node of the +LM forest with its best score and LM boundary."""

    node: int
    score: float  # best inside score (LM of fully-known words included)
    est: float  # weighted LM heuristic for the item's unscored prefix
    boundary: Boundary
    lm_tail: IdTail  # the boundary for combine_ids

    @property
    def priority(self) -> float:
        return self.score + self.est


@dataclass(slots=True)
class _Option:
    """One rule on a cube's rule axis."""

    score: float  # w · φ(rule) without LM
    target: tuple[YieldSym, ...]
    features: dict[str, float]
    rule_id: int
    oov: int  # target terminals unknown to the LM


@dataclass(slots=True)
class _Cube:
    label: str
    span: Span
    options: Callable[[int], _Option]  # lazily materialised, in score order
    num_options: int
    first_score: float
    tails: tuple[list[_Item], ...]
    seen: set[tuple[int, ...]] = field(default_factory=set)  # candidates pushed so far


class ReferenceDecoder(Decoder):
    """The cube-pruning search in Python (:class:`_CubeSearch`), the tested reference.

    Concurrent calls are safe: the LM's context-state cache is a plain dict whose worst case
    under races is recomputation, and the memo of LM steps, :class:`ContextTable`, is one per
    thread. ``lm_table`` is only read for the n-gram structure that LM state minimisation
    needs (a bundle's LM table answers it without a second load); without it ``lm.structure()``
    is asked.
    """

    def _prepare(self, lm_table: LmTable | None) -> None:
        self._structure = _structure(self.lm, self.config, lm_table)
        self._tables = threading.local()  # per thread: the ContextTable kept across sentences

    @classmethod
    def wants_lm_table(cls, config: DecoderConfig) -> bool:
        """Only for the structure of minimised LM states."""
        return config.use_lm and config.minimise_lm_states

    # the LM step memo of one thread is dropped (between sentences) beyond this many contexts
    CONTEXT_TABLE_LIMIT = 100_000

    def _context_table(self) -> ContextTable:
        """This thread's memo of LM steps (a table is only used by one search at a time)."""
        table: ContextTable | None = getattr(self._tables, "table", None)
        if table is None or len(table.words) > self.CONTEXT_TABLE_LIMIT:
            assert self.lm is not None
            table = ContextTable(self._order, self.lm.logp, self.lm, self._structure)
            self._tables.table = table
        return table

    def forest(self, tokens: Sequence[str], pop_limit: int | None = None) -> Forest:
        toks = self._check(tokens)
        limit = pop_limit or self.config.pop_limit
        sg, stats, t1 = self._lookup(toks)
        search = _CubeSearch(self, toks, sg, limit, stats)
        if self.config.pause_gc:
            with _GC_PAUSE.paused():
                hg, best = search.run()
        else:
            hg, best = search.run()
        t2 = time.perf_counter()
        stats.timings["cube_pruning"] = t2 - t1
        stats.search_nodes, stats.search_edges = hg.num_nodes, hg.num_edges
        if self.config.prune_unreachable:
            hg = prune_unreachable(hg)
            stats.timings["prune"] = time.perf_counter() - t2
        stats.nodes, stats.edges = hg.num_nodes, hg.num_edges
        return Forest(toks, hg, best, stats, self.lm is not None)


class _GcPause:
    """Process-wide pause of the cyclic garbage collector, safe for concurrent decodes.

    The collector is disabled when the first pause starts (if it was enabled then) and enabled
    again when the last concurrent pause ends, also on errors. Reference counting still frees
    everything that is not in a cycle; cyclic garbage waits until the pause ends. So that
    overlapping decodes under sustained load cannot keep the collector off for good, a pause
    that ends while others go on runs a collection itself if the collector has been off for
    more than :attr:`max_off` seconds.
    """

    def __init__(self, max_off: float = 2.0) -> None:
        self._lock = threading.Lock()
        self._depth = 0
        self._was_enabled = False
        self._off_since = 0.0
        self.max_off = max_off

    @property
    def depth(self) -> int:
        return self._depth

    @contextmanager
    def paused(self) -> Iterator[None]:
        with self._lock:
            if self._depth == 0:
                self._was_enabled = gc.isenabled()
                self._off_since = time.monotonic()
                gc.disable()
            self._depth += 1
        try:
            yield
        finally:
            collect = False
            with self._lock:
                self._depth -= 1
                if self._was_enabled:
                    if self._depth == 0:
                        gc.enable()
                    elif time.monotonic() - self._off_since > self.max_off:
                        self._off_since = time.monotonic()
                        collect = True
            if collect:
                gc.collect()


_GC_PAUSE = _GcPause()


def _structure(
    lm: LanguageModel | None, config: DecoderConfig, given: NgramStructure | None
) -> NgramStructure:
    """What LM state minimisation needs to know about ``lm`` (none when it is off)."""
    if lm is None or not config.minimise_lm_states:
        return NO_STRUCTURE
    structure = given if given is not None else lm.structure()
    if structure is None:
        raise ConfigurationError(
            f"{type(lm).__name__} cannot tell the n-gram structure that LM state minimisation "
            "needs; use an ARPA model or DecoderConfig(minimise_lm_states=False)"
        )
    return structure


class _CubeSearch:
    """One sentence's cube-pruning search (all mutable state lives here)."""

    def __init__(
        self,
        dec: ReferenceDecoder,
        tokens: tuple[str, ...],
        sg: SentenceGrammar,
        pop_limit: int,
        stats: DecodeStats,
    ) -> None:
        self.dec = dec
        self.tokens = tokens
        self.sg = sg
        self.pop_limit = pop_limit
        self.stats = stats
        self.builder = HypergraphBuilder()
        self.lm = dec.lm
        self.order = dec._order
        self._oov_cache: dict[str, bool] = {}
        self._counter = itertools.count()
        # memo of LM steps over interned contexts (the hot loop's LM cache), kept per thread
        self.table = dec._context_table() if self.lm is not None else _NO_LM_TABLE

    # --- LM --------------------------------------------------------------------------------
    def oov_count(self, target: tuple[YieldSym, ...]) -> int:
        if self.lm is None:
            return 0
        n = 0
        for s in target:
            if isinstance(s, str):
                flag = self._oov_cache.get(s)
                if flag is None:
                    flag = self.lm.is_oov(s)
                    self._oov_cache[s] = flag
                n += flag
        return n

    # --- options -------------------------------------------------------------------------
    def _rule_options(self, lo: int, hi: int) -> tuple[Callable[[int], _Option], int, float]:
        scores = self.dec.rule_scores(lo, hi)
        order = np.argsort(-scores, kind="stable")
        ids = (order + lo).tolist()
        sc = scores[order].tolist()
        made: dict[int, _Option] = {}

        def option(k: int) -> _Option:
            opt = made.get(k)
            if opt is None:
                r = ids[k]
                tgt = self.dec.rule_yield(r)
                opt = _Option(sc[k], tgt, self.dec.rule_features(r), r, self.oov_count(tgt))
                made[k] = opt
            return opt

        return option, len(ids), sc[0]

    def _fixed_option(self, opt: _Option) -> tuple[Callable[[int], _Option], int, float]:
        return (lambda _k: opt), 1, opt.score

    # --- the search ------------------------------------------------------------------------
    def run(self) -> tuple[Hypergraph, float]:
        dec, toks, n = self.dec, self.tokens, len(self.tokens)
        x_items: dict[Span, list[_Item]] = {}
        for length in range(1, n + 1):
            for i in range(0, n - length + 1):
                j = i + length
                cubes: list[_Cube] = []
                if length <= dec.config.max_span:
                    for m in self.sg.matches(i, j):
                        if not all(g in x_items for g in m.gaps):
                            continue
                        gap_items = tuple(x_items[g] for g in m.gaps)
                        opts, count, first = self._rule_options(m.rules.start, m.rules.stop)
                        cubes.append(_Cube(X, (i, j), opts, count, first, gap_items))
                if length == 1 and not has_lexical_unary(self.sg, i):
                    tgt: tuple[YieldSym, ...] = (toks[i],)
                    feats = pass_features()
                    score = dec._w_pass + dec._w_wp
                    opt = _Option(score, tgt, feats, -1, self.oov_count(tgt))
                    fo, count, first = self._fixed_option(opt)
                    cubes.append(_Cube(X, (i, j), fo, count, first, ()))
                if cubes:
                    self.stats.minus_lm_nodes += 1
                    x_items[(i, j)] = self._fill_cell(X, (i, j), cubes)
        s_items: dict[int, list[_Item]] = {}
        unary = _Option(0.0, (0,), {}, -1, 0)
        glue = _Option(dec._w_glue, (0, 1), {GLUE: 1.0}, -1, 0)
        for j in range(1, n + 1):
            cubes = []
            if (0, j) in x_items:
                fo, count, first = self._fixed_option(unary)
                cubes.append(_Cube(S, (0, j), fo, count, first, (x_items[(0, j)],)))
            for k in range(1, j):
                if k in s_items and (k, j) in x_items:
                    fo, count, first = self._fixed_option(glue)
                    pair = (s_items[k], x_items[(k, j)])
                    cubes.append(_Cube(S, (0, j), fo, count, first, pair))
            if cubes:
                self.stats.minus_lm_nodes += 1
                s_items[j] = self._fill_cell(S, (0, j), cubes)
        if n not in s_items:  # cannot happen: pass-through covers every word
            raise InternalError("the sentence could not be parsed (pass-through covers every word)")
        goal = self.builder.add_node(TOP, (0, n))
        best = -np.inf
        bos = self.table.intern((BOS,) if self.order > 1 else ())
        for item in s_items[n]:
            final: dict[str, float] = {}
            score = item.score
            if self.lm is not None:
                lm = finish_ids(item.lm_tail, self.table, bos)
                final[LANGUAGE_MODEL] = lm
                score += dec._w_lm * lm
            self.builder.add_edge(goal, (item.node,), (0,), final, span=(0, n))
            best = max(best, score)
        return self.builder.build(goal), float(best)

    def _fill_cell(self, label: str, span: Span, cubes: list[_Cube]) -> list[_Item]:
        """Pop up to ``pop_limit`` candidates of the cubes of one −LM node (the hot loop).

        A candidate is ``(cube, idx)`` with ``idx[0]`` its rule's rank and ``idx[1:]`` its tail
        items' ranks (:meth:`_candidate` scores it); the heap pops the best priority (inside
        score plus LM estimate), ties in push order; a popped candidate becomes an edge into
        the +LM node of its LM boundary (:meth:`_incorporate`), and its neighbours are pushed.
        """
        heap: list[tuple[float, int, _Candidate]] = []
        counter = self._counter

        def push(cube: _Cube, idx: tuple[int, ...]) -> None:
            cand = self._candidate(cube, idx)
            if cand is not None:
                heapq.heappush(heap, (-(cand.inside + cand.est), next(counter), cand))

        all_rules = self.dec.config.cube_rules == "all"
        first_axis = 1 if all_rules else 0  # with every rule in the heap, rules are no axis
        for cube in cubes:
            corner = (0,) * len(cube.tails)
            for k in range(cube.num_options if all_rules else 1):
                push(cube, (k, *corner))
        items: dict[tuple[int, int, bool], _Item] = {}
        pops = 0
        while heap and pops < self.pop_limit:
            cand = heapq.heappop(heap)[2]
            pops += 1
            self._incorporate(items, label, span, cand)
            idx = cand.idx
            for d in range(first_axis, len(idx)):  # one rank further along each axis in turn
                push(cand.cube, (*idx[:d], idx[d] + 1, *idx[d + 1 :]))
        self.stats.pops += pops
        return sorted(items.values(), key=lambda it: -it.priority)

    def _candidate(self, cube: _Cube, idx: tuple[int, ...]) -> _Candidate | None:
        """The candidate ``idx`` of ``cube`` scored, or None if it is out of the cube or was
        pushed before. Its LM score comes from :func:`combine_ids` (the tested fast form of
        :func:`combine`); it is keyed by interned boundary ids until popped."""
        seen = cube.seen
        if idx in seen or idx[0] >= cube.num_options:
            return None
        tails: list[_Item] = []
        for d, axis in enumerate(cube.tails, 1):
            k = idx[d]
            if k >= len(axis):
                return None
            tails.append(axis[k])
        seen.add(idx)
        opt = cube.options(idx[0])
        inside = opt.score
        for t in tails:
            inside += t.score
        if self.lm is None:
            return _Candidate(cube, idx, inside, 0.0, _NO_KEY, 0.0, opt, tails, 0.0)
        dec = self.dec
        lm, raw_est, left, right, full = combine_ids(
            opt.target, [t.lm_tail for t in tails], self.table
        )
        inside += dec._w_lm * lm + dec._w_oov * opt.oov
        est = dec._w_lm * raw_est
        return _Candidate(cube, idx, inside, est, (left, right, full), lm, opt, tails, raw_est)

    def _incorporate(
        self,
        items: dict[tuple[int, int, bool], _Item],
        label: str,
        span: Span,
        cand: _Candidate,
    ) -> None:
        """Add a popped candidate to the +LM forest: an edge into the node of its boundary
        (made on first use; a better inside score updates the item's)."""
        bkey = cand.key
        item = items.get(bkey)
        if item is None:
            if self.lm is not None:
                words = self.table.words
                left = words[bkey[0]]
                boundary = Boundary(left, words[bkey[1]], bkey[2])
                node = self.builder.add_node(label, span, boundary)
                lm_tail: IdTail = (left, bkey[0], bkey[1], bkey[2], cand.raw_est)
            else:
                boundary = _NO_BOUNDARY
                node = self.builder.add_node(label, span, None)
                lm_tail = _NO_TAIL
            item = _Item(node, cand.inside, cand.est, boundary, lm_tail)
            items[bkey] = item
        elif cand.inside > item.score:
            item.score = cand.inside
        opt = cand.opt
        feats = opt.features
        if self.lm is not None:
            feats = {**feats, LANGUAGE_MODEL: cand.lm}
            if opt.oov:
                feats[LM_OOV] = float(opt.oov)
        tail_nodes = tuple([t.node for t in cand.tails])
        self.builder.add_edge_trusted(item.node, tail_nodes, opt.target, feats, span, opt.rule_id)


@dataclass(slots=True)
class _Candidate:
    """A scored candidate of a cube: ``idx`` its rule's and tails' ranks."""

    cube: _Cube
    idx: tuple[int, ...]
    inside: float  # rule, tails and the LM score of the words it gives their context
    est: float  # weighted LM estimate of the new item's left state
    key: tuple[int, int, bool]  # its LM boundary (left id, right id, full)
    lm: float  # the LanguageModel feature of its edge
    opt: _Option
    tails: list[_Item]
    raw_est: float  # unweighted estimate (kept with the item for combine_ids)


_NO_KEY = (0, 0, False)
_NO_TAIL: IdTail = EMPTY_TAIL
_NO_LM_TABLE = ContextTable(1, lambda _context, _word: 0.0)  # never scores (no LM)
_NO_BOUNDARY = Boundary((), (), False)
