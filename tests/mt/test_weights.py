"""Weights versions: atomic save, validation, activation, path safety, and the state
directory that keeps bundles read-only."""

from __future__ import annotations

from pathlib import Path

import pytest

from service.errors import DataFormatError, InvalidInputError, MissingResourceError, NotFoundError
from service.mt.weights import WeightsStore, bundle_state_dir


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


def shipped_bundle(root: Path, active: str = "default") -> Path:
    """A bundle's weights/ as a build leaves it: versions and its own ACTIVE."""
    store = WeightsStore(root / "weights")  # no state directory: a build writes the bundle
    store.save({"LanguageModel": 1.0}, version="default")
    store.save({"LanguageModel": 0.7}, version="tuned")
    store.activate(active)
    return root


def files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_a_state_directory_keeps_the_bundle_read_only(tmp_path: Path) -> None:
    bundle = shipped_bundle(tmp_path / "de-en")
    shipped = files(bundle)
    state = bundle_state_dir(bundle, tmp_path / "state")
    store = WeightsStore(bundle / "weights", state)
    assert store.active_version() == "default"  # no state yet: the bundle's own pointer
    store.save({"LanguageModel": 0.5}, version="ltr")
    store.activate("ltr")
    assert store.versions() == ["default", "ltr", "tuned"]
    assert [store.origin(v) for v in store.versions()] == ["bundle", "state", "bundle"]
    assert store.active().weights == {"LanguageModel": 0.5}
    store.activate("tuned")  # the bundle's versions stay activatable
    assert WeightsStore(bundle / "weights", state).active_version() == "tuned"
    with pytest.raises(InvalidInputError, match="already exists"):
        store.save({}, version="default")  # not even beside it, in the state
    assert files(bundle) == shipped
    assert sorted(files(state)) == ["ACTIVE", "BUNDLE", "ltr.json"]
    assert (state / "BUNDLE").read_text().strip() == str(bundle.resolve())


def test_a_trained_bundle_keeps_its_active_version_without_state(tmp_path: Path) -> None:
    bundle = shipped_bundle(tmp_path / "de-en", active="tuned")
    store = WeightsStore(bundle / "weights", tmp_path / "state" / "de-en-0")
    assert store.active_version() == "tuned"
    assert not (tmp_path / "state").exists()  # reading creates nothing


def test_each_bundle_has_its_own_state_directory(tmp_path: Path) -> None:
    a, b = tmp_path / "a" / "de-en", tmp_path / "b" / "de-en"
    assert bundle_state_dir(a, tmp_path) != bundle_state_dir(b, tmp_path)
    assert bundle_state_dir(a, tmp_path).name.startswith("de-en-")
    assert bundle_state_dir(a, tmp_path) == bundle_state_dir(tmp_path / "a/../a/de-en", tmp_path)
