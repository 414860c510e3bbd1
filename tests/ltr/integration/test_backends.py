"""The same shards give the same weights inline, in local worker processes and on Ray: the tests
that start processes, Ray or a browser, read the shared data or run long (the integration tier,
tests/README.md); the rest are in :mod:`tests.ltr.test_backends`."""

from __future__ import annotations

import pytest

from service.errors import ClirError, JobCancelled
from service.ltr.backends import LocalBackend, RayBackend, make_backend
from service.ltr.shard import ShardSpec
from tests.ltr.test_backends import two_epochs


@pytest.mark.ray
def test_ray_equals_inline(local_ray: None, specs, inline_weights: dict[str, float]) -> None:
    backend = make_backend("ray")
    assert isinstance(backend, RayBackend)
    stats, weights = two_epochs(backend, *specs)
    assert [s["queries"] for s in stats] == [3, 3]
    assert weights == inline_weights


@pytest.mark.process  # starts a process
def test_local_processes_equal_inline(specs, inline_weights: dict[str, float]) -> None:
    stats, weights = two_epochs(LocalBackend(), *specs)
    assert [s["queries"] for s in stats] == [3, 3]
    assert weights == inline_weights
    assert weights != specs[1]


@pytest.mark.process  # starts a process
def test_local_worker_error_names_the_shard(specs) -> None:
    bad = [ShardSpec(**{**s.__dict__, "model": "/nonexistent/bundle"}) for s in specs[0]]
    backend = LocalBackend()
    with backend, pytest.raises(ClirError, match=r"shard [01] failed: .*nonexistent"):
        backend.launch(bad)
        backend.built()


@pytest.mark.process  # starts a process
def test_local_cancellation_stops_the_workers(specs) -> None:
    backend = LocalBackend()
    with pytest.raises(JobCancelled):
        backend.launch(specs[0])
        backend.built(cancelled=lambda: True)
    assert backend.procs == []
