"""Weights versions: atomic save, validation, activation, path safety."""

from __future__ import annotations

from pathlib import Path

import pytest

from service.errors import DataFormatError, InvalidInputError, MissingResourceError, NotFoundError
from service.mt.weights import WeightsStore


def test_save_activate_and_reload(tmp_path: Path) -> None:
    store = WeightsStore(tmp_path / "weights")
    with pytest.raises(MissingResourceError):
        store.active()
    v1 = store.save({"LanguageModel": 1.0, "WordPenalty": -0.5}, version="default")
    store.activate("default")
    assert store.active() == v1
    v2 = store.save(
        {"LanguageModel": 0.8}, version="tuned", metrics={"bleu": 51.2}, parent="default"
    )
    assert store.versions() == ["default", "tuned"]
    assert store.active_version() == "default"
    store.activate("tuned")
    assert store.active().weights == {"LanguageModel": 0.8}
    assert store.active().metrics == {"bleu": 51.2}
    assert v2.parent == "default"
    with pytest.raises(InvalidInputError, match="already exists"):
        store.save({}, version="tuned")


def test_corrupted_version_is_refused_and_active_unchanged(tmp_path: Path) -> None:
    store = WeightsStore(tmp_path)
    store.save({"a": 1.0}, version="good")
    store.activate("good")
    (tmp_path / "bad.json").write_text('{"version": "bad", "weights": {"a": 1.')
    with pytest.raises(DataFormatError, match=r"bad\.json"):
        store.activate("bad")
    (tmp_path / "nan.json").write_text('{"version": "nan", "weights": {"a": NaN}}')
    with pytest.raises(DataFormatError, match="finite"):
        store.activate("nan")
    assert store.active_version() == "good"


@pytest.mark.parametrize("name", ["../x", "a/b", ".hidden", "", "x" * 65, "a..b", "ümlaut"])
def test_version_names_cannot_escape(tmp_path: Path, name: str) -> None:
    store = WeightsStore(tmp_path)
    with pytest.raises(InvalidInputError):
        store.save({"a": 1.0}, version=name)
    with pytest.raises(InvalidInputError):
        store.load(name)


def test_unknown_version(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError):
        WeightsStore(tmp_path).activate("nope")


def test_non_finite_weights_are_not_written(tmp_path: Path) -> None:
    store = WeightsStore(tmp_path)
    with pytest.raises(DataFormatError):
        store.save({"a": float("inf")}, version="inf")
    assert store.versions() == []
