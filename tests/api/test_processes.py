"""Several API processes (``clir serve --workers N``): one metrics view summed over the
processes, one job worker, requests answered by every process."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx2 as httpx
import pytest

from service.api.metrics import Metrics, SharedMetrics
from service.index.inverted import InvertedIndex
from service.mt.bundle import ModelBundle
from tests.servers import free_port, wait_ready

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "multi-process-token"


def _events(m: Metrics, shift: int) -> None:
    for i in range(5 + shift):
        m.observe_request("/v1/search", "POST", 200 if i % 3 else 503, 0.004 * (i + shift))
    m.observe_request("/v1/translate", "POST", 200, 3.0 + shift)
    m.observe_decode(0.2 * (1 + shift))
    m.inc("clir_query_cache_hits_total", 2 + shift)


def test_summed_snapshots_equal_one_process_that_saw_everything() -> None:
    a, b, reference = Metrics(), Metrics(), Metrics()
    _events(a, 0)
    _events(b, 3)
    _events(reference, 0)
    _events(reference, 3)
    total = Metrics.from_snapshot(json.loads(json.dumps(a.snapshot())))
    total.add(Metrics.from_snapshot(json.loads(json.dumps(b.snapshot()))))
    assert total.render() == reference.render()


def test_collect_sums_live_processes_and_drops_dead_ones(tmp_path: Path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    dead_pid = int(dead.stdout)
    me, parent = SharedMetrics(tmp_path), SharedMetrics(tmp_path, pid=os.getppid())
    ghost = SharedMetrics(tmp_path, pid=dead_pid)
    for shared, n in ((me, 1), (parent, 2), (ghost, 100)):
        m = Metrics()
        m.inc("clir_query_cache_hits_total", n)
        shared.publish(m, {"clir_query_cache_entries": ("Entries.", float(n))})
    total, gauges, processes = me.collect()
    assert processes == 2
    assert total.counters["clir_query_cache_hits_total"] == 3
    assert gauges["clir_query_cache_entries"] == ("Entries.", 3.0)
    assert not (tmp_path / f"{dead_pid}.json").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [f"{os.getpid()}.json", f"{os.getppid()}.json"]
    )


def _children(pid: int) -> list[tuple[int, str]]:
    """(pid, command line) of the direct children of ``pid``, from /proc."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == pid:
            out.append((int(entry.name), cmdline))
    return out


def _metric(text: str, pattern: str) -> float:
    total = 0.0
    for line in text.splitlines():
        if re.match(pattern, line):
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_two_processes_share_one_port_one_worker_and_one_metrics_view(
    toy_bundle: ModelBundle, toy_index: InvertedIndex, tmp_path: Path
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLIR_")}
    env.update(
        {
            "CLIR_MODEL_BUNDLES": json.dumps([str(toy_bundle.path)]),
            "CLIR_DOC_INDEXES": json.dumps([str(toy_index.path)]),
            "CLIR_POOL_INDEXES": "[]",
            "CLIR_JOB_STORE": str(tmp_path / "jobs.sqlite3"),
            "CLIR_ADMIN_TOKEN": TOKEN,
            "CLIR_WORKER_POLL_S": "0.2",
        }
    )
    log = (tmp_path / "serve.log").open("w")
    children: list[tuple[int, str]] = []
    proc = subprocess.Popen(
        [sys.executable, "-m", "service.cli", "serve", "--port", str(port), "--workers", "2",
         "--log-level", "warning"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        wait_ready(url, proc, 90, tmp_path / "serve.log", times=5)  # both processes up
        children = _children(proc.pid)
        workers = [c for c in children if "service.jobs.worker" in c[1]]
        api = [c for c in children if "service.jobs.worker" not in c[1]]
        assert len(workers) == 1, children  # one job worker, owned by the supervisor
        assert len(api) >= 2, children  # the API processes (uvicorn may add a helper)

        query = {"query": "das Haus ist groß", "lang": "de", "method": "bowfd", "k": 3}

        def search(_: int) -> int:
            return httpx.post(f"{url}/v1/search", json=query, timeout=60).status_code

        with ThreadPoolExecutor(8) as pool:
            codes = list(pool.map(search, range(40)))
        assert codes == [200] * 40
        time.sleep(2.5)  # every process has published since (once a second)
        text = httpx.get(f"{url}/metrics", timeout=10).text
        assert _metric(text, r"clir_api_processes ") == 2
        searches = _metric(text, r'clir_http_requests_total\{endpoint="/v1/search",.*status="200"')
        assert searches == 40
        hits = _metric(text, r"clir_query_cache_hits_total ")
        misses = _metric(text, r"clir_query_cache_misses_total ")
        assert hits + misses == 40 and misses >= 1

        auth = {"Authorization": f"Bearer {TOKEN}"}
        job = httpx.post(f"{url}/v1/admin/selftest", json={"steps": 1, "seconds": 0},
                         headers=auth, timeout=10).json()  # fmt: skip
        deadline = time.monotonic() + 60
        while True:
            state = httpx.get(f"{url}/v1/admin/jobs/{job['id']}", headers=auth, timeout=10)
            if state.json()["state"] in ("succeeded", "failed") or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert state.json()["state"] == "succeeded", state.text
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            pytest.fail("clir serve --workers 2 did not stop on SIGTERM")
        finally:
            log.close()
    deadline = time.monotonic() + 10
    for pid, cmd in children:  # the API processes and the job worker stopped with it
        while _state(pid) not in ("gone", "Z") and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _state(pid) in ("gone", "Z"), cmd


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


def test_busy_processes_get_the_configured_healthcheck_time(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # uvicorn's supervisor kills a process that does not answer its ping in time; a process
    # busy decoding answers late (GIL), so the timeout comes from the settings, not uvicorn's 5 s.
    import uvicorn

    from service.api.processes import serve
    from service.settings import Settings

    seen: dict[str, object] = {}

    def fake_run(app: str, **kwargs: object) -> None:
        seen.update(kwargs, app=app, env_worker=os.environ.get("CLIR_EMBEDDED_WORKER"),
                    env_metrics=os.environ.get("CLIR_METRICS_DIR"))  # fmt: skip

    monkeypatch.setattr(uvicorn, "run", fake_run)
    settings = Settings(embedded_worker=False, worker_healthcheck_s=77)
    serve(settings, host="127.0.0.1", port=1, log_level="warning", workers=3)
    assert seen["workers"] == 3 and seen["timeout_worker_healthcheck"] == 77
    assert seen["env_worker"] == "false" and seen["env_metrics"]
    assert "CLIR_METRICS_DIR" not in os.environ  # restored afterwards
