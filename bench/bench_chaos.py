"""Chaos benchmark: the service on a two-node local Ray cluster while faults strike on a schedule.

What a deployment meets in its first week, one after the other, each while ``--clients``
clients send a realistic mix (60 % short queries, 25 % questions, 15 % paragraphs; German dev
queries, BOW-FD and DT) to one ``clir serve`` whose collection (the demo documents, 2 shards)
is searched by shard workers on Ray with ``--replicas`` copies of each shard:

* ``kill-copy``: ``kill -9`` of one shard worker process;
* ``kill-node``: ``kill -9`` of the second node's raylet (its workers die with it); the node
  is started again after the window, for the faults that follow;
* ``freeze``: ``SIGSTOP`` of one shard worker for the window, then ``SIGCONT``;
* ``head-restart``: ``ray stop --force`` (both nodes: they run on this machine), then the head
  and the node started again at the same address;
* ``kill-writer``: ``clir docs add --workers 2`` killed with ``kill -9`` mid-add, then a second
  add that must take the lock at once and commit;
* ``rebuild``: ``clir build-index --shards 2 --force`` over the live collection (a new
  generation: the documents added meanwhile must not be served after it);
* ``huge-doc``: one 50 MB document posted to ``/v1/admin/documents`` (refused, naming the
  limit, without stalling the searches).

Per fault it records: 5xx answers, transport errors, degraded answers (a shard missing),
committed documents lost (an id whose add committed, not found afterwards), documents served
after their deletion, the time from the fault to full health (``/readyz`` ready with every copy
of every shard up), and the latency p50/p99 during the fault window and after health.
The bar is Elasticsearch's: no error while a copy of every shard is alive, no acknowledged
write lost.

Writes ``bench/results/chaos.json`` (``--out``). Needs the ``ray`` extra; a bounded run:
``nice python -m bench chaos --window 20``.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2

from bench.bench_load import Server, free_port, latency_stats, load_queries, process_tree
from bench.common import ROOT, write_result
from service.core.processes import command_of

TOKEN = "bench-chaos-token"
MIX = (("short", 0.60), ("question", 0.25), ("paragraph", 0.15))
FAULTS = ("kill-copy", "kill-node", "freeze", "head-restart", "kill-writer", "rebuild", "huge-doc")


@dataclass(frozen=True)
class Params:
    model: str = "models/demo-de-en"
    docs_index: str = "indexes/demo"  # the documents, exported into a 2-shard collection
    data: str = "../shared/data"
    shards: int = 2
    replicas: int = 2
    clients: int = 8
    baseline: float = 20.0  # seconds of load before the first fault
    window: float = 20.0  # seconds of load from each fault on
    heal_timeout: float = 60.0  # how long full health is waited for after a fault
    # the head checks each node every this many seconds and declares it lost after 3 misses,
    # as Elasticsearch's follower checks do by default (1 s, 3 retries); 0: Ray's own (3 s, 5)
    node_check_s: float = 1.0
    faults: str = ",".join(FAULTS)
    seed: int = 7
    out: str = "bench/results/chaos.json"


# --- the cluster -------------------------------------------------------------------------------


class RayProcess:
    """``ray start --block`` (a head, or a node joining ``address``) with a temp dir of its own
    (the default one's ``ray_current_cluster``, left behind when a head is killed, would send
    every later ``ray.init()`` on this machine to a dead cluster); stopped by signalling it."""

    def __init__(self, exe: str, env: dict[str, str], log: Path, head_port: int | None,
                 address: str | None) -> None:  # fmt: skip
        self.temp_dir = tempfile.mkdtemp(prefix="clir-chaos-", dir="/tmp")  # short: sockets
        where = [f"--address={address}"]
        if head_port:
            where = ["--head", f"--port={head_port}", "--include-dashboard=false",
                     f"--temp-dir={self.temp_dir}"]  # fmt: skip
        self.cmd = [exe, "start", "--block", "--num-cpus=1", "--disable-usage-stats", *where]
        self.env, self.log = env, log
        with log.open("ab") as out:
            self.proc = subprocess.Popen(self.cmd, env=env, stdout=out, stderr=out)

    def raylets(self) -> list[int]:
        return [pid for pid in process_tree(self.proc.pid) if "raylet" in command_of(pid)]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # ray start --block stops what it started
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                for pid in process_tree(self.proc.pid):
                    _signal(pid, signal.SIGKILL)
                self.proc.wait(10)

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.temp_dir, ignore_errors=True)


def node_check_env(seconds: float) -> dict[str, str]:
    """Ray's settings for a head that declares a node lost after 3 missed checks ``seconds``
    apart (Ray's own: 5 misses 3 s apart, so a lost node is known only after about 15 s)."""
    ms = str(int(seconds * 1000))
    return {"RAY_health_check_period_ms": ms, "RAY_health_check_timeout_ms": ms,
            "RAY_health_check_failure_threshold": "3"}  # fmt: skip


class Cluster:
    """A head and a second node on this machine (token auth), each ``ray start --block``."""

    def __init__(self, log_dir: Path, node_check_s: float = 0.0) -> None:
        exe = shutil.which("ray", path=str(Path(sys.executable).parent))
        if exe is None:
            raise SystemExit("the ray command comes with the ray extra: pip install '.[ray]'")
        self.exe, self.log_dir = exe, log_dir
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("CLIR_")}
        self.env = {**env, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(16),
                    "RAY_USAGE_STATS_ENABLED": "0", "PYTHONPATH": str(ROOT)}  # fmt: skip
        if node_check_s > 0:
            self.env.update(node_check_env(node_check_s))
        self.head: RayProcess | None = None
        self.node: RayProcess | None = None
        self.old: list[RayProcess] = []

    def start(self) -> None:
        self.head = RayProcess(self.exe, self.env, self.log_dir / "head.log", self.port, None)
        self.wait_nodes(1)
        self.start_node()

    def start_node(self) -> None:
        if self.node is not None:
            self.old.append(self.node)
        self.node = RayProcess(self.exe, self.env, self.log_dir / "node.log", None, self.address)
        self.wait_nodes(2)

    def wait_nodes(self, n: int, timeout: float = 120) -> None:
        """Until ``ray status`` lists ``n`` live nodes."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            out = subprocess.run([self.exe, "status", f"--address={self.address}"], env=self.env,
                                 capture_output=True, text=True, check=False)  # fmt: skip
            if out.returncode == 0 and out.stdout.count("node_") >= n:
                return
            time.sleep(1)
        raise RuntimeError(f"Ray: {n} nodes not up within {timeout:g} s")

    def kill_node(self) -> list[int]:
        assert self.node is not None
        raylets = self.node.raylets()
        for pid in raylets:
            _signal(pid, signal.SIGKILL)
        return raylets

    def stop(self) -> None:
        for p in (*self.old, self.node, self.head):
            if p is not None:
                p.remove()
        self.node = self.head = None
        self.old = []


def _pids(pattern: str) -> list[int]:
    out = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True, check=False)
    return [int(x) for x in out.stdout.split()]


def _signal(pid: int, sig: int) -> bool:
    try:
        os.kill(pid, sig)
        return True
    except ProcessLookupError:
        return False


def shard_workers() -> list[int]:
    """The pids of the shard worker processes (Ray names an actor's process after its class)."""
    return _pids("ray::ShardWorker")


# --- the load ----------------------------------------------------------------------------------


@dataclass
class Sample:
    t0: float
    t1: float
    kind: str
    status: int  # 0: transport error
    degraded: bool
    reason: str | None


@dataclass
class Load:
    """``clients`` loops sending the mix until stopped, in a thread of their own."""

    url: str
    queries: dict[str, list[str]]
    clients: int
    seed: int
    samples: list[Sample] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=120)

    async def _run(self) -> None:
        import random

        limits = httpx2.Limits(max_connections=self.clients)
        async with httpx2.AsyncClient(base_url=self.url, timeout=60.0, limits=limits) as http:

            async def client(i: int) -> None:
                rng = random.Random(self.seed * 1000 + i)
                while not self._stop.is_set():
                    kind = rng.choices([k for k, _ in MIX], [w for _, w in MIX])[0]
                    text = rng.choice(self.queries[kind])
                    method = "bowfd" if rng.random() < 0.6 else "dt"
                    body = {"query": text, "lang": "de", "method": method}
                    t0 = time.monotonic()
                    try:
                        r = await http.post("/v1/search", json=body)
                        answer = r.json() if r.status_code == 200 else {}
                        status = r.status_code
                        if status != 200:
                            answer = {"degraded_reason": f"{status}: {r.text[:200]}"}
                    except (httpx2.TransportError, ValueError):
                        status, answer = 0, {}
                    reason = answer.get("degraded_reason")
                    self.samples.append(
                        Sample(
                            t0, time.monotonic(), kind, status, bool(answer.get("degraded")), reason
                        )
                    )

            await asyncio.gather(*(client(i) for i in range(self.clients)))

    def between(self, start: float, end: float) -> list[Sample]:
        return [s for s in list(self.samples) if start <= s.t0 < end]


def window_stats(samples: list[Sample]) -> dict[str, Any]:
    answered = [s for s in samples if s.status == 200]
    return {
        "requests": len(samples),
        "5xx": sum(1 for s in samples if s.status >= 500),
        "transport_errors": sum(1 for s in samples if s.status == 0),
        "other_errors": sum(1 for s in samples if 0 < s.status < 500 and s.status != 200),
        "status": dict(Counter(str(s.status) for s in samples)),
        "degraded": sum(1 for s in answered if s.degraded),
        # of which a shard's copies or the cluster failed (searched in process), not the budget
        "degraded_cluster": sum(1 for s in answered if s.degraded and _cluster(s.reason)),
        "latency": latency_stats([s.t1 - s.t0 for s in answered]),
        "degraded_reasons": sorted({s.reason for s in answered if s.degraded and s.reason})[:5],
        "errors": sorted({str(s.reason) for s in samples if s.status != 200})[:5],
    }


def _cluster(reason: str | None) -> bool:
    text = str(reason)
    return "shard" in text or "Ray" in text or "API process" in text


# --- health ------------------------------------------------------------------------------------


def whole(ready: dict[str, Any], shards: int, replicas: int) -> bool:
    """Whether ``/readyz`` says every copy of every shard is up."""
    coll = ready.get("collection") or ready.get("ray") or {}
    rows = coll.get("shards") if isinstance(coll, dict) else None
    if not isinstance(rows, list) or len(rows) < shards:
        return False
    for row in rows:
        up = row.get("copies_up", 1 if row.get("up") else 0)
        if up < replicas:
            return False
    return True


@dataclass
class HealthWatch:
    """``/readyz`` every half second, in a thread: when the service was whole."""

    url: str
    shards: int
    replicas: int
    samples: list[tuple[float, bool]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)

    def start(self) -> None:
        threading.Thread(target=self._run, daemon=True).start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        with httpx2.Client(base_url=self.url, timeout=5) as http:
            while not self._stop.is_set():
                t = time.monotonic()
                try:
                    r = http.get("/readyz")
                    ok = r.status_code == 200 and whole(r.json(), self.shards, self.replicas)
                except (httpx2.TransportError, ValueError):
                    ok = False
                self.samples.append((t, ok))
                self._stop.wait(0.5)

    def first_whole_after(self, start: float) -> float | None:
        """Seconds from ``start`` until the service was whole again the first time after it
        stopped being whole (0: it never stopped), or None."""
        seen = [(t, ok) for t, ok in list(self.samples) if t >= start]
        first_bad = next((t for t, ok in seen if not ok), None)
        if first_bad is None:
            return 0.0 if seen else None
        back = next((t for t, ok in seen if ok and t > first_bad), None)
        return None if back is None else round(back - start, 2)

    def healed_after(self, start: float) -> float | None:
        """Seconds from ``start`` until the service was whole again for good (0: it never
        stopped being whole), or None if it is not whole at the last sample."""
        seen = [(t, ok) for t, ok in list(self.samples) if t >= start]
        if not seen or not seen[-1][1]:
            return None
        last_bad = max((t for t, ok in seen if not ok), default=None)
        if last_bad is None:
            return 0.0
        after = [t for t, ok in seen if ok and t > last_bad]
        return round(after[0] - start, 2) if after else None


def wait_whole(url: str, shards: int, replicas: int, timeout: float) -> float | None:
    """Seconds until the service is whole again, or None if not within ``timeout``."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        try:
            r = httpx2.get(f"{url}/readyz", timeout=5)
            if r.status_code == 200 and whole(r.json(), shards, replicas):
                return round(time.monotonic() - t0, 2)
        except (httpx2.TransportError, ValueError):
            pass
        time.sleep(0.25)
    return None


# --- writers -----------------------------------------------------------------------------------


def write_jsonl(path: Path, docs: list[dict[str, str]]) -> None:
    path.write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs), "utf-8")


def new_docs(prefix: str, n: int) -> list[dict[str, str]]:
    return [{"id": f"{prefix}-{i}", "title": f"Chaos {prefix} {i}",
             "text": f"a table of contents number {i} for the chaos test", "source": "chaos"}
            for i in range(n)]  # fmt: skip


def clir(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "service.cli", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout, check=False)  # fmt: skip


def found(url: str, ids: list[str]) -> list[str]:
    with httpx2.Client(base_url=url, timeout=30) as http:
        return [i for i in ids if http.get(f"/v1/documents/{i}").status_code == 200]


# --- the faults --------------------------------------------------------------------------------


class Run:
    def __init__(self, args: Params, work: Path, cluster: Cluster, coll: Path, docs: Path) -> None:
        self.args, self.work, self.cluster, self.coll, self.docs = args, work, cluster, coll, docs
        self.committed: list[str] = []  # ids whose add committed (and not rebuilt away)
        self.rebuilt_away: list[str] = []

    def fault(self, name: str, url: str) -> dict[str, Any]:
        return dict(getattr(self, "_" + name.replace("-", "_"))(url))

    def _kill_copy(self, url: str) -> dict[str, Any]:
        pids = shard_workers()
        return {"killed": pids[:1], "done": bool(pids) and _signal(pids[0], signal.SIGKILL)}

    def _kill_node(self, url: str) -> dict[str, Any]:
        return {"killed_raylets": self.cluster.kill_node()}

    def _after_kill_node(self) -> None:
        self.cluster.start_node()

    def _freeze(self, url: str) -> dict[str, Any]:
        pids = shard_workers()
        if not pids:
            return {"done": False}
        _signal(pids[0], signal.SIGSTOP)
        self._frozen = pids[0]
        return {"frozen": pids[0]}

    def _after_freeze(self) -> None:
        _signal(self._frozen, signal.SIGCONT)

    def _head_restart(self, url: str) -> dict[str, Any]:
        t0 = time.monotonic()
        self.cluster.stop()
        time.sleep(2)
        self.cluster.start()
        return {"head_back_after_s": round(time.monotonic() - t0, 1)}

    def _kill_writer(self, url: str) -> dict[str, Any]:
        killed = self.work / "killed.jsonl"
        write_jsonl(killed, new_docs("killed", 4000))
        proc = subprocess.Popen(
            [sys.executable, "-m", "service.cli", "docs", "add", "--index", str(self.coll),
             "--docs", str(killed), "--workers", "2", "--quiet", "--buffer-mb", "0.05"],
            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        time.sleep(1.5)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        batch = new_docs("kept", 50)
        write_jsonl(self.work / "kept.jsonl", batch)
        t0 = time.monotonic()
        after = clir("docs", "add", "--index", str(self.coll), "--docs",
                     str(self.work / "kept.jsonl"), "--quiet", timeout=120)  # fmt: skip
        ok = after.returncode == 0
        if ok:
            self.committed += [d["id"] for d in batch]
        leftovers = [p.name for p in (self.coll / "segments").iterdir() if p.name.startswith(".")]
        return {"next_add_ok": ok, "next_add_s": round(time.monotonic() - t0, 2),
                "next_add_error": None if ok else after.stderr[-300:],
                "leftover_temp_dirs": leftovers}  # fmt: skip

    def _rebuild(self, url: str) -> dict[str, Any]:
        out = clir("build-index", "--docs", str(self.docs), "--out", str(self.coll), "--shards",
                   str(self.args.shards), "--no-dense", "--quiet", "--force")  # fmt: skip
        if out.returncode == 0:
            self.rebuilt_away, self.committed = self.committed, []
        return {"ok": out.returncode == 0, "error": None if out.returncode == 0 else out.stderr}

    def _huge_doc(self, url: str) -> dict[str, Any]:
        """A 5 MB document (under the request limit, over the document limit) and a 50 MB
        one (over both), over REST; and the 5 MB one in a file to ``clir docs add``."""
        out: dict[str, Any] = {}
        for mb in (5, 50):
            doc = {"id": f"huge{mb}", "title": "Huge", "text": "word " * (mb * 200_000),
                   "source": "chaos"}  # fmt: skip
            t0 = time.monotonic()
            r = httpx2.post(f"{url}/v1/admin/documents", json={"documents": [doc]},
                            timeout=120, headers={"Authorization": f"Bearer {TOKEN}"})  # fmt: skip
            out[f"rest_{mb}mb"] = {"status": r.status_code, "detail": r.text[:200],
                                   "seconds": round(time.monotonic() - t0, 2)}  # fmt: skip
        big = {"id": "huge-file", "title": "Huge", "text": "word " * 1_000_000, "source": "x"}
        write_jsonl(self.work / "huge.jsonl", [big])
        cli = clir("docs", "add", "--index", str(self.coll), "--docs",
                   str(self.work / "huge.jsonl"), "--quiet")  # fmt: skip
        out["cli"] = {"code": cli.returncode, "error": cli.stderr.strip()[-200:]}
        out["served"] = found(url, ["huge5", "huge50", "huge-file"])
        return out

    def after(self, name: str) -> None:
        hook = getattr(self, "_after_" + name.replace("-", "_"), None)
        if hook is not None:
            hook()


def export_docs(index_dir: Path, out: Path) -> int:
    from service.index.inverted import InvertedIndex

    index = InvertedIndex.load(index_dir)
    with out.open("w", encoding="utf-8") as fh:
        for docno in range(index.n_docs):
            d = index.doc(docno)
            fh.write(json.dumps({"id": d.id, "title": d.title, "text": d.text,
                                 "source": d.source}, ensure_ascii=False) + "\n")  # fmt: skip
    return int(index.n_docs)


def query_mix(data: Path) -> dict[str, list[str]]:
    here = ROOT / "bench" / "querysets" / "lohelp-de"
    return {
        "short": load_queries(here / "queries.short.dev.tsv"),
        "question": load_queries(here / "questions.dev.tsv"),
        "paragraph": load_queries(data / "clir" / "lohelp-de" / "queries.dev.tsv"),
    }


def run(args: Params) -> None:
    faults = [f for f in args.faults.split(",") if f]
    unknown = sorted(set(faults) - set(FAULTS))
    if unknown:
        raise SystemExit(f"unknown faults {unknown}; known: {', '.join(FAULTS)}")
    queries = query_mix((ROOT / args.data).resolve())
    with tempfile.TemporaryDirectory(prefix="chaos-") as tmp:
        work = Path(tmp)
        docs = work / "docs.jsonl"
        n_docs = export_docs(ROOT / args.docs_index, docs)
        coll = work / "coll"
        built = clir("build-index", "--docs", str(docs), "--out", str(coll), "--shards",
                     str(args.shards), "--no-dense", "--quiet")  # fmt: skip
        if built.returncode != 0:
            raise SystemExit(built.stderr)
        cluster = Cluster(work, args.node_check_s)
        cluster.start()
        server: Server | None = None
        load: Load | None = None
        report: dict[str, Any] = {"n_docs": n_docs, "faults": {}}
        try:
            env = {
                "CLIR_MODEL_BUNDLES": json.dumps([args.model]),
                "CLIR_DOC_INDEXES": json.dumps([str(coll)]),
                "CLIR_SEARCH_BACKEND": "ray", "CLIR_RAY_ADDRESS": cluster.address,
                "CLIR_SHARD_REPLICAS": str(args.replicas), "CLIR_ADMIN_TOKEN": TOKEN,
                "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": cluster.env["RAY_AUTH_TOKEN"],
            }  # fmt: skip
            # info: the router's standbys and copies up are in the log (``router_log``)
            server = Server(env, work / "server.log", workers=1, log_level="info")
            server.wait_ready(300)
            report["first_whole_s"] = wait_whole(server.url, args.shards, args.replicas, 120)
            health = HealthWatch(server.url, args.shards, args.replicas)
            health.start()
            load = Load(server.url, queries, args.clients, args.seed)
            load.start()
            t0 = time.monotonic()
            time.sleep(args.baseline)
            report["baseline"] = window_stats(load.between(t0, time.monotonic()))
            chaos = Run(args, work, cluster, coll, docs)
            for name in faults:
                start = time.monotonic()
                info = chaos.fault(name, server.url)
                time.sleep(args.window)
                during = window_stats(load.between(start, time.monotonic()))
                chaos.after(name)
                wait_whole(server.url, args.shards, args.replicas, args.heal_timeout)
                time.sleep(1.0)  # a sample of the whole service for the watch
                healed = health.healed_after(start)
                first_whole = health.first_whole_after(start)
                since = time.monotonic()
                time.sleep(min(args.window, 10.0))
                lost = sorted(set(chaos.committed) - set(found(server.url, chaos.committed)))
                resurrected = found(server.url, chaos.rebuilt_away)
                report["faults"][name] = {
                    "fault": info,
                    "during": during,
                    "first_whole_after_s": first_whole,  # every copy up again, first
                    "whole_after_s": healed,  # ... and for good (copies spread included)
                    "after": window_stats(load.between(since, time.monotonic())),
                    "committed_lost": len(lost),
                    "deleted_served": len(resurrected),
                }  # fmt: skip
                print(json.dumps({name: report["faults"][name]}, default=str), flush=True)
        finally:
            if load is not None:
                load.stop()
                health.stop()
            if server is not None:
                report["server_log_tail"] = _tail(server.log)
                report["router_log"] = _router_lines(server.log)
                server.stop()
            cluster.stop()
    write_result(ROOT / args.out, report, args)


def _router_lines(path: Path) -> list[str]:
    """The shard router's lines (standbys, copies up, re-placements), with their times."""
    try:
        text = path.read_text("utf-8", errors="replace")
    except OSError:
        return []
    return [line[:300] for line in text.splitlines() if "shard " in line and "copy " in line]


def _tail(path: Path, n: int = 4000) -> str:
    try:
        return path.read_text("utf-8", errors="replace")[-n:]
    except OSError:
        return ""
