"""The admin API: bearer-token access (401/403/503, the token never echoed or logged), jobs: the
tests that start processes, Ray or a browser, read the shared data or run long (the integration
tier, tests/README.md); the rest are in :mod:`tests.api.test_admin`."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.api.conftest import MakeClient
from tests.api.test_admin import AUTH, TOKEN, admin_post_selftest, ok


@pytest.mark.slow
def test_the_app_runs_jobs_in_its_embedded_worker_and_stops_it(
    make_client: MakeClient, bundle_copy: Path
) -> None:
    client = make_client(admin_token=TOKEN, model_bundles=[bundle_copy], embedded_worker=True)
    worker = client.app.state.worker  # type: ignore[attr-defined]
    assert worker is not None and worker.proc.poll() is None
    job = ok(admin_post_selftest(client), 202)
    deadline = time.monotonic() + 60
    while (state := ok(client.get(f"/v1/admin/jobs/{job['id']}", headers=AUTH))["state"]) in (
        "queued",
        "running",
    ):
        assert time.monotonic() < deadline, "the embedded worker did not run the job"
        time.sleep(0.05)
    assert state == "succeeded"
    client.__exit__(None, None, None)
    assert worker.proc.poll() == 0  # stopped cleanly with the app
