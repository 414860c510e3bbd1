"""The app skeleton: liveness, readiness without any model, error mapping."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from service.api.app import create_app
from service.api.errors import status_for
from service.errors import InputTooLargeError, InvalidInputError, NotFoundError
from service.settings import Settings


def test_health_and_not_ready_without_models(tmp_path: Path) -> None:
    settings = Settings(
        model_bundles=[tmp_path / "models/de-en"],
        doc_indexes=[tmp_path / "indexes/docs"],
        pool_indexes=[tmp_path / "indexes/pool"],
    )
    with TestClient(create_app(settings)) as client:
        assert client.get("/healthz").json() == {"status": "ok"}
        r = client.get("/readyz")
        assert r.status_code == 503
        body = r.json()
        assert body["ready"] is False
        assert body["detail"] == "no model loaded"
        assert any("models/de-en" in m for m in body["missing"])


def test_error_status_mapping() -> None:
    assert status_for(InputTooLargeError("x")) == 413
    assert status_for(InvalidInputError("x")) == 422
    assert status_for(NotFoundError("x")) == 404
