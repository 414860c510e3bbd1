"""Every scorer is built the same way, with the bundle, so that any weights version of the
bundle can be scored; activation checks a version by scoring a probe query with it."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from service.errors import ConflictError, InvalidInputError
from service.index.inverted import InvertedIndex
from service.mt.bundle import ModelBundle, load_bundle
from service.retrieval import versions
from service.retrieval.base import SCORERS, get_scorer
from service.retrieval.bowfd import IR_FEATURE
from service.retrieval.query import decode_query
from service.retrieval.runner import make_scorer

LEX = {IR_FEATURE: 1.0, "lex:haus_home": 20.0}  # translating "haus" as "home" lifts d2


def test_every_scorer_takes_the_bundle(toy_bundle: ModelBundle, toy_index: InvertedIndex) -> None:
    for method in ("dt", "psq", "bowfd", "tr"):
        assert make_scorer(method, toy_index, toy_bundle).name == method
    assert set(SCORERS) == {"dt", "psq", "bowfd", "tr"}


def test_bowfd_from_make_scorer_scores_lex_weights(
    toy_bundle: ModelBundle, toy_index: InvertedIndex
) -> None:
    weights = {**toy_bundle.active_weights().weights, **LEX}
    query = decode_query(toy_bundle.make_decoder(weights), "das haus ist groß", "de")
    hits = make_scorer("bowfd", toy_index, toy_bundle).rank(query, 3).hits
    assert hits[0].doc_id == "d2"


@pytest.fixture
def bundle(toy_bundle: ModelBundle, tmp_path: Path) -> ModelBundle:
    copy = shutil.copytree(toy_bundle.path, tmp_path / "de-en")
    return load_bundle(copy, state_root=tmp_path / "weights")


def test_activation_probes_the_version(bundle: ModelBundle, toy_index: InvertedIndex) -> None:
    store = bundle.weights_store
    store.save({**store.active().weights, **LEX}, version="lex")
    done = versions.activate_version(bundle, "lex", toy_index)
    assert (done.previous, done.record.version, store.active_version()) == ("default", "lex", "lex")


def test_activation_refuses_what_a_scorer_cannot_score(
    bundle: ModelBundle, toy_index: InvertedIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    def bowfd_without_grammar(method: str, index: Any, bundle: Any, **params: Any) -> Any:
        return get_scorer(method, index, **({} if method == "bowfd" else {"bundle": bundle}))

    monkeypatch.setattr(versions, "make_scorer", bowfd_without_grammar)
    store = bundle.weights_store
    store.save({**store.active().weights, **LEX}, version="lex")
    with pytest.raises(ConflictError, match=r"cannot rank .*'lex'.*\(bowfd\).*grammar"):
        versions.activate_version(bundle, "lex", toy_index)
    assert store.active_version() == "default"
    store.save({"NoSuchFeature": 1.0}, version="odd")
    with pytest.raises(InvalidInputError, match="NoSuchFeature"):
        versions.activate_version(bundle, "odd")  # without an index: the file checks only
