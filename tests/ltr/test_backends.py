"""The same shards give the same weights inline, in local worker processes and on Ray."""

from __future__ import annotations

from service.ltr.backends import Backend
from service.ltr.shard import ShardSpec, mix


def two_epochs(backend: Backend, specs: list[ShardSpec], start: dict[str, float]):
    with backend:
        backend.launch(specs)
        stats = backend.built()
        weights = dict(start)
        for _ in range(2):
            results = backend.epoch(weights)
            weights = mix([r.weights for r in results], weights)
    return stats, weights
