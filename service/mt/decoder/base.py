"""What both decoders share: the configuration, the forest they return and the abstract
:class:`Decoder` over one grammar, LM and weight vector.

A decoder parses a tokenised source sentence with the Hiero grammar and integrates the
language model by cube pruning (Chiang 2007, §5.3.3; Huang & Chiang 2007); the engines —
:mod:`.reference`, the search in Python, and :mod:`.compiled`, the same search as one numba
kernel (:mod:`.kernel`) — differ only in how :meth:`Decoder.forest` runs it. The base holds
what their searches read and must read alike, since one flipped bit can flip a tie in the
cube-pruning heap and change the forest: the rule scores w · φ (:func:`weighted_rule_scores`),
each rule's target yield and features, the input checks and the sentence grammar
(:meth:`service.mt.grammar.Grammar.filter`); and the unpruned −LM forest
(:meth:`Decoder.minus_lm_forest`, Chiang 2007 §5.1), the exact search space tests rescore.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from numpy.typing import NDArray

from service.core.csr import ptr_from_counts
from service.core.jit import Engine
from service.errors import InputTooLargeError, InvalidInputError
from service.forest.hypergraph import Hypergraph, HypergraphBuilder
from service.mt.grammar import Grammar, SentenceGrammar
from service.mt.lm import LanguageModel
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
from service.text.compounds import CompoundSplitter
from service.text.questions import QuestionRewriter

if TYPE_CHECKING:
    from service.mt.lm import LmTable

Span = tuple[int, int]
YieldSym = str | int  # a target terminal, or the index of the tail filling a gap
TOP = "TOP"


@dataclass(frozen=True)
class DecoderConfig:
    """Search parameters (defaults: pop limit 200, Hieber & Riezler 2015, §5; span 10,
    Chiang 2007)."""

    pop_limit: int = 200
    max_span: int = 10
    use_lm: bool = True
    max_words: int = 200
    # pause Python's cyclic garbage collector during the reference search (its GcPause): it
    # allocates some 10^5 tuples and objects per sentence, and the collector's passes over the
    # growing forest took about half of the decode time. The output does not depend on it.
    pause_gc: bool = True
    # which search :meth:`service.mt.bundle.ModelBundle.decoder` builds (by name in
    # :data:`service.mt.decoder.DECODERS`): the compiled kernel (service.mt.decoder.compiled)
    # or the Python reference (service.mt.decoder.reference), same forests; the service and the
    # commands pass their setting CLIR_DECODER_ENGINE (so each can run either)
    engine: Engine = "compiled"
    # drop the +LM nodes and edges that no derivation of the goal uses before the forest is
    # handed on (:func:`service.forest.hypergraph.prune_unreachable`); no derivation, score or
    # ranking changes, forests shrink (bench/README.md, "Pruning unreachable +LM nodes").
    # Off only to measure or inspect the search's whole output.
    prune_unreachable: bool = True
    # recombine +LM items on minimised LM states (:mod:`service.mt.lm.states`: left states of
    # the words that can still change, right states of the words the LM can still use; Heafield
    # 2011, §4.1). Exact either way; off only to measure what it buys.
    minimise_lm_states: bool = True
    # the rules of a cube: "all" puts every rule's best corner (its tails' best items) into the
    # heap at the start, so each rule is a cube over its tails (Huang & Chiang 2007, as cdec);
    # "lazy" makes the rules, sorted by their -LM score, one more axis of the cube, the next
    # rule entering only when the previous one's corner is popped (Chiang 2007, §5.3.3)
    cube_rules: Literal["all", "lazy"] = "all"

    def __post_init__(self) -> None:
        if self.pop_limit < 1:
            raise InvalidInputError(f"pop_limit must be at least 1, got {self.pop_limit}")
        if self.max_span < 1:
            raise InvalidInputError(f"max_span must be at least 1, got {self.max_span}")


@dataclass
class DecodeStats:
    """Sizes and per-stage timings (seconds) of one decode.

    ``nodes``/``edges`` count the forest handed on; ``search_nodes``/``search_edges`` what
    the search made, before the nodes the goal cannot reach were pruned (equal when
    ``DecoderConfig.prune_unreachable`` is off).
    """

    words: int = 0
    matches: int = 0
    rules: int = 0
    minus_lm_nodes: int = 0
    nodes: int = 0
    edges: int = 0
    search_nodes: int = 0
    search_edges: int = 0
    pops: int = 0
    timings: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Forest:
    """The +LM translation forest of one sentence, and how it was made."""

    tokens: tuple[str, ...]
    hypergraph: Hypergraph
    best_score: float
    stats: DecodeStats
    use_lm: bool


class Decoder(ABC):
    """Builds translation forests for one grammar, LM and weight vector; an engine
    (:data:`service.mt.decoder.DECODERS`) fills in :meth:`forest`.

    A decoder holds no per-sentence mutable state: concurrent calls are safe.

    ``lm_table``: the LM as arrays (:class:`~service.mt.lm.LmTable`, the same model as ``lm``),
    for the engines that read it (:meth:`wants_lm_table`). ``splitter``: how queries decoded
    with this decoder split the words the grammar does not know (:mod:`service.text.compounds`;
    :meth:`service.mt.bundle.ModelBundle.decoder` sets the bundle's, a decoder made for tuning
    has none). The decoder itself translates the tokens it is given;
    :func:`service.retrieval.query.query_sentences` applies it. ``questions``: how its search
    queries rewrite a how-to question as an instruction (:mod:`service.text.questions`; set the
    same way, and not applied by translation).
    """

    splitter: CompoundSplitter | None = None
    questions: QuestionRewriter | None = None

    def __init__(
        self,
        grammar: Grammar,
        lm: LanguageModel | None,
        weights: Mapping[str, float],
        config: DecoderConfig | None = None,
        lm_table: LmTable | None = None,
    ) -> None:
        self.grammar = grammar
        self.config = config or DecoderConfig()
        self.lm = lm if (lm is not None and self.config.use_lm) else None
        self.weights = dict(weights)
        w = self.weights
        self._w_rule = np.array([w.get(n, 0.0) for n in grammar.feature_names], dtype=np.float64)
        self._w_wp = w.get(WORD_PENALTY, 0.0)
        self._w_rp = w.get(RULE_PENALTY, 0.0)
        self._w_glue = w.get(GLUE, 0.0)
        self._w_pass = w.get(PASS_THROUGH, 0.0)
        self._w_lm = w.get(LANGUAGE_MODEL, 0.0)
        self._w_oov = w.get(LM_OOV, 0.0)
        self._order = self.lm.order if self.lm is not None else 1
        self._nterm = target_terminal_counts(grammar)
        self._yield_cache: dict[int, tuple[YieldSym, ...]] = {}
        self._prepare(lm_table)

    @abstractmethod
    def _prepare(self, lm_table: LmTable | None) -> None:
        """What the engine sets up once the shared state above exists."""

    @classmethod
    def wants_lm_table(cls, config: DecoderConfig) -> bool:
        """Whether a decoder of this engine with ``config`` reads the LM table (the bundle
        loads it only then)."""
        return False

    @abstractmethod
    def forest(self, tokens: Sequence[str], pop_limit: int | None = None) -> Forest:
        """The +LM forest of ``tokens`` (already normalised and tokenised), searched with up
        to ``pop_limit`` pops per −LM node (default ``config.pop_limit``)."""

    # --- rules ---------------------------------------------------------------------------
    def rule_yield(self, rule_id: int) -> tuple[YieldSym, ...]:
        cached = self._yield_cache.get(rule_id)
        if cached is None:
            vocab = self.grammar.target_vocab
            cached = tuple(
                vocab[c] if c >= 0 else (-c - 1) % 2
                for c in self.grammar.target_ids(rule_id).tolist()
            )
            if len(self._yield_cache) > 1_000_000:
                self._yield_cache.clear()
            self._yield_cache[rule_id] = cached
        return cached

    def rule_features(self, rule_id: int) -> dict[str, float]:
        row = self.grammar.features[rule_id].tolist()
        feats = {n: v for n, v in zip(self.grammar.feature_names, row, strict=True) if v}
        feats[RULE_PENALTY] = 1.0
        nterm = int(self._nterm[rule_id])
        if nterm:
            feats[WORD_PENALTY] = float(nterm)
        return feats

    def rule_scores(self, lo: int, hi: int) -> NDArray[np.float64]:
        """w · φ for the contiguous rule ids ``lo..hi-1`` (no LM)."""
        return weighted_rule_scores(
            self.grammar.features[lo:hi], self._w_rule, self._w_rp, self._w_wp, self._nterm[lo:hi]
        )

    # --- the sentence ----------------------------------------------------------------------
    def _check(self, tokens: Sequence[str]) -> tuple[str, ...]:
        toks = tuple(tokens)
        if not toks:
            raise InvalidInputError("cannot translate an empty sentence")
        if len(toks) > self.config.max_words:
            raise InputTooLargeError(
                f"sentence has {len(toks)} words; the decoder accepts at most "
                f"{self.config.max_words} per sentence (split long text into sentences)"
            )
        return toks

    def _lookup(self, toks: tuple[str, ...]) -> tuple[SentenceGrammar, DecodeStats, float]:
        """The sentence grammar, the stats it starts, and the time it was done."""
        stats = DecodeStats(words=len(toks))
        t0 = time.perf_counter()
        sg = self.grammar.filter(toks, self.config.max_span)
        stats.matches = len(sg)
        stats.rules = sg.num_rules
        t1 = time.perf_counter()
        stats.timings["lookup"] = t1 - t0
        return sg, stats, t1

    def minus_lm_forest(self, tokens: Sequence[str]) -> Hypergraph:
        """The unpruned −LM forest: one node per (label, span), every matching rule an edge.

        Used by tests as the exact search space (with LM rescoring of its derivations) and
        for inspection; serving uses :meth:`forest`.
        """
        toks = self._check(tokens)
        sg = self.grammar.filter(toks, self.config.max_span)
        b = HypergraphBuilder()
        x_node: dict[Span, int] = {}
        n = len(toks)
        for length in range(1, n + 1):
            for i in range(0, n - length + 1):
                j = i + length
                edges: list[tuple[tuple[int, ...], tuple[YieldSym, ...], dict[str, float], int]]
                edges = []
                if length <= self.config.max_span:
                    for m in sg.matches(i, j):
                        if not all(gap in x_node for gap in m.gaps):
                            continue
                        tails = tuple(x_node[gap] for gap in m.gaps)
                        for r in m.rules:
                            edges.append((tails, self.rule_yield(r), self.rule_features(r), r))
                if length == 1 and not has_lexical_unary(sg, i):
                    edges.append(((), (toks[i],), pass_features(), -1))
                if edges:
                    v = b.add_node(X, (i, j))
                    x_node[(i, j)] = v
                    for tails, tgt, feats, r in edges:
                        b.add_edge(v, tails, tgt, feats, rule_id=r)
        s_node: dict[int, int] = {}
        for j in range(1, n + 1):
            v = b.add_node(S, (0, j))
            s_node[j] = v
            if (0, j) in x_node:
                b.add_edge(v, (x_node[(0, j)],), (0,), {})
            for k in range(1, j):
                if k in s_node and (k, j) in x_node:
                    b.add_edge(v, (s_node[k], x_node[(k, j)]), (0, 1), {GLUE: 1.0})
        goal = b.add_node(TOP, (0, n))
        b.add_edge(goal, (s_node[n],), (0,), {})
        return b.build(goal)


def pass_features() -> dict[str, float]:
    """The features of a pass-through edge (a source word copied to the output)."""
    return {PASS_THROUGH: 1.0, WORD_PENALTY: 1.0}


def has_lexical_unary(sg: SentenceGrammar, i: int) -> bool:
    """True if some gap-free rule translates word ``i`` on its own (else it passes through)."""
    return any(not m.gaps for m in sg.matches(i, i + 1))


def weighted_rule_scores(
    features: NDArray[np.floating[Any]],
    w_rule: NDArray[np.float64],
    w_rp: float,
    w_wp: float,
    nterm: NDArray[np.integer[Any]],
) -> NDArray[np.float64]:
    """w · φ of rules (rows of ``features``), without LM: the one function both decoders use.

    Computed column by column with elementwise operations, so the value of a rule does not
    depend on which other rules share the call (a matrix product's last bit does, and one
    flipped bit can flip a tie in the cube-pruning heap and change the forest).
    """
    f = np.asarray(features, dtype=np.float64)
    scores = np.zeros(f.shape[0], dtype=np.float64)
    for k in range(f.shape[1]):
        scores += f[:, k] * w_rule[k]
    scores += w_rp
    scores += w_wp * nterm
    return scores


def target_terminal_counts(grammar: Grammar) -> NDArray[np.int32]:
    """Number of target terminals of every rule (vectorised over the whole grammar, once per
    grammar)."""
    cached: NDArray[np.int32] | None = grammar.__dict__.get("_clir_nterm")
    if cached is not None:
        return cached
    symbols = np.asarray(grammar.target_symbols)
    offsets = np.asarray(grammar.target_offsets, dtype=np.int64)
    terminal = ptr_from_counts(symbols >= 0)  # terminals before each position
    per_target = (terminal[offsets[1:]] - terminal[offsets[:-1]]).astype(np.int32)
    counts: NDArray[np.int32] = per_target[np.asarray(grammar.rule_target)]
    grammar.__dict__["_clir_nterm"] = counts
    return counts
