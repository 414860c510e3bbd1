"""clir tune end to end on the synthetic bundle: dev data join, tuning, new version."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from service.cli import main
from service.mt.bundle import ModelBundle, load_bundle
from service.mt.training.train import train_model
from service.mt.tuning.data import load_dev_pairs
from tests.synthetic import ADJS, CONFIG, DETS, NOUNS, synthetic


def _tr_dir(root: Path) -> Path:
    tr = root / "tr" / "de-en"
    tr.mkdir(parents=True)
    queries, qrels, pool = [], [], []
    k = 0
    for d, de_d in DETS.items():
        for noun, en_noun in NOUNS.items():
            for adj, en_adj in ADJS.items():
                qid = f"tr-de-{k:04d}"
                queries.append(f"{qid}\t{d} {noun} ist {adj}")
                qrels.append(f"{qid} 0 gt:{k} 1")
                pool.append(f"gt:{k}\t{de_d} {en_noun} is {en_adj}")
                k += 1
    (tr / "queries.dev.tsv").write_text("\n".join(queries) + "\n")
    (tr / "qrels.dev.txt").write_text("\n".join(qrels) + "\n")
    (root / "tr" / "pool.en.tsv.gz").write_bytes(gzip.compress(("\n".join(pool) + "\n").encode()))
    return tr


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


def test_bleu_of_scores_token_sequences(toy_bundle: ModelBundle) -> None:
    import sacrebleu

    from service.mt.tuning.data import DevPair
    from service.mt.tuning.run import bleu_of, translate_1best

    pairs = [
        DevPair("a", ("das", "buch", "ist", "alt"), ("the", "book", "is", "old")),
        DevPair("b", ("ein", "hund", "ist", "klein"), ("a", "cat", "is", "small")),
    ]
    weights = toy_bundle.active_weights().weights
    hyps = translate_1best(toy_bundle, weights, [p.source for p in pairs])
    expected = sacrebleu.corpus_bleu(
        [" ".join(h) for h in hyps], [[" ".join(p.reference) for p in pairs]], tokenize="none"
    ).score
    assert bleu_of(toy_bundle, weights, pairs) == pytest.approx(expected)
    assert bleu_of(toy_bundle, weights, pairs[:1]) == pytest.approx(100.0)
