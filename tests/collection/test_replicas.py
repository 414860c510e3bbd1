"""Where the shard router puts copies (a unit test over a stand-in for the Ray module: no
cluster). A copy killed on a healthy node comes back there, so a shard's copies stay on
different nodes; a copy on a node whose copies all fail (a node lost before the cluster says
so) goes elsewhere; a shard whose copies came to share a node is spread again when a node is
free — the chaos benchmark lost a shard with a node after a killed copy had been re-placed
beside its twin."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

pytest.importorskip("ray")  # the scheduling strategy class comes from Ray

from service.collection.replicas import DEAD, SUSPECT, UP, ShardRouter

A, B, C = "a" * 56, "b" * 56, "c" * 56  # node ids: hex, as Ray checks


@dataclass
class FakeActor:
    node: str
    killed: bool = False


@dataclass
class FakeRemote:
    """``remote.options(scheduling_strategy=...).remote(...)`` → an actor on that node."""

    started: list[FakeActor] = field(default_factory=list)
    _node: str = ""

    def options(self, *, scheduling_strategy: Any, **_: Any) -> FakeRemote:
        self._node = scheduling_strategy.node_id
        return self

    def remote(self, *_: Any) -> FakeActor:
        actor = FakeActor(self._node)
        self.started.append(actor)
        return actor


class FakeRay:
    def __init__(self, nodes: list[str]) -> None:
        self.alive = list(nodes)

    def nodes(self) -> list[dict[str, Any]]:
        return [{"NodeID": n, "Alive": True} for n in self.alive]

    def kill(self, actor: FakeActor, no_restart: bool = True) -> None:
        actor.killed = True


def router(nodes: list[str], shards: int = 2, replicas: int = 2) -> ShardRouter:
    r = ShardRouter(FakeRay(nodes), FakeRemote(), ("c", None, None), shards,
                    replicas=replicas, monitor=False)  # fmt: skip
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
