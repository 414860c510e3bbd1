"""The Ray driver's process logs as the API process does: its router's failover lines (at
info) reach the log, in the parent's format and at its level."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest

from service.collection.ray_driver import DriverConfig, log_as
from service.core.logs import current_format


@pytest.fixture
def restore_logging() -> Iterator[None]:
    names = ("service", "uvicorn", "")
    saved = {n: (logging.getLogger(n).handlers[:], logging.getLogger(n).level,
                 logging.getLogger(n).propagate) for n in names}  # fmt: skip
    yield
    for n, (handlers, level, propagate) in saved.items():
        logger = logging.getLogger(n)
        logger.handlers[:] = handlers
        logger.setLevel(level)
        logger.propagate = propagate


def _config(level: int, fmt: str) -> DriverConfig:
    return DriverConfig(None, ("c", None, None), 1, None, 1.0, 1, lambda ray, n: None,
                        level, fmt)  # type: ignore[arg-type]  # fmt: skip


@pytest.mark.usefixtures("restore_logging")
def test_the_driver_writes_info_lines_as_its_parent(capsys: pytest.CaptureFixture[str]) -> None:
    log_as(_config(logging.INFO, "json"))
    assert current_format() == "json"  # what a child of this process would be told
    logging.getLogger("service.collection.replicas").info("shard %d copy %d: standby", 1, 0)
    lines = [json.loads(x) for x in capsys.readouterr().err.splitlines() if x.strip()]
    assert [(x["level"], x["message"]) for x in lines] == [("INFO", "shard 1 copy 0: standby")]
    log_as(_config(logging.WARNING, "text"))
    assert current_format() == "text"
    logging.getLogger("service.collection.replicas").info("not at warning level")
    logging.getLogger("service.collection.replicas").warning("replaced")
    err = capsys.readouterr().err
    assert "replaced" in err and "not at warning level" not in err
