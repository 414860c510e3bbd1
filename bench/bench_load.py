"""Bounded load benchmark of the running service on loopback.

Starts the real service (``clir serve --workers W`` in a subprocess, W = ``--workers``, default
one API process per core, on 127.0.0.1 and a free port, with the configured model bundles and
indexes, or the committed demo bundle with ``--demo``), waits for ``/readyz``, warms up
(``--warmup`` seconds with the largest client count, so that the memory baseline already holds
the most requests in flight and a filled query cache), then runs C concurrent clients
(``--clients``, default 4, 32 and 64) for D seconds each (``--duration``, default 120) or
until ``--max-requests`` requests, whichever comes first; then it stops. The request mix:

* ``POST /v1/search`` method bowfd (35 %) and dt (25 %), ``POST /v1/suggest`` (15 %),
  ``POST /v1/translate`` (25 %, the query's first sentence);
* German dev queries from ``clir/lohelp-de/queries.dev.tsv``: half from a hot set of 20
  (repeated: the query cache answers them), half fresh (each dev query in turn).

Recorded per phase: throughput, p50/p95/p99 latency per endpoint (and repeated vs fresh), status
counts (5xx must be 0), the share of answers served from the cache; the server's RSS and the
number of cached queries after the warm-up and after every phase (growth %); RSS is the sum
over the server's process tree (supervisor, API processes). Per phase also the share of
answers 200, 503 (refused: the request could not finish within its time budget) and 429 (the
admission queue was full), and the latency of each. The load phases run with the service's
admission rule (:mod:`service.api.admission`: a request queues while it can finish within
``request_time_budget_s``); ``--queue-timeout S`` sets the deprecated ``CLIR_QUEUE_TIMEOUT_S``
as well (0.1 gives the refusal of the service before that rule, 600 an unbounded wait).
A run of the admission levels in a few minutes on the demo: ``python -m bench load --demo
--workers 1 --clients 4,32,64 --duration 30 --warmup 10 --probe-slots 0 --train-clients 0
--out bench/results/load_admission_demo.json``. Then an **overload probe**
against a second server started with ``max_concurrency`` = ``--probe-slots``, the queue
settings of the load phases and 4× as many clients: the share of 503 answers, whether each
carried Retry-After, and their latency next to that of the answered requests.

Then a **training phase**: a third server with the query cache
off (every request does its full work, so equal requests cost the same) and its embedded
training worker runs ``--train-clients`` clients for ``--duration`` s idle, then a
learning-to-rank job is submitted over the admin API (``POST /v1/admin/train``: hinge, SMT
frozen, a small slice of the training queries) and, once it runs, the same clients send the same
request sequence again; latency, 5xx and RSS of both halves are recorded with the job's state,
and the job is cancelled at the end.

``--env CLIR_KEY=VALUE`` (repeatable) sets the served configuration, for example a collection
and the Ray backend; ``--probe-slots 0`` and ``--train-clients 0`` skip the probe and the
training phase.

Writes ``bench/results/load.json`` (``--out``). A short proof run:
``nice -n 10 python -m bench load --demo --duration 10 --out bench/results/load_demo.json``.
"""

from __future__ import annotations

import asyncio
import json
import os
import platform
import random
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import httpx2

from bench.common import DATA, RESULTS_DIR, ROOT, Help, percentile, write_result
from service.core.settings import Settings

RESULTS = RESULTS_DIR / "load.json"
HOT_SET = 20
MIX: list[tuple[str, float]] = [
    ("search/bowfd", 0.35),
    ("search/dt", 0.25),
    ("suggest", 0.15),
    ("translate", 0.25),
]
DEMO_ENV = {
    "CLIR_MODEL_BUNDLES": json.dumps(["models/demo-de-en"]),
    "CLIR_DOC_INDEXES": json.dumps(["indexes/demo"]),
    "CLIR_POOL_INDEXES": json.dumps(["indexes/demo-pool"]),
}


# --- the server --------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rss_mb(pid: int) -> float:
    """Resident set size of process ``pid`` in MiB (from /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def process_tree(root: int) -> list[int]:
    """``root`` and all its descendants (from /proc)."""
    parent: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parent[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    tree, frontier = [root], [root]
    while frontier:
        frontier = [pid for pid, ppid in parent.items() if ppid in frontier]
        tree += frontier
    return [pid for pid in tree if Path(f"/proc/{pid}/status").exists()]


class Server:
    """``clir serve`` in a subprocess, on loopback; stopped with SIGTERM (then SIGKILL)."""

    def __init__(
        self, env: dict[str, str], log: Path, workers: int, log_level: str = "warning"
    ) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        full_env = {k: v for k, v in os.environ.items() if not k.startswith("CLIR_")}
        full_env.update({"CLIR_EMBEDDED_WORKER": "false", **env})
        self._log_file = log.open("w", encoding="utf-8")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "service.cli",
                "serve",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--log-level",
                log_level,
                "--workers",
                str(workers),
            ],
            cwd=ROOT,
            env=full_env,
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
        )
        self.load_seconds = 0.0

    def wait_ready(self, timeout: float) -> dict[str, Any]:
        start = time.perf_counter()
        deadline = start + timeout
        while time.perf_counter() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the server exited ({self.proc.returncode}); see {self.log}")
            try:
                r = httpx2.get(f"{self.url}/readyz", timeout=5)
                if r.status_code == 200:
                    self.load_seconds = time.perf_counter() - start
                    status: dict[str, Any] = r.json()
                    return status
            except httpx2.TransportError:
                pass
            time.sleep(0.5)
        raise RuntimeError(f"the server was not ready within {timeout:g} s; see {self.log}")

    def rss(self) -> float:
        """RSS of the whole process tree (the supervisor and its API processes)."""
        return sum(rss_mb(pid) for pid in process_tree(self.proc.pid))

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)
        self._log_file.close()


# --- the workload ------------------------------------------------------------------------------


def load_queries(path: Path) -> list[str]:
    queries = []
    for line in path.read_text(encoding="utf-8").splitlines():
        parts = line.split("\t")
        if len(parts) >= 2 and parts[1].strip():
            queries.append(parts[1].strip())
    if len(queries) <= HOT_SET:
        raise SystemExit(f"{path}: need more than {HOT_SET} queries, found {len(queries)}")
    return queries


def first_sentence(text: str) -> str:
    for stop in (". ", "? ", "! ", ": "):
        if stop in text:
            return text.split(stop, 1)[0]
    return text


@dataclass
class Workload:
    """A seeded request stream: (endpoint, repeated?, path, body)."""

    queries: list[str]
    seed: int
    rng: random.Random = field(init=False)
    fresh_next: int = field(default=HOT_SET, init=False)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    def next(self) -> tuple[str, bool, str, dict[str, Any]]:
        endpoint = self.rng.choices([m for m, _ in MIX], weights=[w for _, w in MIX])[0]
        repeated = self.rng.random() < 0.5
        if repeated:
            text = self.queries[self.rng.randrange(HOT_SET)]
        else:
            text = self.queries[self.fresh_next]
            self.fresh_next = HOT_SET + (self.fresh_next + 1 - HOT_SET) % (
                len(self.queries) - HOT_SET
            )
        return (endpoint, repeated, *request_for(endpoint, text))


def request_for(endpoint: str, text: str) -> tuple[str, dict[str, Any]]:
    if endpoint.startswith("search/"):
        return "/v1/search", {"query": text, "lang": "de", "method": endpoint.split("/")[1]}
    if endpoint == "suggest":
        return "/v1/suggest", {"query": first_sentence(text), "lang": "de", "nbest": 5}
    return "/v1/translate", {"query": first_sentence(text), "lang": "de"}


@dataclass
class Sample:
    endpoint: str
    repeated: bool
    status: int  # 0: transport error
    seconds: float
    retry_after: bool
    cached: bool | None
    degraded: bool = False  # answered from only some shards of a collection


async def run_phase(
    url: str, workload: Workload, clients: int, duration: float, max_requests: int
) -> tuple[list[Sample], float]:
    """``clients`` concurrent loops for ``duration`` s or ``max_requests`` requests."""
    samples: list[Sample] = []
    issued = 0
    limits = httpx2.Limits(max_connections=clients, max_keepalive_connections=clients)
    start = time.perf_counter()
    deadline = start + duration
    async with httpx2.AsyncClient(base_url=url, timeout=300.0, limits=limits) as http:

        async def client() -> None:
            nonlocal issued
            while time.perf_counter() < deadline and issued < max_requests:
                issued += 1
                endpoint, repeated, path, body = workload.next()
                t0 = time.perf_counter()
                try:
                    r = await http.post(path, json=body)
                    status = r.status_code
                    retry = "retry-after" in r.headers
                    answer = r.json() if status == 200 else {}
                    cached, degraded = answer.get("cached"), bool(answer.get("degraded"))
                except httpx2.TransportError:
                    status, retry, cached, degraded = 0, False, None, False
                seconds = time.perf_counter() - t0
                samples.append(Sample(endpoint, repeated, status, seconds, retry, cached, degraded))

        await asyncio.gather(*(client() for _ in range(clients)))
    return samples, time.perf_counter() - start


def latency_stats(seconds: list[float]) -> dict[str, Any]:
    ms = sorted(s * 1000 for s in seconds)
    if not ms:
        return {"n": 0}
    return {
        "n": len(ms),
        "mean_ms": round(sum(ms) / len(ms), 1),
        "p50_ms": round(percentile(ms, 50), 1),
        "p95_ms": round(percentile(ms, 95), 1),
        "p99_ms": round(percentile(ms, 99), 1),
        "max_ms": round(ms[-1], 1),
    }


def summarise(samples: list[Sample], elapsed: float, clients: int) -> dict[str, Any]:
    status = Counter(str(s.status) for s in samples)
    by_endpoint: dict[str, dict[str, Any]] = {}
    groups: defaultdict[str, list[Sample]] = defaultdict(list)
    for s in samples:
        groups[s.endpoint].append(s)
    for endpoint, group in sorted(groups.items()):
        ok = [s for s in group if s.status == 200]
        cached = [s for s in ok if s.cached is not None]
        by_endpoint[endpoint] = {
            **latency_stats([s.seconds for s in ok]),
            "repeated": latency_stats([s.seconds for s in ok if s.repeated]),
            "fresh": latency_stats([s.seconds for s in ok if not s.repeated]),
            "cache_hit_share": (
                round(sum(1 for s in cached if s.cached) / len(cached), 3) if cached else None
            ),
            "status": dict(Counter(str(s.status) for s in group)),
        }
    return {
        "clients": clients,
        "seconds": round(elapsed, 2),
        "requests": len(samples),
        "throughput_rps": round(len(samples) / elapsed, 2) if elapsed else None,
        "status": dict(sorted(status.items())),
        # 503 is the admission's refusal (with Retry-After, counted in share), not an error
        "errors_5xx": sum(1 for s in samples if s.status >= 500 and s.status != 503),
        "transport_errors": sum(1 for s in samples if s.status == 0),
        "degraded": sum(1 for s in samples if s.degraded),
        "share": {
            code: round(sum(1 for s in samples if s.status == int(code)) / len(samples), 3)
            if samples
            else None
            for code in ("200", "503", "429")
        },
        "all_ok": latency_stats([s.seconds for s in samples if s.status == 200]),
        "refused_503": latency_stats([s.seconds for s in samples if s.status == 503]),
        "refused_429": latency_stats([s.seconds for s in samples if s.status == 429]),
        "endpoints": by_endpoint,
    }


def summarise_overload(samples: list[Sample], elapsed: float, clients: int) -> dict[str, Any]:
    refused = [s for s in samples if s.status == 503]
    answered = [s for s in samples if s.status == 200]
    return {
        "clients": clients,
        "seconds": round(elapsed, 2),
        "requests": len(samples),
        "status": dict(sorted(Counter(str(s.status) for s in samples).items())),
        "share_503": round(len(refused) / len(samples), 3) if samples else None,
        "share_503_with_retry_after": (
            round(sum(1 for s in refused if s.retry_after) / len(refused), 3) if refused else None
        ),
        "other_5xx": sum(1 for s in samples if s.status >= 500 and s.status != 503),
        "latency_503": latency_stats([s.seconds for s in refused]),
        "latency_200": latency_stats([s.seconds for s in answered]),
    }


# --- main --------------------------------------------------------------------------------------


def start_server(
    env: dict[str, str], log: Path, timeout: float, workers: int
) -> tuple[Server, dict[str, Any]]:
    server = Server(env, log, workers)
    try:
        ready = server.wait_ready(timeout)
    except BaseException:
        server.stop()
        raise
    return server, ready


def warm_up(url: str, queries: list[str], seconds: float, clients: int = 4) -> dict[str, Any]:
    """Decode the hot set once (search fills the query cache that search and suggest share),
    touch every endpoint, then ``seconds`` of the mix with ``clients`` clients."""
    t0 = time.perf_counter()
    status: Counter[str] = Counter()
    with httpx2.Client(base_url=url, timeout=120.0) as http:
        for text in queries[:HOT_SET]:
            path, body = request_for("search/bowfd", text)
            status[str(http.post(path, json=body).status_code)] += 1
        for endpoint, _ in MIX:
            path, body = request_for(endpoint, queries[0])
            status[str(http.post(path, json=body).status_code)] += 1
    if seconds > 0:
        samples, _ = asyncio.run(run_phase(url, Workload(queries, seed=1), clients, seconds, 10**6))
        status.update(str(s.status) for s in samples)
    return {"seconds": round(time.perf_counter() - t0, 1), "status": dict(status)}


def cache_entries(url: str) -> int | None:
    """The server's query-cache size, from ``/metrics``."""
    text = httpx2.get(f"{url}/metrics", timeout=30).text
    for line in text.splitlines():
        if line.startswith("clir_query_cache_entries "):
            return int(float(line.split()[1]))
    return None


TOKEN = "bench-load-token"
TRAIN_JOB = {"lang": "de", "objective": "hinge", "freeze_smt": True, "epochs": 3, "limit": 60,
             "dev_limit": 30}  # fmt: skip


def training_phase(
    args: Params, base_env: dict[str, str], queries: list[str], log_dir: Path
) -> dict[str, Any]:
    """Idle vs while a training job runs: same server (cache off), same request sequence."""
    env = {
        **base_env,
        **queue_env(args),
        "CLIR_FOREST_CACHE_SIZE": "0",
        "CLIR_ADMIN_TOKEN": TOKEN,
        "CLIR_EMBEDDED_WORKER": "true",
        "CLIR_JOB_STORE": str(log_dir / "jobs.sqlite3"),
    }
    auth = {"authorization": f"Bearer {TOKEN}"}
    server, _ = start_server(env, log_dir / "train_server.log", args.ready_timeout, args.workers)
    out: dict[str, Any] = {"clients": args.train_clients, "job_params": TRAIN_JOB}
    try:
        warm_up(server.url, queries, 0.0)
        for label in ("idle", "while_training"):
            if label == "while_training":
                job = httpx2.post(f"{server.url}/v1/admin/train", json=TRAIN_JOB, headers=auth,
                                  timeout=60).json()  # fmt: skip
                deadline = time.perf_counter() + 300
                while time.perf_counter() < deadline:
                    state = httpx2.get(f"{server.url}/v1/admin/jobs/{job['id']}", headers=auth,
                                       timeout=30).json()  # fmt: skip
                    if state["state"] != "queued":
                        break
                    time.sleep(1)
                out["job_state_at_start"] = state["state"]
            samples, elapsed = asyncio.run(
                run_phase(server.url, Workload(queries, seed=42), args.train_clients,
                          args.duration, args.max_requests)
            )  # fmt: skip
            out[label] = summarise(samples, elapsed, args.train_clients)
            out[label]["rss_mb"] = round(server.rss(), 1)
            print(f"{label}: {out[label]['status']}, p99 {out[label]['all_ok'].get('p99_ms')} ms",
                  file=sys.stderr)  # fmt: skip
        state = httpx2.get(f"{server.url}/v1/admin/jobs/{job['id']}", headers=auth,
                           timeout=30).json()  # fmt: skip
        out["job_state_at_end"] = {k: state.get(k) for k in ("state", "progress", "message")}
        httpx2.delete(f"{server.url}/v1/admin/jobs/{job['id']}", headers=auth, timeout=30)
        idle, busy = out["idle"]["all_ok"], out["while_training"]["all_ok"]
        out["p50_ratio"] = round(busy["p50_ms"] / idle["p50_ms"], 2) if idle.get("p50_ms") else None
        out["p99_ratio"] = round(busy["p99_ms"] / idle["p99_ms"], 2) if idle.get("p99_ms") else None
    finally:
        server.stop()
    return out


def overload_probe(
    args: Params,
    queries: list[str],
    probe_env: dict[str, str],
    probe_clients: int,
    log_dir: Path,
    result: dict[str, Any],
) -> None:
    """4x as many clients as slots against a server with the load phases' queue settings."""
    probe_slots = args.probe_slots
    server, _ = start_server(
        probe_env, log_dir / "load_probe_server.log", args.ready_timeout, args.workers
    )
    try:
        warm_up(server.url, queries, 0.0)
        duration = args.probe_duration or max(5.0, args.duration / 4)
        samples, elapsed = asyncio.run(
            run_phase(server.url, Workload(queries, 7), probe_clients, duration, args.max_requests)
        )
        result["overload"] = {
            "max_concurrency": probe_slots,
            "queue_timeout_s": args.queue_timeout,
            **summarise_overload(samples, elapsed, probe_clients),
        }
        print(f"overload probe: {result['overload']['status']}", file=sys.stderr)
    finally:
        server.stop()


@dataclass(frozen=True)
class Params:
    demo: Annotated[bool, Help("serve the committed demo bundle")] = False
    clients: Annotated[tuple[int, ...], Help("concurrent clients per phase")] = (4, 32, 64)
    workers: Annotated[int, Help("API processes (one per core)")] = os.cpu_count() or 1
    duration: Annotated[float, Help("seconds per phase")] = 120.0
    max_requests: Annotated[int, Help("requests per phase")] = 200_000
    warmup: Annotated[float, Help("seconds of warm-up load (largest client count)")] = 60.0
    queue_timeout: Annotated[
        float | None,
        Help(
            "the deprecated CLIR_QUEUE_TIMEOUT_S of the load phases (unset: admission by the "
            "time budget alone; 0.1: the refusal before it; 600: queue without bound)"
        ),
    ] = None
    probe_slots: Annotated[int, Help("max_concurrency of the probe (0: no probe)")] = 2
    env: Annotated[
        tuple[str, ...],
        Help(
            "CLIR_KEY=VALUE settings of the served configuration (e.g. a collection as "
            'CLIR_DOC_INDEXES=["/data/wiki"] and CLIR_SEARCH_BACKEND=ray)'
        ),
    ] = ()
    probe_duration: Annotated[float | None, Help("default: --duration/4")] = None
    ready_timeout: Annotated[float, Help("seconds to wait for /readyz")] = 900.0
    queries: Annotated[Path, Help("query file")] = DATA / "clir/lohelp-de/queries.dev.tsv"
    out: Annotated[Path, Help("JSON output")] = RESULTS
    cache_mb: Annotated[int | None, Help("forest_cache_mb per process (default: setting)")] = None
    train_clients: Annotated[int, Help("0: no training phase")] = 16


def queue_env(args: Params) -> dict[str, str]:
    """The served queue settings: the deprecated queue timeout only when asked for."""
    return {} if args.queue_timeout is None else {"CLIR_QUEUE_TIMEOUT_S": str(args.queue_timeout)}


def run(args: Params) -> None:
    queries = load_queries(args.queries)
    base_env = dict(DEMO_ENV) if args.demo else {}
    for item in args.env:
        key, sep, value = item.partition("=")
        if not sep or not key.startswith("CLIR_"):
            raise SystemExit(f"--env takes CLIR_KEY=VALUE, got {item!r}")
        base_env[key] = value
    args.out.parent.mkdir(parents=True, exist_ok=True)
    log_dir = Path(tempfile.mkdtemp(prefix="bench_load_"))  # the servers' logs
    print(f"server logs in {log_dir}", file=sys.stderr)
    result: dict[str, Any] = {
        "setup": {
            "demo": args.demo,
            "env": args.env,
            "queries": str(args.queries),
            "mix": dict(MIX),
            "hot_set": HOT_SET,
            "duration_s": args.duration,
            "max_requests": args.max_requests,
            "queue_timeout_s": args.queue_timeout,
            "machine": f"{platform.machine()}, {os.cpu_count()} cores shared by client and server",
        }
    }

    env = {**base_env, **queue_env(args)}
    if args.cache_mb is not None:
        env["CLIR_FOREST_CACHE_MB"] = str(args.cache_mb)
    # the server's environment has no CLIR_* variables but these, so the rest are the defaults
    defaults = Settings.model_fields
    result["setup"]["forest_cache_mb"] = (
        args.cache_mb if args.cache_mb is not None else defaults["forest_cache_mb"].default
    )
    result["setup"]["workers"] = args.workers
    result["setup"]["max_concurrency_per_process"] = defaults["max_concurrency"].default
    for name in ("queue_size", "request_time_budget_s"):
        result["setup"][name] = defaults[name].default
    server, ready = start_server(env, log_dir / "load_server.log", args.ready_timeout, args.workers)
    try:
        result["server"] = {"ready": ready, "load_seconds": round(server.load_seconds, 1)}
        print(f"server ready in {server.load_seconds:.1f} s: {ready['models']}", file=sys.stderr)
        result["warmup"] = warm_up(server.url, queries, args.warmup, max(args.clients))
        rss: dict[str, float] = {"after_warmup": round(server.rss(), 1)}
        cache = {"after_warmup": cache_entries(server.url)}
        phases = []
        for i, clients in enumerate(args.clients):
            workload = Workload(queries, seed=100 + i)
            samples, elapsed = asyncio.run(
                run_phase(server.url, workload, clients, args.duration, args.max_requests)
            )
            phase = summarise(samples, elapsed, clients)
            rss[f"after_{clients}_clients"] = round(server.rss(), 1)
            cache[f"after_{clients}_clients"] = cache_entries(server.url)
            phases.append(phase)
            print(
                f"{clients} clients: {phase['requests']} requests, "
                f"{phase['throughput_rps']} req/s, status {phase['status']}, "
                f"p50 {phase['all_ok'].get('p50_ms')} ms, "
                f"p99 {phase['all_ok'].get('p99_ms')} ms",
                file=sys.stderr,
            )
        rss["end"] = round(server.rss(), 1)
        rss["growth_pct"] = round(100 * (rss["end"] - rss["after_warmup"]) / rss["after_warmup"], 1)
        result["phases"] = phases
        result["rss_mb"] = rss
        result["query_cache_entries"] = cache  # RSS grows with the cache up to its capacity
        result["errors_5xx"] = sum(ph["errors_5xx"] for ph in phases)
    finally:
        server.stop()

    probe_slots = args.probe_slots
    probe_clients = 4 * probe_slots * args.workers
    probe_env = {**base_env, **queue_env(args), "CLIR_MAX_CONCURRENCY": str(probe_slots)}
    if probe_slots > 0:
        overload_probe(args, queries, probe_env, probe_clients, log_dir, result)

    if args.train_clients > 0:
        result["training"] = training_phase(args, base_env, queries, log_dir)
        result["errors_5xx"] += sum(
            result["training"][k]["errors_5xx"] for k in ("idle", "while_training")
        )

    write_result(args.out, result, args, signatures={"served": base_env}, indent=2)
    print(f"wrote {args.out}", file=sys.stderr)
    if result["errors_5xx"]:
        print(f"FAIL: {result['errors_5xx']} answers with 5xx in the load phases", file=sys.stderr)


if __name__ == "__main__":
    from bench.cli import main_for

    main_for("load")
