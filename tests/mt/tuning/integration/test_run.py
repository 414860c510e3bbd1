"""clir tune end to end on the synthetic bundle: dev data join, tuning, new version: the tests that
start processes, Ray or a browser, read the shared data or run long (the integration tier,
tests/README.md); the rest are in :mod:`tests.mt.tuning.test_run`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from service.cli import main
from service.mt.bundle import load_bundle
from service.mt.training.train import train_model
from service.mt.tuning.data import load_dev_pairs
from tests.mt.tuning.test_run import _tr_dir
from tests.synthetic import CONFIG, synthetic


@pytest.mark.slow
def test_tune_writes_a_version(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], weights_root: Path
) -> None:
    par, lm = tmp_path / "p.tsv.gz", tmp_path / "lm.txt"
    synthetic(par, lm)
    model = tmp_path / "de-en"
    train_model(par, lm, model, CONFIG, log=lambda _m: None)
    tr = _tr_dir(tmp_path)
    split = load_dev_pairs(tr, tmp_path / "tr" / "pool.en.tsv.gz", "de")
    assert len(split.tune) + len(split.heldout) == 50
    assert split.tune[0].reference[-2] == "is"
    args = ["tune", "--model", str(model), "--dev", str(tr), "--method", "pro",
            "--iterations", "2", "--k", "5", "--activate", "--version", "t1"]  # fmt: skip
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["version"] == "t1"
    assert out["dev_bleu"] > 50  # the synthetic language is easy
    bundle = load_bundle(model, state_root=weights_root)
    assert "t1" in bundle.weights_store.versions()
    stored = bundle.weights_store.load("t1")
    assert stored.metrics["heldout_bleu"] == pytest.approx(out["heldout_bleu"], abs=0.01)
    assert stored.parent == "default"
    # A second run from an explicit start version while t1 is active: t1 stays active.
    assert bundle.weights_store.active_version() == "t1"
    args = ["tune", "--model", str(model), "--dev", str(tr), "--method", "listnet",
            "--iterations", "1", "--k", "5", "--version", "t2", "--start", "default"]  # fmt: skip
    assert main(args) == 0
    capsys.readouterr()
    bundle = load_bundle(model, state_root=weights_root)
    assert bundle.weights_store.load("t2").parent == "default"
    assert bundle.weights_store.active_version() == "t1"
