"""The serving layer: time-budget plans, budgeted decoding with a fake clock, the LRU cache."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from service.api.serving import (
    BYTES_PER_ARRAY_EDGE,
    BYTES_PER_EDGE,
    QueryCache,
    decode_sentences,
    plan_sentence,
    query_bytes,
)
from service.mt.bundle import ModelBundle
from service.mt.decoder import DecoderConfig
from service.retrieval.base import DecodedQuery
from service.retrieval.query import decode_query


@pytest.mark.parametrize(
    ("elapsed", "budget", "spw", "words", "plan"),
    [
        (0.0, 1.0, 0.1, 5, "full"),  # 0.5 s fits in 1.0
        (0.5, 1.0, 0.1, 5, "full"),  # exactly fits
        (0.6, 1.0, 0.1, 5, "reduced"),  # 0.5 s > 0.4 s left
        (1.0, 1.0, 0.1, 1, "skip"),  # nothing left
        (2.0, 1.0, 0.0, 1, "skip"),
    ],
)
def test_plan(elapsed: float, budget: float, spw: float, words: int, plan: str) -> None:
    assert plan_sentence(elapsed, budget, spw, words) == plan


def fake_clock(times: list[float]) -> Callable[[], float]:
    it = iter(times)
    return lambda: next(it)


def test_budgeted_decode_reduces_then_skips(toy_bundle: ModelBundle) -> None:
    decoder = toy_bundle.decoder(DecoderConfig())
    sentences = [("das", "haus"), ("das", "auto"), ("ein", "buch")]
    # start 0; before sentence 2: 1.0 s for 2 words (0.5 s/word), 2 words need 1.0 s but
    # 0.5 s are left -> reduced; before sentence 3: nothing left -> skipped
    forests, reason = decode_sentences(decoder, sentences, 1.5, fake_clock([0.0, 1.0, 1.5]))
    assert [f.tokens for f in forests] == sentences[:2]
    assert reason == (
        "time budget of 1.5 s exceeded: sentences 2 of 3 decoded with pop limit 20; "
        "sentences 3 of 3 skipped"
    )


def test_budgeted_decode_within_budget(toy_bundle: ModelBundle) -> None:
    decoder = toy_bundle.decoder(DecoderConfig())
    sentences = [("das", "haus"), ("das", "auto")]
    forests, reason = decode_sentences(decoder, sentences, 5.0, fake_clock([0.0, 0.1]))
    assert len(forests) == 2 and reason is None


def query(qid: str) -> DecodedQuery:
    return DecodedQuery(qid, qid, "de", (), (), {}, "default")


def test_cache_evicts_the_least_recently_used() -> None:
    cache = QueryCache(2)
    lock_a = cache.put("a", query("a"))
    cache.put("b", query("b"))
    hit = cache.get("a")  # a is now the most recent
    assert hit is not None and hit[1] is lock_a
    cache.put("c", query("c"))
    assert cache.get("b") is None
    assert cache.get("a") is not None and cache.get("c") is not None
    assert cache.put("a", query("other")) is lock_a  # an existing entry wins
    assert len(cache) == 2


def test_cache_of_size_zero_keeps_nothing() -> None:
    cache = QueryCache(0)
    cache.put("a", query("a"))
    assert cache.get("a") is None and len(cache) == 0


def test_cache_is_bounded_by_memory(toy_bundle: ModelBundle) -> None:
    decoder = toy_bundle.decoder(DecoderConfig())
    small = decode_query(decoder, "das Haus", "de")
    large = decode_query(decoder, "das Haus ist groß . das Auto ist groß", "de")
    edges = [sum(f.hypergraph.num_edges for f in q.forests) for q in (small, large)]
    assert edges[0] < edges[1]
    assert [query_bytes(small), query_bytes(large)] == [BYTES_PER_ARRAY_EDGE * e for e in edges]
    reference = toy_bundle.decoder(DecoderConfig(engine="reference"))
    objects = decode_query(reference, "das Haus", "de")
    assert query_bytes(objects) == BYTES_PER_EDGE * edges[0]  # same forest, as objects
    # room for the large query alone, or for the small one twice, never for both kinds
    cache = QueryCache(100, max_bytes=query_bytes(large) + query_bytes(small) - 1)
    cache.put("s1", small)
    cache.put("L", large)  # evicts s1: both would exceed the bound
    assert cache.get("s1") is None and cache.get("L") is not None
    assert cache.bytes == query_bytes(large)
    cache.put("s2", small)  # evicts L, the least recently used
    assert cache.get("L") is None and cache.bytes == query_bytes(small)
    tiny = QueryCache(100, max_bytes=query_bytes(small) - 1)
    tiny.put("s", small)  # larger than the whole budget: not kept
    assert len(tiny) == 0 and tiny.bytes == 0
