"""The benchmarks' one contract (bench/registry.py, bench/cli.py): every benchmark resolves to a:
the tests that start processes, Ray or a browser, read the shared data or run long (the
integration tier, tests/README.md); the rest are in :mod:`tests.test_bench_registry`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.common import ROOT, write_result
from bench.registry import BENCHMARKS
from tests.test_bench_registry import _committed_bench_modules, _Params


@pytest.mark.process  # starts a process
def test_every_bench_module_is_registered() -> None:
    registered = {b.target.split(":")[0].removeprefix("bench.") for b in BENCHMARKS.values()}
    missing = sorted(_committed_bench_modules() - registered)
    assert not missing, (
        f"register {missing} in bench/registry.py: a function run(params: Params) of one frozen "
        "dataclass with typed defaults, written with bench.common.write_result"
    )


@pytest.mark.process  # starts a process
def test_python_m_bench_list_names_every_benchmark() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "bench", "--list"], cwd=ROOT, capture_output=True, text=True,
        check=True, timeout=60,
    ).stdout  # fmt: skip
    rows = {line.split()[0]: line.split()[1] for line in out.splitlines()}
    assert rows == {n: "cheap" if b.cheap else "full" for n, b in BENCHMARKS.items()}


@pytest.mark.process  # starts a process
def test_a_result_is_written_with_its_stamp(tmp_path: Path) -> None:
    path = write_result(tmp_path / "r.json", {"map": 0.5, "stamp": "old"}, _Params(),
                        signatures={"bundle": {"model": "demo-de-en"}})  # fmt: skip
    data = json.loads(path.read_text())
    assert data["map"] == 0.5
    stamp = data["stamp"]
    assert len(stamp["revision"]) == 40 and isinstance(stamp["dirty"], bool)
    assert {"cpus", "platform", "python"} <= set(stamp["machine"])
    assert stamp["time"].endswith("+00:00")
    assert stamp["params"] == {"queries": 3, "model": "models/demo-de-en"}
    assert stamp["signatures"] == {"bundle": {"model": "demo-de-en"}}


@pytest.mark.process  # starts a process
def test_a_keyed_result_keeps_the_other_records(tmp_path: Path) -> None:
    path = tmp_path / "collection.json"
    path.write_text(json.dumps({"build/x1": {"seconds": 1.0}}))
    write_result(path, {"seconds": 2.0}, _Params(), key="build/x2", sort_keys=True)
    data = json.loads(path.read_text())
    assert data["build/x1"] == {"seconds": 1.0}
    assert data["build/x2"]["seconds"] == 2.0 and "revision" in data["build/x2"]["stamp"]
    assert list(data) == sorted(data)
