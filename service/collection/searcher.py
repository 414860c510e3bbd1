"""Searching a collection in this process: :class:`SnapshotSearcher` runs a method
(:mod:`service.retrieval.partials`) over the segments of a snapshot, shard by shard or shards
at once in threads, and merges them exactly; :class:`CollectionScorer` is a method over a
collection shaped as a :class:`~service.retrieval.base.Scorer`.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

import numpy as np
import numpy.typing as npt

from service.collection.feedback import Rerank, feedback_ranking
from service.collection.reader import Collection, SegmentView, Snapshot
from service.errors import ConfigurationError
from service.mt.bundle import ModelBundle
from service.retrieval.base import (
    DecodedQuery,
    Hit,
    Ranking,
    Relation,
    Scorer,
    get_scorer,
)
from service.retrieval.bowfd.scorer import BowFdScorer
from service.retrieval.explain import Explanation
from service.retrieval.feedback import Expansion, FeedbackParams, rerank_weights
from service.retrieval.partials import Partial, SegmentTask, final_ranking, get_method

Int64Array = npt.NDArray[np.int64]


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
        self._key = object()  # this searcher's scorers among a view's

    def _thread_pool(self) -> ThreadPoolExecutor:
        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="clir-shard")
            return self._pool

    def close(self) -> None:
        """Stop the shard threads; a later search starts them again. (The scorers are kept
        by the views they score, and go with their snapshot.)"""
        with self._pool_lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)

    def scorer(self, method: str, view: SegmentView, params: Mapping[str, Any]) -> Scorer:
        """This searcher's scorer of ``method`` over ``view``, made on its first use; kept by
        the view (not here: a long-lived searcher would keep every commit's segments)."""
        key = (self._key, method, tuple(sorted(params.items())))
        scorer: Scorer | None = view.scorers.get(key)
        if scorer is None:
            scorer = view.scorers[key] = get_scorer(
                method, view.index, bundle=self.bundle, **params
            )
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
        ``count``: see :class:`~service.retrieval.partials.SegmentTask`."""
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
                task = SegmentTask(view, query, shared, depth, floor, count, merged)
                part, keep = m.partial(scorer, task)
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
        prepared: dict[str, Any] | None = None,
    ) -> tuple[Ranking, tuple[int, Relation]]:
        """The top ``k`` of the collection, and how many documents the method retrieved
        (``count``: beyond ``k`` too; else a lower bound); ``restrict``: only these documents
        (sequence numbers, ascending; BOW-FD, as a cascade's first stage restricts it).
        ``explain``: each hit's explanation — only the first ``explain_top`` hits' when given
        (a feedback stage ranks 100 deep for a page of 10; BOW-FD's explanations cost ~2 ms
        a hit). ``prepared``: what searches of this query over this snapshot share (BOW-FD's
        prepared forests, :meth:`Method.reusable`), filled by the search of the whole
        collection and read by a search of ``restrict`` (the feedback stage's rerank)."""
        params = dict(params or {})
        m = get_method(method)
        kept: dict[str, Any] = {}
        lead = self.any_scorer(snapshot, method, params)

        def first_stage(name: str, depth: int) -> Ranking:
            return self.rank(snapshot, name, query, depth, count=False)[0]

        reuse = None if prepared is None else prepared.get(method)
        if restrict is not None:
            plan = m.restricted(np.asarray(restrict, dtype=np.int64), reuse)
        else:
            plan = None if lead is None else m.search_plan(lead, query, first_stage)
        if lead is not None:  # once for every shard of this process
            plan = m.segments_plan(lead, snapshot.views(), query, plan, k, len(snapshot.shards))
            if prepared is not None and restrict is None:
                prepared[method] = m.reusable(plan)
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
        prepared: dict[str, Any] | None = None,
    ) -> Rerank | None:
        """How the rerank feedback forms rank the collection again (None for a method that
        cannot, :attr:`Scorer.reranks`): the method over the given documents only, the query's
        weights carrying the relevance model's (:func:`~service.retrieval.feedback
        .rerank_weights`) — as :meth:`BowFdScorer._rerank` ranks one index. ``explain_top``:
        how many of its hits are explained (:meth:`rank`; the page's); ``prepared``: what the
        first ranking of the query over this snapshot left to reuse (:meth:`rank`)."""
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
                count=False, restrict=seqs, explain_top=top, prepared=prepared,
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
        prepared: dict[str, Any] | None = None,
    ) -> tuple[Ranking, tuple[int, Relation]]:
        """The feedback stage after the collection's ``first`` ranking of ``query`` (from this
        searcher or from shard workers; :func:`~service.collection.feedback.feedback_ranking`),
        the rerank forms ranking this process's segments again and explaining the top ``k``
        (``prepared``: what the first ranking left to reuse when it ran here, :meth:`rank`)."""
        rerank = self.reranker(
            snapshot, method, query, params, explain=explain, explain_top=k, prepared=prepared
        )
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
        prepared: dict[str, Any] = {}
        ranking, retrieved = self.searcher.rank(
            snapshot, self.method, query, depth, explain=explain and first_explained,
            params=self.params, prepared=prepared,
        )  # fmt: skip
        if feedback is not None:  # the feedback stage, as over one index
            ranking, retrieved = self.searcher.feedback(
                snapshot, self.method, query, ranking, retrieved, k, feedback,
                explain=explain, params=self.params, prepared=prepared,
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
