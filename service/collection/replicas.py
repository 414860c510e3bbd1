"""Replicas of a collection's shards on Ray, and the failover between them.

Each shard is served by R copies — Ray actors of
:class:`~service.collection.distributed.ShardWorker`, as Elasticsearch's replication group
serves a shard by a primary and its replicas — placed on different nodes where there are
enough. :class:`ShardRouter` runs in the process that holds
the Ray driver (:mod:`service.collection.ray_driver`) and does everything a copy's failure
asks for, in one place:

* **One copy per shard a query**, the least loaded of the healthy ones (requests in flight
  from here; ties in turn).
* **Failover within the request.** A copy that fails (any Ray error) is replaced in the same
  request by another copy of its shard; a copy that has not answered after the shard's hedge
  delay — three times its observed 95th percentile (of the last 200 answers, a copy's first
  call of a kind, cold, left out), at least :data:`HEDGE_FLOOR_S`, at most half the budget
  — gets a second copy asked beside it, and the first answer wins (the *hedged request* of
  Dean & Barroso 2013, "The Tail at Scale", §"Within request short-term adaptations").
  Everything stays within the request's budget; a shard is missing from the
  answer only when no copy of it answered.
* **Suspects.** A copy that timed out, or that a hedge overtook (its first, cold call of a
  kind excused), is *suspect*: no query goes to it while another copy can take it, and a
  monitor pings it until it answers again — so a frozen worker
  (``SIGSTOP``) costs one request, not every one. A copy suspect for longer than
  :data:`SUSPECT_REPLACE_S` is replaced.
* **Standbys.** A copy whose calls fail (Ray: unavailable — restarting, or its node lost
  before the cluster's health checks say so, ~15 s) gets a standby started at once on the node
  :meth:`ShardRouter._place` picks; the standby takes the copy's place as soon as it answers a
  ping, and is stopped if the copy answers first. So a lost copy costs the time a worker takes
  to start, not that plus a wait to be sure.
* **Spares.** Once a node's copies are up, the router starts spare workers there — the
  bundle loaded, no shard opened; as many as the most copies a node holds, so that a node lost
  has each of its copies adopted elsewhere (:attr:`ShardRouter.spares_per_node`) — and a copy
  to be started on that node (a replacement, a standby) is a spare adopting its shard: it opens
  it, in milliseconds, where a new worker takes a process, its imports and the bundle (10 s on
  two saturated cores in the chaos benchmark). Another spare is started behind it, and idle
  spares are pinged as suspects are, so a dead one is replaced rather than adopted. A spare is
  not restarted by Ray in place (it would come back without its shard); a copy made from one
  is re-placed as any copy that died.
* **Re-placement.** A copy whose actor died, cannot be scheduled, or whose node is gone is
  started again on a node alive now (pinned there: a preference is dropped whenever the
  scheduler has not yet heard of a node's resources, and every copy would then land on the
  head), on a node holding no other copy of its shard when there is one. Ray itself restarts
  a worker that crashes on a live node (``max_restarts=-1``).

Events (failovers, hedges, re-placements) are counted per shard and handed to a callback, so
the service's ``/metrics`` counts them.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

NAMESPACE = "clir"  # the namespace of the shard workers' actor names
HEDGE_FLOOR_S = 0.05  # never hedge sooner: a shard's round trip is a few milliseconds
HEDGE_FACTOR = 3.0  # hedge after this multiple of the shard's 95th percentile
MIN_SAMPLES = 10  # below this many answers, hedge after half the budget
MONITOR_S = 0.5  # how often the monitor looks at the nodes and probes suspects
SUSPECT_REPLACE_S = 6.0  # a copy that has not answered a ping this long is started again
FAILING_REPLACE_S = 3.0  # a copy whose calls and pings fail this long is started elsewhere
BAD_NODE_S = 60.0  # a node whose copies all failed gets no copy moved to it for this long
START_S = 300.0  # a copy still starting (loading its bundle) after this long is replaced

UP, STARTING, SUSPECT, DEAD = "up", "starting", "suspect", "dead"
# errors that say the copy's node cannot take it (a new copy there would fail the same way)
NODE_GONE = ("ActorUnschedulableError", "NodeDiedError", "its node is gone")

Event = tuple[str, int]  # (kind, shard): kind is failover, hedge or replacement
OnEvent = Callable[[str, int, int], None]  # kind, shard, count


class Copy:
    """One copy of a shard: its actor, where it runs and what the router knows of it."""

    def __init__(self, shard: int, slot: int, actor: Any, node: str, name: str) -> None:
        self.shard = shard
        self.slot = slot
        self.actor = actor
        self.node = node
        self.name = name
        self.state = STARTING
        self.since = time.monotonic()  # when the state was last changed
        self.inflight = 0
        self.probe: Any = None  # an outstanding ping
        self.error: str | None = None
        self.failing = False  # suspect because calls fail (not because they hang)
        self.standby: Copy | None = None  # started beside a failing copy, to take its place
        self.warm: set[tuple[str, Any]] = set()  # the kinds of call it has answered once

    def mark(self, state: str, error: str | None = None, failing: bool = False) -> None:
        if state != self.state:
            self.state, self.since = state, time.monotonic()
            # a ping sent before the change may have been answered before it (a copy that
            # answered while starting, then froze): only a ping sent from now on counts
            self.probe = None
        if error is not None or state == UP:
            self.error = error
        self.failing = failing and state == SUSPECT

    def public(self) -> dict[str, Any]:
        return {
            "copy": self.slot,
            "node": self.node,
            "state": self.state,
            "up": self.state == UP,
            "error": self.error,
        }


class ShardRouter:
    """Spawns R copies of every shard and routes each call to them (see the module docstring).

    ``ray``: the ``ray`` module, initialised; ``remote``: the actor class; ``args``: the
    worker's constructor arguments after the shard (collection path, bundle path, state root).
    """

    def __init__(
        self,
        ray: Any,
        remote: Any,
        args: tuple[Any, ...],
        shards: int,
        *,
        replicas: int | None = None,
        timeout_s: float = 10.0,
        on_event: OnEvent | None = None,
        monitor: bool = True,
        spares: int | None = None,
    ) -> None:
        self.ray = ray
        self._remote = remote
        self._args = args
        self.timeout_s = timeout_s
        self.on_event = on_event
        self._tag = uuid.uuid4().hex[:8]
        self._names = itertools.count()
        self._turn = itertools.count()
        self._lock = threading.RLock()
        self._bad_nodes: dict[str, float] = {}  # where every copy failed: when
        self._wake = threading.Event()
        self._stop = threading.Event()
        nodes = self.alive_nodes()
        self.replicas = replicas or (2 if len(nodes) >= 2 else 1)
        self.spares: dict[str, list[Copy]] = {}  # node -> workers with a bundle, no shard
        self._spares_wanted = spares
        self.latency: list[deque[float]] = [deque(maxlen=200) for _ in range(shards)]
        self.copies: list[list[Copy]] = [
            [self._spawn(s, c, nodes[(s + c) % len(nodes)]) for c in range(self.replicas)]
            for s in range(shards)
        ]
        self.cluster_error: str | None = None
        self._monitor: threading.Thread | None = None
        if monitor:
            self._monitor = threading.Thread(target=self._watch, name="shard-monitor", daemon=True)
            self._monitor.start()

    # --- placement ----------------------------------------------------------------------------

    def alive_nodes(self) -> list[str]:
        return sorted(x["NodeID"] for x in self.ray.nodes() if x.get("Alive"))

    def _spawn(self, shard: int, slot: int, node: str) -> Copy:
        """A copy of ``shard`` on ``node``: the node's spare, adopting the shard, when it has
        one up; else a new worker."""
        with self._lock:
            spare = next((c for c in self.spares.get(node, []) if c.state == UP), None)
            if spare is not None:
                self.spares[node].remove(spare)
                spare.shard, spare.slot = shard, slot
                spare.mark(STARTING)
                spare.probe = spare.actor.adopt.remote(shard)  # its answer marks the copy up
                log.info("shard %d copy %d: the spare on node %s adopts it (%s)",
                         shard, slot, node[:12], spare.name)  # fmt: skip
                self._wake.set()  # the monitor probes it, and starts the next spare
                return spare
        return self._start(shard, slot, node)

    def _start(self, shard: int, slot: int, node: str) -> Copy:
        """A new worker on ``node``: a copy of ``shard``, or a spare (``shard`` −1)."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        what = f"s{shard}-c{slot}" if shard >= 0 else "spare"
        name = f"clir-{self._tag}-{what}-{next(self._names)}"
        where = NodeAffinitySchedulingStrategy(node, soft=False)
        path, bundle_path, state = self._args
        options: dict[str, Any] = {"scheduling_strategy": where, "name": name,
                                   "namespace": NAMESPACE}  # fmt: skip
        if shard < 0:  # Ray would restart it as a spare, even once it holds a shard
            options["max_restarts"] = 0
        actor = self._remote.options(**options).remote(
            path, shard if shard >= 0 else None, bundle_path, state
        )
        return Copy(shard, slot, actor, node, name)

    @property
    def spares_per_node(self) -> int:
        """Spares kept on each node: as asked, else as many as the most copies a node holds
        (a node lost then has each of its copies adopted on another); on one node, one for
        a copy lost there when shards have copies to fail over to, else none."""
        if self._spares_wanted is not None:
            return self._spares_wanted
        held: dict[str, int] = {}
        for c in (c for cs in self.copies for c in cs):
            held[c.node] = held.get(c.node, 0) + 1
        if len(held) <= 1:
            return 1 if self.replicas > 1 else 0
        return max(held.values())

    def _keep_spares(self, alive: set[str]) -> None:
        """The spares wanted up on every live node whose copies are all up (a spare started
        beside a copy still loading would slow it): the gone are dropped, the starting
        probed."""
        now = time.monotonic()
        for node, spares in list(self.spares.items()):
            for spare in list(spares):
                stale = spare.state == STARTING and now - spare.since > START_S
                if node not in alive or spare.state == DEAD or stale:
                    spares.remove(spare)
                    self._kill(spare)
                else:  # an idle spare up is pinged too: one that died is not adopted
                    self._probe(spare)
        wanted = self.spares_per_node
        busy = {c.node for cs in self.copies for c in cs if c.state != UP}
        for cs in self.copies:
            busy |= {c.standby.node for c in cs if c.standby is not None}
        for node in sorted(alive - busy):
            if now - self._bad_nodes.get(node, -BAD_NODE_S) < BAD_NODE_S:
                continue
            if len(self.spares.get(node, [])) < wanted:  # one a round: a start loads the node
                self.spares.setdefault(node, []).append(self._start(-1, -1, node))
                log.info("spare worker started on node %s", node[:12])

    def _place(self, shard: int, failed: Copy | None = None) -> str | None:
        """A node alive now for a new copy of ``shard`` (replacing ``failed``): not the
        failed copy's node while no copy there answers (a node lost before the cluster says
        so, whose copies all fail); then the node with the fewest copies of this shard, then
        of all shards — so a copy killed on a healthy node comes back there, and the copies
        of a shard stay on different nodes."""
        alive = self.alive_nodes()
        if not alive:
            return None
        live = [c for cs in self.copies for c in cs if c.state != DEAD and c is not failed]
        answering = {c.node for c in live if c.state == UP}
        avoid = None
        if failed is not None and (failed.node not in answering or failed.error in NODE_GONE):
            avoid = failed.node
        if avoid is not None:
            self._bad_nodes[avoid] = time.monotonic()
        mine = [c.node for c in live if c.shard == shard]
        every = [c.node for c in live]
        return min(alive, key=lambda n: (n == avoid, mine.count(n), every.count(n), n))

    def _rebalance(self, alive: set[str]) -> None:
        """Move one copy of a shard whose copies share a node to a live node holding none of
        them (after a node was lost and came back, or a new one joined), when every copy of
        the shard is up: the shard keeps an answering copy throughout."""
        now = time.monotonic()
        for cs in self.copies:
            nodes = [c.node for c in cs]
            free = sorted(n for n in alive - set(nodes)
                          if now - self._bad_nodes.get(n, -BAD_NODE_S) >= BAD_NODE_S)  # fmt: skip
            if not free or len(set(nodes)) == len(nodes) or any(c.state != UP for c in cs):
                continue
            twice = next(c for c in reversed(cs) if nodes.count(c.node) > 1)
            self.replace(twice, "spreading the shard's copies over the nodes", node=free[0])
            return  # one a round: a copy starting costs the node a bundle load

    def replace(self, copy: Copy, why: str, node: str | None = None) -> Copy | None:
        """Start ``copy`` again on a live node (``node``, else the one :meth:`_place` picks;
        the old actor is killed); the new copy."""
        wanted = node
        standby = copy.standby
        if node is None and standby is not None and standby.state != DEAD:
            node = standby.node
        node = node or self._place(copy.shard, copy)  # asks the cluster: not under the lock
        if node is None:
            return None
        with self._lock:
            if self.copies[copy.shard][copy.slot] is not copy:
                return None  # already replaced
            self._kill(copy)
            new, copy.standby = copy.standby, None
            if new is None or new.state == DEAD or (wanted is not None and new.node != wanted):
                if new is not None:
                    self._kill(new)
                new = self._spawn(copy.shard, copy.slot, node)
            self.copies[copy.shard][copy.slot] = new
        log.warning(
            "shard %d copy %d replaced on node %s (%s)", copy.shard, copy.slot, node[:12], why
        )
        self._event("replacement", copy.shard)
        return new

    def _kill(self, copy: Copy) -> None:
        try:
            self.ray.kill(copy.actor, no_restart=True)
        except Exception:  # an actor already gone, or its node
            log.debug("shard %d copy %d: already gone", copy.shard, copy.slot)

    def _stand_by(self, copy: Copy) -> None:
        """Keep ``copy``'s standby going while its calls fail: start one (on the node
        :meth:`_place` picks), probe it, let it take the copy's place once it answers; stop
        it when the copy answers again or the standby itself fails."""
        standby = copy.standby
        if standby is None:
            node = self._place(copy.shard, copy)
            if node is None:
                return
            with self._lock:
                if self.copies[copy.shard][copy.slot] is not copy or copy.standby is not None:
                    return
                copy.standby = self._spawn(copy.shard, copy.slot, node)
            log.info("shard %d copy %d: standby started on node %s (%s)",
                     copy.shard, copy.slot, node[:12], copy.error)  # fmt: skip
            return
        if standby.state == DEAD or (standby.state == SUSPECT and standby.probe is None):
            copy.standby = None  # it failed too: another is started at the next round
            self._kill(standby)
        elif standby.state == UP:
            self.replace(copy, f"its standby answered ({copy.error})")
        else:
            self._probe(standby)

    # --- routing ------------------------------------------------------------------------------

    def _choose(self, shard: int, tried: Sequence[Copy], last_resort: bool = True) -> Copy | None:
        """The copy of ``shard`` to ask next: up before starting, the least loaded, in turn;
        never a dead one or one tried already; a suspect whose calls do not fail (slow, or
        frozen) only as the ``last_resort`` — when no other copy is left, it may still answer
        within the budget, rather than the shard going unanswered."""
        turn = next(self._turn)
        with self._lock:
            cs = self.copies[shard]
            order = {UP: 0, STARTING: 1, SUSPECT: 2}
            ok = [
                c for c in cs
                if c.state in order and all(c is not t for t in tried)
                and (c.state != SUSPECT or not c.failing)
            ]  # fmt: skip
            if not last_resort:
                ok = [c for c in ok if c.state != SUSPECT]
            if not ok:
                return None
            n = len(cs)
            return min(ok, key=lambda c: (order[c.state], c.inflight, (c.slot - turn) % n))

    def hedge_after(self, shard: int, budget: float) -> float:
        seen = self.latency[shard]
        if len(seen) < MIN_SAMPLES:
            return budget / 2
        p95 = float(np.percentile(np.fromiter(seen, float), 95))
        return min(budget / 2, max(HEDGE_FLOOR_S, HEDGE_FACTOR * p95))

    def ask(
        self, method: str, args: tuple[Any, ...], budget: float | None = None
    ) -> list[tuple[int, Any, str | None]]:
        """Call ``method(*args)`` on one copy of every shard, failing over and hedging as the
        module docstring says: each shard's answer, or why no copy answered, within
        ``budget`` seconds (default: the timeout)."""
        budget = self.timeout_s if budget is None else budget
        start = time.monotonic()
        deadline = start + budget
        req = _Request(self, method, args, len(self.copies))
        req.hedge_at = [start + self.hedge_after(s, budget) for s in range(req.n)]
        for s in range(req.n):
            if not req.send(s):
                req.errors[s].append("no copy is up")
        while req.pending and len(req.done) < req.n:
            now = time.monotonic()
            if now >= deadline:
                break
            hedges = [t for s, t in enumerate(req.hedge_at) if s not in req.done and t > now]
            wait = min([deadline, *hedges]) - now
            ready, _ = self.ray.wait(list(req.pending), num_returns=1, timeout=max(wait, 0.0))
            for ref in ready:
                req.receive(ref)
            req.hedge(time.monotonic())
        req.expire(budget)
        return req.answers()

    def _cancel(self, ref: Any) -> None:
        try:
            self.ray.cancel(ref, force=False)
        except Exception:  # a task already done, or its actor gone
            log.debug("could not cancel a shard call")

    def _suspect(self, copy: Copy, why: str) -> None:
        if copy.state in (UP, STARTING):
            log.warning("shard %d copy %d suspect: %s", copy.shard, copy.slot, why)
            copy.mark(SUSPECT, why)
            self._wake.set()

    def _failed(self, copy: Copy, exc: Exception) -> None:
        """A call failed: a copy that is gone for good (died, cannot be scheduled, its node
        lost) is marked dead and the monitor starts it again; another error (unavailable:
        restarting, or cut off) makes it suspect until it answers a ping."""
        e = self.ray.exceptions
        gone = (e.ActorDiedError, e.ActorUnschedulableError, e.NodeDiedError)
        why = type(exc).__name__
        if isinstance(exc, gone) and not isinstance(exc, e.ActorUnavailableError):
            copy.mark(DEAD, why)
        else:  # unavailable: restarting, or its node lost before the cluster says so
            copy.mark(SUSPECT, why, failing=True)
        # a ping sent before the failure may have been answered before it: only a ping sent
        # after it says the copy is back (else a lost copy flaps up, and its standby stops)
        copy.probe = None
        self._wake.set()

    def _event(self, kind: str, shard: int) -> None:
        if self.on_event is not None:
            try:
                self.on_event(kind, shard, 1)
            except Exception:  # counting must never fail a search
                log.exception("shard event callback failed")

    # --- monitor ------------------------------------------------------------------------------

    def _watch(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(MONITOR_S)
            self._wake.clear()
            if self._stop.is_set():
                break
            try:
                self.check()
            except Exception as exc:  # the cluster unreachable: try again
                self.cluster_error = f"{type(exc).__name__}: {exc}"[:300]
                log.warning("shard monitor: %s", self.cluster_error)

    def check(self) -> None:
        """One round of the monitor: re-place copies that are dead or whose node is gone,
        probe suspects and starting copies, replace those frozen too long."""
        alive = set(self.alive_nodes())
        self.cluster_error = None
        now = time.monotonic()
        for copy in [c for cs in self.copies for c in cs]:
            if copy.standby is not None and copy.state == UP:
                log.info("shard %d copy %d answered again: standby stopped",
                         copy.shard, copy.slot)  # fmt: skip
                standby, copy.standby = copy.standby, None
                self._kill(standby)
            if copy.state == DEAD:
                self.replace(copy, copy.error or "dead")
            elif copy.node not in alive:
                self.replace(copy, "its node is gone")
            elif copy.state == SUSPECT and copy.failing and now - copy.since > FAILING_REPLACE_S:
                # calls and pings fail at once (a node lost, which the cluster notices only
                # after its health checks, ~15 s): started elsewhere without waiting for it
                self.replace(copy, f"failing for {FAILING_REPLACE_S:g} s ({copy.error})")
            elif copy.state == SUSPECT and now - copy.since > SUSPECT_REPLACE_S:
                self.replace(copy, f"suspect for {SUSPECT_REPLACE_S:g} s")
            elif copy.state == STARTING and now - copy.since > START_S:
                self.replace(copy, f"not started within {START_S:g} s")
            elif copy.state in (SUSPECT, STARTING):
                if copy.state == SUSPECT and copy.failing:
                    self._stand_by(copy)
                self._probe(copy)
        self._rebalance(alive)
        self._keep_spares(alive)

    def _probe(self, copy: Copy) -> None:
        if copy.probe is None:
            copy.probe = copy.actor.ping.remote()
            return
        ready, _ = self.ray.wait([copy.probe], timeout=0)
        if not ready:
            return
        probe, copy.probe = copy.probe, None
        try:
            self.ray.get(probe)
        except self.ray.exceptions.RayError as exc:
            self._failed(copy, exc)
            return
        if copy.state != UP:
            log.info("shard %d copy %d up on node %s", copy.shard, copy.slot, copy.node[:12])
        copy.mark(UP)

    # --- status -------------------------------------------------------------------------------

    def names(self) -> list[list[str]]:
        """Every copy's actor name (namespace :data:`NAMESPACE`), by shard."""
        return [[c.name for c in cs] for cs in self.copies]

    def status(self, timeout_s: float | None = None) -> list[dict[str, Any]]:
        """Each shard: its copies (node, state) and, from the first that answers within
        ``timeout_s``, its generation, segments and documents; ``up``: any copy answered."""
        timeout = self.timeout_s if timeout_s is None else timeout_s
        copies = [c for cs in self.copies for c in cs if c.state != DEAD]
        refs = {c.actor.status.remote(): c for c in copies}
        ready, _ = self.ray.wait(list(refs), num_returns=len(refs), timeout=timeout)
        answered: dict[tuple[int, int], dict[str, Any]] = {}
        for ref in ready:
            c = refs[ref]
            try:
                answered[(c.shard, c.slot)] = self.ray.get(ref)
            except self.ray.exceptions.RayError as exc:
                self._failed(c, exc)
                continue
            if c.state == STARTING:
                c.mark(UP)
        for ref in set(refs) - set(ready):
            self._cancel(ref)
        out: list[dict[str, Any]] = []
        for s, cs in enumerate(self.copies):
            info: dict[str, Any] = {"shard": s}
            views = []
            for c in cs:
                got = answered.get((s, c.slot))
                # up as the router knows it (it answered its last search or ping): a busy
                # copy that is slow to answer this status call is not down
                view = c.public() | {"up": c.state == UP}
                if got is not None and "generation" not in info:
                    info.update(got)
                views.append(view)
            up = sum(v["up"] for v in views)
            info.update(shard=s, up=up > 0, copies_up=up, replicas=len(cs), copies=views)
            if not up:
                info["error"] = "; ".join(f"copy {c.slot} {c.state}" for c in cs)
            out.append(info)
        return out

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        for copy in [c for cs in self.copies for c in cs]:
            for c in (copy, copy.standby):
                if c is not None:
                    self._kill(c)
        for spare in (c for spares in self.spares.values() for c in spares):
            self._kill(spare)
        self.copies, self.spares = [], {}


class _Request:
    """One :meth:`ShardRouter.ask`: the calls in flight, the copies tried and why they
    failed, and the answers, per shard."""

    def __init__(self, router: ShardRouter, method: str, args: tuple[Any, ...], n: int) -> None:
        self.router, self.method, self.args, self.n = router, method, args, n
        # a kind of call (its method, and a search's method): a copy's first one is cold
        self.kind = (method, args[0] if args and isinstance(args[0], str) else None)
        self.pending: dict[Any, tuple[int, Copy, float]] = {}
        self.tried: list[list[Copy]] = [[] for _ in range(n)]
        self.errors: list[list[str]] = [[] for _ in range(n)]
        self.done: dict[int, Any] = {}
        self.hedge_at: list[float] = []

    def send(self, shard: int, last_resort: bool = True) -> bool:
        """Send to a copy of ``shard`` not tried yet; False when none is left (a suspect only
        as the ``last_resort``: never for a hedge)."""
        router = self.router
        copy = router._choose(shard, self.tried[shard], last_resort)
        if copy is None:
            return False
        self.tried[shard].append(copy)
        try:
            ref = getattr(copy.actor, self.method).remote(*self.args)
        except router.ray.exceptions.RayError as exc:  # a handle of an actor known dead
            router._failed(copy, exc)
            self.errors[shard].append(f"copy {copy.slot} failed ({type(exc).__name__})")
            return self.send(shard, last_resort)
        copy.inflight += 1
        self.pending[ref] = (shard, copy, time.monotonic())
        return True

    def receive(self, ref: Any) -> None:
        """Take the answer (or the failure, failed over) of a call that is ready."""
        router = self.router
        shard, copy, sent = self.pending.pop(ref)
        copy.inflight -= 1
        try:
            value = router.ray.get(ref)
        except router.ray.exceptions.RayError as exc:
            router._failed(copy, exc)
            self.errors[shard].append(f"copy {copy.slot} failed ({type(exc).__name__})")
            if shard not in self.done and not self.asked(shard) and self.send(shard):
                router._event("failover", shard)
            return
        took = time.monotonic() - sent
        if shard in self.done:
            return  # a hedge's loser, late
        self.done[shard] = value
        # a copy's first call of a kind compiles its kernels and pages its segments in: not
        # the shard's latency (counted, it would put the hedge delay at seconds for good)
        if self.kind in copy.warm:
            router.latency[shard].append(took)
        copy.warm.add(self.kind)
        if copy.state != UP:
            copy.mark(UP)
        for other, (s2, c2, sent2) in list(self.pending.items()):
            if s2 == shard:  # overtaken: no longer waited for
                self.pending.pop(other)
                c2.inflight -= 1
                router._cancel(other)
                if time.monotonic() - sent2 <= took:
                    continue
                if self.kind in c2.warm:
                    router._suspect(c2, "overtaken by another copy")
                else:  # its cold call, excused once: the next one of the kind counts
                    c2.warm.add(self.kind)

    def hedge(self, now: float) -> None:
        """Send once more, to a second copy, for each shard past its hedge time."""
        for s in range(self.n):
            if s not in self.done and now >= self.hedge_at[s] and self.asked(s):
                self.hedge_at[s] = float("inf")  # one hedge a shard
                if self.send(s, last_resort=False):
                    self.router._event("hedge", s)

    def expire(self, budget: float) -> None:
        """Out of time: cancel what is still in flight and suspect its copies."""
        for ref, (shard, copy, _sent) in self.pending.items():
            copy.inflight -= 1
            self.router._cancel(ref)
            self.router._suspect(copy, f"no answer within {budget:g} s")
            self.errors[shard].append(f"copy {copy.slot} timed out after {budget:g} s")

    def asked(self, shard: int) -> bool:
        return any(s == shard for s, _, _ in self.pending.values())

    def answers(self) -> list[tuple[int, Any, str | None]]:
        return [
            (s, self.done[s], None)
            if s in self.done
            else (s, None, "no copy answered (" + "; ".join(self.errors[s]) + ")")
            for s in range(self.n)
        ]
