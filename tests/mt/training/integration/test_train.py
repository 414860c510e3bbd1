"""End to end: train a bundle on a small synthetic corpus, load it, translate with it: the tests
that start processes, Ray or a browser, read the shared data or run long (the integration tier,
tests/README.md); the rest are in :mod:`tests.mt.training.test_train`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from service.errors import (
    ConfigurationError,
    DataFormatError,
    InvalidInputError,
)
from service.forest.inference import viterbi
from service.mt.bundle import MANIFEST, load_bundle
from service.mt.training.train import TrainConfig, train_model
from tests.synthetic import CONFIG, synthetic


@pytest.mark.slow
def test_train_load_translate_and_skip(tmp_path: Path) -> None:
    par, lm = tmp_path / "p.tsv.gz", tmp_path / "lm.txt"
    synthetic(par, lm)
    out = tmp_path / "models" / "de-en"
    logs: list[str] = []
    manifest = train_model(par, lm, out, CONFIG, log=logs.append)
    assert (out / MANIFEST).exists()
    assert manifest["counts"]["grammar"]["rules"] > 10
    assert not (tmp_path / "models" / "de-en.partial").exists()
    bundle = load_bundle(out, verify=True, state_root=tmp_path / "weights")
    assert (bundle.src, bundle.tgt) == ("de", "en")
    dec = bundle.decoder()
    forest = dec.forest(["das", "haus", "ist", "groß"])
    best = viterbi(forest.hypergraph, bundle.active_weights().weights)
    assert best.text == "the house is big"
    assert bundle.lexical.prob_e_given_f("house", "haus") > 0.5
    # a second run with the same inputs does nothing
    logs.clear()
    again = train_model(par, lm, out, CONFIG, log=logs.append)
    assert again["build_key"] == manifest["build_key"]
    assert any("up to date" in m for m in logs)
    # a changed setting reruns only the stages it affects
    logs.clear()
    train_model(
        par, lm, out, TrainConfig(src="de", lm_order=3, lm_discount_fallback=True), log=logs.append
    )
    assert any("[clean] up to date" in m for m in logs)
    assert any("[align] up to date" in m for m in logs)
    assert any("[lm] running" in m for m in logs)
    assert json.loads((out / MANIFEST).read_text())["settings"]["lm_order"] == 3


@pytest.mark.slow
def test_in_domain_pairs_give_their_own_probabilities(tmp_path: Path) -> None:
    """Pairs whose origin starts with an in-domain prefix add LogPEgivenFDomain and
    LogPFgivenEDomain; weighting them makes the domain's translation win."""
    import gzip

    import numpy as np

    from service.mt.grammar import load_grammar
    from service.mt.rules import DOMAIN_FEATURES, LOG_P_E_GIVEN_F, LOG_P_E_GIVEN_F_DOMAIN

    par, lm = tmp_path / "p.tsv.gz", tmp_path / "lm.txt"
    synthetic(par, lm)
    rows = gzip.decompress(par.read_bytes()).decode().splitlines()
    rows += [f"lohelp:page{k}.html#p\tdas haus\tthe home" for k in range(20)]
    par.write_bytes(gzip.compress(("\n".join(rows) + "\n").encode()))
    out = tmp_path / "m"
    plain = train_model(par, lm, out, CONFIG, log=lambda _m: None)
    assert not set(DOMAIN_FEATURES) & set(plain["feature_names"])
    logs: list[str] = []
    config = TrainConfig(src="de", lm_discount_fallback=True, in_domain=("lohelp:",))
    manifest = train_model(par, lm, out, config, log=logs.append)
    assert any("[align] up to date" in m for m in logs)  # the alignment is reused
    assert any("[origins] running" in m for m in logs)
    assert manifest["counts"]["grammar"]["in_domain_pairs"] == 20
    assert set(DOMAIN_FEATURES) <= set(manifest["feature_names"])
    grammar = load_grammar(out / "grammar")
    rows_of = {(r.source, r.target): r.features for r in grammar.rules() if r.source == ("haus",)}
    home, house = rows_of[("haus",), ("home",)], rows_of[("haus",), ("house",)]
    assert home[LOG_P_E_GIVEN_F] < house[LOG_P_E_GIVEN_F]  # the whole corpus says "house"
    assert home[LOG_P_E_GIVEN_F_DOMAIN] > house[LOG_P_E_GIVEN_F_DOMAIN]  # the domain "home"
    assert np.isfinite(list(home.values())).all()
    bundle = load_bundle(out, state_root=tmp_path / "weights")
    weights = dict(bundle.active_weights().weights)
    sentence = ["das", "haus"]
    assert viterbi(bundle.decoder().forest(sentence).hypergraph, weights).text == "the house"
    weights[LOG_P_E_GIVEN_F_DOMAIN] = 2.0
    assert viterbi(bundle.decoder().forest(sentence).hypergraph, weights).text == "the home"
    bad = TrainConfig(src="de", lm_discount_fallback=True, in_domain=("nothing:",))
    with pytest.raises(ConfigurationError, match="no sentence pair is in the domain"):
        train_model(par, lm, tmp_path / "m2", bad, log=lambda _m: None)
    with pytest.raises(ConfigurationError, match="prefixes"):
        TrainConfig(src="de", in_domain=("",))


@pytest.mark.process  # starts a process
def test_bad_training_inputs_name_the_file(tmp_path: Path) -> None:
    out = tmp_path / "m"
    lm = tmp_path / "lm.txt"
    lm.write_text("the house\n")
    with pytest.raises(ConfigurationError, match=r"nope\.tsv"):
        train_model(tmp_path / "nope.tsv", lm, out, CONFIG, log=lambda _m: None)
    empty = tmp_path / "empty.tsv"
    empty.write_text("gettext:x\t%s\t<b></b>\nbroken line without tabs\n")
    with pytest.raises(InvalidInputError, match="no usable sentence pair"):
        train_model(empty, lm, out, CONFIG, log=lambda _m: None)
    assert not (out / "manifest.json").exists()
    par = tmp_path / "p.tsv.gz"
    synthetic(par, tmp_path / "ignored.txt")
    blank = tmp_path / "blank.txt"
    blank.write_bytes(b"\n\xff\xfe\n")
    with pytest.raises(DataFormatError, match=r"blank\.txt"):
        train_model(par, blank, out, CONFIG, log=lambda _m: None)
    assert not (out / "manifest.json").exists()
