"""Where a store is searched, chosen once: the search pipelines, scorers and shard searchers a
long-running caller (the API) keeps per store and bundle.

Every store is a collection (an index built whole is one of one segment) and is searched by the
segment searcher in this process, or — the ``ray`` backend — by Ray shard workers that fan each
query out over the shards' copies (answered here, degraded, where no copy of a shard answers).
The backend is fixed when a :class:`StoreSearchers` is made, from a :class:`Backend` record that
the caller fills from its settings; everything above it (the API's routes, its warm-up and
probes) asks for a pipeline and ranks, whatever the store and wherever its shards run. Short-lived
callers (``clir search``, runs, benchmarks) build a pipeline directly with
:func:`store_pipeline`: the same stages, searched in process.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from service.collection import Collection
from service.collection.docstore import Store, store_scorer
from service.collection.searcher import SnapshotSearcher
from service.mt.bundle import ModelBundle
from service.retrieval.base import Scorer
from service.search.pipeline import CollectionStage, SearchPipeline

if TYPE_CHECKING:
    from service.collection.distributed import RaySearcher

ShardEvent = Callable[[str, int, int], None]  # (kind, shard, count): failovers, hedges, …


@dataclass(frozen=True)
class Backend:
    """Where collections are searched and how (the settings ``search_backend``,
    ``search_threads`` and the Ray shard workers' ones)."""

    kind: Literal["local", "ray"] = "local"
    threads: int = 0  # shards searched at once in this process (0: one per core)
    ray_address: str | None = None
    shard_timeout_s: float = 10.0
    state_root: Path | None = None  # the weights state the shard workers load
    concurrency: int = 4  # searches one shard worker runs at once
    replicas: int | None = None
    spares: int | None = None


class StoreSearchers:
    """The pipelines, scorers and shard searchers over stores, built once per (store, bundle)
    and reused by every request; :meth:`close` releases them (and stops the Ray fan-outs)."""

    def __init__(self, backend: Backend, on_shard_event: ShardEvent | None = None) -> None:
        self.backend = backend
        self.on_shard_event = on_shard_event
        self._scorers: dict[Hashable, Scorer] = {}
        self._searchers: dict[int, SnapshotSearcher] = {}
        self._ray: dict[tuple[str, int], RaySearcher] = {}
        self._pipelines: dict[tuple[int, int], SearchPipeline] = {}
        self._lock = threading.Lock()

    def close(self) -> None:
        with self._lock:
            ray, self._ray = list(self._ray.values()), {}
            searchers, self._searchers = list(self._searchers.values()), {}
            self._scorers.clear()
            self._pipelines.clear()
        for r in ray:
            r.close()
        for s in searchers:
            s.close()

    def pipeline(self, store: Store, bundle: ModelBundle) -> SearchPipeline:
        """The search pipeline over ``store`` for ``bundle``, built once: its first stage is
        the index's scorers, or the collection searched here or by Ray shard workers."""
        key = (id(store), id(bundle))
        with self._lock:
            found = self._pipelines.get(key)
        if found is not None:
            return found
        ray = partial(self.ray_searcher, store, bundle) if self.backend.kind == "ray" else None
        if ray is not None:
            ray()  # the workers start loading now
        stage = CollectionStage(store, self.collection_searcher(bundle), ray)
        with self._lock:
            return self._pipelines.setdefault(key, SearchPipeline(stage))

    def scorer(self, method: str, store: Store, bundle: ModelBundle, **params: Any) -> Scorer:
        """A scorer per (method, store, bundle, params), built once and reused (over a
        collection, one that searches its current commit in this process)."""
        key = (method, id(store), id(bundle), tuple(sorted(params.items())))
        with self._lock:
            scorer = self._scorers.get(key)
            if scorer is None:
                scorer = store_scorer(store, method, bundle, threads=self.backend.threads, **params)
                self._scorers[key] = scorer
            return scorer

    def collection_searcher(self, bundle: ModelBundle) -> SnapshotSearcher:
        """The searcher of collections in this process for ``bundle`` (its scorers kept per
        segment)."""
        with self._lock:
            searcher = self._searchers.get(id(bundle))
            if searcher is None:
                searcher = SnapshotSearcher(bundle, threads=self.backend.threads)
                self._searchers[id(bundle)] = searcher
            return searcher

    def ray_searcher(self, collection: Collection, bundle: ModelBundle) -> RaySearcher:
        """The Ray fan-out over ``collection``'s shards for ``bundle`` (started on first use;
        a rebuild that changed the shard count gets a new one, the old stopped beside)."""
        from service.collection.distributed import RaySearcher

        local = self.collection_searcher(bundle)  # answers when no copy of a shard does
        b = self.backend
        with self._lock:
            key = (str(collection.path), id(bundle))
            searcher = self._ray.get(key)
            if searcher is not None and searcher.shards != collection.snapshot.commit.shards:
                old, searcher = searcher, None
                threading.Thread(target=old.close, name="ray-close", daemon=True).start()
            if searcher is None:
                searcher = self._ray[key] = RaySearcher(
                    collection, bundle, address=b.ray_address, timeout_s=b.shard_timeout_s,
                    state_root=b.state_root, concurrency=b.concurrency, replicas=b.replicas,
                    spares=b.spares, local=local, on_event=self.on_shard_event,
                )  # fmt: skip
            return searcher

    def start_shard_workers(
        self, store: Store, bundle: ModelBundle, timeout_s: float
    ) -> list[dict[str, Any]]:
        """With the Ray backend over a collection: start its shard workers and wait up to
        ``timeout_s`` for them to answer; the shards not up then (none otherwise)."""
        if self.backend.kind != "ray":
            return []
        return [s for s in self.ray_searcher(store, bundle).status(timeout_s) if not s["up"]]

    def ray_state(self) -> dict[str, Any] | None:
        """Whether the Ray fan-out reaches its cluster, and why not (None: none started)."""
        with self._lock:
            searchers = list(self._ray.values())
        return searchers[0].state() if searchers else None

    def shard_status(self, timeout_s: float = 1.0) -> list[dict[str, Any]]:
        """Every Ray shard worker's status (none without the Ray backend); a worker that does
        not answer within ``timeout_s`` is down (a probe must answer quickly)."""
        with self._lock:
            searchers = list(self._ray.values())
        return searchers[0].status(timeout_s) if searchers else []

    def ray_searchers(self) -> list[RaySearcher]:
        """The Ray fan-outs started so far (for tests and probes)."""
        with self._lock:
            return list(self._ray.values())


def store_pipeline(store: Store, bundle: ModelBundle, *, threads: int = 0) -> SearchPipeline:
    """The pipeline over an index or a collection searched in this process (``threads``: its
    shards searched at once), its scorers kept per method and parameters: what the command
    line's searches, runs and evaluations rank with."""
    return StoreSearchers(Backend(threads=threads)).pipeline(store, bundle)
