"""Optional extras: ``ray`` (extra ``ray``) and ``eflomal`` (extra ``train``): the tests that start
processes, Ray or a browser, read the shared data or run long (the integration tier,
tests/README.md); the rest are in :mod:`tests.core.test_extras`."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.core.test_extras import ROOT


@pytest.mark.process  # starts a process
def test_serving_imports_neither_ray_nor_eflomal() -> None:
    """The app and the CLI import with both hidden, and importing them loads neither."""
    code = (
        "import sys\n"
        "sys.modules.update({'ray': None, 'eflomal': None})\n"
        "import service.api.app, service.cli, service.jobs.worker\n"
        "loaded = [m for m in ('ray', 'eflomal') if sys.modules.get(m) is not None]\n"
        "assert not loaded, loaded\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
