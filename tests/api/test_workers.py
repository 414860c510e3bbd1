"""Several API processes (``clir serve --workers N``): one metrics view summed over the
processes, one job worker, requests answered by every process."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from service.api.workers import metrics_directory

TOKEN = "multi-process-token"
TWO_PROCESSES = ("--workers", "2", "--log-level", "warning")


def test_metrics_directory_is_created_or_emptied_at_start(tmp_path: Path) -> None:
    configured = tmp_path / "metrics"
    with metrics_directory(configured) as path:
        assert Path(path) == configured and configured.is_dir()
    (configured / "counter_123.db").write_bytes(b"stale")
    (configured / "README").write_text("not ours")
    with metrics_directory(configured) as path:
        assert sorted(p.name for p in configured.iterdir()) == ["README"]
    with metrics_directory(None) as path:
        temporary = Path(path)
        assert temporary.is_dir() and not any(temporary.iterdir())
    assert not temporary.exists()


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

    from service.api.workers import serve
    from service.core.settings import Settings

    seen: dict[str, object] = {}

    def fake_run(app: str, **kwargs: object) -> None:
        seen.update(kwargs, app=app, env_worker=os.environ.get("CLIR_EMBEDDED_WORKER"),
                    env_metrics=os.environ.get("PROMETHEUS_MULTIPROC_DIR"))  # fmt: skip

    monkeypatch.setattr(uvicorn, "run", fake_run)
    settings = Settings(embedded_worker=False, worker_healthcheck_s=77)
    serve(settings, host="127.0.0.1", port=1, log_level="warning", workers=3)
    assert seen["workers"] == 3 and seen["timeout_worker_healthcheck"] == 77
    assert seen["env_worker"] == "false" and seen["env_metrics"]
    assert "PROMETHEUS_MULTIPROC_DIR" not in os.environ  # restored afterwards
    assert not Path(str(seen["env_metrics"])).exists()  # the temporary directory is removed


def _counts(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of the service's counters and histograms in a scrape, by name and labels
    (per-process series, ``process_cpu_seconds_total{pid=…}``, end with their process)."""
    from prometheus_client.parser import text_string_to_metric_families

    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        if family.type in ("counter", "histogram") and family.name.startswith("clir_")
        for s in family.samples
    }


def _api_children(pid: int) -> list[int]:
    return sorted(p for p, cmd in _children(pid) if "spawn_main" in cmd)
