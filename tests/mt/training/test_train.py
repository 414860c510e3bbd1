"""End to end: train a bundle on a small synthetic corpus, load it, translate with it."""

from __future__ import annotations

from pathlib import Path

import pytest

from service.errors import (
    MissingResourceError,
)
from service.mt.bundle import load_bundle


def test_incomplete_bundle_is_refused(tmp_path: Path) -> None:
    (tmp_path / "b" / "grammar").mkdir(parents=True)
    with pytest.raises(MissingResourceError, match="incomplete"):
        load_bundle(tmp_path / "b")
