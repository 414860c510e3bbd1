"""BOW-FD over a collection (Hieber & Riezler 2015, §3): the forests prepared once with the
segments' weighted words, each sentence's list merged to depth K' and combined by the product
of experts only when finished; shards searched at once share their boards."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from service.collection.boards import new_board_name, open_board, private_board, release_board
from service.collection.methods.base import (
    Int64Array,
    Method,
    Partial,
    top_order,
)
from service.collection.reader import SegmentView
from service.retrieval.base import (
    DecodedQuery,
    Relation,
    Scorer,
)
from service.retrieval.bowfd.kernels import Board, board_ranks
from service.retrieval.bowfd.prepare import PreparedForest
from service.retrieval.bowfd.ranking import SentenceRanking
from service.retrieval.bowfd.scorer import BowFdScorer
from service.retrieval.explain import Explanation


class SegmentsWeighting:
    """Which words are weighted index terms of a collection's segments (see
    :class:`~service.retrieval.bowfd.prepare.TermWeighting`): every segment scores with the
    collection's statistics, so a term's rsj is the same in each segment holding it."""

    def __init__(self, views: Sequence[SegmentView]) -> None:
        self.views = views
        self._known: dict[str, str | None] = {}

    def weighted_term(self, token: str) -> str | None:
        if token in self._known:
            return self._known[token]
        out = None
        term = self.views[0].index.analyzer.term(token) if self.views else None
        if term is not None:
            for view in self.views:
                tid = view.index.vocab.id(term)
                if tid is not None:
                    out = term if view.index.rsj[tid] != 0 else None
                    break
        self._known[token] = out
        return out


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
class BowFdRemote:
    """BOW-FD's plan as sent to shard workers in other processes: a cascade's first-stage
    documents and the name of the boards the workers on one machine share
    (:mod:`service.collection.boards`)."""

    docs: Int64Array | None
    board: str
    slots: int


class BowFdMethod(Method):
    """BOW-FD: each sentence's list merged, combined at the end."""

    def segments_plan(
        self,
        scorer: Scorer,
        views: Sequence[SegmentView],
        query: DecodedQuery,
        plan: Any,
        depth: int,
        slots: int,
    ) -> Any:
        if isinstance(plan, BowFdPlan):
            return plan
        assert isinstance(scorer, BowFdScorer)
        forests = scorer.prepare_forests(query, SegmentsWeighting(views))
        cols = len(board_ranks(scorer.sentence_depth(len(forests), depth))[0])
        if isinstance(plan, BowFdRemote):
            shape = (len(forests), plan.slots, cols)
            cells, board_file = open_board(plan.board, int(np.prod(shape)))
            return BowFdPlan(plan.docs, tuple(forests), cells.reshape(shape), board_file)
        shape = (len(forests), slots, cols)
        return BowFdPlan(plan, tuple(forests), private_board(int(np.prod(shape))).reshape(shape))

    def remote_plan(self, plan: Any, slots: int) -> Any:
        return BowFdRemote(plan, new_board_name(), slots)

    def release(self, plan: Any) -> None:
        if isinstance(plan, BowFdPlan):
            release_board(plan.board_file)

    def partial(
        self,
        scorer: Scorer,
        view: SegmentView,
        query: DecodedQuery,
        plan: Any,
        depth: int,
        bound: Partial | None = None,
        count: bool = True,
        own: Partial | None = None,
    ) -> tuple[Partial, Any]:
        assert isinstance(scorer, BowFdScorer)
        plan = self.segments_plan(scorer, [view], query, plan, depth, view.segment.shard + 1)
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

    def restricted(self, seqs: Int64Array) -> Any:
        return seqs  # as a cascade's first-stage documents (search_plan)

    def explain(
        self, scorer: Scorer, kept: Any, docno: int, final: Partial, view: SegmentView
    ) -> Explanation | None:
        assert isinstance(scorer, BowFdScorer)
        preps, v = kept
        local = [
            replace(r, docs=np.flatnonzero(np.isin(view.seq, r.docs)).astype(np.int32))
            for r in final.sentences
        ]
        return scorer.explain(preps, docno, local, v)
