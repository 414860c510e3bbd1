"""Where the shard router puts copies (a unit test over a stand-in for the Ray module: no
cluster). A copy killed on a healthy node comes back there, so a shard's copies stay on
different nodes; a copy on a node whose copies all fail (a node lost before the cluster says
so) goes elsewhere; a shard whose copies came to share a node is spread again when a node is
free — the chaos benchmark lost a shard with a node after a killed copy had been re-placed
beside its twin. Spares: started once a node's copies are up, as many as a node holds copies;
a copy lost is replaced by its node's spare adopting the shard, not by a new worker."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

pytest.importorskip("ray")  # the scheduling strategy class comes from Ray

from service.collection.replicas import DEAD, STARTING, SUSPECT, UP, ShardRouter

A, B, C = "a" * 56, "b" * 56, "c" * 56  # node ids: hex, as Ray checks


@dataclass(eq=False)  # a key of the router's calls in flight, as Ray's refs are
class FakeRef:
    actor: FakeActor
    done: bool = False  # answered already (whatever the actor does now)


@dataclass
class FakePing:
    actor: FakeActor

    def remote(self, *_args: Any) -> FakeRef:
        return FakeRef(self.actor)


@dataclass(eq=False)
class FakeActor:
    node: str
    killed: bool = False
    answers: bool = False  # its pings are answered (it has started)
    dies: bool = False  # its calls fail: ActorDiedError
    calls: int = 0  # searches sent to it
    shard: int | None = None  # the shard it was started with (None: a spare)
    adopted: list[int] = field(default_factory=list)  # the shards it was asked to adopt
    options: dict[str, Any] = field(default_factory=dict)  # its actor options

    @property
    def ping(self) -> FakePing:
        return FakePing(self)

    @property
    def partial(self) -> FakePing:  # a search: answered as a ping is
        self.calls += 1
        return FakePing(self)

    @property
    def adopt(self) -> FakeAdopt:
        return FakeAdopt(self)


@dataclass
class FakeAdopt:
    actor: FakeActor

    def remote(self, shard: int) -> FakeRef:
        self.actor.adopted.append(shard)
        return FakeRef(self.actor)


@dataclass
class FakeRemote:
    """``remote.options(scheduling_strategy=...).remote(...)`` → an actor on that node."""

    started: list[FakeActor] = field(default_factory=list)
    _node: str = ""

    _options: dict[str, Any] = field(default_factory=dict)

    def options(self, *, scheduling_strategy: Any, **options: Any) -> FakeRemote:
        self._node = scheduling_strategy.node_id
        self._options = options
        return self

    def remote(self, _path: str, shard: int | None, *_: Any) -> FakeActor:
        actor = FakeActor(self._node, shard=shard, options=self._options)
        self.started.append(actor)
        return actor


class FakeRay:
    def __init__(self, nodes: list[str]) -> None:
        self.alive = list(nodes)

    def nodes(self) -> list[dict[str, Any]]:
        return [{"NodeID": n, "Alive": True} for n in self.alive]

    def kill(self, actor: FakeActor, no_restart: bool = True) -> None:
        actor.killed = True

    class exceptions:  # as ray.exceptions
        class RayError(Exception):
            pass

        class ActorDiedError(RayError):
            pass

        class ActorUnavailableError(RayError):
            pass

        class ActorUnschedulableError(RayError):
            pass

        class NodeDiedError(RayError):
            pass

    def wait(
        self, refs: list[FakeRef], num_returns: int = 1, timeout: float = 0
    ) -> tuple[list[FakeRef], list[Any]]:
        ready = [
            r for r in refs if r.done or r.actor.dies or (r.actor.answers and not r.actor.killed)
        ]
        return ready, [r for r in refs if r not in ready]

    def get(self, ref: FakeRef) -> bool:
        if ref.actor.dies:
            raise self.exceptions.ActorDiedError("died")
        return True

    def cancel(self, ref: FakeRef, force: bool = False) -> None:
        pass


def router(
    nodes: list[str], shards: int = 2, replicas: int = 2, spares: int | None = 0
) -> ShardRouter:
    r = ShardRouter(FakeRay(nodes), FakeRemote(), ("c", None, None), shards,
                    replicas=replicas, monitor=False, spares=spares)  # fmt: skip
    for cs in r.copies:
        for c in cs:
            c.mark(UP)
    return r


def placement(r: ShardRouter) -> list[list[str]]:
    return [[c.node for c in cs] for cs in r.copies]


def test_copies_of_a_shard_start_on_different_nodes() -> None:
    r = router([A, B])
    assert placement(r) == [[A, B], [B, A]]


def test_a_copy_killed_on_a_healthy_node_comes_back_there() -> None:
    r = router([A, B])
    r.copies[0][0].mark(DEAD, "ActorDiedError")
    r.check()
    assert placement(r) == [[A, B], [B, A]]
    assert r.copies[0][0].state != DEAD


def test_a_lost_node_s_copies_go_to_the_node_alive_and_come_back_spread() -> None:
    r = router([A, B])
    for cs in r.copies:  # every call to node b fails: it is lost, the cluster not yet told
        for c in cs:
            if c.node == B:
                c.mark(SUSPECT, "ActorUnavailableError", failing=True)
                c.since -= 10
    r.check()
    assert placement(r) == [[A, A], [A, A]]
    for cs in r.copies:
        for c in cs:
            c.mark(UP)
    r.check()  # node b still listed alive, but its copies all failed: nothing moves there
    assert placement(r) == [[A, A], [A, A]]
    r.ray.alive = [A, C]  # the node came back (a new node id)
    for _ in range(4):
        r.check()
        for cs in r.copies:
            for c in cs:
                c.mark(UP)
    assert [sorted(nodes) for nodes in placement(r)] == [[A, C], [A, C]]


def test_a_failing_copy_gets_a_standby_at_once_which_takes_its_place_when_it_answers() -> None:
    # a node lost before the cluster says so: calls to its copies fail at once; the standby
    # starts now, not after the copy has failed for FAILING_REPLACE_S
    r = router([A, B])
    for c in (r.copies[0][1], r.copies[1][0]):  # the copies on node b
        c.mark(SUSPECT, "ActorUnavailableError", failing=True)
    lost = r.copies[0][1]
    r.check()
    standby = lost.standby
    assert standby is not None and standby.node == A  # not beside the failing copies
    assert r.copies[0][1] is lost and not lost.actor.killed  # still its slot, until...
    r.check()  # ... the standby answers: not yet
    assert r.copies[0][1] is lost
    standby.actor.answers = True
    r.check()  # the ping is sent
    r.check()  # and answered: the standby takes the slot, the failing copy is stopped
    assert r.copies[0][1] is standby and standby.state == UP and lost.actor.killed
    assert placement(r)[0] == [A, A]


def test_a_standby_is_stopped_when_the_failing_copy_answers_again() -> None:
    r = router([A, B])
    flaky = r.copies[1][0]
    flaky.mark(SUSPECT, "ActorUnavailableError", failing=True)
    r.check()
    standby = flaky.standby
    assert standby is not None
    flaky.mark(UP)
    r.check()
    assert standby.actor.killed and flaky.standby is None and r.copies[1][0] is flaky


def test_a_failing_copy_replaced_before_its_standby_answers_is_replaced_by_it() -> None:
    r = router([A, B])
    lost = r.copies[0][1]
    lost.mark(SUSPECT, "ActorUnavailableError", failing=True)
    r.check()
    standby = lost.standby
    lost.since -= 10  # failing too long: replaced, by the standby already starting
    r.check()
    assert r.copies[0][1] is standby and len(r._remote.started) == 5  # 4 copies, 1 standby


def test_a_busy_copy_gets_no_standby() -> None:
    # overtaken by a hedge or slow: suspect, not failing; starting a worker would not help
    r = router([A, B])
    busy = r.copies[0][0]
    busy.mark(SUSPECT, "overtaken by another copy")
    busy.probe = FakeRef(busy.actor)  # a ping outstanding
    r.check()
    assert busy.standby is None and len(r._remote.started) == 4


def test_a_ping_answered_before_a_failure_does_not_bring_the_copy_back() -> None:
    class Unavailable(Exception):
        pass

    r = router([A, B])
    r.ray.exceptions = type("E", (), {"ActorDiedError": KeyError, "ActorUnschedulableError":
                                      KeyError, "NodeDiedError": KeyError,
                                      "ActorUnavailableError": Unavailable})  # fmt: skip
    copy = r.copies[0][1]
    copy.mark(SUSPECT, "overtaken by another copy")
    copy.probe = FakeRef(copy.actor)  # a ping sent while it was only slow...
    copy.actor.answers = True  # ... and answered, just before its node was lost
    r._failed(copy, Unavailable())
    r.check()
    assert copy.state == SUSPECT and copy.failing and copy.standby is not None


def test_a_ping_answered_before_a_copy_turned_suspect_does_not_bring_it_back() -> None:
    # a copy started, was pinged, answered a search (up) before the ping was read, then froze:
    # the old ping's answer says nothing about the frozen copy
    r = router([A, B])
    copy = r.copies[1][0]
    copy.mark(STARTING)
    copy.probe = FakeRef(copy.actor, done=True)  # sent and answered while starting
    copy.mark(UP)  # a search's answer, read first
    copy.mark(SUSPECT, "overtaken by another copy")
    r.check()
    assert copy.state == SUSPECT


def test_a_copy_s_first_call_of_a_kind_is_not_the_shard_s_latency() -> None:
    """A copy's first search of a method compiles its kernels and pages its segments in
    (seconds): counted, it put the hedge delay at seconds, and a frozen copy then cost every
    request that long (CI: both copies timed out on a loaded machine)."""
    r = router([A, B], shards=1)
    for cs in r.copies:
        for c in cs:
            c.actor.answers = True
    for _ in range(3):
        for method in ("dt", "dt", "bowfd", "bowfd"):  # the copies take turns
            assert r.ask("partial", (method, "query"), budget=1.0) == [(0, True, None)]
    assert [sorted(m for _, m in c.warm) for c in r.copies[0]] == [["bowfd", "dt"]] * 2
    # 12 answers; each copy's first dt and first bowfd left out
    assert len(r.latency[0]) == 12 - 2 * 2


def answering(r: ShardRouter) -> ShardRouter:
    for cs in r.copies:
        for c in cs:
            c.actor.answers = True
    return r


def test_a_suspect_is_the_last_resort_of_a_failover_never_of_a_hedge() -> None:
    """The only other copy dies: the request fails over to the suspect (slow, not failing),
    which answers — the shard is not dropped while a copy can still answer. A hedge never
    goes to a suspect."""
    r = answering(router([A, B], shards=1))
    live, suspect = r.copies[0]
    suspect.mark(SUSPECT, "overtaken by another copy")
    live.actor.dies = True
    assert r.ask("partial", ("dt", "q"), budget=1.0) == [(0, True, None)]
    assert live.state == DEAD and suspect.actor.calls == 1
    r = answering(router([A, B], shards=1))
    slow, suspect = r.copies[0]
    slow.actor.answers = False  # never answers: hedged after half the budget
    suspect.mark(SUSPECT, "overtaken by another copy")
    [(_, value, why)] = r.ask("partial", ("dt", "q"), budget=0.1)
    assert value is None and why == "no copy answered (copy 0 timed out after 0.1 s)"
    assert suspect.actor.calls == 0
    failing = answering(router([A, B], shards=1))
    gone, broken = failing.copies[0]
    broken.mark(SUSPECT, "ActorUnavailableError", failing=True)  # its calls fail: not tried
    gone.actor.dies = True
    [(_, value, why)] = failing.ask("partial", ("dt", "q"), budget=1.0)
    assert value is None and broken.actor.calls == 0


def test_a_cold_copy_overtaken_is_excused_once() -> None:
    """A copy whose first search of a method is overtaken by a hedge (compiling, paging in)
    stays up; overtaken again on a later one, it is suspect."""
    r = answering(router([A, B], shards=1))
    cold = r.copies[0][0]
    cold.actor.answers = False
    overtaken = 0
    for _ in range(8):
        calls = cold.actor.calls
        assert r.ask("partial", ("dt", "q"), budget=0.1) == [(0, True, None)]
        if cold.actor.calls > calls:  # it was asked first and the hedge overtook it
            overtaken += 1
            assert cold.state == (UP if overtaken == 1 else SUSPECT), overtaken
        if cold.state == SUSPECT:
            break
    assert overtaken == 2 and ("partial", "dt") in cold.warm


def spares_up(r: ShardRouter, rounds: int = 8) -> dict[str, list[FakeActor]]:
    """Monitor rounds until the spares have started and answered: each node's spare actors."""
    for _ in range(rounds):
        r.check()
        for spare in (c for cs in r.spares.values() for c in cs):
            spare.actor.answers = True
    r.check()
    return {n: [c.actor for c in cs] for n, cs in r.spares.items()}


def test_spares_start_once_the_copies_are_up_as_many_as_a_node_holds_copies() -> None:
    r = router([A, B], spares=None)  # 2 shards x 2 copies: 2 copies a node
    starting = router([A, B], spares=None)
    starting.copies[0][0].mark(STARTING)
    starting.check()
    assert not starting.spares.get(A) and len(starting.spares[B]) == 1  # A still loading
    spares = spares_up(r)
    assert {n: len(cs) for n, cs in spares.items()} == {A: 2, B: 2}
    assert all(a.shard is None and a.options["max_restarts"] == 0
               for cs in spares.values() for a in cs)  # fmt: skip
    assert all(c.state == UP for cs in r.spares.values() for c in cs)
    lone = router([A], replicas=1, spares=None)
    assert spares_up(lone) == {}  # one copy a shard on one node: nothing to adopt it for
    one_node = router([A], replicas=2, spares=None)  # four copies on A: one spare for a loss
    assert {n: len(cs) for n, cs in spares_up(one_node).items()} == {A: 1}


def test_a_copy_killed_is_replaced_by_its_node_s_spare_adopting_the_shard() -> None:
    r = router([A, B], spares=1)
    spares = spares_up(r)
    remote = r._remote
    started = len(remote.started)
    dead = r.copies[0][0]  # on A
    dead.mark(DEAD, "ActorDiedError")
    r.check()
    new = r.copies[0][0]
    assert new.actor is spares[A][0] and new.actor.adopted == [0]
    assert (new.shard, new.slot, new.node, new.state) == (0, 0, A, STARTING)
    assert dead.actor.killed and len(remote.started) == started  # no worker started for it
    r.check()  # its adoption answered: up
    assert new.state == UP
    r.check()  # and another spare behind it
    assert len(remote.started) == started + 1 and remote.started[-1].shard is None


def test_a_lost_node_s_copies_are_all_adopted_by_the_spares_of_the_node_alive() -> None:
    r = router([A, B], spares=None)
    spares = spares_up(r)
    remote = r._remote
    started = len(remote.started)
    r.ray.alive = [A]
    r.check()
    assert placement(r) == [[A, A], [A, A]]
    adopted = {c.actor for cs in r.copies for c in cs if c.actor.adopted}
    assert adopted == set(spares[A])  # both of A's spares, no new worker for a copy
    assert all(a.shard is None for a in remote.started[started:])  # only spares started since
    assert B not in r.spares or not r.spares[B]


def test_a_spare_that_dies_or_whose_node_goes_is_dropped_and_another_started() -> None:
    r = router([A, B], spares=1)
    spares = spares_up(r)
    remote = r._remote
    spares[A][0].dies = True
    for _ in range(3):  # a ping sent, its failure read (dead), the spare dropped and replaced
        r.check()
    assert spares[A][0].killed and r.spares[A][0].actor is not spares[A][0]
    assert remote.started[-1].shard is None and remote.started[-1].node == A
    r.ray.alive = [A]
    r.check()
    assert spares[B][0].killed and not r.spares.get(B)
    r.close()  # every spare ever started is gone with the router
    assert all(a.killed for a in remote.started if a.shard is None)
