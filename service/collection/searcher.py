"""Searching a collection: every method run per segment and shard, merged exactly.

Each segment scores with the collection's statistics (:mod:`service.collection.segment`), so
a document's score does not depend on where it is stored; what remains is to merge top lists
so that the result is the one a single index over the same documents gives. A method's work
on a set of segments is a :class:`Partial`, partials of disjoint sets merge into a partial of
their union (so segments merge into a shard's partial, shards into the collection's), and
:meth:`Method.finish` turns the collection's partial into the ranking:

* DT and PSQ score each document independently: a partial is a top-``depth`` list, the merge
  keeps the best ``depth`` of the union (score descending, then sequence number ascending —
  the document numbers a single index gives the same documents), and the count of documents
  retrieved adds up.
* BOW-FD (Hieber & Riezler 2015, §3) ranks each sentence of a query to depth ``K'`` and
  combines the lists by a product of experts in which a document missing from a list takes
  that list's minimum: the minimum of the *collection's* list. So its partial keeps each
  sentence's list (merged to depth ``K'``) and candidate count, and only :meth:`finish`
  combines them, with the same function the scorer uses.

What does not depend on the documents is done once per query, not per segment: DT's 1-best
translation, PSQ's structured query and BOW-FD's prepared forests (the words the segments
together call weighted terms: :class:`SegmentsWeighting`), each joined with every segment's
postings. Shards in one process are searched one after another, each bounding the next, or at
once in threads (``threads``; the compiled passes release the GIL), sharing BOW-FD's boards
(:mod:`service.collection.boards`).

Results carry the document's sequence number as ``docno``
(:meth:`service.collection.reader.Collection.doc` resolves it) and the external id.
Explanations are made by the segment holding the document, after the merge (BOW-FD's need
to know whether the document made the collection's list of each sentence).
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from service.collection.boards import new_board_name, open_board, private_board, release_board
from service.collection.feedback import Rerank, feedback_ranking
from service.collection.reader import Collection, SegmentView, Snapshot
from service.errors import ConfigurationError
from service.index.inverted import InvertedIndex
from service.mt.bundle import ModelBundle
from service.retrieval.base import (
    DecodedQuery,
    Hit,
    Ranking,
    Relation,
    Scorer,
    get_scorer,
    one_best,
)
from service.retrieval.bowfd.kernels import Board, board_ranks
from service.retrieval.bowfd.prepare import PreparedForest
from service.retrieval.bowfd.ranking import SentenceRanking
from service.retrieval.bowfd.scorer import BowFdScorer
from service.retrieval.dt import DirectTranslation
from service.retrieval.explain import Explanation, TrExplanation
from service.retrieval.feedback import Expansion, FeedbackParams, rerank_weights
from service.retrieval.psq import ProbabilisticStructuredQuery
from service.retrieval.tr import Candidate, Keep, TranslationRetrieval, combine_candidates

Int64Array = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Partial:
    """A method's result over some segments (see the module docstring)."""

    seqs: Int64Array  # best first
    scores: npt.NDArray[np.float64]
    ids: tuple[str, ...]
    retrieved: int
    relation: Relation
    info: dict[str, Any] = field(default_factory=dict)
    sentences: tuple[SentenceRanking, ...] = ()  # BOW-FD: each sentence's list, by seq
    depth: int = 0
    # TR: the translations, each one's top-M candidates (by seq), the final explanations
    translations: tuple[tuple[tuple[str, ...], float], ...] = ()
    candidates: tuple[tuple[Candidate, ...], ...] = ()
    explanations: tuple[Explanation | None, ...] = ()


def _uncounted(n: int, depth: int) -> tuple[int, Relation]:
    """``n`` hits at ``depth``, not counted beyond: all of them, or a lower bound."""
    return n, "eq" if n < depth else "gte"


def _order(seqs: Int64Array, scores: npt.NDArray[np.float64], depth: int) -> Int64Array:
    return np.lexsort((seqs, -scores))[:depth].astype(np.int64)


class Method:
    """How one retrieval method runs over segments and merges (one per method name).

    :meth:`plan` does once per query what does not depend on the documents (PSQ's structured
    query from the n-best list); :meth:`partial` runs the method over one segment."""

    def plan(self, scorer: Scorer, query: DecodedQuery) -> Any:
        """What every segment's :meth:`partial` reads of the query (default: nothing)."""
        return None

    def segments_plan(
        self,
        scorer: Scorer,
        views: Sequence[SegmentView],
        query: DecodedQuery,
        plan: Any,
        depth: int,
        slots: int,
    ) -> Any:
        """``plan`` with what the segments ``views`` share beyond it, done once for them in
        the process that searches them (default: nothing more; ``slots``: the shards that may
        search at once). Given its own result, it returns it unchanged."""
        return plan

    def remote_plan(self, plan: Any, slots: int) -> Any:
        """``plan`` as sent to the ``slots`` shard workers in other processes (default:
        unchanged)."""
        return plan

    def release(self, plan: Any) -> None:
        """Free what :meth:`segments_plan` took for a search that is done (default: none)."""

    def ranking(
        self, scorer: Scorer, query: DecodedQuery, plan: Any, depth: int, explain: bool
    ) -> Ranking:
        """The segment's own ranking (default: the scorer's :meth:`~Scorer.rank`)."""
        return scorer.rank(query, depth, explain=explain)

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
        """The partial of one segment, and what :meth:`explain` needs later (kept by the
        caller, never merged). ``bound``: the merged partial of the segments ranked before
        (a method may skip what cannot enter it; BOW-FD does). ``count``: whether to count the
        documents retrieved beyond ``depth`` (a cascade's first stage does not need it).
        ``own``: the merged partial of the segments of the same shard ranked before (part of
        ``bound``; BOW-FD shares it with shards searched at the same time)."""
        ranking = self.ranking(scorer, query, plan, depth, False)
        if count:
            n, relation = scorer.retrieved(ranking, depth, query)
        else:
            n, relation = _uncounted(len(ranking.hits), depth)
        docs = np.asarray([h.docno for h in ranking.hits], dtype=np.int64)
        part = Partial(
            seqs=view.seq[docs].astype(np.int64),
            scores=np.asarray([h.score for h in ranking.hits], dtype=np.float64),
            ids=tuple(h.doc_id for h in ranking.hits),
            retrieved=n,
            relation=relation,
            info=ranking.info,
            depth=depth,
        )
        return part, (query, plan, depth)

    def merge(self, parts: Sequence[Partial]) -> Partial:
        """The partial of the union of the parts' segments."""
        depth = max(p.depth for p in parts)
        seqs = np.concatenate([p.seqs for p in parts])
        scores = np.concatenate([p.scores for p in parts])
        ids = [i for p in parts for i in p.ids]  # none if a part has none (DT's)
        pos = _order(seqs, scores, depth)
        relation: Relation = "eq" if all(p.relation == "eq" for p in parts) else "gte"
        info = dict(parts[0].info)
        cands = [p.info.get("candidates") for p in parts]
        if all(isinstance(c, int) for c in cands):
            info["candidates"] = sum(c for c in cands if isinstance(c, int))
        with_ids = all(len(p.ids) == len(p.seqs) for p in parts)
        return Partial(
            seqs[pos], scores[pos], tuple(ids[i] for i in pos.tolist()) if with_ids else (),
            sum(p.retrieved for p in parts), relation, info, depth=depth,
        )  # fmt: skip

    def finish(self, part: Partial, k: int) -> Partial:
        """The collection's top ``k`` from its merged partial."""
        n = min(k, len(part.seqs))
        return replace(part, seqs=part.seqs[:n], scores=part.scores[:n], ids=part.ids[:n])

    def restricted(self, seqs: Int64Array) -> Any:
        """The plan of a search of only the documents ``seqs`` (ascending): what the rerank
        feedback forms search (:meth:`SnapshotSearcher.reranker`)."""
        raise ConfigurationError(f"{type(self).__name__} cannot search a set of documents")

    def explain(
        self, scorer: Scorer, kept: Any, docno: int, final: Partial, view: SegmentView
    ) -> Explanation | None:
        """The explanation of the segment's document ``docno`` in the final ranking (``kept``:
        what :meth:`partial` returned for the segment): by default the segment ranks again
        with explanations (DT, PSQ: a few ms) and takes the document's."""
        query, plan, depth = kept
        for hit in self.ranking(scorer, query, plan, depth, True).hits:
            if hit.docno == docno:
                return hit.explanation
        return None


class DtMethod(Method):
    """DT: the 1-best translation found once per query; a segment's partial is its top list
    by sequence number, without ids (only the final top ``k``'s are looked up)."""

    def plan(self, scorer: Scorer, query: DecodedQuery) -> Any:
        return tuple(one_best(query))

    def ranking(
        self, scorer: Scorer, query: DecodedQuery, plan: Any, depth: int, explain: bool
    ) -> Ranking:
        assert isinstance(scorer, DirectTranslation)
        hits, info = scorer.rank_translation(plan, depth, explain)
        return Ranking(query.qid, hits, scorer.signature(query), info)

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
        assert isinstance(scorer, DirectTranslation)
        tokens = [t for sentence in plan for t in sentence]
        top, reached = scorer.index.bm25_topk_counted(tokens, depth)
        relation: Relation = "eq"  # the documents holding a weighted term, counted in one pass
        n = reached
        if not count:
            n, relation = _uncounted(len(top.docs), depth)
        info = {"translation": " ".join(" ".join(s) for s in plan), "candidates": len(top.docs)}
        part = Partial(
            view.seq[top.docs].astype(np.int64), top.scores.astype(np.float64), (), n,
            relation, info, depth=depth,
        )  # fmt: skip
        return part, (query, plan, depth)


class PsqMethod(Method):
    """PSQ: the structured query is built once, from the n-best list."""

    def plan(self, scorer: Scorer, query: DecodedQuery) -> Any:
        assert isinstance(scorer, ProbabilisticStructuredQuery)
        return scorer.structured(query)

    def ranking(
        self, scorer: Scorer, query: DecodedQuery, plan: Any, depth: int, explain: bool
    ) -> Ranking:
        assert isinstance(scorer, ProbabilisticStructuredQuery)
        hits, info = scorer.rank_structured(plan, depth, explain)
        return Ranking(query.qid, hits, scorer.signature(query), info)


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
            pos = _order(seqs, scores, cut)
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


def _tr_keep(before: Sequence[Candidate], m: int, seq: npt.NDArray[np.int64]) -> Keep | None:
    """Whether a segment's candidate (its docno, cosine) can enter the top ``m`` that
    :meth:`TrMethod.merge` keeps, given the candidates ``before`` it of the segments searched
    already: only if it sorts before their ``m``-th (cosine down, sequence number up). None
    when fewer than ``m`` came before (anything can enter)."""
    if len(before) < m:
        return None
    last = sorted(before, key=lambda c: (-c.cosine, c.docno))[m - 1]
    floor = (-last.cosine, last.docno)
    return lambda docno, cosine: (-cosine, int(seq[docno])) < floor


class TrMethod(Method):
    """Translation retrieval (TR paper, Algorithm 1): each translation's top-M candidates by
    cosine are merged to the collection's top M, then combined once."""

    def plan(self, scorer: Scorer, query: DecodedQuery) -> Any:
        assert isinstance(scorer, TranslationRetrieval)
        return tuple((tuple(t), p) for t, p in scorer.translations(query))

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
        assert isinstance(scorer, TranslationRetrieval)
        keep = None
        if bound is not None and bound.candidates:
            keep = [_tr_keep(cands, scorer.max_candidates, view.seq) for cands in bound.candidates]
        lists = scorer.candidate_lists(plan, keep)
        seq = view.seq
        by_seq = tuple(
            tuple(Candidate(int(seq[c.docno]), c.cosine, c.levenshtein, c.prob) for c in cands)
            for cands in lists
        )
        info = {"max_candidates": scorer.max_candidates}
        empty = np.zeros(0, np.int64)
        part = Partial(empty, np.zeros(0), (), 0, "eq", info, depth=depth, translations=plan,
                       candidates=by_seq)  # fmt: skip
        return part, None

    def merge(self, parts: Sequence[Partial]) -> Partial:
        m = int(parts[0].info["max_candidates"])
        lists = []
        for i in range(len(parts[0].candidates)):
            cands = sorted((c for p in parts for c in p.candidates[i]),
                           key=lambda c: (-c.cosine, c.docno))  # fmt: skip
            lists.append(tuple(cands[:m]))
        return replace(parts[0], candidates=tuple(lists), depth=max(p.depth for p in parts))

    def finish(self, part: Partial, k: int) -> Partial:
        result = combine_candidates(part.translations, part.candidates)
        ranked = sorted(result.scores.items(), key=lambda ds: (-ds[1], ds[0]))[:k]
        info = {
            "translations": [{"text": " ".join(t), "pr_t": p} for t, p in part.translations],
            "candidates": len(result.scores),
        }
        return replace(
            part,
            seqs=np.asarray([d for d, _ in ranked], dtype=np.int64),
            scores=np.asarray([s for _, s in ranked], dtype=np.float64),
            retrieved=len(ranked),
            relation="eq" if len(ranked) < k else "gte",
            info=info,
            explanations=tuple(TrExplanation(tuple(result.found_by[d])) for d, _ in ranked),
        )

    def explain(
        self, scorer: Scorer, kept: Any, docno: int, final: Partial, view: SegmentView
    ) -> Explanation | None:
        seqs: list[int] = final.seqs.tolist()
        return final.explanations[seqs.index(int(view.seq[docno]))]


def search_plan(
    method: str,
    scorer: Scorer | None,
    query: DecodedQuery,
    first_stage: Callable[[str, int], Ranking],
) -> Any:
    """What every segment reads of the query, planned once: the method's plan, or for
    BOW-FD with a cascade the sequence numbers of the collection's first-stage top documents
    (``first_stage(method, depth)`` ranks the whole collection). ``scorer``: any segment's
    scorer of the method (None: an empty collection)."""
    if isinstance(scorer, BowFdScorer) and scorer.cascade is not None:
        ranking = first_stage(scorer.first_stage, scorer.cascade)
        return np.sort(np.asarray([h.docno for h in ranking.hits], dtype=np.int64))
    return get_method(method).plan(scorer, query) if scorer is not None else None


def final_ranking(
    snapshot: Snapshot,
    query: DecodedQuery,
    final: Partial,
    signature: str,
    info: dict[str, Any],
    explained: Mapping[int, Explanation | None],
) -> Ranking:
    """The ranking of a collection's merged and finished partial (documents by sequence
    number; their ids looked up where the partial has none)."""
    seqs: list[int] = final.seqs.tolist()
    ids = final.ids or tuple(_id_of(snapshot, s) for s in seqs)
    hits = [
        Hit(seq, doc_id, float(score), explained.get(seq))
        for seq, doc_id, score in zip(seqs, ids, final.scores.tolist(), strict=True)
    ]
    return Ranking(query.qid, hits, signature, {**final.info, **info})


METHODS: dict[str, Method] = {
    "dt": DtMethod(), "psq": PsqMethod(), "bowfd": BowFdMethod(), "tr": TrMethod(),
}  # fmt: skip


def get_method(name: str) -> Method:
    method = METHODS.get(name)
    if method is None:
        valid = ", ".join(sorted(METHODS))
        raise ConfigurationError(
            f"method {name!r} does not run over a collection; choose one of: {valid}"
        )
    return method


class SnapshotSearcher:
    """Runs methods over the segments of snapshots (in this process), with one scorer per
    segment view and method parameters, kept as long as the view."""

    def __init__(self, bundle: ModelBundle | None = None, threads: int = 0) -> None:
        """``threads``: shards searched at once (0: one per CPU core; 1: in turn)."""
        if threads < 0:
            raise ConfigurationError(
                f"search threads must be 0 (one per core) or more, not {threads}"
            )
        self.bundle = bundle
        self.threads = threads or os.cpu_count() or 1
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()
        self._scorers: weakref.WeakKeyDictionary[InvertedIndex, dict[Any, Scorer]] = (
            weakref.WeakKeyDictionary()
        )

    def _thread_pool(self) -> ThreadPoolExecutor:
        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="clir-shard")
            return self._pool

    def close(self) -> None:
        """Stop the shard threads and drop the scorers (and the segments they map); a later
        search starts them again."""
        with self._pool_lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
        self._scorers.clear()

    def scorer(self, method: str, view: SegmentView, params: Mapping[str, Any]) -> Scorer:
        key = (method, tuple(sorted(params.items())))
        per_view = self._scorers.setdefault(view.index, {})
        scorer = per_view.get(key)
        if scorer is None:
            scorer = per_view[key] = get_scorer(method, view.index, bundle=self.bundle, **params)
        return scorer

    def any_scorer(
        self, snapshot: Snapshot, method: str, params: Mapping[str, Any] | None = None
    ) -> Scorer | None:
        """A scorer of ``method`` over some segment (what a method says of a query — its
        terms — does not depend on the segment), or None for an empty collection."""
        views = snapshot.views()
        return self.scorer(method, views[0], dict(params or {})) if views else None

    def shard_partial(
        self,
        method: str,
        views: Sequence[SegmentView],
        query: DecodedQuery,
        depth: int,
        params: Mapping[str, Any],
        plan: Any,
        kept: dict[str, Any] | None = None,
        bound: Partial | None = None,
        count: bool = True,
    ) -> Partial | None:
        """The partial of a shard (its segments), or None for an empty shard. ``bound``: the
        merged partial of shards searched before (BOW-FD starts from its K'-th best);
        ``count``: see :meth:`Method.partial`."""
        if not views:
            return None
        m = get_method(method)
        lead = self.scorer(method, views[0], params)
        slots = views[0].segment.shard + 1  # when planned here: this shard's own board
        shared = m.segments_plan(lead, views, query, plan, depth, slots)
        merged: Partial | None = None
        try:
            # the largest segment first: its top lists bound the others' most
            for view in sorted(views, key=lambda v: -v.index.n_docs):
                scorer = self.scorer(method, view, params)
                so_far = [p for p in (bound, merged) if p is not None]
                floor = None if not so_far else so_far[0] if len(so_far) == 1 else m.merge(so_far)
                part, keep = m.partial(scorer, view, query, shared, depth, floor, count, merged)
                merged = part if merged is None else m.merge([merged, part])  # associative
                if kept is not None:
                    kept[view.segment.name] = keep
        finally:
            if shared is not plan:  # taken here, not by the caller
                m.release(shared)
        return merged

    def rank(
        self,
        snapshot: Snapshot,
        method: str,
        query: DecodedQuery,
        k: int,
        *,
        explain: bool = False,
        params: Mapping[str, Any] | None = None,
        count: bool = True,
        restrict: Int64Array | None = None,
        explain_top: int | None = None,
    ) -> tuple[Ranking, tuple[int, Relation]]:
        """The top ``k`` of the collection, and how many documents the method retrieved
        (``count``: beyond ``k`` too; else a lower bound); ``restrict``: only these documents
        (sequence numbers, ascending; BOW-FD, as a cascade's first stage restricts it).
        ``explain``: each hit's explanation — only the first ``explain_top`` hits' when given
        (a feedback stage ranks 100 deep for a page of 10; BOW-FD's explanations cost ~2 ms
        a hit)."""
        params = dict(params or {})
        m = get_method(method)
        kept: dict[str, Any] = {}
        lead = self.any_scorer(snapshot, method, params)

        def first_stage(name: str, depth: int) -> Ranking:
            return self.rank(snapshot, name, query, depth, count=False)[0]

        if restrict is not None:
            plan = m.restricted(np.asarray(restrict, dtype=np.int64))
        else:
            plan = search_plan(method, lead, query, first_stage)
        if lead is not None:  # once for every shard of this process
            plan = m.segments_plan(lead, snapshot.views(), query, plan, k, len(snapshot.shards))
        seconds: dict[int, float] = {}

        def shard_part(i: int, bound: Partial | None) -> Partial | None:
            t0 = time.perf_counter()
            part = self.shard_partial(method, snapshot.shards[i], query, k, params, plan,
                                      kept, bound, count)  # fmt: skip
            seconds[i] = time.perf_counter() - t0
            return part

        shards = [i for i, views in enumerate(snapshot.shards) if views]
        parts: list[Partial] = []
        if self.threads > 1 and len(shards) > 1:  # at once; BOW-FD shares its boards
            pool = self._thread_pool()
            parts = [p for p in pool.map(lambda i: shard_part(i, None), shards) if p is not None]
        else:
            running: Partial | None = None  # one shard after another: each bounds the next
            for i in shards:
                part = shard_part(i, running)
                if part is not None:
                    parts.append(part)
                    running = part if running is None else m.merge([running, part])
        if not parts:
            return Ranking(query.qid, [], f"method:{method}", {}), (0, "eq")
        final = m.finish(m.merge(parts), k)
        explained: dict[int, Explanation | None] = {}
        for seq in final.seqs[:explain_top].tolist() if explain else ():
            view, docno = snapshot.locate_seq(seq)
            scorer = self.scorer(method, view, params)
            explained[seq] = m.explain(scorer, kept[view.segment.name], docno, final, view)
        assert lead is not None  # views exist: parts came from them
        ranking = final_ranking(
            snapshot, query, final, lead.signature(query), {"shard_seconds": seconds}, explained
        )
        return ranking, (final.retrieved, final.relation)

    def reranker(
        self,
        snapshot: Snapshot,
        method: str,
        query: DecodedQuery,
        params: Mapping[str, Any] | None = None,
        *,
        explain: bool = False,
        explain_top: int | None = None,
    ) -> Rerank | None:
        """How the rerank feedback forms rank the collection again (None for a method that
        cannot, :attr:`Scorer.reranks`): the method over the given documents only, the query's
        weights carrying the relevance model's (:func:`~service.retrieval.feedback
        .rerank_weights`) — as :meth:`BowFdScorer._rerank` ranks one index. ``explain_top``:
        how many of its hits are explained (:meth:`rank`; the page's)."""
        lead = self._rerank_lead(snapshot, method, params)
        if lead is None:
            return None
        v = lead.v_for(query.weights)

        def rerank(
            expansion: Expansion, fb: FeedbackParams, seqs: Int64Array, depth: int
        ) -> Ranking:
            weighted = replace(query, weights=rerank_weights(expansion, fb, v, query.weights))
            top = None if fb.mixes else explain_top  # a mix may show any of its hits
            return self.rank(
                snapshot, method, weighted, max(depth, 1), explain=explain, params=params,
                count=False, restrict=seqs, explain_top=top,
            )[0]  # fmt: skip

        return rerank

    def feedback(
        self,
        snapshot: Snapshot,
        method: str,
        query: DecodedQuery,
        first: Ranking,
        retrieved: tuple[int, Relation],
        k: int,
        feedback: FeedbackParams,
        *,
        explain: bool = False,
        params: Mapping[str, Any] | None = None,
    ) -> tuple[Ranking, tuple[int, Relation]]:
        """The feedback stage after the collection's ``first`` ranking of ``query`` (from this
        searcher or from shard workers; :func:`~service.collection.feedback.feedback_ranking`),
        the rerank forms ranking this process's segments again and explaining the top ``k``."""
        rerank = self.reranker(snapshot, method, query, params, explain=explain, explain_top=k)
        return feedback_ranking(
            snapshot, query, first, retrieved, k, feedback, explain=explain, rerank=rerank
        )

    def explains_first(
        self,
        snapshot: Snapshot,
        method: str,
        feedback: FeedbackParams | None,
        params: Mapping[str, Any] | None = None,
    ) -> bool:
        """Whether a search's first ranking needs its explanations: not when the feedback
        stage ranks the documents again (the rerank forms), whose explanations replace them."""
        if feedback is None:
            return True
        can = self._rerank_lead(snapshot, method, params) is not None
        return not feedback.for_method(can).reranks

    def _rerank_lead(
        self, snapshot: Snapshot, method: str, params: Mapping[str, Any] | None
    ) -> BowFdScorer | None:
        """A scorer of ``method`` that can rank again with a relevance model (BOW-FD), or None
        (a method that cannot: DT, PSQ; an empty collection)."""
        lead = self.any_scorer(snapshot, method, params or {})
        return lead if isinstance(lead, BowFdScorer) and lead.reranks else None


def _id_of(snapshot: Snapshot, seq: int) -> str:
    view, docno = snapshot.locate_seq(seq)
    return view.index.doc_id(docno)


class CollectionScorer(Scorer):
    """A retrieval method over a collection, shaped as a :class:`Scorer` (what evaluation,
    runs and ``clir search`` call): each ``rank`` searches the collection's current commit.
    A hit's ``docno`` is its sequence number (:meth:`Collection.doc` resolves it)."""

    def __init__(
        self,
        collection: Collection,
        method: str,
        *,
        bundle: ModelBundle | None = None,
        threads: int = 0,
        **params: Any,
    ) -> None:
        """``threads``: shards searched at once (see :class:`SnapshotSearcher`)."""
        get_method(method)  # an unknown method fails here, naming the valid ones
        self.name = method  # type: ignore[misc]  # the name of the scorer it stands for
        self.collection = collection
        self.method = method
        self.params = dict(params)
        self.bundle = bundle
        self.searcher = SnapshotSearcher(bundle, threads)

    def rank(
        self,
        query: DecodedQuery,
        k: int,
        *,
        explain: bool = False,
        feedback: FeedbackParams | None = None,
    ) -> Ranking:
        self.collection.refresh()
        snapshot = self.collection.snapshot
        depth = k if feedback is None else feedback.first_depth(k)
        first_explained = self.searcher.explains_first(snapshot, self.method, feedback, self.params)
        ranking, retrieved = self.searcher.rank(
            snapshot, self.method, query, depth, explain=explain and first_explained,
            params=self.params,
        )  # fmt: skip
        if feedback is not None:  # the feedback stage, as over one index
            ranking, retrieved = self.searcher.feedback(
                snapshot, self.method, query, ranking, retrieved, k, feedback,
                explain=explain, params=self.params,
            )  # fmt: skip
        ranking.info["retrieved"] = list(retrieved)  # what retrieved() answers
        return ranking

    def _rank(self, query: DecodedQuery, k: int, explain: bool) -> tuple[list[Hit], dict[str, Any]]:
        ranking = self.rank(query, k, explain=explain)
        return ranking.hits, ranking.info

    def _retrieved(self, ranking: Ranking, depth: int, query: DecodedQuery) -> tuple[int, Relation]:
        n, relation = ranking.info["retrieved"]
        return int(n), "eq" if relation == "eq" else "gte"

    def _query_terms(self, query: DecodedQuery, ranking: Ranking) -> set[str]:
        lead = self.searcher.any_scorer(self.collection.snapshot, self.method, self.params)
        return set() if lead is None else lead.query_terms(query, ranking)

    def signature(self, query: DecodedQuery | None = None) -> str:
        lead = self.searcher.any_scorer(self.collection.snapshot, self.method, self.params)
        return f"method:{self.method}" if lead is None else lead.signature(query)
