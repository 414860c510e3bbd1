"""Shared fixtures. Tests never read the user's environment: settings are built explicitly."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from service.mt.bundle import ModelBundle, load_bundle
from service.mt.train import train_model
from service.settings import get_settings
from tests.synthetic import CONFIG, synthetic

ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = ROOT.parent / "shared" / "data"
FIXTURES = Path(__file__).resolve().parent / "data"


@pytest.fixture(autouse=True)
def _fresh_settings(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for key in list(__import__("os").environ):
        if key.startswith("CLIR_"):
            monkeypatch.delenv(key)
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


@pytest.fixture
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.fail(f"the shared data directory {SHARED_DATA} is missing")
    return SHARED_DATA


@pytest.fixture(scope="session")
def toy_bundle(tmp_path_factory: pytest.TempPathFactory) -> ModelBundle:
    root = tmp_path_factory.mktemp("bundle")
    par, lm = root / "p.tsv.gz", root / "lm.txt"
    synthetic(par, lm)
    train_model(par, lm, root / "de-en", CONFIG, log=lambda _m: None)
    return load_bundle(root / "de-en")
