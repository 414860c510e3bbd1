"""Readers and writers: round trips, gzip, error policies with file and line numbers: the tests
that start processes, Ray or a browser, read the shared data or run long (the integration tier,
tests/README.md); the rest are in :mod:`tests.dataformats.test_formats`."""

from __future__ import annotations

from pathlib import Path

import pytest

from service.data import (
    load_qrels,
    load_queries,
)


@pytest.mark.data
def test_reads_the_shared_qrels_and_queries(shared_data: Path) -> None:
    qrels = load_qrels(shared_data / "clir/lohelp-de/qrels.dev.txt")
    queries = load_queries(shared_data / "clir/lohelp-de/queries.dev.tsv")
    assert len(queries) == 260
    assert sum(len(v) for v in qrels.values()) == 1836
    assert set(qrels) <= set(queries)
