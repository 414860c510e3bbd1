"""Several API processes (``clir serve --workers N``): one metrics view summed over the: the tests
that start processes, Ray or a browser, read the shared data or run long (the integration tier,
tests/README.md); the rest are in :mod:`tests.api.test_workers`."""

from __future__ import annotations

import itertools
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

from service.api.telemetry import api_pids, forget_dead_processes
from service.index.inverted import InvertedIndex
from service.mt.bundle import ModelBundle
from tests.api.test_workers import (
    TOKEN,
    TWO_PROCESSES,
    _api_children,
    _children,
    _counts,
    _metric,
    _state,
)
from tests.servers import clir_serve, serve_env, wait_ready


@pytest.mark.process  # starts a process
def test_dead_processes_leave_their_counts_but_not_their_gauges(tmp_path: Path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    dead_pid, me = int(dead.stdout), os.getpid()
    for name in (f"counter_{dead_pid}.db", f"histogram_{dead_pid}.db",
                 f"gauge_livesum_{dead_pid}.db", f"gauge_livesum_{me}.db"):  # fmt: skip
        (tmp_path / name).write_bytes(b"")
    assert api_pids(str(tmp_path)) == {dead_pid, me}
    assert forget_dead_processes(str(tmp_path)) == [dead_pid]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [f"counter_{dead_pid}.db", f"histogram_{dead_pid}.db", f"gauge_livesum_{me}.db"]
    )


@pytest.mark.process  # starts a process
def test_two_processes_share_one_port_one_worker_and_one_metrics_view(
    toy_bundle: ModelBundle, toy_index: InvertedIndex, tmp_path: Path
) -> None:
    env = serve_env(
        toy_bundle.path, toy_index.path, tmp_path, CLIR_ADMIN_TOKEN=TOKEN, CLIR_WORKER_POLL_S="0.2"
    )
    children: list[tuple[int, str]] = []
    with clir_serve(env, tmp_path / "serve.log", *TWO_PROCESSES) as (proc, url):
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
    deadline = time.monotonic() + 10
    for pid, cmd in children:  # the API processes and the job worker stopped with it
        while _state(pid) not in ("gone", "Z") and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _state(pid) in ("gone", "Z"), cmd


@pytest.mark.process  # starts a process
def test_killing_an_api_process_never_lowers_the_totals(
    toy_bundle: ModelBundle, toy_index: InvertedIndex, tmp_path: Path
) -> None:
    # Prometheus reads a counter that goes down as a reset: what a killed process counted must
    # stay in the totals after uvicorn replaces it.
    env = serve_env(
        toy_bundle.path,
        toy_index.path,
        tmp_path,
        CLIR_EMBEDDED_WORKER="false",
        CLIR_METRICS_DIR=str(tmp_path / "metrics"),
        # a process killed right after a liveness ping is noticed when the next ping
        # times out: keep that short
        CLIR_WORKER_HEALTHCHECK_S="5",
    )
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    query = {"query": "das Haus ist groß", "lang": "de", "method": "bowfd", "k": 3}
    search = r'clir_http_requests_total\{endpoint="/v1/search",.*status="200"'

    def one(_: int) -> int:
        return httpx.post(f"{url}/v1/search", json=query, timeout=60).status_code

    def searches(n: int) -> None:
        with ThreadPoolExecutor(4) as pool:
            assert list(pool.map(one, range(n))) == [200] * n

    with clir_serve(env, tmp_path / "serve.log", *TWO_PROCESSES) as (proc, url):
        wait_ready(url, proc, 90, tmp_path / "serve.log", times=5)
        before = _api_children(proc.pid)
        assert len(before) == 2, _children(proc.pid)
        searches(40)
        scrapes = [httpx.get(f"{url}/metrics", timeout=10).text]
        assert _metric(scrapes[0], search) == 40
        assert _metric(scrapes[0], r"clir_api_processes ") == 2

        os.kill(before[0], signal.SIGKILL)
        deadline = time.monotonic() + 90
        while True:  # scrape while the supervisor notices and starts a replacement
            scrapes.append(httpx.get(f"{url}/metrics", timeout=10).text)
            now = _api_children(proc.pid)
            replaced = len(now) == 2 and before[0] not in now
            if replaced and _metric(scrapes[-1], r"clir_api_processes ") == 2:
                break
            assert time.monotonic() < deadline, "no replacement process"
            time.sleep(0.2)
        wait_ready(url, proc, 90, tmp_path / "serve.log", times=5)
        searches(10)
        for _ in range(6):
            scrapes.append(httpx.get(f"{url}/metrics", timeout=10).text)

    for i, (earlier, later) in enumerate(itertools.pairwise(map(_counts, scrapes))):
        lower = {k: (v, later.get(k)) for k, v in earlier.items() if later.get(k, -1.0) < v}
        assert not lower, f"scrape {i + 1} lowered {sorted(lower.items())[:4]}"
    last = scrapes[-1]
    assert _metric(last, search) == 50
    assert _metric(last, r"clir_api_processes ") == 2  # the dead process is not counted
    memory = {
        int(m.group(1)): float(m.group(2))
        for m in re.finditer(r'^process_resident_memory_bytes\{pid="(\d+)"\} (\S+)$', last, re.M)
    }
    assert sorted(memory) == now  # one series per live API process
    assert all(v > 10e6 for v in memory.values())


@pytest.mark.process  # starts a process
def test_a_process_killed_while_the_supervisor_waits_for_it_is_replaced_in_seconds(
    toy_bundle: ModelBundle, toy_index: InvertedIndex, tmp_path: Path
) -> None:
    # The supervisor pings each process and waits up to CLIR_WORKER_HEALTHCHECK_S (120 s by
    # default) for its answer. A process stopped, then killed, while a ping waits for it never
    # answers: uvicorn's own wait ran the whole two minutes; the service's looks every 0.2 s
    # whether the process is still there.
    env = serve_env(toy_bundle.path, toy_index.path, tmp_path, CLIR_EMBEDDED_WORKER="false")
    assert "CLIR_WORKER_HEALTHCHECK_S" not in env  # the default, 120 s
    with clir_serve(env, tmp_path / "serve.log", *TWO_PROCESSES) as (proc, url):
        wait_ready(url, proc, 90, tmp_path / "serve.log", times=3)
        before = _api_children(proc.pid)
        assert len(before) == 2, _children(proc.pid)
        os.kill(before[0], signal.SIGSTOP)  # the next ping waits for an answer
        time.sleep(2.0)
        killed = time.monotonic()
        os.kill(before[0], signal.SIGKILL)
        while True:
            now = _api_children(proc.pid)
            if len(now) == 2 and before[0] not in now:
                break
            assert time.monotonic() - killed < 30, "not replaced within 30 s"
            time.sleep(0.1)
        replaced_after = time.monotonic() - killed
        assert replaced_after < 5, replaced_after
        wait_ready(url, proc, 90, tmp_path / "serve.log", times=3)
        query = {"query": "das Haus ist groß", "lang": "de", "method": "dt", "k": 3}
        assert httpx.post(f"{url}/v1/search", json=query, timeout=60).status_code == 200
