"""The app skeleton: liveness, readiness without any model, error mapping."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from service import errors
from service.api.app import create_app
from service.api.errors import STATUS_BY_ERROR, status_for
from service.core.settings import Settings
from service.errors import (
    ClirError,
    ConfigurationError,
    DataFormatError,
    InputTooLargeError,
    InternalError,
    InvalidInputError,
    NotFoundError,
)
from service.forest.hypergraph import HypergraphBuilder
from service.index.inverted import InvertedIndex
from service.mt.bundle import ModelBundle
from service.mt.decoder import DecodeStats, Forest


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
    assert status_for(InternalError("x")) == 500


DOMAIN_ERRORS = sorted(
    (c for c in vars(errors).values() if isinstance(c, type) and issubclass(c, ClirError)),
    key=lambda c: c.__name__,
)


@pytest.mark.parametrize("cls", DOMAIN_ERRORS, ids=lambda c: c.__name__)
def test_every_domain_error_has_a_deliberate_status(cls: type[ClirError]) -> None:
    # listed itself, not caught by the fallback of a base class; 500 only for a bug
    assert cls in {listed for listed, _ in STATUS_BY_ERROR}
    status = status_for(cls.__new__(cls))
    assert 400 <= status < 600 and (status != 500 or cls is InternalError)


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (ConfigurationError("LEX weights need a grammar"), 503),
        (DataFormatError("weights/v.json", None, "corrupted weights file"), 503),
        (ClirError("a learning-to-rank shard failed"), 503),
    ],
)
def test_a_domain_error_in_a_route_is_not_a_500(
    client: TestClient, error: ClirError, status: int
) -> None:
    def fail() -> None:
        raise error

    client.app.add_api_route("/v1/test-fail", fail)  # type: ignore[attr-defined]
    r = client.get("/v1/test-fail")
    assert r.status_code == status
    assert r.json() == {"detail": str(error)}


def _internal_error_logs(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "service.api.errors"]


def test_an_internal_error_is_a_500_logged_with_the_request_id(
    client: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    def fail() -> None:
        raise InternalError("the forest has no derivation of its goal node 7")

    client.app.add_api_route("/v1/test-bug", fail)  # type: ignore[attr-defined]
    caplog.set_level(logging.INFO)
    r = client.get("/v1/test-bug", headers={"X-Request-ID": "bug-1"})
    assert r.status_code == 500
    assert r.headers["x-request-id"] == "bug-1"
    body = r.json()
    assert body["request_id"] == "bug-1" and "bug-1" in body["detail"]
    assert "derivation" not in body["detail"]  # the message is for the log, not the client
    (record,) = _internal_error_logs(caplog)
    assert record.levelno == logging.ERROR
    assert record.__dict__["request_id"] == "bug-1"
    assert "the forest has no derivation of its goal node 7" in record.getMessage()
    assert record.exc_info is not None  # with the traceback
    requests = [x for x in caplog.records if x.name == "service.requests"]
    assert [x.__dict__["status"] for x in requests] == [500]


def test_a_search_that_breaks_an_invariant_answers_500(
    client: TestClient, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a decoder forest always has a derivation of its goal (pass-through covers every word);
    # one without is a bug that BOW-FD finds, not the searcher's fault
    b = HypergraphBuilder()
    x = b.add_node("X", (0, 1))
    b.add_node("S", (0, 1))
    b.add_edge(x, [], ["house"], {})
    broken = b.build(1)

    def decode(
        _decoder: object, sentences: list[tuple[str, ...]], *_args: object, **_kwargs: object
    ) -> tuple[list[Forest], None]:
        return [Forest(tuple(s), broken, 0.0, DecodeStats(), False) for s in sentences], None

    monkeypatch.setattr("service.api.serving.decode_sentences", decode)
    caplog.set_level(logging.INFO)
    r = client.post("/v1/search", json={"query": "das Haus", "lang": "de", "method": "bowfd"})
    assert r.status_code == 500
    rid = r.headers["x-request-id"]
    assert r.json()["request_id"] == rid and rid in r.json()["detail"]
    (record,) = _internal_error_logs(caplog)
    assert record.levelno == logging.ERROR and record.__dict__["request_id"] == rid
    assert "no derivation of its goal" in record.getMessage()


def test_ready_when_a_bundle_and_an_index_load(
    toy_bundle: ModelBundle, toy_index: InvertedIndex, tmp_path: Path
) -> None:
    settings = Settings(
        model_bundles=[tmp_path / "absent", toy_bundle.path],
        doc_indexes=[toy_index.path],
        pool_indexes=[tmp_path / "no-pool"],
    )
    with TestClient(create_app(settings)) as client:
        r = client.get("/readyz")
        assert r.status_code == 200
        body = r.json()
        assert body["ready"] is True
        assert body["models"] == {"de": toy_bundle.name}
        assert any("sentence-pool index" in m for m in body["missing"])


def test_broken_bundle_is_reported_not_fatal(tmp_path: Path) -> None:
    broken = tmp_path / "models" / "de-en"
    broken.mkdir(parents=True)
    (broken / "manifest.json").write_text("{not json")
    settings = Settings(model_bundles=[broken], doc_indexes=[], pool_indexes=[])
    with TestClient(create_app(settings)) as client:
        body = client.get("/readyz").json()
        assert body["ready"] is False
        assert any("manifest.json" in e for e in body["errors"])
