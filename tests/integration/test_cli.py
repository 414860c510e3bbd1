"""The clir command: every verb has --help, unbuilt verbs exit 2, eval tools work: the tests that
start processes, Ray or a browser, read the shared data or run long (the integration tier,
tests/README.md); the rest are in :mod:`tests.test_cli`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from service.cli import main
from service.data import load_qrels
from tests.test_cli import _write_run


@pytest.mark.data
def test_eval_run_on_the_shared_dev_qrels(shared_data: Path, tmp_path: Path) -> None:
    qrels_path = shared_data / "clir/lohelp-de/qrels.dev.txt"
    run = tmp_path / "a.run"
    _write_run(run, load_qrels(qrels_path), 0.6, 0)
    out = subprocess.run(
        [sys.executable, "-m", "service.cli", "eval-run", "--qrels", str(qrels_path),
         "--run", str(run), "--json"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    metrics = json.loads(out.stdout)
    assert metrics["queries"] == 260
    for name in ("map", "ndcg", "ndcg@10", "pres", "mrr", "recall@1000", "p@10", "seconds"):
        assert name in metrics
    assert 0.3 < metrics["map"] < 0.9


@pytest.mark.data
def test_compare_runs_reports_deltas_and_p_values(
    shared_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    qrels_path = shared_data / "clir/lohelp-de/qrels.dev.txt"
    qrels = load_qrels(qrels_path)
    a, b = tmp_path / "a.run", tmp_path / "b.run"
    _write_run(a, qrels, 0.3, 1)
    _write_run(b, qrels, 0.8, 2)
    args = ["compare-runs", "--qrels", str(qrels_path), str(a), str(b), "--json"]
    assert main([*args, "--permutations", "2000"]) == 0
    rows = {r["metric"]: r for r in json.loads(capsys.readouterr().out)["metrics"]}
    assert rows["map"]["delta"] > 0.1
    assert rows["map"]["p_randomization"] < 0.01
    assert main(["compare-runs", "--qrels", str(qrels_path), str(a), str(a), "--json"]) == 0
    same = {r["metric"]: r for r in json.loads(capsys.readouterr().out)["metrics"]}
    assert same["map"]["p_randomization"] == 1.0
