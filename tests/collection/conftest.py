"""Fixtures shared by this folder's tiers."""

from __future__ import annotations

import pytest

from service.mt.bundle import ModelBundle
from service.retrieval.base import DecodedQuery
from service.retrieval.query import decode_query
from tests.collection.test_live import QUERIES


@pytest.fixture(scope="module")
def queries(toy_bundle: ModelBundle) -> list[DecodedQuery]:
    decoder = toy_bundle.decoder()
    return [decode_query(decoder, q, "de", qid=f"q{i}") for i, q in enumerate(QUERIES)]
