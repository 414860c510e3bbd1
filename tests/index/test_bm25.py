"""BM25 weights and scores of the index against a brute-force computation of the formula
in Hieber & Riezler 2015, §3, and against rank_bm25, and the three policies for negative rsj."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from rank_bm25 import BM25Okapi

from service.errors import InvalidInputError
from service.index import (
    InvertedIndex,
    build_arrays,
    build_docs_index,
    regex_tokenize,
    top_k,
)
from service.records import Doc
from tests.index.conftest import SEVEN

K1, B = 1.2, 0.75


def brute_force_bm25(docs: list[list[str]], term: str, d: int, k1: float, b: float) -> float:
    """bm25(t,d) = log((|C| − df + 0.5)/(df + 0.5)) · tf/(k1((1 − b) + b·dl/avdl) + tf)."""
    n = len(docs)
    df = sum(1 for doc in docs if term in doc)
    tf = docs[d].count(term)
    dl = len(docs[d])
    avdl = sum(len(doc) for doc in docs) / n
    rsj = math.log((n - df + 0.5) / (df + 0.5))
    return rsj * tf / (k1 * ((1 - b) + b * dl / avdl) + tf)


def _tokens(doc: Doc, title_weight: int = 1) -> list[str]:
    """The document as BM25 sees it: its title written ``title_weight`` times, then its text."""
    return regex_tokenize(doc.title) * title_weight + regex_tokenize(doc.text)


def _load(path: Path, out: Path, rsj: str = "floor", title_weight: int = 1) -> InvertedIndex:
    build_docs_index(path, out, tokenizer="regex", rsj_policy=rsj, k1=K1, b=B, analysis="none",
                     title_weight=title_weight)  # fmt: skip
    return InvertedIndex.load(out)


@pytest.mark.parametrize("title_weight", [1, 3])
def test_weights_equal_the_papers_formula_computed_by_brute_force(
    seven_docs: Path, tmp_path: Path, title_weight: int
) -> None:
    index = _load(seven_docs, tmp_path / "ix", rsj="keep", title_weight=title_weight)
    docs = [_tokens(d, title_weight) for d in SEVEN]
    assert docs[0] == ["cats"] * title_weight + ["the", "cat", "sat", "on", "the", "mat"]
    vocab = sorted({t for doc in docs for t in doc})
    assert [index.term(i) for i in range(index.n_terms)] == vocab
    assert index.avdl == pytest.approx(sum(map(len, docs)) / 7)
    checked = 0
    for term in vocab:
        tid = index.term_id(term)
        assert tid is not None
        post = index.postings(tid)
        expected_docs = [d for d in range(7) if term in docs[d]]
        assert post.docs.tolist() == expected_docs
        assert index.df[tid] == len(expected_docs)
        for d, tf, w in zip(post.docs, post.tfs, post.weights, strict=True):
            assert tf == docs[d].count(term)
            assert w == pytest.approx(brute_force_bm25(docs, term, int(d), K1, B), rel=1e-6)
            checked += 1
    assert checked == sum(len(set(doc)) for doc in docs)


def test_hand_computed_weight() -> None:
    # "fish": df 1 of 7, tf 2 in a 3-token document; avdl = (3 + 2) / 2 over two documents.
    arrays, stats = build_arrays(
        [Doc("a", "", "fish fish x"), Doc("b", "", "y z")], regex_tokenize, k1=1.2, b=0.75
    )
    assert stats["avdl"] == 2.5
    # rsj = log((2 - 1 + 0.5) / 1.5) = 0, so every weight in a 2-document corpus with df 1 is 0
    assert np.all(arrays["post_weight"] == 0)
    arrays, stats = build_arrays(
        [Doc("a", "", "fish fish x"), Doc("b", "", "y z"), Doc("c", "", "y z w")],
        regex_tokenize, k1=1.2, b=0.75,
    )  # fmt: skip
    fish = arrays["vocab_blob"].tobytes().decode().split("\n").index("fish")
    start = arrays["post_offsets"][fish]
    rsj = math.log((3 - 1 + 0.5) / (1 + 0.5))  # 0.5108
    norm = 1.2 * (0.25 + 0.75 * 3 / (8 / 3))  # dl 3, avdl 8/3
    assert arrays["post_weight"][start] == pytest.approx(rsj * 2 / (norm + 2), rel=1e-6)


# Eight documents; no term is in more than four of them ("a" is in exactly four: rsj = 0,
# which rank_bm25 does not floor either), so rank_bm25's epsilon floor never applies.
EIGHT = [
    "a quick brown fox",
    "a lazy dog sleeps all day",
    "the quick dog barks",
    "a fox and a dog and a fox",
    "cats sleep",
    "a brown bread and butter",
    "lazy cats sleep all day long",
    "the end of the story",
]
QUERIES = [
    "quick fox",
    "lazy dog dog",  # a repeated token adds its weight twice
    "a fox",
    "brown butter unknownword",
    "cats sleep all day",
    "the the story",
]


@pytest.fixture
def eight(tmp_path: Path) -> tuple[InvertedIndex, BM25Okapi]:
    from service.data import write_docs

    path = tmp_path / "eight.jsonl"
    write_docs(path, [Doc(f"e{i}", "", t) for i, t in enumerate(EIGHT)])
    tokenized = [regex_tokenize(t) for t in EIGHT]
    df = Counter(t for doc in tokenized for t in set(doc))
    assert max(df.values()) == df["a"] == len(EIGHT) // 2
    return _load(path, tmp_path / "ix"), BM25Okapi(tokenized, k1=K1, b=B)


@pytest.mark.parametrize("query", QUERIES)
def test_scores_equal_rank_bm25(eight: tuple[InvertedIndex, BM25Okapi], query: str) -> None:
    index, reference = eight
    tokens = regex_tokenize(query)
    expected = reference.get_scores(tokens)
    # rank_bm25's tf part has (k1 + 1) in the numerator, the paper's does not
    got = index.bm25_scores(tokens).astype(np.float64) * (K1 + 1)
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-9)
    hits = index.bm25_topk(tokens, k=3)
    ranked = sorted(np.flatnonzero(expected > 0), key=lambda d: (-expected[d], d))
    assert hits.docs.tolist() == ranked[:3]
    np.testing.assert_allclose(hits.scores * (K1 + 1), expected[ranked[:3]], rtol=1e-6)
    everything = index.bm25_topk(tokens, k=100)
    assert everything.docs.tolist() == ranked  # only documents that match a weighted term


def test_weighted_query_equals_repeated_tokens(eight: tuple[InvertedIndex, BM25Okapi]) -> None:
    index, _ = eight
    a = index.bm25_topk(["lazy", "dog", "dog"], k=8)
    b = index.bm25_weighted({"lazy": 1.0, "dog": 2.0, "nothere": 5.0}, k=8)
    assert a.docs.tolist() == b.docs.tolist()
    np.testing.assert_allclose(a.scores, b.scores, rtol=1e-6)
    half = index.bm25_weighted({"lazy": 0.5}, k=8)
    full = index.bm25_weighted({"lazy": 1.0}, k=8)
    np.testing.assert_allclose(half.scores * 2, full.scores, rtol=1e-6)
    ids = [index.term_id("lazy"), index.term_id("dog")]
    c = index.bm25_weighted_ids([i for i in ids if i is not None], [1.0, 2.0], k=8)
    assert c.docs.tolist() == a.docs.tolist()
    with pytest.raises(InvalidInputError, match="more than once"):
        index.bm25_weighted_ids([ids[0], ids[0]], [1.0, 1.0], k=8)  # type: ignore[list-item]
    with pytest.raises(InvalidInputError, match="k must be"):
        index.bm25_topk(["dog"], k=0)


def test_docs_containing_any(eight: tuple[InvertedIndex, BM25Okapi]) -> None:
    index, _ = eight
    ids = index.term_ids(["fox", "butter", "a", "zzz"])
    assert len(ids) == 3
    # "a" has rsj 0 (df 4 of 8): it adds nothing, so it does not make a candidate
    assert index.docs_containing_any(ids).tolist() == [0, 3, 5]
    everything = index.docs_containing_any(ids, nonzero_weight_only=False)
    assert everything.tolist() == [0, 1, 3, 5]


def test_top_k_breaks_ties_by_document_number() -> None:
    scores = np.array([1.0, 3.0, 2.0, 3.0, 2.0, 2.0, 0.5], dtype=np.float32)
    cands = np.arange(7, dtype=np.int32)
    assert top_k(scores, cands, 1).docs.tolist() == [1]
    assert top_k(scores, cands, 3).docs.tolist() == [1, 3, 2]
    assert top_k(scores, cands, 4).docs.tolist() == [1, 3, 2, 4]
    assert top_k(scores, cands, 10).docs.tolist() == [1, 3, 2, 4, 5, 0, 6]
    sub = np.array([0, 4, 5], dtype=np.int32)
    assert top_k(scores, sub, 2).docs.tolist() == [4, 5]


@pytest.mark.parametrize("policy", ["floor", "drop", "keep"])
def test_negative_rsj_policies(seven_docs: Path, tmp_path: Path, policy: str) -> None:
    index = _load(seven_docs, tmp_path / policy, rsj=policy)
    docs = [_tokens(d) for d in SEVEN]
    assert index.rsj_policy.value == policy
    assert index.manifest["build"]["rsj"] == policy
    counts = index.manifest["counts"]
    # "the" is in d1, d2, d4, d6, d7: df 5 of 7, rsj = log(2.5 / 5.5) < 0; nothing else is
    assert counts["negative_rsj_terms"] == 1
    assert counts["negative_rsj_postings"] == 5
    the = index.term_id("the")
    assert the is not None
    assert index.df[the] == 5  # df is kept under every policy (PSQ needs it)
    post = index.postings(the)
    raw = math.log(2.5 / 5.5)
    if policy == "floor":
        assert post.docs.tolist() == [0, 1, 3, 5, 6]
        assert np.all(post.weights == 0) and index.rsj[the] == 0
    elif policy == "drop":
        assert len(post.docs) == 0 and index.rsj[the] == 0
        assert counts["dropped_terms"] == 1
    else:
        assert index.rsj[the] == pytest.approx(raw, rel=1e-6)
        for d, w in zip(post.docs, post.weights, strict=True):
            assert w == pytest.approx(brute_force_bm25(docs, "the", int(d), K1, B), rel=1e-6)
            assert w < 0
    hits = index.bm25_topk(["the", "cat"], k=7)
    cat = index.term_id("cat")
    assert cat is not None
    cat_w = dict(zip(index.postings(cat).docs.tolist(), index.postings(cat).weights, strict=True))
    if policy == "keep":
        the_w = dict(zip(post.docs.tolist(), post.weights, strict=True))
        expected = {d: cat_w.get(d, 0.0) + the_w.get(d, 0.0) for d in set(cat_w) | set(the_w)}
    else:  # "the" adds nothing under floor and drop: the ranking is by "cat" alone
        expected = cat_w
    ranked = sorted(expected, key=lambda d: (-expected[d], d))
    assert hits.docs.tolist() == ranked
    np.testing.assert_allclose(hits.scores, [expected[d] for d in ranked], rtol=1e-6)


def test_postings_among_documents_equal_the_filtered_postings(
    eight: tuple[InvertedIndex, BM25Okapi],
) -> None:
    """``postings(t, among)`` (binary search) keeps exactly the full postings' rows of those
    documents, weights included: a cascade's candidates cost their own lookups."""
    index, _ = eight
    rng = np.random.default_rng(3)
    for t in range(index.n_terms):
        full = index.postings(t)
        for size in (0, 1, 3, index.n_docs):
            among = np.sort(rng.choice(index.n_docs, size=size, replace=False)).astype(np.int32)
            got = index.postings(t, among)
            keep = np.isin(full.docs, among)
            assert got.docs.tolist() == full.docs[keep].tolist()
            assert got.tfs.tolist() == full.tfs[keep].tolist()
            assert got.weights.tolist() == full.weights[keep].tolist()
