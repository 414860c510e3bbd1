"""Search fanned out over shard workers on Ray (one actor per shard), merged exactly.

The query is decoded once, by the caller; what does not depend on the documents (PSQ's
structured query) is planned once; the decoded query (its forests as arrays) goes to every
shard worker, which runs the method over its own segments — BOW-FD's candidates, bounds and
Viterbi passes stay next to the data — and returns its partial
(:class:`~service.retrieval.partials.Partial`: a top list, or BOW-FD's per-sentence
lists), merged here exactly as the in-process search
merges them (:class:`~service.collection.searcher.SnapshotSearcher`).

Each worker memory-maps its shard's segments from the collection directory (a volume every
node mounts): processes on one node share those pages through the OS page cache, as they
would share arrays put in Ray's object store, without a copy into the store and without
reloading after a restart beyond the maps. Workers are restarted by Ray when they die
(``max_restarts=-1``); a shard that fails or does not answer within the timeout leaves the
answer ``degraded`` with the shard named, never an error.

Workers on one machine share BOW-FD's boards through shared memory (named per query: the
best scores found so far, :mod:`service.retrieval.bowfd.boards`), so a shard prunes by what the
others have found, as shards searched in threads of one process do.

A worker refreshes its snapshot to the collection's current commit before each query and says
which generation it searched; if two shards disagree (a commit landed between them) the query
is asked again once, so every shard of an answer scores with the same statistics.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from service.collection.ray_driver import (
    DriverConfig,
    DriverProcess,
    DriverUnavailable,
    router_calls,
)
from service.collection.reader import Collection, Snapshot, open_collection
from service.collection.replicas import NAMESPACE, OnEvent, ShardRouter
from service.collection.searcher import SnapshotSearcher
from service.core.logs import current_format
from service.core.processes import command_of, exit_with, raise_open_files_limit
from service.errors import InternalError, MissingExtraError
from service.mt.bundle import ModelBundle, load_bundle
from service.retrieval.base import DecodedQuery, Ranking, Relation
from service.retrieval.bowfd.boards import sweep_boards
from service.retrieval.explain import Explanation
from service.retrieval.partials import Partial, final_ranking, get_method

log = logging.getLogger(__name__)


ADOPT_WAIT_S = 30.0  # how long a call to a spare waits for the adoption sent before it


class ShardWorker:
    """One shard of a collection, searched in its own process (the Ray actor's class).

    Started with ``shard=None`` it is a *spare*: its bundle loaded and no shard opened, it
    waits to :meth:`adopt` one (the router keeps spares on each node, so a copy lost is
    replaced by opening a shard, not by starting a process and loading a bundle). A call that
    needs the shard waits for the adoption (sent first) for at most :data:`ADOPT_WAIT_S`.
    """

    def __init__(
        self, path: str, shard: int | None, bundle_path: str | None, state_root: str | None
    ) -> None:
        self.path = path
        self.shard = -1 if shard is None else shard
        self._adopted = threading.Event()
        self._adopt_lock = threading.Lock()
        self._collection: Collection | None = None
        raise_open_files_limit()  # the shard's segments are memory-mapped, a descriptor each
        raylet = os.getppid()
        if "raylet" in command_of(raylet):  # a Ray worker: it dies with its node's raylet
            exit_with(raylet, "raylet-watch")
        sweep_boards()  # what workers killed mid-query left in shared memory
        bundle = None
        if bundle_path is not None:
            bundle = load_bundle(bundle_path, state_root=state_root)
        self.searcher = SnapshotSearcher(bundle)
        if shard is not None:
            self.adopt(shard)

    def adopt(self, shard: int) -> bool:
        """Open ``shard`` and serve it from now on (a spare becomes a copy); refused for a
        worker that holds another shard."""
        with self._adopt_lock:
            if self._adopted.is_set():
                if shard != self.shard:
                    raise InternalError(f"this worker holds shard {self.shard}, not {shard}")
                return True
            self._collection = open_collection(self.path, shards=[shard])
            self.shard = shard
            self._adopted.set()
        return True

    @property
    def collection(self) -> Collection:
        """The shard's collection, once adopted (waits for an adoption in flight)."""
        if not self._adopted.wait(ADOPT_WAIT_S) or self._collection is None:
            raise InternalError(
                f"this worker holds no shard: a spare not adopted within {ADOPT_WAIT_S:g} s"
            )
        return self._collection

    def ping(self) -> bool:
        """Answers at once: the worker is not frozen (the router's probe of a suspect)."""
        return True

    def pid(self) -> int:
        """The worker's process id (tests freeze or kill it)."""
        return os.getpid()

    def status(self) -> dict[str, Any]:
        collection = self.collection
        collection.refresh()
        snap = collection.snapshot
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
        :class:`~service.retrieval.partials.SegmentTask`."""
        t0 = time.perf_counter()
        collection = self.collection
        collection.refresh()
        snap = collection.snapshot
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


def remote_worker(ray: Any, concurrency: int) -> Any:
    """The shard worker as a Ray actor class: restarted by Ray whenever it dies on a live
    node, running ``concurrency`` searches at once in its threads."""
    return ray.remote(num_cpus=0, max_restarts=-1, max_task_retries=0, max_concurrency=concurrency)(
        ShardWorker
    )


@dataclass(frozen=True)
class ShardAnswer:
    shard: int
    generation: int
    partial: Partial | None
    explained: dict[int, Explanation | None]


# how long a status call waits for the driver to connect (the warm-up asks at start: a
# service whose cluster is down must still open its port soon)
CONNECT_WAIT_S = 15.0
REPLY_SLACK_S = 5.0  # beyond the search budget, for the pipe and pickling


class LocalDriver:
    """The router in this process, on a Ray initialised here (a script, a test that kills
    copies): no isolation from the cluster's end, which :class:`DriverProcess` gives."""

    def __init__(self, ray: Any, config: DriverConfig, on_event: OnEvent | None) -> None:
        remote = config.worker(ray, config.concurrency)
        self.router = ShardRouter(
            ray, remote, config.args, config.shards, replicas=config.replicas,
            timeout_s=config.timeout_s, on_event=on_event, spares=config.spares,
        )  # fmt: skip
        self._calls = router_calls(ray, self.router)
        self.connected = threading.Event()
        self.connected.set()
        self.error: str | None = None
        self.where = "the Ray of this process"

    def call(self, kind: str, *args: Any, timeout: float) -> Any:
        return self._calls[kind](*args)

    def wait_connected(self, timeout: float) -> bool:
        return True

    def close(self) -> None:
        self.router.close()


class RaySearcher:
    """Fans a search out to one copy of every shard of a collection on Ray (the copies and
    their failover: :class:`~service.collection.replicas.ShardRouter`), and answers in
    process from the collection's directory when a shard has no copy that answers or the
    cluster cannot be reached (the answer then says so)."""

    def __init__(
        self,
        collection: Collection,
        bundle: ModelBundle | None,
        *,
        address: str | None = None,
        timeout_s: float = 10.0,
        state_root: str | Path | None = None,
        concurrency: int = 8,
        replicas: int | None = None,
        spares: int | None = None,
        local: SnapshotSearcher | None = None,
        isolate: bool = True,
        on_event: OnEvent | None = None,
    ) -> None:
        """``concurrency``: searches a shard worker runs at once, in its threads (one at a
        time would queue a cheap DT search behind a paragraph's BOW-FD, past the timeout).
        ``replicas``: copies of each shard (default: 2 on two or more nodes, else 1).
        ``spares``: workers with the bundle loaded kept on each node to adopt a lost copy's
        shard (default: as many as the most copies a node holds, none on a lone copy).
        ``local``: the searcher of answers in process (default: one of ``bundle``).
        ``isolate``: the Ray driver in a process of its own (:mod:`.ray_driver`), so this
        process outlives the cluster; False runs it here (Ray initialised here: tests)."""
        self.collection = collection
        self.bundle = bundle
        self.timeout_s = timeout_s
        self.on_event = on_event
        self.local = local or SnapshotSearcher(bundle)  # plans, signatures, answers here
        self.shards = collection.snapshot.commit.shards
        self.missing: str | None = None
        self.driver: DriverProcess | LocalDriver | None = None
        if not ray_installed():
            self.missing = str(MissingExtraError("searching a collection on Ray", "ray", "ray"))
            log.error("%s", self.missing)
            return
        args = (
            str(collection.path),
            str(bundle.path) if bundle is not None else None,
            None if state_root is None else str(state_root),
        )
        if isolate:
            config = DriverConfig(
                address or _running_address(), args, self.shards, replicas, timeout_s,
                concurrency, remote_worker, logging.getLogger("service").getEffectiveLevel(),
                current_format(), spares,
            )  # fmt: skip
            self.driver = DriverProcess(config, on_event)
        else:
            import ray

            if not ray.is_initialized():
                ray.init(address=address, include_dashboard=False, log_to_driver=False)
            config = DriverConfig(
                address, args, self.shards, replicas, timeout_s, concurrency, remote_worker,
                spares=spares,
            )  # fmt: skip
            self.driver = LocalDriver(ray, config, on_event)

    # --- state --------------------------------------------------------------------------------

    @property
    def unavailable(self) -> str | None:
        """Why the cluster cannot be searched now (None: it can)."""
        if self.missing is not None:
            return self.missing
        assert self.driver is not None
        if self.driver.connected.is_set():
            return None
        return f"Ray: {self.driver.error or 'not connected'}"

    def state(self) -> dict[str, Any]:
        """Whether the cluster is connected, where, and why not (without asking it)."""
        if self.driver is None:
            return {"connected": False, "address": None, "error": self.missing}
        return {
            "connected": self.driver.connected.is_set(),
            "address": self.driver.where,
            "error": self.unavailable,
        }

    def status(self, timeout_s: float | None = None) -> list[dict[str, Any]]:
        """Each shard: its copies (node, state), how many are up and, from one that
        answers within ``timeout_s`` (default: the search timeout), its generation, segments
        and documents; or why none is."""
        timeout = self.timeout_s if timeout_s is None else timeout_s
        why = self.unavailable
        if self.driver is not None and why is not None:
            self.driver.wait_connected(min(timeout, CONNECT_WAIT_S))
            why = self.unavailable
        if why is None and self.driver is not None:
            try:
                return list(self.driver.call("status", timeout, timeout=timeout + REPLY_SLACK_S))
            except DriverUnavailable as exc:
                why = f"Ray: {exc}"
        return [
            {"shard": s, "up": False, "copies_up": 0, "copies": [], "error": why}
            for s in range(self.shards)
        ]

    def copy_actors(self) -> list[list[Any]]:
        """Every copy's actor handle, by shard (Ray initialised in this process: tests)."""
        import ray

        assert self.driver is not None

        def handle(name: str) -> Any:
            try:
                return ray.get_actor(name, namespace=NAMESPACE)
            except ValueError:  # gone, and not started again yet
                return None

        names = self.driver.call("names", timeout=30.0)
        return [[h for h in map(handle, ns) if h is not None] for ns in names]

    @property
    def actors(self) -> list[Any]:
        """The first live copy of every shard that has one."""
        return [cs[0] for cs in self.copy_actors() if cs]

    # --- search -------------------------------------------------------------------------------

    def _event(self, kind: str, shard: int) -> None:
        if self.on_event is not None:
            self.on_event(kind, shard, 1)

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
        args = (method, query, depth, params, plan, final, count)
        why = self.unavailable
        if why is None and self.driver is not None:
            try:
                got = self.driver.call(
                    "ask", "partial", args, None, timeout=self.timeout_s + REPLY_SLACK_S
                )
            except DriverUnavailable as exc:
                why = f"Ray: {exc}"
        if why is not None:
            return [], [why]
        answers: list[ShardAnswer] = []
        failed: list[str] = []
        for shard, value, error in got:
            if error:
                failed.append(f"shard {shard}: {error}")
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
        """The top ``k`` over every shard, how many documents were retrieved (``count``:
        beyond ``k`` too), and why the answer is degraded: a shard no copy of which
        answered, or the cluster out of reach — the answer is then searched in this process,
        from the collection's directory, and equals the one the workers would give."""
        params = dict(params or {})
        if snapshot.commit.shards != self.shards:  # rebuilt with another shard count
            why = f"{snapshot.commit.shards} shards now, the workers serve {self.shards}"
            return self._in_process(snapshot, method, query, k, explain, params, count, [why])
        if self.unavailable is not None:
            return self._in_process(snapshot, method, query, k, explain, params, count,
                                    [self.unavailable])  # fmt: skip
        m = get_method(method)
        scorer = self.local.any_scorer(snapshot, method, params)
        first_failed: list[str] = []

        def first_stage(name: str, depth: int) -> Ranking:
            ranking, _, failed = self.rank(snapshot, name, query, depth, count=False)
            first_failed.extend(failed)
            return ranking

        plan = None if scorer is None else m.search_plan(scorer, query, first_stage)
        plan = m.remote_plan(plan, self.shards)
        for _attempt in range(2):
            answers, failed = self._ask(method, query, k, params, plan, count=count)
            if len({a.generation for a in answers}) <= 1:
                break
        if {a.generation for a in answers} - {snapshot.generation}:
            # a commit landed between the caller's snapshot and the workers' (an add, a
            # rebuild): their documents are numbered by another commit than the one this
            # answer is read from; searched here on the caller's snapshot (complete, exact)
            ranking, total = self.local.rank(
                snapshot, method, query, k, explain=explain, params=params, count=count
            )
            return ranking, total, first_failed
        parts = [a.partial for a in answers if a.partial is not None]
        signature = scorer.signature(query) if scorer is not None else f"method:{method}"
        final = m.finish(m.merge(parts), k) if parts and not failed else None
        explained: dict[int, Explanation | None] = {}
        if explain and final is not None and len(final.seqs):
            again, failed = self._ask(method, query, k, params, plan, final)
            for a in again:
                explained.update(a.explained)
        failed = first_failed + [f for f in failed if f not in first_failed]
        if failed:
            return self._in_process(snapshot, method, query, k, explain, params, count, failed)
        if final is None:
            return Ranking(query.qid, [], signature, {}), (0, "eq"), []
        seconds = {
            a.shard: float(a.partial.info.get("seconds", 0.0))
            for a in answers
            if a.partial is not None
        }
        info = {"shards": len(answers), "shard_seconds": seconds}
        ranking = final_ranking(snapshot, query, final, signature, info, explained)
        return ranking, (final.retrieved, final.relation), []

    def _in_process(
        self,
        snapshot: Snapshot,
        method: str,
        query: DecodedQuery,
        k: int,
        explain: bool,
        params: Mapping[str, Any],
        count: bool,
        why: list[str],
    ) -> tuple[Ranking, tuple[int, Relation], list[str]]:
        """The ranking searched here, and why (a shard's copies, the cluster)."""
        for reason in why:
            shard = reason.removeprefix("shard ").partition(":")[0]
            self._event("in_process", int(shard) if shard.isdigit() else -1)
        ranking, total = self.local.rank(
            snapshot, method, query, k, explain=explain, params=params, count=count
        )
        return ranking, total, [*why, "searched in the API process instead"]

    def close(self) -> None:
        if self.driver is not None:
            self.driver.close()


def ray_installed() -> bool:
    """Whether the ``ray`` extra is installed (without importing it)."""
    return importlib.util.find_spec("ray") is not None


def _running_address() -> str | None:
    """The address of a Ray this process is already connected to (a test's, a script's),
    for the driver process to join rather than start its own."""
    ray = sys.modules.get("ray")
    if ray is None or not ray.is_initialized():
        return None
    return str(ray.get_runtime_context().gcs_address)
