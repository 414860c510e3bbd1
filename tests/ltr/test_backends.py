"""The same shards give the same weights inline, in local worker processes and on Ray."""

from __future__ import annotations

from pathlib import Path

import pytest

from service.errors import ClirError, JobCancelled
from service.index.inverted import InvertedIndex
from service.ltr.backends import Backend, InlineBackend, LocalBackend, RayBackend, make_backend
from service.ltr.shard import ShardSpec, mix
from service.mt.bundle import ModelBundle
from tests.ltr.test_training import make_specs


def two_epochs(backend: Backend, specs: list[ShardSpec], start: dict[str, float]):
    with backend:
        backend.launch(specs)
        stats = backend.built()
        weights = dict(start)
        for _ in range(2):
            results = backend.epoch(weights)
            weights = mix([r.weights for r in results], weights)
    return stats, weights


@pytest.fixture
def specs(
    toy_bundle: ModelBundle, toy_index: InvertedIndex, ltr_data: dict[str, Path]
) -> tuple[list[ShardSpec], dict[str, float]]:
    return make_specs(toy_bundle, toy_index, ltr_data, 2, lex=True)


@pytest.fixture
def inline_weights(toy_bundle: ModelBundle, toy_index: InvertedIndex, specs) -> dict[str, float]:
    _, weights = two_epochs(InlineBackend(toy_bundle, toy_index), *specs)
    return weights


def test_local_processes_equal_inline(specs, inline_weights: dict[str, float]) -> None:
    stats, weights = two_epochs(LocalBackend(), *specs)
    assert [s["queries"] for s in stats] == [3, 3]
    assert weights == inline_weights
    assert weights != specs[1]


def test_local_worker_error_names_the_shard(specs) -> None:
    bad = [ShardSpec(**{**s.__dict__, "model": "/nonexistent/bundle"}) for s in specs[0]]
    backend = LocalBackend()
    with backend, pytest.raises(ClirError, match=r"shard [01] failed: .*nonexistent"):
        backend.launch(bad)
        backend.built()


def test_local_cancellation_stops_the_workers(specs) -> None:
    backend = LocalBackend()
    with pytest.raises(JobCancelled):
        backend.launch(specs[0])
        backend.built(cancelled=lambda: True)
    assert backend.procs == []


@pytest.mark.ray
def test_ray_equals_inline(local_ray: None, specs, inline_weights: dict[str, float]) -> None:
    backend = make_backend("ray")
    assert isinstance(backend, RayBackend)
    stats, weights = two_epochs(backend, *specs)
    assert [s["queries"] for s in stats] == [3, 3]
    assert weights == inline_weights
