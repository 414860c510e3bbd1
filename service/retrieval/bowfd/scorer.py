"""The BOW-FD scorer (Hieber & Riezler 2015, §3): prepare every sentence of a decoded query,
rank each (compiled or reference engine), combine the sentences, explain the hits.

A document whose score is no better than the sum of the sentences' SMT Viterbi scores earned no
BM25 weight and is not retrieved (:meth:`BowFdScorer.rank_prepared`); every caller (search,
evaluation, learning to rank) gets its ranking from there.

Over a collection (:class:`BowFdMethod`, the scorer's ``segments``) the forests are prepared
once with the segments' weighted words, each sentence's list is merged to depth K' and the
lists are combined by the product of experts only when finished (a document missing from a
list takes the *collection's* list minimum); shards searched at once share their boards
(:mod:`service.retrieval.bowfd.boards`).
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import numpy.typing as npt

from service.core.jit import ENGINES, Engine
from service.errors import ConfigurationError
from service.forest.hypergraph import FloatArray
from service.index.inverted import Int32Array, InvertedIndex
from service.mt.bundle import ModelBundle
from service.retrieval.base import (
    DecodedQuery,
    Hit,
    Ranking,
    Relation,
    Scorer,
    get_scorer,
    register,
)
from service.retrieval.bowfd.boards import (
    new_board_name,
    open_board,
    private_board,
    release_board,
)
from service.retrieval.bowfd.combine import combine_sentences
from service.retrieval.bowfd.derivation import best_derivation
from service.retrieval.bowfd.features import (
    IR_FEATURE,
    ir_term_feature,
    is_ir_term_feature,
)
from service.retrieval.bowfd.kernels import Board, board_ranks
from service.retrieval.bowfd.prepare import (
    PreparedForest,
    PreparedSentence,
    TermWeighting,
    join_index,
    prepare_forest,
    smt_edge_weights,
    with_term_weights,
)
from service.retrieval.bowfd.ranking import SentenceRanking, rank_sentence, top_k_order
from service.retrieval.explain import BowFdExplanation, Explanation
from service.retrieval.lex import LexFeatures, is_lex_feature
from service.retrieval.partials import (
    Int64Array,
    Method,
    Partial,
    SegmentPart,
    SegmentTask,
    top_order,
)

if TYPE_CHECKING:
    from service.retrieval.feedback import Expansion, FeedbackParams

DEFAULT_PER_SENTENCE_K = 1000


class SegmentsWeighting:
    """Which words are weighted index terms of a collection's segments (see
    :class:`~service.retrieval.bowfd.prepare.TermWeighting`): every segment scores with the
    collection's statistics, so a term's rsj is the same in each segment holding it."""

    def __init__(self, views: Sequence[SegmentPart]) -> None:
        self.views = views
        self._known: dict[str, str | None] = {}

    def weighted_term(self, token: str) -> str | None:
        """The weighted term of ``token`` in any segment holding it (a segment without the
        term says None, and the others agree on its rsj): each token looked up once."""
        if token not in self._known:
            found = (v.index.weighted_term(token) for v in self.views)
            self._known[token] = next((t for t in found if t is not None), None)
        return self._known[token]


@dataclass(frozen=True)
class BowFdPlan:
    """What the segments of a BOW-FD search share: a cascade's first-stage documents (by
    sequence number; None: every candidate), each sentence's prepared forest, prepared
    once for all the segments a process searches rather than once per segment, and each
    sentence's board: a score ``K'`` documents of the segments searched so far reach, which
    segments searched at the same time (shards in threads) raise and prune by."""

    docs: Int64Array | None
    forests: tuple[PreparedForest, ...]
    boards: npt.NDArray[np.float64]  # sentences × slots (shards) × ranks
    board_file: Path | None = None  # boards shared with other processes (see boards.py)

    def board(self, sentence: int, shard: int) -> Board | None:
        return Board(self.boards[sentence], shard) if shard < self.boards.shape[1] else None


@dataclass(frozen=True)
class BowFdReuse:
    """The plan of a rerank (:meth:`BowFdMethod.restricted`): the documents to rank again
    and the forests the first ranking of the query prepared over the same commit, which the
    rerank takes with its own term weights instead of preparing them again."""

    docs: Int64Array
    forests: tuple[PreparedForest, ...]


@dataclass(frozen=True)
class BowFdRemote:
    """BOW-FD's plan as sent to shard workers in other processes: a cascade's first-stage
    documents and the name of the boards the workers on one machine share
    (:mod:`service.retrieval.bowfd.boards`)."""

    docs: Int64Array | None
    board: str
    slots: int


class BowFdMethod(Method["BowFdScorer"]):
    """BOW-FD: each sentence's list merged, combined at the end."""

    def segments_plan(
        self,
        scorer: BowFdScorer,
        views: Sequence[SegmentPart],
        query: DecodedQuery,
        plan: Any,
        depth: int,
        slots: int,
    ) -> Any:
        if isinstance(plan, BowFdPlan):
            return plan
        if isinstance(plan, BowFdReuse):
            docs: Int64Array | None = plan.docs
            forests = scorer.reweighted(plan.forests, query)
        else:
            docs = plan.docs if isinstance(plan, BowFdRemote) else plan
            forests = scorer.prepare_forests(query, SegmentsWeighting(views))
        cols = len(board_ranks(scorer.sentence_depth(len(forests), depth))[0])
        if isinstance(plan, BowFdRemote):
            shape = (len(forests), plan.slots, cols)
            cells, board_file = open_board(plan.board, int(np.prod(shape)))
            return BowFdPlan(docs, tuple(forests), cells.reshape(shape), board_file)
        shape = (len(forests), slots, cols)
        return BowFdPlan(docs, tuple(forests), private_board(int(np.prod(shape))).reshape(shape))

    def remote_plan(self, plan: Any, slots: int) -> Any:
        return BowFdRemote(plan, new_board_name(), slots)

    def release(self, plan: Any) -> None:
        if isinstance(plan, BowFdPlan):
            release_board(plan.board_file)

    def partial(self, scorer: BowFdScorer, task: SegmentTask) -> tuple[Partial, Any]:
        view, query, depth, bound, own = task.view, task.query, task.depth, task.bound, task.own
        plan = self.segments_plan(scorer, [view], query, task.plan, depth, view.segment.shard + 1)
        v = scorer.v_for(query.weights)
        # a cascade: the collection's first-stage documents held here
        restrict = None if plan.docs is None else np.zeros(0, dtype=np.int32)
        if plan.docs is not None and len(view.seq):  # both ascending
            pos = np.minimum(np.searchsorted(view.seq, plan.docs), len(view.seq) - 1)
            restrict = pos[view.seq[pos] == plan.docs].astype(np.int32)
        preps = scorer.prepare(query, restrict, plan.forests)
        sdepth = scorer.sentence_depth(len(preps), depth)
        floors = None
        if bound is not None and bound.sentences:  # the K'-th best so far, per sentence
            floors = [float(r.scores[sdepth - 1]) if len(r.scores) >= sdepth else -np.inf
                      for r in bound.sentences]  # fmt: skip
        boards = [plan.board(i, view.segment.shard) for i in range(len(preps))]
        seeds = None if own is None or not own.sentences else [r.scores for r in own.sentences]
        lists = scorer.rank_sentences(preps, sdepth, v, floors, boards, seeds)
        by_seq = tuple(
            SentenceRanking(
                view.seq[r.docs], r.scores, r.viterbi, r.complete, {"candidates": int(p.docs.size)}
            )
            for r, p in zip(lists, preps, strict=True)
        )  # fmt: skip
        info = {
            "sentences": len(preps),
            "sentence_depth": sdepth,
            "v": v,
            "candidates": [int(p.docs.size) for p in preps],
            "viterbi": [p.viterbi for p in preps],
            "edges": [p.hypergraph.num_edges for p in preps],
        }
        part = Partial(np.zeros(0, np.int64), np.zeros(0), (), 0, "eq", info, by_seq, depth=depth)
        return part, (preps, v)

    def merge(self, parts: Sequence[Partial]) -> Partial:
        depth = max(p.depth for p in parts)
        n_sent = len(parts[0].sentences)
        sentences = []
        cands = [sum(p.info["candidates"][i] for p in parts) for i in range(n_sent)]
        cut = int(parts[0].info["sentence_depth"])  # K' (k for one sentence)
        for i in range(n_sent):
            lists = [p.sentences[i] for p in parts]
            seqs = np.concatenate([r.docs for r in lists]).astype(np.int64)
            scores = np.concatenate([r.scores for r in lists])
            pos = top_order(seqs, scores, cut)
            complete = cands[i] <= cut
            ranking = SentenceRanking(
                seqs[pos], scores[pos], lists[0].viterbi, complete, {"candidates": cands[i]}
            )
            sentences.append(ranking)
        info = dict(parts[0].info)
        info["candidates"] = cands
        return Partial(
            np.zeros(0, np.int64), np.zeros(0), (), 0, "eq", info, tuple(sentences), depth=depth
        )

    def finish(self, part: Partial, k: int) -> Partial:
        seqs, scores = BowFdScorer.combine(part.sentences, k)
        n = len(seqs)
        cands = part.info["candidates"]
        relation: Relation = "eq" if n < k or sum(cands) <= n else "gte"
        return replace(
            part, seqs=np.asarray(seqs, dtype=np.int64), scores=np.asarray(scores),
            retrieved=n, relation=relation,
        )  # fmt: skip

    def search_plan(
        self, scorer: BowFdScorer, query: DecodedQuery, first_stage: Callable[[str, int], Ranking]
    ) -> Any:
        """A cascade's plan: the sequence numbers of the collection's first-stage top
        documents (ascending), which every segment then searches alone."""
        if scorer.cascade is None:
            return self.plan(scorer, query)
        ranking = first_stage(scorer.first_stage, scorer.cascade)
        return np.sort(np.asarray([h.docno for h in ranking.hits], dtype=np.int64))

    def restricted(self, seqs: Int64Array, prepared: Any = None) -> Any:
        if prepared is None:
            return seqs  # as a cascade's first-stage documents (search_plan)
        return BowFdReuse(seqs, tuple(prepared))

    def reusable(self, plan: Any) -> Any:
        return plan.forests if isinstance(plan, BowFdPlan) else None

    def explain(
        self, scorer: BowFdScorer, kept: Any, docno: int, final: Partial, view: SegmentPart
    ) -> Explanation | None:
        preps, v = kept
        local = [
            replace(r, docs=np.flatnonzero(np.isin(view.seq, r.docs)).astype(np.int32))
            for r in final.sentences
        ]
        return scorer.explain(preps, docno, local, v)


@register("bowfd")
class BowFdScorer(Scorer):
    """Bag-of-words forced decoding (Hieber & Riezler 2015, §3) over one index.

    Parameters: ``v`` the default IR weight (≥ 0 lets the search prune with bounds),
    ``beam`` incoming edges kept per node (None: exact), ``per_sentence_k`` the depth ``K'`` of
    each sentence's list in multi-sentence queries (None: ``max(k, 1000)``), ``lex_weights``
    weights of LEX features (merged over any in the query's weight vector; they need the
    ``bundle``, whose grammar holds the rules' word alignments), ``engine`` ``"compiled"`` or
    ``"reference"`` (same numbers).
    """

    segments = BowFdMethod()  # how it runs over a collection's segments

    configured: ClassVar[Mapping[str, str]] = {"cascade": "bowfd_cascade"}

    def __init__(
        self,
        index: InvertedIndex,
        *,
        v: float = 1.0,
        beam: int | None = None,
        per_sentence_k: int | None = None,
        lex_weights: Mapping[str, float] | None = None,
        engine: Engine = "compiled",
        cascade: int | None = None,
        first_stage: str = "dt",
        bundle: ModelBundle | None = None,
    ) -> None:
        if not math.isfinite(v):
            raise ConfigurationError(f"BOW-FD weight v must be a finite number, got {v!r}")
        if beam is not None and beam < 1:
            raise ConfigurationError(f"BOW-FD beam must be at least 1 (or None), got {beam}")
        if per_sentence_k is not None and per_sentence_k < 1:
            raise ConfigurationError(f"per_sentence_k must be at least 1, got {per_sentence_k}")
        if engine not in ENGINES:
            raise ConfigurationError(
                f"BOW-FD engine must be one of {', '.join(ENGINES)}, not {engine!r}"
            )
        if cascade is not None and cascade < 1:
            raise ConfigurationError(f"the cascade depth must be at least 1, got {cascade}")
        if first_stage not in ("dt", "psq"):
            raise ConfigurationError(f"the first stage must be dt or psq, not {first_stage!r}")
        lex_w = dict(lex_weights or {})
        bad = [n for n in lex_w if not is_lex_feature(n)]
        if bad:
            raise ConfigurationError(
                f"lex_weights must name LEX features (lex:/ins:/del:); got {bad[:5]}"
            )
        super().__init__(index, bundle=bundle, v=float(v), beam=beam, per_sentence_k=per_sentence_k)
        self.v = float(v)
        self.beam = beam
        self.per_sentence_k = per_sentence_k
        self.lex_weights = lex_w
        self.lex = LexFeatures(bundle.grammar) if bundle is not None else None
        self.engine = engine
        self.cascade = cascade
        self.first_stage = first_stage
        self._first: Scorer | None = None

    def signature_parts(self) -> dict[str, Any]:
        parts: dict[str, Any] = {
            "v": self.v,
            "beam": self.beam if self.beam is not None else "exact",
            "sentence_k": self.per_sentence_k if self.per_sentence_k is not None else "auto",
        }
        if self.lex_weights:
            blob = repr(sorted(self.lex_weights.items())).encode()
            parts["lex"] = hashlib.sha256(blob).hexdigest()[:10]
        if self.cascade is not None:
            parts["cascade"] = f"{self.first_stage}@{self.cascade}"
        return parts

    def first_stage_docs(self, query: DecodedQuery) -> Int32Array:
        """The cascade's candidates: the first stage's top ``cascade`` documents (sorted)."""
        assert self.cascade is not None
        if self._first is None:
            self._first = get_scorer(self.first_stage, self.index, bundle=self.bundle)
        ranking = self._first.rank(query, self.cascade)
        return np.sort(np.asarray([h.docno for h in ranking.hits], dtype=np.int32))

    def v_for(self, weights: Mapping[str, float]) -> float:
        """The IR weight for a weight vector: its ``IR_BM25`` entry (learning to rank writes
        one), else the scorer's default ``v``."""
        v = float(weights.get(IR_FEATURE, self.v))
        if not math.isfinite(v):
            raise ConfigurationError(f"the weight of {IR_FEATURE} must be finite, got {v!r}")
        return v

    @staticmethod
    def _term_weights(query: DecodedQuery) -> dict[str, float]:
        return {n: float(w) for n, w in query.weights.items() if is_ir_term_feature(n)}

    def _lex_weights(self, query: DecodedQuery) -> dict[str, float]:
        out = {n: float(w) for n, w in query.weights.items() if is_lex_feature(n)}
        out.update(self.lex_weights)
        return out

    def prepare_forests(
        self, query: DecodedQuery, weighting: TermWeighting | None = None
    ) -> list[PreparedForest]:
        """Every sentence's forest with its local terms (the words ``weighting`` says are
        weighted terms: by default this scorer's index), before any document is read: a
        collection prepares them once per query for all its segments."""
        lex_w = self._lex_weights(query)
        out = []
        for forest in query.forests:
            hg = forest.hypergraph
            smt = smt_edge_weights(hg, query.weights, self.lex, lex_w)
            out.append(prepare_forest(hg, smt, weighting or self.index, self.beam))
        return self.reweighted(out, query)

    def reweighted(
        self, forests: Sequence[PreparedForest], query: DecodedQuery
    ) -> list[PreparedForest]:
        """Prepared ``forests`` with the per-term IR weights of ``query`` (whose weights
        carry a relevance model's in the rerank feedback forms): the rest of a prepared
        forest does not read them, so a rerank takes the first ranking's."""
        term_w = self._term_weights(query)
        return [with_term_weights(f, term_w) for f in forests]

    def prepare(
        self,
        query: DecodedQuery,
        restrict: Int32Array | None = None,
        forests: Sequence[PreparedForest] | None = None,
    ) -> list[PreparedSentence]:
        """Every sentence's forest joined with the index (reusable across ``v`` and ``k``);
        the candidates are the documents of ``restrict`` when given, else with a cascade the
        first stage's top documents, else every document sharing a weighted term.
        ``forests``: the sentences' prepared forests (:meth:`prepare_forests`) when at hand."""
        if restrict is None and self.cascade is not None:
            restrict = self.first_stage_docs(query)
        if forests is None:
            forests = self.prepare_forests(query)
        return [join_index(f, self.index, restrict) for f in forests]

    def rank_prepared(
        self, preps: Sequence[PreparedSentence], k: int, v: float | None = None
    ) -> tuple[Int32Array, FloatArray, list[SentenceRanking]]:
        """Top ``k`` (documents, scores) of prepared sentences, and each sentence's list
        (``v``: the IR weight, default the scorer's).

        A document whose score is no better than the sum of the sentences' SMT Viterbi scores
        earned no BM25 weight (a forest word made it a candidate, but its best derivation does
        not use it): like DT for a document without a query term, it is not retrieved, so a
        query of only "???" retrieves nothing rather than ties ranked by document number. Every
        caller (search, evaluation, learning to rank) gets the same ranking from here."""
        v = self.v if v is None else v
        depth = self.sentence_depth(len(preps), k)
        lists = [self._rank_one(p, depth, v) for p in preps]
        docs, scores = self.combine(lists, k)
        return docs, scores, lists

    def sentence_depth(self, n_sentences: int, k: int) -> int:
        """How deep each sentence's list goes for a top ``k``: ``k`` for one sentence, else
        ``K'`` (at least ``k``: a smaller per_sentence_k is raised to k)."""
        if n_sentences == 1:
            return k
        return max(k, self.per_sentence_k or DEFAULT_PER_SENTENCE_K)

    def rank_sentences(
        self,
        preps: Sequence[PreparedSentence],
        depth: int,
        v: float,
        floors: Sequence[float] | None = None,
        boards: Sequence[Board | None] | None = None,
        seeds: Sequence[FloatArray] | None = None,
    ) -> list[SentenceRanking]:
        """Each prepared sentence's top ``depth`` list (:meth:`sentence_depth`); ``floors``:
        per sentence, a score ``depth`` documents elsewhere already reach (documents below it
        are left out: see :func:`rank_sentence`); ``boards``: per sentence, a cell such scores
        are shared through with searches running at the same time; ``seeds``: per sentence,
        the scores of the documents of the same board slot found before."""
        if (floors is None and boards is None and seeds is None) or self.engine != "compiled":
            return [self._rank_one(p, depth, v) for p in preps]
        return [
            rank_sentence(
                p, v, depth,
                floor=-np.inf if floors is None else floors[i],
                board=None if boards is None else boards[i],
                seed=None if seeds is None else seeds[i],
            )
            for i, p in enumerate(preps)
        ]  # fmt: skip

    @staticmethod
    def combine(lists: Sequence[SentenceRanking], k: int) -> tuple[Any, FloatArray]:
        """The top ``k`` of the sentences' lists (product of experts for several), without
        the documents that earned no BM25 weight (see :meth:`rank_prepared`)."""
        if len(lists) == 1:
            docs, scores = lists[0].docs[:k], lists[0].scores[:k]
        else:
            docs, scores = combine_sentences(lists)
            docs, scores = docs[:k], scores[:k]
        floor = float(sum(r.viterbi for r in lists))
        keep = scores > floor + 1e-9 * max(1.0, abs(floor))
        return docs[keep], scores[keep]

    def _rank_one(self, prep: PreparedSentence, depth: int, v: float) -> SentenceRanking:
        if self.engine == "compiled":
            return rank_sentence(prep, v, depth)
        t0 = time.perf_counter()
        deltas = (
            {}
            if prep.term_delta is None
            else {
                ir_term_feature(t): float(x)
                for t, x in zip(prep.term_names, prep.term_delta.tolist(), strict=True)
            }
        )
        from service.retrieval.bowfd.reference import reference_scores  # the reference engine

        docs, scores = reference_scores(prep.hypergraph, prep.smt, self.index, v, deltas)
        pos = top_k_order(docs, scores, depth)
        info = {"candidates": len(docs), "scored": len(docs),
                "seconds": time.perf_counter() - t0}  # fmt: skip
        return SentenceRanking(docs[pos], scores[pos], prep.viterbi, len(docs) <= depth, info)

    def _rank(self, query: DecodedQuery, k: int, explain: bool) -> tuple[list[Hit], dict[str, Any]]:
        hits, info, explainer = self._rank_explainable(query, k)
        if explain:
            hits = [replace(h, explanation=explainer(h.docno)) for h in hits]
        return hits, info

    def _rank_explainable(
        self, query: DecodedQuery, k: int
    ) -> tuple[list[Hit], dict[str, Any], Callable[[int], Explanation | None]]:
        """The ranking, and each hit's best derivation found only when asked for."""
        v = self.v_for(query.weights)  # checked before the forests are prepared
        t0 = time.perf_counter()
        preps = self.prepare(query)
        return self._ranked(preps, k, v, time.perf_counter() - t0)

    def _first_ranking(
        self, query: DecodedQuery, k: int, explain: bool
    ) -> tuple[list[Hit], dict[str, Any], Callable[[int], Explanation | None] | None, Any]:
        """Feedback's first ranking, keeping its prepared sentences for :meth:`_rerank`."""
        v = self.v_for(query.weights)
        t0 = time.perf_counter()
        preps = self.prepare(query)
        hits, info, explainer = self._ranked(preps, k, v, time.perf_counter() - t0)
        return hits, info, explainer if explain else None, preps

    def _ranked(
        self, preps: Sequence[PreparedSentence], k: int, v: float, prepared: float
    ) -> tuple[list[Hit], dict[str, Any], Callable[[int], Explanation | None]]:
        """The top ``k`` of prepared sentences as hits, the diagnostics (``prepared``: the
        seconds preparing took) and the explainer of any hit."""
        t1 = time.perf_counter()
        docs, scores, lists = self.rank_prepared(preps, k, v)
        t2 = time.perf_counter()
        hits = [
            Hit(d, self.index.doc_id(d), s, None)
            for d, s in zip(docs.tolist(), scores.tolist(), strict=True)
        ]
        info: dict[str, Any] = {
            "sentences": len(preps),
            "v": v,
            "candidates": [p.docs.size for p in preps],
            "viterbi": [p.viterbi for p in preps],
            "edges": [p.hypergraph.num_edges for p in preps],
            "seconds": {"prepare": prepared, "score": t2 - t1},
            "per_sentence": [r.info for r in lists],
        }
        return hits, info, lambda d: self.explain(preps, d, lists, v)

    reranks: ClassVar[bool] = True

    def _rerank(
        self,
        query: DecodedQuery,
        kept: Any,
        expansion: Expansion,
        params: FeedbackParams,
        restrict: Int32Array,
        k: int,
        explain: bool,
    ) -> tuple[list[Hit], Callable[[int], Explanation | None] | None]:
        """The rerank feedback forms: the documents ``restrict`` ranked again over the first
        ranking's prepared forests (``kept``), every forest word the relevance model holds
        earning its extra IR weight δ_t (the per-term weights of §3,
        :func:`service.retrieval.feedback.rerank_weights`): only the term weights change, and
        the candidates are joined again."""
        from service.retrieval.feedback import rerank_weights  # feedback imports this package

        v = self.v_for(query.weights)
        weighted = replace(query, weights=rerank_weights(expansion, params, v, query.weights))
        term_w = self._term_weights(weighted)
        preps = [join_index(with_term_weights(p, term_w), self.index, restrict) for p in kept]
        hits, _, explainer = self._ranked(preps, k, v, 0.0)
        return hits, explainer if explain else None

    def explain(
        self,
        preps: Sequence[PreparedSentence],
        docno: int,
        lists: Sequence[SentenceRanking] | None = None,
        v: float | None = None,
    ) -> BowFdExplanation:
        """Per sentence, the document's best derivation with the words that matched it."""
        v = self.v if v is None else v
        parts = []
        for i, prep in enumerate(preps):
            in_list = None
            if lists is not None and len(preps) > 1:
                in_list = bool(np.isin(docno, lists[i].docs))
            parts.append(
                best_derivation(prep, docno, v, self.index, self.lex).explained(i, in_list)
            )
        return BowFdExplanation(tuple(parts))

    def _retrieved(self, ranking: Ranking, depth: int, query: DecodedQuery) -> tuple[int, Relation]:
        """Every retrieved document is a candidate of some sentence; the scorer stops once no
        other candidate can enter the top ``depth`` (bounds), so beyond that the count is a
        lower bound unless the candidates are no more than the ranking holds."""
        n = len(ranking.hits)
        candidates = ranking.info.get("candidates")
        if n < depth or (isinstance(candidates, list) and sum(candidates) <= n):
            return n, "eq"
        return n, "gte"

    def feature_vector(
        self,
        query: DecodedQuery | Sequence[PreparedSentence],
        docno: int,
        v: float | None = None,
    ) -> dict[str, float]:
        """Features of ``docno``'s best derivations, summed over the sentences.

        SMT features summed over the derivation edges, ``IR_BM25`` = Σ_{t ∈ h} bm25(t, d)
        (weight ``v``) and the LEX feature counts (when the scorer has a grammar). For a
        single sentence, ``w · Φ`` is the document's score; the hinge-loss subgradient of
        learning to rank is the difference of two such vectors.
        """
        if v is None:
            v = self.v_for(query.weights) if isinstance(query, DecodedQuery) else self.v
        preps = self.prepare(query) if isinstance(query, DecodedQuery) else query
        total: dict[str, float] = {}
        for prep in preps:
            deriv = best_derivation(prep, docno, v, self.index, self.lex)
            for n, x in deriv.features.items():
                total[n] = total.get(n, 0.0) + x
        return total
