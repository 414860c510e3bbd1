"""Optional extras: ``ray`` (extra ``ray``) and ``eflomal`` (extra ``train``)
are left out of the service's own install, so choosing the Ray backend or training a model
without them must fail with a domain error naming the extra, and serving must not import them.

A package counts as missing when ``sys.modules`` maps it to None: ``import`` then raises
``ModuleNotFoundError`` as it does for a package that was never installed."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from service.cli import EXIT_ERROR, main
from service.core.extras import import_extra
from service.errors import ConfigurationError, MissingExtraError
from service.ltr.backends import make_backend
from service.mt.training.align import align_corpus
from service.mt.training.train import TrainConfig, train_model

ROOT = Path(__file__).resolve().parents[2]


def hide(monkeypatch: pytest.MonkeyPatch, *modules: str) -> None:
    for name in modules:
        monkeypatch.setitem(sys.modules, name, None)


def test_the_ray_backend_without_ray_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    hide(monkeypatch, "ray")
    with pytest.raises(MissingExtraError) as info:
        make_backend("ray", ray_address="ray-head:6379")
    assert isinstance(info.value, ConfigurationError)  # mapped like any unusable setting
    message = str(info.value)
    assert "ray training backend" in message and "'ray' extra" in message
    assert "clir-service[ray]" in message and "-e '.[ray]'" in message
    assert info.value.extra == "ray" and info.value.module == "ray"
    make_backend("local")  # the other backends do not need it


def test_aligning_without_eflomal_names_the_train_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    hide(monkeypatch, "eflomal", "eflomal.cython")
    with pytest.raises(MissingExtraError, match=r"'train' extra .*clir-service\[train\]"):
        align_corpus([(["ein", "Haus"], ["a", "house"])])


def test_train_model_without_eflomal_fails_before_any_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    hide(monkeypatch, "eflomal", "eflomal.cython")
    parallel, lm_text = tmp_path / "de-en.tsv", tmp_path / "en.txt"
    parallel.write_text("ein Haus\ta house\n", encoding="utf-8")
    lm_text.write_text("a house\n", encoding="utf-8")
    out = tmp_path / "bundle"
    with pytest.raises(MissingExtraError, match="'train' extra"):
        train_model(parallel, lm_text, out, TrainConfig(src="de", tgt="en"), log=lambda _: None)
    assert not out.with_name("bundle.work").exists()  # nothing cleaned or written
    argv = ["train-model", "--parallel", str(parallel), "--lm-text", str(lm_text)]
    code = main([*argv, "--src", "de", "--tgt", "en", "--out", str(out)])
    assert code == EXIT_ERROR
    assert "clir-service[train]" in capsys.readouterr().err


def test_a_broken_install_keeps_its_own_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only the package itself missing is "install the extra"; an installed package that
    imports something missing keeps its own error."""
    (tmp_path / "clir_extra_probe").mkdir()
    (tmp_path / "clir_extra_probe" / "__init__.py").write_text("import clir_no_such_dependency\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError) as info:
        import_extra("clir_extra_probe", "x", "a feature")
    assert not isinstance(info.value, MissingExtraError)
    assert info.value.name == "clir_no_such_dependency"
    monkeypatch.delitem(sys.modules, "clir_extra_probe", raising=False)
    with pytest.raises(MissingExtraError):
        import_extra("clir_no_such_dependency", "x", "a feature")
