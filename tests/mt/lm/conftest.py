"""The toy ARPA files of :mod:`tests.mt.lm.toy_lm`, written to a test's directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.mt.lm.toy_lm import PRUNED_ARPA, TOY_ARPA, write


@pytest.fixture
def toy(tmp_path: Path) -> Path:
    return write(tmp_path, TOY_ARPA)


@pytest.fixture
def pruned(tmp_path: Path) -> Path:
    return write(tmp_path, PRUNED_ARPA)
