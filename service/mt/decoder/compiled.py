"""The compiled decoder: the reference decoder's search as one numba kernel per sentence.

:class:`CompiledDecoder` is a :class:`service.mt.decoder.base.Decoder` whose :meth:`forest` runs
:func:`service.mt.decoder.kernel.decode_chart` (Chiang 2007 §5.3.3, cube pruning) over the
sentence grammar's arrays and the language model as arrays (:mod:`service.mt.lm.table`), and
returns the +LM forest as a :class:`~service.forest.hypergraph.Hypergraph` built from arrays: node
and edge objects are only made when something asks for them (explanations, tests); Viterbi,
k-best, BOW-FD (Hieber & Riezler 2015, §3) and the feature sums read the arrays.

The nodes and edges the goal cannot reach are dropped on the kernel's arrays
(:func:`service.mt.decoder.kernel.reachable`, one reverse pass over the edges) before the forest's
arrays are built, as the reference drops them from its objects.

The forest equals the reference decoder's (:class:`service.mt.decoder.reference.ReferenceDecoder`,
which this module does not import) node for node and edge for edge — labels, spans, LM
boundaries, tails, rule ids, yields and every feature value — because both use the same rule
scores (:func:`service.mt.decoder.base.weighted_rule_scores`), the same chart, cube and heap order,
the same LM values (the table equals KenLM bit for bit) and the same boundary semantics.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from service.core.csr import ptr_from_counts
from service.errors import ConfigurationError, InternalError, InvalidInputError
from service.forest.hypergraph import (
    Hyperedge,
    Hypergraph,
    HypergraphArrays,
    Node,
    PortableEdges,
    edge_from_arrays,
)
from service.mt.decoder import kernel as K
from service.mt.decoder.base import (
    TOP,
    Decoder,
    DecoderConfig,
    DecodeStats,
    Forest,
    weighted_rule_scores,
)
from service.mt.grammar import Grammar
from service.mt.lm import BOS, EOS, Boundary, LmTable
from service.mt.rules import (
    GLUE,
    LANGUAGE_MODEL,
    LM_OOV,
    PASS_THROUGH,
    RULE_PENALTY,
    WORD_PENALTY,
    S,
    X,
)

I64 = NDArray[np.int64]
_LABELS = (X, S, TOP)
# the decoder's own features, in the order the reference decoder writes them into an edge's
# feature dict (after the rule's features): one column each in the dense feature block
_EXTRA = (RULE_PENALTY, PASS_THROUGH, WORD_PENALTY, GLUE, LANGUAGE_MODEL, LM_OOV)


def _readonly(*arrays: NDArray[Any]) -> None:
    for a in arrays:
        a.setflags(write=False)


class CompiledDecoder(Decoder):
    """A :class:`~service.mt.decoder.base.Decoder` whose search runs compiled; the reference's
    forests, objects on demand.

    ``lm_table`` must hold the same language model as ``lm`` (the bundle's ARPA); it is only
    read when the LM is used. The LM order must be at most 4 and the target vocabulary below
    two million words (packed LM contexts); otherwise :class:`ConfigurationError`.
    """

    def _prepare(self, lm_table: LmTable | None) -> None:
        grammar = self.grammar
        self._use_lm = self.lm is not None
        if self._use_lm:
            if lm_table is None:
                raise ConfigurationError("the compiled decoder needs the LM table of its LM")
            if lm_table.order != self._order:
                raise ConfigurationError(
                    f"the LM table has order {lm_table.order}, the LM {self._order}"
                )
            if self._order - 1 > K.MAX_CONTEXT:
                raise ConfigurationError(
                    f"the compiled decoder packs at most {K.MAX_CONTEXT} context words "
                    f"(LM order <= {K.MAX_CONTEXT + 1}); this LM has order {self._order}"
                )
        self._table = lm_table
        vocab = grammar.target_vocab
        self._nvocab = len(vocab)
        if self._nvocab + 2 > K.MAX_WORD_ID:
            raise ConfigurationError(
                f"the target vocabulary has {self._nvocab} words; the compiled decoder packs "
                f"at most {K.MAX_WORD_ID - 2}"
            )
        self._word_id: dict[str, int] = _word_ids(grammar)
        self._bos, self._eos = self._nvocab, self._nvocab + 1
        if self._use_lm:
            assert lm_table is not None
            self._base, self._vocab_oov = _lm_ids(grammar, lm_table)
        else:
            self._base = np.zeros(self._nvocab + 2, dtype=np.int64)
            self._vocab_oov = np.zeros(self._nvocab, dtype=np.int64)
        self._tsym = np.asarray(grammar.target_symbols)
        self._toff = np.asarray(grammar.target_offsets)
        self._rtarget = np.asarray(grammar.rule_target)
        self._targets = K.RuleTargets(self._tsym, self._toff, self._rtarget)
        self._features = np.asarray(grammar.features)
        if lm_table is not None and self._use_lm:
            self._lm_arrays, self._st_arrays = lm_table.arrays(), lm_table.structure_arrays()
        else:  # the kernel never reads them without an LM; same dtypes, one specialisation
            keys, vals, flags = np.zeros(1, np.uint64), np.zeros(1, np.float32), np.zeros(1, bool)
            self._lm_arrays = (keys, vals, vals, vals, vals)
            self._st_arrays = (keys, vals, vals, flags, flags)
        clash = set(grammar.feature_names) & set(_EXTRA)
        if clash:
            raise ConfigurationError(f"grammar features clash with decoder features: {clash}")

    @classmethod
    def wants_lm_table(cls, config: DecoderConfig) -> bool:
        """The kernel reads the LM as arrays whenever the LM is used."""
        return config.use_lm

    # --- per sentence: prepare, search, finish ---------------------------------------------
    def forest(self, tokens: Sequence[str], pop_limit: int | None = None) -> Forest:
        sentence = self.prepare(tokens, pop_limit)
        return self.finish(sentence, K.decode_chart(*sentence.inputs))

    def prepare(self, tokens: Sequence[str], pop_limit: int | None = None) -> PreparedSentence:
        """The checked tokens, their sentence grammar and the kernel's inputs: each match's
        rules sorted by w · φ (:func:`~service.mt.decoder.kernel.sort_options`), the
        pass-through words and the LM, as arrays."""
        toks = self._check(tokens)
        limit = pop_limit or self.config.pop_limit
        sg, stats, t1 = self._lookup(toks)
        words = _SentenceWords(self, toks)
        m_rlo = np.asarray(sg.rule_start, dtype=np.int64)
        m_rhi = np.asarray(sg.rule_end, dtype=np.int64)
        counts = m_rhi - m_rlo
        starts = ptr_from_counts(counts)[:-1]
        rows = np.repeat(m_rlo - starts, counts) + np.arange(int(counts.sum()))
        scores = weighted_rule_scores(
            self.grammar.features[rows], self._w_rule, self._w_rp, self._w_wp, self._nterm[rows]
        )
        m_optlo, m_nopt, options = K.sort_options(m_rlo, m_rhi, scores, self._rule_oov(rows))
        inputs = K.ChartInputs(
            K.Search(len(toks), self.config.max_span, limit, self.config.cube_rules == "all"),
            K.Matches(
                np.asarray(sg.start, dtype=np.int64),
                np.asarray(sg.end, dtype=np.int64),
                np.ascontiguousarray(sg.gaps, dtype=np.int64),
                m_optlo,
                m_nopt,
            ),
            options,
            self._targets,
            K.PassWords(words.pass_sym, words.pass_oov),
            K.EdgeWeights(self._w_pass + self._w_wp, self._w_glue, self._w_lm, self._w_oov),
            K.ChartLm(
                self._use_lm,
                self._order - 1 if self._use_lm else 0,
                self._bos,
                self._eos,
                self._base,
                words.extra_lm,
                self._lm_arrays,
                self._st_arrays,
                self.config.minimise_lm_states,
            ),
        )
        return PreparedSentence(toks, words, stats, t1, inputs)

    def finish(self, sentence: PreparedSentence, chart: K.Chart) -> Forest:
        """The forest of the kernel's ``chart`` of ``sentence``: pruned to what the goal
        reaches, as :class:`~service.forest.hypergraph.HypergraphArrays`."""
        nodes, edges = chart.nodes, chart.edges
        if not len(edges.head) or edges.rule[-1] != K.GOAL:  # cannot happen: pass-through
            raise InternalError("the sentence could not be parsed (pass-through covers every word)")
        stats = sentence.stats
        t2 = time.perf_counter()
        stats.timings["cube_pruning"] = t2 - sentence.start
        stats.search_nodes, stats.search_edges = len(nodes.label), len(edges.head)
        if self.config.prune_unreachable:
            nodes, edges = _prune(nodes, edges)
            stats.timings["prune"] = time.perf_counter() - t2
        forest = _ArrayForest(self, sentence.tokens, sentence.words, nodes)
        hg = forest.hypergraph(edges)
        stats.pops, stats.minus_lm_nodes = int(chart.pops), int(chart.minus_lm_nodes)
        stats.nodes, stats.edges = hg.num_nodes, hg.num_edges
        return Forest(sentence.tokens, hg, float(chart.best), stats, self._use_lm)

    def _rule_oov(self, rows: I64) -> I64:
        """The LM OOV count of each rule in ``rows`` (its target words unknown to the LM)."""
        if not self._use_lm or not len(rows):
            return np.zeros(len(rows), dtype=np.int64)
        tt = self._rtarget[rows]
        starts = self._toff[tt].astype(np.int64)
        lens = self._toff[tt + 1].astype(np.int64) - starts
        ptr = ptr_from_counts(lens)
        pos = np.repeat(starts - ptr[:-1], lens) + np.arange(int(ptr[-1]))
        syms = self._tsym[pos]
        flags = np.where(syms >= 0, self._vocab_oov[np.maximum(syms, 0)], 0)
        owner = np.repeat(np.arange(len(rows)), lens)
        return np.bincount(owner, weights=flags, minlength=len(rows)).astype(np.int64)

    def word(self, d: int, words: _SentenceWords) -> str:
        """The word of decoder word id ``d``."""
        if d < self._nvocab:
            return str(self.grammar.target_vocab[d])
        if d == self._bos:
            return BOS
        if d == self._eos:
            return EOS
        return words.extra_words[d - self._nvocab - 2]


class PreparedSentence(NamedTuple):
    """A sentence ready for the kernel (:meth:`CompiledDecoder.prepare`)."""

    tokens: tuple[str, ...]
    words: _SentenceWords  # its pass-through words' decoder ids
    stats: DecodeStats  # begun by the grammar lookup
    start: float  # when the lookup ended (perf_counter): the search's time starts
    inputs: K.ChartInputs  # the arguments of decode_chart


def _prune(nodes: K.ChartNodes, edges: K.ChartEdges) -> tuple[K.ChartNodes, K.ChartEdges]:
    """The kernel's node and edge arrays without what the goal cannot reach (same order,
    nodes renumbered): :func:`service.forest.hypergraph.prune_unreachable` on arrays."""
    keep_node, keep_edge = K.reachable(len(nodes.label), edges)
    if keep_node.all() and keep_edge.all():
        return nodes, edges
    new = (np.cumsum(keep_node) - 1).astype(edges.head.dtype)
    kept = K.ChartEdges._make(a[keep_edge] for a in edges)
    t0 = np.where(kept.t0 >= 0, new[kept.t0], kept.t0)
    t1 = np.where(kept.t1 >= 0, new[kept.t1], kept.t1)
    pruned = kept._replace(head=new[kept.head], t0=t0, t1=t1)
    return K.ChartNodes._make(a[keep_node] for a in nodes), pruned


def _word_ids(grammar: Grammar) -> dict[str, int]:
    """Target word -> id, built once per grammar."""
    cached: dict[str, int] | None = grammar.__dict__.get("_clir_word_ids")
    if cached is None:
        cached = {w: i for i, w in enumerate(grammar.target_vocab)}
        grammar.__dict__["_clir_word_ids"] = cached
    return cached


def _lm_ids(grammar: Grammar, table: LmTable) -> tuple[I64, I64]:
    """LM ids of the target vocabulary (+ ``<s>``, ``</s>``) and OOV flags, once per pair."""
    key = f"_clir_lm_ids_{id(table)}"
    cached: tuple[I64, I64] | None = grammar.__dict__.get(key)
    if cached is None:
        vocab = grammar.target_vocab
        ids = np.array([table.word_id(w) for w in vocab] + [table.bos, table.eos], np.int64)
        oov = np.array([table.is_oov(w) for w in vocab], dtype=np.int64)
        _readonly(ids, oov)
        cached = (ids, oov)
        grammar.__dict__[key] = cached
    return cached


class _SentenceWords:
    """Decoder word ids of one sentence's pass-through words.

    A source word that is also a target word keeps that word's id (so equal strings are equal
    to the LM state, as in the reference); others get ids after ``</s>``.
    """

    def __init__(self, dec: CompiledDecoder, tokens: tuple[str, ...]) -> None:
        extra: dict[str, int] = {}
        ids: list[int] = []
        for t in tokens:
            d = dec._word_id.get(t)
            if d is None:
                if t == BOS:
                    d = dec._bos
                elif t == EOS:
                    d = dec._eos
                else:
                    d = extra.get(t)
                    if d is None:
                        d = extra[t] = dec._nvocab + 2 + len(extra)
            ids.append(d)
        if dec._nvocab + 2 + len(extra) > K.MAX_WORD_ID:
            raise InvalidInputError("too many distinct unknown words in one sentence")
        self.extra_words = list(extra)
        self.pass_sym = np.array(ids, dtype=np.int32)
        table = dec._table
        if dec._use_lm and table is not None:
            self.extra_lm = np.array([table.word_id(w) for w in extra], dtype=np.int64)
            self.pass_oov = np.array([int(table.is_oov(t)) for t in tokens], dtype=np.int64)
        else:
            self.extra_lm = np.zeros(len(extra), dtype=np.int64)
            self.pass_oov = np.zeros(len(tokens), dtype=np.int64)
        if not len(self.extra_lm):
            self.extra_lm = np.zeros(1, dtype=np.int64)  # one specialisation: never empty


class _ArrayForest:
    """Turns the kernel's output into :class:`HypergraphArrays` and objects on demand."""

    def __init__(
        self,
        dec: CompiledDecoder,
        tokens: tuple[str, ...],
        words: _SentenceWords,
        nodes: K.ChartNodes,
    ) -> None:
        self.dec = dec
        self.tokens = tokens
        self.words = words
        self.nodes = nodes

    def hypergraph(self, edges: K.ChartEdges) -> Hypergraph:
        dec = self.dec
        num_nodes = len(self.nodes.label)
        num_edges = len(edges.head)
        (tail_ptr, tail_nodes, in_ptr, in_edges, term_ptr, term_words, feat_ptr, feat_cols,
         feat_vals) = K.edge_arrays(
            num_nodes, edges, dec._targets, dec._features, dec._nterm,
            K.PassWords(self.words.pass_sym, self.words.pass_oov), dec._use_lm,
        )  # fmt: skip
        # the forest's vocabulary in first-seen order
        uniq, first, inverse = np.unique(term_words, return_index=True, return_inverse=True)
        seen_order = np.argsort(first, kind="stable")
        rank = np.empty(len(uniq), dtype=np.int64)
        rank[seen_order] = np.arange(len(uniq))
        term_ids = rank[inverse.reshape(-1)]
        vocabulary = tuple(dec.word(int(d), self.words) for d in uniq[seen_order])
        # feature columns -> ids of the names present, sorted
        names = tuple(dec.grammar.feature_names) + _EXTRA
        used = np.flatnonzero(np.bincount(feat_cols, minlength=len(names)))
        feature_names = tuple(sorted(names[c] for c in used))
        name_id = {n: i for i, n in enumerate(feature_names)}
        col_id = np.array([name_id.get(n, -1) for n in names], dtype=np.int64)
        arrays = HypergraphArrays(
            num_nodes=num_nodes,
            num_edges=num_edges,
            goal=num_nodes - 1,
            edge_head=edges.head.astype(np.int64),
            tail_ptr=tail_ptr,
            tail_nodes=tail_nodes,
            in_ptr=in_ptr,
            in_edges=in_edges,
            term_ptr=term_ptr,
            term_ids=term_ids,
            vocabulary=vocabulary,
            feat_ptr=feat_ptr,
            feat_ids=col_id[feat_cols],
            feat_vals=feat_vals,
            feature_names=feature_names,
        )  # read-only from here on
        self.rule = edges.rule
        self.ei, self.ej = edges.i, edges.j
        self.arrays = arrays
        spans = (
            np.stack([self.nodes.i, self.nodes.j], axis=1).astype(np.int64),
            np.stack([edges.i, edges.j], axis=1).astype(np.int64),
        )
        return Hypergraph.from_arrays(arrays, self.node, self.edge, spans)

    def portable_edges(self) -> PortableEdges:
        """:meth:`edge` as a picklable object (a forest sent to a shard worker): the arrays,
        and the yield of each rule the forest uses."""
        rules = np.asarray(self.rule, dtype=np.int64)
        used = np.unique(rules[rules >= 0]).tolist()
        return PortableEdges(
            self.arrays, rules, np.asarray(self.ei, dtype=np.int64),
            np.asarray(self.ej, dtype=np.int64), tuple(self.tokens),
            {r: self.dec.rule_yield(r) for r in used}, K.PASS, K.GLUE,
        )  # fmt: skip

    def _context(self, packed: int) -> tuple[str, ...]:
        out: list[str] = []
        field = (1 << K.BITS) - 1
        while packed:
            out.append(self.dec.word((packed & field) - 1, self.words))
            packed >>= K.BITS
        return tuple(reversed(out))

    def node(self, v: int) -> Node:
        label, ni, nj, left, right, full = (int(a[v]) for a in self.nodes)
        state = None
        if self.dec._use_lm and label != K.LABEL_TOP:
            state = Boundary(self._context(left), self._context(right), bool(full))
        return Node(v, _LABELS[label], (ni, nj), state)

    def edge(self, e: int) -> Hyperedge:
        a = self.arrays
        r = int(self.rule[e])
        target: tuple[str | int, ...]
        if r >= 0:
            target = self.dec.rule_yield(r)
        elif r == K.PASS:
            target = (self.tokens[int(self.ei[e])],)
        elif r == K.GLUE:
            target = (0, 1)
        else:
            target = (0,)
        return edge_from_arrays(a, e, target, (int(self.ei[e]), int(self.ej[e])), max(r, -1))
