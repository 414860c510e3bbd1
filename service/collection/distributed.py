"""Search fanned out over shard workers on Ray (one actor per shard), merged exactly.

The query is decoded once, by the caller; what does not depend on the documents (PSQ's
structured query) is planned once; the decoded query (its forests as arrays) goes to every
shard worker, which runs the method over its own segments — BOW-FD's candidates, bounds and
Viterbi passes stay next to the data — and returns its :class:`~service.collection.search.Partial`
(a top list, or BOW-FD's per-sentence lists), merged here exactly as the in-process search
merges them (:class:`~service.collection.search.SnapshotSearcher`).

Each worker memory-maps its shard's segments from the collection directory (a volume every
node mounts): processes on one node share those pages through the OS page cache, as they
would share arrays put in Ray's object store, without a copy into the store and without
reloading after a restart beyond the maps. Workers are restarted by Ray when they die
(``max_restarts=-1``); a shard that fails or does not answer within the timeout leaves the
answer ``degraded`` with the shard named, never an error.

Workers on one machine share BOW-FD's boards through shared memory (named per query: the
best scores found so far, :mod:`service.collection.boards`), so a shard prunes by what the
others have found, as shards searched in threads of one process do.

A worker refreshes its snapshot to the collection's current commit before each query and says
which generation it searched; if two shards disagree (a commit landed between them) the query
is asked again once, so every shard of an answer scores with the same statistics.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from service.collection.boards import sweep_boards
from service.collection.reader import Collection, Snapshot
from service.collection.search import (
    Partial,
    SnapshotSearcher,
    final_ranking,
    get_method,
    search_plan,
)
from service.extras import import_extra
from service.mt.bundle import ModelBundle, load_bundle
from service.retrieval.base import DecodedQuery, Ranking, Relation
from service.retrieval.explain import Explanation

log = logging.getLogger(__name__)


class ShardWorker:
    """One shard of a collection, searched in its own process (the Ray actor's class)."""

    def __init__(
        self, path: str, shard: int, bundle_path: str | None, state_root: str | None
    ) -> None:
        self.shard = shard
        sweep_boards()  # what workers killed mid-query left in shared memory
        self.collection = Collection(path, shards=[shard])
        bundle = None
        if bundle_path is not None:
            bundle = load_bundle(bundle_path, state_root=state_root)
        self.searcher = SnapshotSearcher(bundle)

    def status(self) -> dict[str, Any]:
        self.collection.refresh()
        snap = self.collection.snapshot
        views = snap.shards[self.shard]
        import ray  # a shard worker runs inside Ray

        return {
            "shard": self.shard,
            "node": ray.get_runtime_context().get_node_id(),
            "generation": snap.generation,
            "segments": len(views),
            "n_docs": sum(v.n_live for v in views),
        }

    def partial(
        self,
        method: str,
        query: DecodedQuery,
        depth: int,
        params: Mapping[str, Any],
        plan: Any,
        explain_final: Partial | None = None,
        count: bool = True,
    ) -> tuple[int, Partial | None, dict[int, Explanation | None]]:
        """(generation searched, this shard's partial, explanations of the documents of
        ``explain_final`` this shard holds); ``count``: see
        :meth:`~service.collection.search.Method.partial`."""
        t0 = time.perf_counter()
        self.collection.refresh()
        snap = self.collection.snapshot
        kept: dict[str, Any] = {}
        views = snap.shards[self.shard]
        part = self.searcher.shard_partial(
            method, views, query, depth, params, plan, kept, count=count
        )
        if part is not None:
            part = replace(part, info={**part.info, "seconds": time.perf_counter() - t0})
        explained: dict[int, Explanation | None] = {}
        if explain_final is not None:
            m = get_method(method)
            for view in views:
                for seq in explain_final.seqs.tolist():
                    pos = int(view.seq.searchsorted(seq))
                    if pos < len(view.seq) and int(view.seq[pos]) == seq:
                        scorer = self.searcher.scorer(method, view, params)
                        keep = kept[view.segment.name]
                        explained[seq] = m.explain(scorer, keep, pos, explain_final, view)
        return snap.generation, part, explained


@dataclass(frozen=True)
class ShardAnswer:
    shard: int
    generation: int
    partial: Partial | None
    explained: dict[int, Explanation | None]


class RaySearcher:
    """Fans a search out to one Ray actor per shard of a collection."""

    def __init__(
        self,
        collection: Collection,
        bundle: ModelBundle | None,
        *,
        address: str | None = None,
        timeout_s: float = 10.0,
        state_root: str | Path | None = None,
        concurrency: int = 8,
    ) -> None:
        """``concurrency``: searches a shard worker runs at once, in its threads (one at a
        time would queue a cheap DT search behind a paragraph's BOW-FD, past the timeout)."""
        self.ray = import_extra("ray", "ray", "searching a collection on Ray")
        self.collection = collection
        self.bundle = bundle
        self.timeout_s = timeout_s
        self.local = SnapshotSearcher(bundle)  # plans and signatures, in this process
        if not self.ray.is_initialized():
            if address:
                self.ray.init(address=address, log_to_driver=False)
            else:
                self.ray.init(include_dashboard=False, log_to_driver=False)
        self._remote = self.ray.remote(
            num_cpus=0, max_restarts=-1, max_task_retries=0, max_concurrency=concurrency
        )(ShardWorker)
        self._args = (
            str(collection.path),
            str(bundle.path) if bundle is not None else None,
            None if state_root is None else str(state_root),
        )
        self.actors = [self._spawn(s) for s in range(collection.snapshot.commit.shards)]

    def _spawn(self, shard: int) -> Any:
        """Shard ``shard``'s worker, pinned to node ``shard mod nodes`` of the nodes alive now
        (each node mounts the collection). Pinned, not preferred: a preference is dropped
        whenever the scheduler has not yet heard of a node's resources, and every shard then
        lands on the head. Ray restarts a worker that dies on its node; one whose node is gone
        is spawned again on the nodes alive then (:meth:`_gather`)."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        nodes = sorted(x["NodeID"] for x in self.ray.nodes() if x.get("Alive"))
        where = NodeAffinitySchedulingStrategy(nodes[shard % len(nodes)], soft=False)
        path, bundle_path, state = self._args
        return self._remote.options(scheduling_strategy=where).remote(
            path, shard, bundle_path, state
        )

    def status(self, timeout_s: float | None = None) -> list[dict[str, Any]]:
        """Each shard's generation, segments and documents, or why it did not answer within
        ``timeout_s`` (default: the search timeout)."""
        out: list[dict[str, Any]] = []
        refs = [a.status.remote() for a in self.actors]
        for shard, value, error in self._gather(refs, timeout_s):
            out.append({"shard": shard, "up": False, "error": error} if error else
                       {"up": True, **value})  # fmt: skip
        return out

    def _gather(
        self, refs: list[Any], timeout_s: float | None = None
    ) -> list[tuple[int, Any, str | None]]:
        """Each shard's answer, or why there is none (timed out: cancelled; failed: the
        error's type), within the timeout for all."""
        timeout = self.timeout_s if timeout_s is None else timeout_s
        ready, _ = self.ray.wait(refs, num_returns=len(refs), timeout=timeout)
        out: list[tuple[int, Any, str | None]] = []
        for shard, ref in enumerate(refs):
            if ref not in ready:
                self.ray.cancel(ref, force=False)
                out.append((shard, None, f"timed out after {timeout:g} s"))
                continue
            try:
                out.append((shard, self.ray.get(ref), None))
            except self.ray.exceptions.RayError as exc:
                out.append((shard, None, f"failed ({type(exc).__name__})"))
                if isinstance(exc, self.ray.exceptions.ActorDiedError):
                    self.actors[shard] = self._spawn(shard)  # its node is gone for good
        return out

    def _ask(
        self,
        method: str,
        query: DecodedQuery,
        depth: int,
        params: Mapping[str, Any],
        plan: Any,
        final: Partial | None = None,
        count: bool = True,
    ) -> tuple[list[ShardAnswer], list[str]]:
        # put once: every shard reads the same copy (the forests' arrays, ~2 MB a paragraph)
        q, pl = self.ray.put(query), self.ray.put(plan)
        refs = [a.partial.remote(method, q, depth, params, pl, final, count) for a in self.actors]
        answers: list[ShardAnswer] = []
        failed: list[str] = []
        for shard, value, error in self._gather(refs):
            if error:
                failed.append(f"shard {shard} {error}")
            else:
                answers.append(ShardAnswer(shard, *value))
        return answers, failed

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
    ) -> tuple[Ranking, tuple[int, Relation], list[str]]:
        """The top ``k`` over every shard that answered, how many documents were retrieved
        (``count``: beyond ``k`` too), and the shards that did not answer (the answer is then
        degraded)."""
        params = dict(params or {})
        m = get_method(method)
        scorer = self.local.any_scorer(snapshot, method, params)
        first_failed: list[str] = []

        def first_stage(name: str, depth: int) -> Ranking:
            ranking, _, failed = self.rank(snapshot, name, query, depth, count=False)
            first_failed.extend(failed)
            return ranking

        plan = m.remote_plan(search_plan(method, scorer, query, first_stage), len(self.actors))
        for _attempt in range(2):
            answers, failed = self._ask(method, query, k, params, plan, count=count)
            if len({a.generation for a in answers}) <= 1:
                break
        failed = first_failed + [f for f in failed if f not in first_failed]
        parts = [a.partial for a in answers if a.partial is not None]
        signature = scorer.signature(query) if scorer is not None else f"method:{method}"
        if not parts:
            return Ranking(query.qid, [], signature, {}), (0, "eq"), failed
        final = m.finish(m.merge(parts), k)
        explained: dict[int, Explanation | None] = {}
        if explain and len(final.seqs):
            again, more = self._ask(method, query, k, params, plan, final)
            failed += [f for f in more if f not in failed]
            for a in again:
                explained.update(a.explained)
        seconds = {
            a.shard: float(a.partial.info.get("seconds", 0.0))
            for a in answers
            if a.partial is not None
        }
        info = {"shards": len(answers), "shard_seconds": seconds}
        ranking = final_ranking(snapshot, query, final, signature, info, explained)
        return ranking, (final.retrieved, final.relation), failed

    def close(self) -> None:
        for a in self.actors:
            try:
                self.ray.kill(a)
            except Exception:  # an actor already gone
                log.debug("shard worker already gone")
        self.actors = []
