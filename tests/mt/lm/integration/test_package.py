"""The shape of the LM package (service.mt.lm): every module says what it is for, the modules: the
tests that start processes, Ray or a browser, read the shared data or run long (the integration
tier, tests/README.md); the rest are in :mod:`tests.mt.lm.test_package`."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.mt.lm.test_package import ROOT


@pytest.mark.process  # starts a process
def test_importing_the_package_loads_no_numba() -> None:
    probe = "import sys, service.mt.lm; print('numba' in sys.modules)"
    run = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert run.stdout.strip() == "False"
