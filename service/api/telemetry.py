"""Service metrics for Prometheus (``GET /metrics``), kept by ``prometheus_client``.

One :class:`Metrics` per app holds the service's series in its own ``CollectorRegistry``:

* ``clir_http_requests_total{endpoint,method,status}`` and
  ``clir_http_request_duration_seconds{endpoint,method}`` — every HTTP request, recorded by
  :class:`MetricsMiddleware` under its route template (so ``/v1/documents/{doc_id:path}`` is one
  series, not one per id; unmatched paths count as ``other``);
* ``clir_decode_seconds`` (cache misses), ``clir_query_cache_hits_total``,
  ``clir_query_cache_misses_total``, ``clir_degraded_responses_total`` — from the query service;
* ``clir_shard_search_seconds{shard}`` and the gauge ``clir_shard_documents{shard}`` when the
  document index is a collection (:mod:`service.collection`);
* ``clir_shard_failovers_total{shard}`` (a copy failed and another copy of its shard was
  asked in the same request), ``clir_shard_hedges_total{shard}`` (a copy slower than its
  shard's hedge delay and a second copy asked), ``clir_shard_replacements_total{shard}`` (a
  copy started again on a live node) and ``clir_shard_in_process_total{shard}`` (answers
  searched in the API process because no copy of the shard answered; ``shard="-1"``: the
  cluster out of reach) with the Ray backend (:mod:`service.collection.replicas`);
* gauges ``clir_query_cache_entries``, ``clir_query_cache_capacity``, ``clir_query_cache_bytes``
  and ``clir_api_processes``;
* the standard ``process_*`` figures (resident and virtual memory, CPU seconds, open file
  descriptors, start time).

**Several API processes** (``clir serve --workers N``) use ``prometheus_client``'s multiprocess
mode: ``clir serve`` gives every API process one empty directory in ``PROMETHEUS_MULTIPROC_DIR``
(:mod:`service.api.processes`), each process writes its values to memory-mapped files of its
own there, and whichever process answers ``/metrics`` merges every file
(``MultiProcessCollector``). Counters and histograms are summed over every process that ran
since the server started: the files of a process that died stay, so a killed and replaced
process takes nothing away and totals never decrease. Gauges are summed over the *live*
processes (``livesum``): at each scrape the gauge files of dead processes are dropped
(``mark_process_dead``, which a supervisor's child-exit hook would otherwise call), so
``clir_api_processes`` counts the processes that serve now. ``prometheus_client``'s process
collector only sees the process it runs in, so here the answering process reads the
``/proc`` figures of every live API process with that collector and labels them ``pid``:
``process_resident_memory_bytes{pid="…"}`` is one series per process (``sum(...)`` is the
server's total). With one process the figures are the standard unlabelled ones.
"""

from __future__ import annotations

import contextlib
import glob
import os
import re
import time
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.metrics_core import Metric
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead

from service.api.asgi import StatusSend, route_template
from service.core.processes import pid_alive

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

BUCKETS: tuple[float, ...] = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

CACHE_HITS = "clir_query_cache_hits_total"
CACHE_MISSES = "clir_query_cache_misses_total"
DEGRADED = "clir_degraded_responses_total"
COUNTERS = {
    CACHE_HITS: "Queries whose forests came from the cache.",
    CACHE_MISSES: "Queries decoded because the cache did not hold them.",
    DEGRADED: "Responses whose decoding the time budget cut short, or missing a shard.",
}
API_PROCESSES = "clir_api_processes"
# the Ray searcher's events (service.collection.replicas): kind -> the counter's help
SHARD_EVENTS = {
    "failovers": "Shard calls asked again of another copy after a copy failed.",
    "hedges": "Shard calls also asked of a second copy after the shard's hedge delay.",
    "replacements": "Shard copies started again on a live node (died, lost, or frozen).",
    "in_process": "Searches answered in the API process because no copy of a shard answered.",
}


def multiprocess_dir() -> str | None:
    """The multiprocess directory, if this process runs in ``prometheus_client``'s multiprocess
    mode (the library reads the variable itself when it is imported, so it is read here too)."""
    return os.environ.get(MULTIPROC_ENV) or None


class Metrics:
    """The service's series (see the module docstring); safe to use from any thread."""

    def __init__(self) -> None:
        disable_created_metrics()  # type: ignore[no-untyped-call]  # no *_created series: the same text in both modes
        self.directory = multiprocess_dir()
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter(
            "clir_http_requests",
            "HTTP requests by route, method and status.",
            ("endpoint", "method", "status"),
            registry=r,
        )
        self.latency = Histogram(
            "clir_http_request_duration_seconds",
            "HTTP request latency.",
            ("endpoint", "method"),
            buckets=BUCKETS,
            registry=r,
        )
        self.decode = Histogram(
            "clir_decode_seconds",
            "Query decoding time (cache misses).",
            buckets=BUCKETS,
            registry=r,
        )
        self.counters = {
            name: Counter(name.removesuffix("_total"), text, registry=r)
            for name, text in COUNTERS.items()
        }

        def gauge(name: str, text: str) -> Gauge:
            return Gauge(name, text, registry=r, multiprocess_mode="livesum")

        self.cache_entries = gauge("clir_query_cache_entries", "Decoded queries in the cache.")
        self.cache_capacity = gauge("clir_query_cache_capacity", "Capacity of the query cache.")
        self.cache_bytes = gauge(
            "clir_query_cache_bytes", "Approximate memory held by the query cache."
        )
        self.processes = gauge(API_PROCESSES, "API processes summed here.")
        self.admission_queued = gauge(
            "clir_admission_queued", "Query requests waiting for a slot (CLIR_QUEUE_SIZE)."
        )
        self.admission_running = gauge(
            "clir_admission_running", "Query requests holding a slot (CLIR_MAX_CONCURRENCY)."
        )
        self.refused = Counter(
            "clir_admission_refused",
            "Query requests refused by admission, by kind (search/<method>, translate, "
            "suggest) and status: 503 could not finish within the time budget, 429 queue full.",
            ("kind", "status"),
            registry=r,
        )
        self.shard_latency = Histogram(
            "clir_shard_search_seconds",
            "Time one shard of the collection took to rank a query (its segments, merged).",
            ("shard",),
            buckets=BUCKETS,
            registry=r,
        )
        self.shard_docs = Gauge(
            "clir_shard_documents",
            "Live documents in each shard of the served collection.",
            ("shard",),
            registry=r,
            multiprocess_mode="livemax",  # every process sees the same collection
        )
        self.shard_events = {
            kind: Counter(f"clir_shard_{kind}", text, ("shard",), registry=r)
            for kind, text in SHARD_EVENTS.items()
        }
        self.processes.set(1)
        if self.directory is None:
            ProcessCollector(registry=r)

    def observe_request(self, endpoint: str, method: str, status: int, seconds: float) -> None:
        self.requests.labels(endpoint, method, str(status)).inc()
        self.latency.labels(endpoint, method).observe(seconds)

    def observe_decode(self, seconds: float) -> None:
        self.decode.observe(seconds)

    def inc(self, name: str, by: int = 1) -> None:
        self.counters[name].inc(by)

    def observe_shards(self, seconds: dict[int, float]) -> None:
        """How long each shard took for one query."""
        for shard, secs in seconds.items():
            self.shard_latency.labels(str(shard)).observe(secs)

    def count_shard_event(self, kind: str, shard: int, n: int = 1) -> None:
        """One of :data:`SHARD_EVENTS` (``failover``, ``hedge``, ``replacement`` or
        ``in_process``, singular or plural) happened ``n`` times to ``shard``."""
        kind = kind if kind in self.shard_events else f"{kind}s"
        self.shard_events[kind].labels(str(shard)).inc(n)

    def set_shard_docs(self, docs: list[int]) -> None:
        for shard, n in enumerate(docs):
            self.shard_docs.labels(str(shard)).set(n)

    def set_admission(self, queued: int, running: int) -> None:
        """This process's admission queue: requests waiting, requests holding a slot."""
        self.admission_queued.set(queued)
        self.admission_running.set(running)

    def count_refused(self, kind: str, status: int) -> None:
        self.refused.labels(kind, str(status)).inc()

    def set_cache(self, entries: int, capacity: int, nbytes: int) -> None:
        """This process's query cache: entries, capacity and approximate bytes."""
        self.cache_entries.set(entries)
        self.cache_capacity.set(capacity)
        self.cache_bytes.set(nbytes)

    def render(self) -> str:
        """The exposition text: this process's series, or with several processes the merge of
        every process's files plus the process figures of each live one."""
        if self.directory is None:
            return generate_latest(self.registry).decode()
        forget_dead_processes(self.directory)
        merged = CollectorRegistry(auto_describe=False)
        MultiProcessCollector(merged, path=self.directory)  # type: ignore[no-untyped-call]
        merged.register(ApiProcessCollector(self.directory))
        return generate_latest(merged).decode()


class UncountedMetrics(Metrics):
    """Records nothing (the warm-up is not traffic). In multiprocess mode a second
    :class:`Metrics` would write into the same files, so this one has no series at all."""

    def __init__(self) -> None:
        self.directory = None
        self.registry = CollectorRegistry(auto_describe=True)

    def observe_request(self, endpoint: str, method: str, status: int, seconds: float) -> None:
        pass

    def observe_decode(self, seconds: float) -> None:
        pass

    def inc(self, name: str, by: int = 1) -> None:
        pass

    def observe_shards(self, seconds: dict[int, float]) -> None:
        pass

    def count_shard_event(self, kind: str, shard: int, n: int = 1) -> None:
        pass

    def set_shard_docs(self, docs: list[int]) -> None:
        pass

    def set_cache(self, entries: int, capacity: int, nbytes: int) -> None:
        pass

    def set_admission(self, queued: int, running: int) -> None:
        pass

    def count_refused(self, kind: str, status: int) -> None:
        pass


_LIVE_GAUGE_FILE = re.compile(r"gauge_live[a-z]+_(\d+)\.db")


def api_pids(directory: str) -> set[int]:
    """The pids of the processes with live-gauge files in ``directory`` (every API process
    writes ``clir_api_processes``)."""
    out = set()
    for path in glob.glob(os.path.join(directory, "gauge_live*_*.db")):
        m = _LIVE_GAUGE_FILE.fullmatch(os.path.basename(path))
        if m is not None:
            out.add(int(m.group(1)))
    return out


def forget_dead_processes(directory: str) -> list[int]:
    """Drop the live-gauge files of processes that are gone; their pids. Counter and histogram
    files are kept: what a dead process counted stays in the totals."""
    dead = [pid for pid in sorted(api_pids(directory)) if not pid_alive(pid)]
    for pid in dead:
        with contextlib.suppress(FileNotFoundError):
            mark_process_dead(pid, directory)  # type: ignore[no-untyped-call]
    return dead


class ApiProcessCollector:
    """``process_*`` figures of every live API process, labelled ``pid`` (read from ``/proc``
    with ``prometheus_client``'s own :class:`ProcessCollector`)."""

    def __init__(self, directory: str) -> None:
        self.directory = directory

    def collect(self) -> Iterable[Metric]:
        families: dict[str, Metric] = {}
        for pid in sorted(api_pids(self.directory)):
            if not pid_alive(pid):
                continue
            collector = ProcessCollector(pid=lambda p=pid: p, registry=None)  # type: ignore[misc]
            for family in collector.collect():
                out = families.get(family.name)
                if out is None:
                    out = families[family.name] = Metric(
                        family.name, family.documentation, family.type, family.unit
                    )
                for s in family.samples:
                    out.add_sample(s.name, {**s.labels, "pid": str(pid)}, s.value)
        return list(families.values())


class MetricsMiddleware:
    """Counts every HTTP request by route template, method and status, and times it;
    ``after`` runs after each request (it refreshes the cache gauges)."""

    def __init__(
        self, app: ASGIApp, metrics: Metrics, after: Callable[[], None] | None = None
    ) -> None:
        self.app = app
        self.metrics = metrics
        self.after = after

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        recorder = StatusSend(send)
        try:
            await self.app(scope, receive, recorder)
        finally:
            self.metrics.observe_request(
                route_template(scope),
                str(scope.get("method", "")),
                recorder.status,
                time.perf_counter() - start,
            )
            if self.after is not None:
                self.after()
