"""Serving never imports training or tuning code, nor a reference implementation.

The serving entry points — the app factory (:func:`service.api.app.create_app`, what
``clir serve`` hands to uvicorn), the model bundle, the retrieval runner and the runs by path,
the CLI module and the job worker — are imported in a fresh interpreter; in another, the app's
resources (the committed demo bundle and indexes) are loaded and warmed up, which runs every
request path once, so the modules the decoders and scorers import lazily are loaded too.
Neither may load a module of :mod:`service.mt.training` or :mod:`service.mt.tuning`, nor a
reference kept for the tests (:mod:`service.mt.decoder.reference`, serving runs the compiled
engine and the reference is for tests, benchmarks and ``CLIR_DECODER_ENGINE=reference``;
:mod:`service.forest.kbest.reference`, :mod:`service.mt.lm.reference`,
:mod:`service.retrieval.bowfd.reference`). :mod:`tests.test_layers` checks the same
statically, with the layers of the whole service.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN = (
    "service.mt.training",
    "service.mt.tuning",
    "service.mt.decoder.reference",
    "service.forest.kbest.reference",
    "service.mt.lm.reference",
    "service.retrieval.bowfd.reference",
)

IMPORT_ENTRY_POINTS = """
import service.api.workers
import service.cli
import service.jobs.worker
import service.mt.bundle
import service.retrieval.runner
import service.runs
from service.api.app import create_app

app = create_app()
"""

SERVE_DEMO = (
    IMPORT_ENTRY_POINTS
    + """
from service.api.resources import load_resources
from service.api.warmup import warm_up
from service.core.settings import get_settings

settings = get_settings()
resources = load_resources(settings)
assert resources.models and not resources.missing, (resources.missing, resources.errors)
warm_up(app.state.service, resources, settings)
"""
)


def forbidden_modules(code: str, tmp_path: Path) -> list[str]:
    """The modules of :data:`FORBIDDEN` that running ``code`` in a fresh interpreter loads."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLIR_")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    env.update(
        {
            "CLIR_MODEL_BUNDLES": json.dumps(["models/demo-de-en"]),
            "CLIR_DOC_INDEXES": json.dumps(["indexes/demo"]),
            "CLIR_POOL_INDEXES": json.dumps(["indexes/demo-pool"]),
            "CLIR_JOB_STORE": str(tmp_path / "jobs.sqlite3"),
            "CLIR_WEIGHTS_STATE_DIR": str(tmp_path / "weights"),
            "CLIR_EMBEDDED_WORKER": "false",
        }
    )
    probe = code + "\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))\n"
    run = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    loaded: list[str] = json.loads(run.stdout.splitlines()[-1])
    return [m for m in loaded if any(m == p or m.startswith(p + ".") for p in FORBIDDEN)]


@pytest.mark.process  # starts a process
def test_the_probe_sees_training_tuning_and_reference_imports(tmp_path: Path) -> None:
    code = (
        "import service.mt.bundle\nimport service.mt.training.extract\nimport service.mt.tuning\n"
        "from service.mt.decoder import decoder_class\ndecoder_class('reference')"
    )
    assert forbidden_modules(code, tmp_path) == [
        "service.mt.decoder.reference",
        "service.mt.training",
        "service.mt.training.extract",
        "service.mt.tuning",
    ]


@pytest.mark.process  # starts a process
def test_serving_entry_points_import_no_training_tuning_or_reference(tmp_path: Path) -> None:
    assert forbidden_modules(IMPORT_ENTRY_POINTS, tmp_path) == []


@pytest.mark.slow
def test_serving_the_demo_loads_no_training_tuning_or_reference(tmp_path: Path) -> None:
    assert forbidden_modules(SERVE_DEMO, tmp_path) == []
