"""DT: the Viterbi translation of a toy forest as a BM25 query, scores worked out by hand."""

from __future__ import annotations

import math
from collections import Counter

import pytest

from service.data import write_docs
from service.forest.hypergraph import HypergraphBuilder
from service.index import build_docs_index
from service.index.inverted import InvertedIndex
from service.mt.bundle import ModelBundle
from service.mt.decoder import DecodeStats, Forest
from service.records import Doc
from service.retrieval.base import DecodedQuery, get_scorer
from service.retrieval.dt import DirectTranslation
from service.retrieval.query import decode_query
from tests.conftest import TOY_DOCS

K1, B = 1.2, 0.75


@pytest.fixture(scope="module")
def three_docs(tmp_path_factory: pytest.TempPathFactory) -> InvertedIndex:
    root = tmp_path_factory.mktemp("dt")
    docs = [
        Doc("a", "", "big house"),
        Doc("b", "", "large home"),
        Doc("c", "", "small dog"),
    ]
    write_docs(root / "d.jsonl", docs)
    build_docs_index(root / "d.jsonl", root / "ix", tokenizer="regex", k1=K1, b=B)
    return InvertedIndex.load(root / "ix")


def toy_query(weights: dict[str, float]) -> DecodedQuery:
    """One sentence 'großes haus' with two derivations: 'big house' (f=1) and 'large home'
    (f=0.5), so the 1-best depends on the sign of the weight of f."""
    b = HypergraphBuilder()
    x = b.add_node("X", (0, 2))
    b.add_edge(x, (), ("big", "house"), {"f": 1.0})
    b.add_edge(x, (), ("large", "home"), {"f": 0.5})
    goal = b.add_node("TOP", (0, 2))
    b.add_edge(goal, (x,), (0,), {})
    hg = b.build(goal)
    forest = Forest(("großes", "haus"), hg, 0.0, DecodeStats(), use_lm=True)
    return DecodedQuery("q1", "großes Haus", "de", (forest.tokens,), (forest,), weights, "w")


def test_hand_worked_scores(three_docs: InvertedIndex) -> None:
    # N = 3 documents of 2 words each: avdl = 2, so k1·((1-b) + b·dl/avdl) = 1.2 and
    # tf_bm25 = 1/(1.2 + 1) for every match; each query word is in one document:
    # rsj = ln((3 - 1 + 0.5)/(1 + 0.5)) = ln(5/3).
    expected = 2 * math.log(5 / 3) / 2.2
    scorer = get_scorer("dt", three_docs)
    best = scorer.rank(toy_query({"f": 1.0}), 10, explain=True)
    assert [h.doc_id for h in best.hits] == ["a"]
    assert best.hits[0].score == pytest.approx(expected, rel=1e-6)
    expl = best.hits[0].explanation
    assert expl is not None
    assert expl.to_json() == {"translation": "big house", "matched": ["big", "house"]}
    assert expl.matched_terms() == ["big", "house"]
    other = scorer.rank(toy_query({"f": -1.0}), 10)
    assert [h.doc_id for h in other.hits] == ["b"]
    assert other.hits[0].score == pytest.approx(expected, rel=1e-6)
    assert other.info["translation"] == "large home"
    assert "method:dt" in best.signature and "weights:w" in best.signature


def brute_force_bm25(query: list[str], docs: list[list[str]]) -> list[float]:
    n = len(docs)
    avdl = sum(map(len, docs)) / n
    df = Counter(t for d in docs for t in set(d))
    out = []
    for d in docs:
        tf = Counter(d)
        s = 0.0
        for t in query:
            if not tf[t]:
                continue
            rsj = max(0.0, math.log((n - df[t] + 0.5) / (df[t] + 0.5)))
            s += rsj * tf[t] / (K1 * ((1 - B) + B * len(d) / avdl) + tf[t])
        out.append(s)
    return out


def test_toy_bundle_end_to_end(toy_bundle: ModelBundle, toy_index: InvertedIndex) -> None:
    q = decode_query(toy_bundle.decoder(), "Das Buch ist alt. Das Hund ist klein.", "de")
    ranking = DirectTranslation(toy_index).rank(q, 8)
    text = "the book is old . the dog is small ."
    assert ranking.info["translation"] == text
    tokens = toy_index.analyzer.terms(text.split())  # the index's terms of the query
    w = toy_index.title_weight  # the title counts w times (BM25F)
    docs = [toy_index.analyze(d.title) * w + toy_index.analyze(d.text) for d in TOY_DOCS]
    expected = brute_force_bm25(tokens, docs)
    got = {h.doc_id: h.score for h in ranking.hits}
    for d, e in zip(TOY_DOCS, expected, strict=True):
        assert got.get(d.id, 0.0) == pytest.approx(e, abs=1e-5)
    assert {h.doc_id for h in ranking.hits[:2]} == {"d5", "d6"}


def test_unknown_method_lists_valid_ones(three_docs: InvertedIndex) -> None:
    from service.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="dt"):
        get_scorer("nope", three_docs)
