"""Translator suggestions reread by the dense reader: the head's order against a sort written
out by hand, the sentence-vector cache against encoding every time, and the suggestion path of
the command line and the API (the toy bundle and pool, the tiny hash encoder)."""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.collection.reader import Collection
from service.dense.vectors import build_vectors
from service.index.build import build_pool_index
from service.index.inverted import InvertedIndex
from service.mt.bundle import ModelBundle
from service.retrieval.base import Hit, Ranking, get_scorer
from service.retrieval.query import decode_query
from service.search.suggestions import (
    SentenceVectors,
    SuggestionReader,
    SuggestionRerank,
    pool_vectors,
    rank_suggestions,
    rerank_head,
)
from tests.api.conftest import POOL, write_pool
from tests.dense.conftest import HashEncoder


def _ranking(scores: list[float]) -> Ranking:
    ordered = sorted(scores, reverse=True)
    return Ranking("q", [Hit(i, f"s{i}", s) for i, s in enumerate(ordered)], "method:tr")


@settings(max_examples=60, deadline=None)
@given(
    scores=st.lists(st.floats(0.0, 1.0), min_size=0, max_size=30),
    cos=st.lists(st.sampled_from([-0.2, 0.0, 0.3, 0.8, 0.81, 0.95]), min_size=30, max_size=30),
    head=st.integers(1, 25),
    power=st.sampled_from([0.0, 1.0, 16.0]),
    k=st.integers(1, 35),
)
def test_the_head_is_sorted_by_the_product_and_the_rest_follows_in_order(
    scores: list[float], cos: list[float], head: int, power: float, k: int
) -> None:
    ranking = _ranking(scores)
    n = min(head, len(ranking.hits))
    got, cosines = rerank_head(ranking, cos[:n], SuggestionRerank(head, power), k)
    # by hand: each head hit's key, sorted (ties: TR's rank); then the rest as they were
    keys = [(ranking.hits[i].score * max(cos[i], 1e-6) ** power, i) for i in range(n)]
    want = [i for _, i in sorted(keys, key=lambda t: (-t[0], t[1]))] + list(
        range(n, len(ranking.hits))
    )
    assert [h.docno for h in got.hits] == want[:k]
    assert all(a.score >= b.score for a, b in zip(got.hits, got.hits[1:], strict=False))
    assert [c for c in cosines if not math.isnan(c)] == [cos[i] for i in want[:k] if i < n]
    assert got.signature == f"method:tr|dense-head:{head}^{power:g}"


def test_power_zero_keeps_translation_retrievals_order() -> None:
    ranking = _ranking([0.9, 0.5, 0.4, 0.1])
    got, _ = rerank_head(ranking, [0.1, 0.9, 0.5, 0.7], SuggestionRerank(4, 0.0), 4)
    assert [(h.docno, h.score) for h in got.hits] == [(h.docno, h.score) for h in ranking.hits]


def test_cached_vectors_are_the_encoders_and_the_cache_is_bounded() -> None:
    encoder = HashEncoder()
    cache = SentenceVectors(encoder, capacity=3)
    texts = {0: "the house", 1: "a big table", 2: "sort the sheet", 3: "insert a table"}
    rows = cache.get(["a", "b"], texts.__getitem__, [0, 1])
    np.testing.assert_array_equal(rows, encoder.encode_passages([texts[0], texts[1]]))
    calls = encoder.calls
    again = cache.get(["b", "a"], texts.__getitem__, [1, 0])  # both kept: no encoding
    assert encoder.calls == calls
    np.testing.assert_array_equal(again, rows[::-1])
    cache.get(["c", "d"], texts.__getitem__, [2, 3])  # four rows: the least recent (b) goes
    assert len(cache) == 3
    calls = encoder.calls
    cache.get(["a"], texts.__getitem__, [0])  # read last before c, d: kept
    assert encoder.calls == calls
    cache.get(["b"], texts.__getitem__, [1])  # dropped: embedded again
    assert encoder.calls == calls + 1


def test_suggestions_reread_by_meaning(toy_bundle: ModelBundle, tmp_path: Path) -> None:
    build_pool_index(write_pool(tmp_path / "pool.tsv", POOL), tmp_path / "pool")
    pool = InvertedIndex.load(tmp_path / "pool")
    scorer = get_scorer("tr", pool, bundle=toy_bundle)
    decoded_sentence = decode_query(toy_bundle.decoder(), "das haus ist groß", "de", search=False)

    def texts(d: int) -> str:
        return pool.doc(d).text

    plain, cos_off = rank_suggestions(scorer, decoded_sentence, 3, None, texts)
    assert plain.signature == scorer.rank(decoded_sentence, 3).signature
    assert all(math.isnan(c) for c in cos_off)
    reader = SuggestionReader(HashEncoder(), SuggestionRerank(head=5, power=16.0))
    got, cos = rank_suggestions(scorer, decoded_sentence, 3, reader, texts)
    deep = scorer.rank(decoded_sentence, 5)
    assert len(deep.hits) >= 3
    query = reader.encoder.encode_queries([deep.info["translations"][0]["text"]])[0]
    by_hand = [
        float(reader.encoder.encode_passages([texts(h.docno)])[0] @ query) for h in deep.hits
    ]
    want, want_cos = rerank_head(deep, by_hand, reader.params, 3)
    assert [h.doc_id for h in got.hits] == [h.doc_id for h in want.hits]
    assert cos == pytest.approx(want_cos, abs=1e-6)
    assert got.signature.endswith("|dense-head:5^16|enc:test-hash:hash32:32")


def test_a_pool_with_vectors_is_read_instead_of_embedded(
    toy_bundle: ModelBundle, tmp_path: Path
) -> None:
    build_pool_index(write_pool(tmp_path / "pool.tsv", POOL), tmp_path / "pool")
    pool = InvertedIndex.load(tmp_path / "pool")
    decoded = decode_query(toy_bundle.decoder(), "das haus ist groß", "de", search=False)
    scorer = get_scorer("tr", pool, bundle=toy_bundle)
    assert pool_vectors(Collection.of_index(pool)) is None  # none yet: embedded as read
    reader = SuggestionReader(HashEncoder(), SuggestionRerank(head=5, power=16.0))
    build_vectors(pool, HashEncoder())
    stored = pool_vectors(Collection.of_index(pool))
    assert stored is not None and stored.encoder == reader.encoder.signature()
    calls = reader.encoder.calls
    got, cos = rank_suggestions(
        scorer, decoded, 5, reader, lambda d: pool.doc(d).text, stored=stored
    )
    assert len(got.hits) >= 3
    assert reader.encoder.calls == calls + 1  # the query only
    want, want_cos = rank_suggestions(
        scorer, decoded, 5, SuggestionReader(HashEncoder(), reader.params),
        lambda d: pool.doc(d).text,
    )  # fmt: skip
    assert cos == pytest.approx(want_cos, abs=0.02)  # int8 rows: about 1 % of a cosine
    other = SuggestionReader(HashEncoder("other"), reader.params)  # vectors of another model
    again, _ = rank_suggestions(
        scorer, decoded, 5, other, lambda d: pool.doc(d).text, stored=stored
    )
    assert [h.doc_id for h in again.hits] == [h.doc_id for h in want.hits]
    assert "|enc:test-hash:other:32" in again.signature


def test_damaged_pool_vectors_fall_back_to_embedding(
    toy_bundle: ModelBundle, tmp_path: Path
) -> None:
    build_pool_index(write_pool(tmp_path / "pool.tsv", POOL), tmp_path / "pool")
    pool = InvertedIndex.load(tmp_path / "pool")
    build_vectors(pool, HashEncoder())
    assert pool_vectors(Collection.of_index(pool)) is not None
    manifest = tmp_path / "pool" / "dense" / "manifest.json"
    manifest.write_text("{not json", encoding="utf-8")  # damaged: a new stamp, read again
    os.utime(manifest, ns=(1, 1))
    assert pool_vectors(Collection.of_index(pool)) is None
    decoded = decode_query(toy_bundle.decoder(), "das haus ist groß", "de", search=False)
    reader = SuggestionReader(HashEncoder(), SuggestionRerank(head=5, power=16.0))
    got, cos = rank_suggestions(
        get_scorer("tr", pool, bundle=toy_bundle), decoded, 3, reader,
        lambda d: pool.doc(d).text, stored=pool_vectors(Collection.of_index(pool)),
    )  # fmt: skip
    assert got.hits and not any(math.isnan(c) for c in cos)  # embedded as read
