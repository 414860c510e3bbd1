"""Service metrics in the Prometheus text exposition format (``GET /metrics``), written by hand.

Counters and histograms live in one :class:`Metrics` object on ``app.state`` behind a lock;
:class:`MetricsMiddleware` (plain ASGI) records every request under its route template (so
``/v1/documents/{doc_id:path}`` is one series, not one per id; unmatched paths count as
``other``), method and status. The query cache and the decoder add their own series.

With several API processes (``clir serve --workers N``) a scrape reaches one of them, so each
process publishes a snapshot of its metrics and gauges to ``metrics_dir`` (:class:`SharedMetrics`,
one JSON file per pid, replaced atomically about once a second and on every scrape) and
``/metrics`` answers with the sum over the live processes. A restarted process starts from 0,
which Prometheus reads as a counter reset.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from service.jobs.store import pid_alive

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

BUCKETS: tuple[float, ...] = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class Histogram:
    """Cumulative buckets, sum and count of observed seconds."""

    def __init__(self) -> None:
        self.buckets = [0] * len(BUCKETS)
        self.total = 0.0
        self.count = 0

    def observe(self, seconds: float) -> None:
        for i, upper in enumerate(BUCKETS):
            if seconds <= upper:
                self.buckets[i] += 1
        self.total += seconds
        self.count += 1

    def add(self, other: Histogram) -> None:
        self.buckets = [a + b for a, b in zip(self.buckets, other.buckets, strict=True)]
        self.total += other.total
        self.count += other.count

    def to_json(self) -> list[Any]:
        return [self.buckets, self.total, self.count]

    @classmethod
    def from_json(cls, data: list[Any]) -> Histogram:
        h = cls()
        buckets, h.total, h.count = data
        if len(buckets) != len(BUCKETS):
            raise ValueError(f"a histogram snapshot has {len(buckets)} buckets, not {len(BUCKETS)}")
        h.buckets = [int(n) for n in buckets]
        return h


def _labels(**labels: str) -> str:
    def esc(v: str) -> str:
        return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")

    return "{" + ",".join(f'{k}="{esc(v)}"' for k, v in labels.items()) + "}"


class Metrics:
    """Thread-safe request, decode and cache metrics."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.requests: defaultdict[tuple[str, str, str], int] = defaultdict(int)
        self.latency: defaultdict[tuple[str, str], Histogram] = defaultdict(Histogram)
        self.decode = Histogram()
        self.counters: defaultdict[str, int] = defaultdict(int)

    def observe_request(self, endpoint: str, method: str, status: int, seconds: float) -> None:
        with self._lock:
            self.requests[(endpoint, method, str(status))] += 1
            self.latency[(endpoint, method)].observe(seconds)

    def observe_decode(self, seconds: float) -> None:
        with self._lock:
            self.decode.observe(seconds)

    def inc(self, name: str, by: int = 1) -> None:
        with self._lock:
            self.counters[name] += by

    def snapshot(self) -> dict[str, Any]:
        """Everything counted so far, as JSON-able data (:meth:`from_snapshot` reads it)."""
        with self._lock:
            return {
                "requests": [[*key, n] for key, n in self.requests.items()],
                "latency": [[*key, h.to_json()] for key, h in self.latency.items()],
                "decode": self.decode.to_json(),
                "counters": dict(self.counters),
            }

    @classmethod
    def from_snapshot(cls, data: dict[str, Any]) -> Metrics:
        m = cls()
        for ep, method, status, n in data["requests"]:
            m.requests[(ep, method, status)] += int(n)
        for ep, method, h in data["latency"]:
            m.latency[(ep, method)] = Histogram.from_json(h)
        m.decode = Histogram.from_json(data["decode"])
        for name, n in data["counters"].items():
            m.counters[name] += int(n)
        return m

    def add(self, other: Metrics) -> None:
        """Add ``other``'s counts to these (summing processes)."""
        with self._lock:
            for key, n in other.requests.items():
                self.requests[key] += n
            for lkey, h in other.latency.items():
                self.latency[lkey].add(h)
            self.decode.add(other.decode)
            for name, n in other.counters.items():
                self.counters[name] += n

    def render(self, gauges: dict[str, tuple[str, float]] | None = None) -> str:
        """The exposition text; ``gauges`` maps a name to (help, value)."""
        lines: list[str] = []
        with self._lock:
            lines += [
                "# HELP clir_http_requests_total HTTP requests by route, method and status.",
                "# TYPE clir_http_requests_total counter",
            ]
            for (ep, method, status), n in sorted(self.requests.items()):
                lines.append(
                    f"clir_http_requests_total{_labels(endpoint=ep, method=method, status=status)}"
                    f" {n}"
                )
            name = "clir_http_request_duration_seconds"
            lines += [f"# HELP {name} HTTP request latency.", f"# TYPE {name} histogram"]
            for (ep, method), h in sorted(self.latency.items()):
                lines += _histogram(name, h, {"endpoint": ep, "method": method})
            name = "clir_decode_seconds"
            lines += [
                f"# HELP {name} Query decoding time (cache misses).",
                f"# TYPE {name} histogram",
            ]
            lines += _histogram(name, self.decode, {})
            for counter, help_text in COUNTERS.items():
                lines += [
                    f"# HELP {counter} {help_text}",
                    f"# TYPE {counter} counter",
                    f"{counter} {self.counters.get(counter, 0)}",
                ]
        for gauge, (help_text, value) in sorted((gauges or {}).items()):
            lines += [f"# HELP {gauge} {help_text}", f"# TYPE {gauge} gauge", f"{gauge} {value:g}"]
        return "\n".join(lines) + "\n"


Gauges = dict[str, tuple[str, float]]


class SharedMetrics:
    """The metrics of every API process sharing ``directory`` (see the module docstring)."""

    def __init__(self, directory: str | os.PathLike[str], pid: int | None = None) -> None:
        self.directory = os.fspath(directory)
        self.pid = os.getpid() if pid is None else pid

    def publish(self, metrics: Metrics, gauges: Gauges) -> None:
        """Replace this process's snapshot (write to a temporary file, then rename)."""
        data = {"pid": self.pid, "metrics": metrics.snapshot(), "gauges": gauges}
        path = os.path.join(self.directory, f"{self.pid}.json")
        tmp = f"{path}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(data, f)
        os.replace(tmp, path)

    def collect(self) -> tuple[Metrics, Gauges, int]:
        """The sum of the live processes' snapshots (files of dead pids are removed) and the
        number of processes summed. Gauges are summed too (cache entries, bytes, capacity)."""
        total = Metrics()
        gauges: Gauges = {}
        processes = 0
        for name in sorted(os.listdir(self.directory)):
            if not name.endswith(".json"):
                continue
            path = os.path.join(self.directory, name)
            pid = int(name.removesuffix(".json"))
            if pid != self.pid and not pid_alive(pid):
                with contextlib.suppress(FileNotFoundError):
                    os.remove(path)
                continue
            try:
                with open(path, encoding="utf-8") as f:
                    data = json.load(f)
            except FileNotFoundError:  # its process exited between listdir and open
                continue
            total.add(Metrics.from_snapshot(data["metrics"]))
            for gauge, (help_text, value) in data["gauges"].items():
                prev = gauges.get(gauge, (help_text, 0.0))[1]
                gauges[gauge] = (help_text, prev + float(value))
            processes += 1
        return total, gauges, processes


CACHE_HITS = "clir_query_cache_hits_total"
CACHE_MISSES = "clir_query_cache_misses_total"
DEGRADED = "clir_degraded_responses_total"
COUNTERS = {
    CACHE_HITS: "Queries whose forests came from the cache.",
    CACHE_MISSES: "Queries decoded because the cache did not hold them.",
    DEGRADED: "Responses whose decoding the time budget cut short.",
}


def _histogram(name: str, h: Histogram, labels: dict[str, str]) -> list[str]:
    out = [
        f"{name}_bucket{_labels(**labels, le=f'{upper:g}')} {n}"
        for upper, n in zip(BUCKETS, h.buckets, strict=True)
    ]
    out.append(f"{name}_bucket{_labels(**labels, le='+Inf')} {h.count}")
    suffix = _labels(**labels) if labels else ""
    out.append(f"{name}_sum{suffix} {h.total:.6f}")
    out.append(f"{name}_count{suffix} {h.count}")
    return out


class MetricsMiddleware:
    """Counts every HTTP request by route template, method and status, and times it."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500

        async def send_wrapper(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            route = scope.get("route")
            endpoint = str(getattr(route, "path", "other"))
            self.metrics.observe_request(
                endpoint, str(scope.get("method", "")), status, time.perf_counter() - start
            )
