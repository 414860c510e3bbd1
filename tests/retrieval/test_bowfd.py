"""Bag-of-words forced decoding (Hieber & Riezler 2015, §3): hand-worked scores, the fast search
against the reference (and the reference against brute-force enumeration), beam, multi-sentence
combination, LEX features, explanations and feature vectors."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from service.core.csr import ptr_from_counts
from service.core.jit import Engine
from service.errors import ConfigurationError, InternalError, InvalidInputError
from service.forest.hypergraph import Hypergraph, HypergraphBuilder
from service.index.analysis import analysis_signature
from service.index.inverted import InvertedIndex
from service.index.vocab import encode_terms
from service.mt.bundle import ModelBundle
from service.mt.decoder import DecodeStats, Forest
from service.mt.rules import GLUE, Rule, nt, target_yield
from service.retrieval.base import DecodedQuery, get_scorer
from service.retrieval.bowfd import (
    IR_FEATURE,
    BowFdScorer,
    SentenceRanking,
    combine_sentences,
    doc_bounds,
    prepare_sentence,
    rank_sentence,
    reference_bounds,
    reference_scores,
    top_k_order,
    with_term_weights,
)
from service.retrieval.bowfd.kernels import Board, board_ranks
from service.retrieval.explain import BowFdExplanation, MatchedTerm
from service.retrieval.lex import LexFeatures, rule_lex_features
from service.retrieval.query import decode_query
from tests.forest.forests import TOY_WEIGHTS, WORDS, all_trees, random_forest, toy_forest

P, WP = "LogPEgivenF", "WordPenalty"


# --- a hand-made index: bm25(t, d) chosen directly --------------------------------------------
def hand_index(docs: Mapping[str, Mapping[str, float]]) -> InvertedIndex:
    """An in-memory index whose bm25 weights are exactly the given ones (rsj set to 1)."""
    ids = list(docs)
    terms = sorted({t for d in docs.values() for t in d})
    tid = {t: i for i, t in enumerate(terms)}
    rows = sorted((tid[t], n, w) for n, d in enumerate(ids) for t, w in docs[d].items())
    counts = np.bincount([r[0] for r in rows], minlength=len(terms))
    offsets = ptr_from_counts(counts)
    blob, voffsets = encode_terms(terms)

    def strings(xs: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        data = [x.encode() for x in xs]
        off = ptr_from_counts([len(x) for x in data])
        return np.frombuffer(b"".join(data) or b"", dtype=np.uint8).copy(), off

    arrays: dict[str, np.ndarray] = {
        "vocab_blob": blob,
        "vocab_offsets": voffsets,
        "df": counts.astype(np.int32),
        "rsj": np.ones(len(terms), dtype=np.float32),
        "post_offsets": offsets,
        "post_docs": np.array([r[1] for r in rows], dtype=np.int32),
        "post_tf": np.ones(len(rows), dtype=np.int32),
        "post_weight": np.array([r[2] for r in rows], dtype=np.float32),
        "doc_len": np.full(len(ids), 10, dtype=np.int32),
        "doc_source": np.zeros(len(ids), dtype=np.uint16),
    }
    for name in ("id", "title", "text"):
        arrays[f"{name}_blob"], arrays[f"{name}_offsets"] = strings(ids)
    manifest = {
        "build": {
            "kind": "docs",
            "k1": 1.2,
            "b": 0.75,
            "rsj": "floor",
            "tokenizer": "en",
            "analysis": "none",
            "analysis_signature": analysis_signature("none"),
        },
        "counts": {"n_docs": len(ids), "avdl": 10.0, "sources": ["t"]},
    }
    return InvertedIndex(Path("in-memory"), manifest, arrays)


def query_of(*forests: Hypergraph, weights: Mapping[str, float] = TOY_WEIGHTS) -> DecodedQuery:
    fs = tuple(Forest(("w",), hg, 0.0, DecodeStats(), False) for hg in forests)
    return DecodedQuery("q", "text", "de", tuple(("w",) for _ in fs), fs, dict(weights), "toy")


# --- hand-worked scores -------------------------------------------------------------------------
# toy_forest() is "das Haus brennt" (tests/forest/forests.py). With TOY_WEIGHTS the edge scores are
#   the −1.0, that −1.5 | house −0.75, home −2.0 | burns −1.5, "is burning" −1.75 |
#   swap X13 −0.5 | "the house" −2.5 | every glue edge −0.25.
# The monotone glue derivation of words x y z scores x + y + z − 0.75; "the house"+z scores
# z − 3.0; the swapped one (x z y) x + y + z − 1.0. SMT Viterbi: "the house burns" −4.0.
DOCS = {
    "D1": {"house": 2.0, "burning": 1.0},
    "D2": {"home": 2.5},
    "D3": {"that": 1.0, "is": 0.5},
    "D4": {"cat": 5.0},  # shares no word with the forest: never a candidate
    "D5": {"burns": 0.125},
}
# D1: "the house is burning" = −1.0 − 0.75 − 1.75 − 0.75 + (2.0 + 1.0) = −1.25
#     (beats "the house burns" −4.0 + 2.0 = −2.0 and "the house"+"is burning" −4.75 + 3 = −1.75)
# D2: "the home burns"       = −1.0 − 2.0 − 1.5 − 0.75 + 2.5          = −2.75
# D3: "that house is burning" = −1.5 − 0.75 − 1.75 − 0.75 + (1.0 + 0.5) = −3.25
#     (beats "that house burns" −4.5 + 1.0 = −3.5, "the house is burning" −4.25 + 0.5 = −3.75)
# D5: "the house burns"      = −4.0 + 0.125                             = −3.875
HAND = [("D1", -1.25), ("D2", -2.75), ("D3", -3.25), ("D5", -3.875)]


def test_hand_worked_scores() -> None:
    index = hand_index(DOCS)
    scorer = BowFdScorer(index, v=1.0)
    ranking = scorer.rank(query_of(toy_forest()), k=10)
    assert [(h.doc_id, h.score) for h in ranking.hits] == HAND
    top = scorer.rank(query_of(toy_forest()), k=2)
    assert [(h.doc_id, h.score) for h in top.hits] == HAND[:2]


def test_hand_worked_scores_reference_engine() -> None:
    scorer = BowFdScorer(hand_index(DOCS), v=1.0, engine="reference")
    ranking = scorer.rank(query_of(toy_forest()), k=10)
    assert [(h.doc_id, h.score) for h in ranking.hits] == HAND


def test_v_scales_the_bonus() -> None:
    # v = 0.5: D1 "the house is burning" −4.25 + 1.5 = −2.75 vs "the house burns" −4.0 + 1.0
    # = −3.0; D2 "the home burns" −5.25 + 1.25 = −4.0 = the Viterbi score (tie with
    # "the house burns" −4.0 without bonus).
    # D2, like D3 ("that house is burning" −4.75 + 0.75), earns nothing over a document
    # without any forest word, so neither is retrieved; D5 −4.0 + 0.0625.
    scorer = BowFdScorer(hand_index(DOCS), v=0.5)
    scores = {h.doc_id: h.score for h in scorer.rank(query_of(toy_forest()), k=10).hits}
    assert scores == {"D1": -2.75, "D5": -3.9375}
    # learning to rank ranks prepared sentences directly: the same documents
    docs, _, _ = scorer.rank_prepared(scorer.prepare(query_of(toy_forest())), 10)
    assert [scorer.index.doc_id(int(d)) for d in docs] == ["D1", "D5"]


def test_ir_weight_in_the_weight_vector_overrides_the_default_v() -> None:
    # learning to rank writes v into the weights as IR_BM25; the same hand-worked numbers as
    # test_v_scales_the_bonus, from a scorer whose own default is v = 1.0
    scorer = BowFdScorer(hand_index(DOCS), v=1.0)
    query = query_of(toy_forest(), weights={**TOY_WEIGHTS, IR_FEATURE: 0.5})
    scores = {h.doc_id: h.score for h in scorer.rank(query, k=10).hits}
    assert scores["D1"] == -2.75
    assert "D2" not in scores
    features = scorer.feature_vector(query, scorer.index.docno("D1"))
    assert features[IR_FEATURE] == 3.0  # "the house is burning": house 2.0 + burning 1.0
    bad = query_of(toy_forest(), weights={**TOY_WEIGHTS, IR_FEATURE: float("nan")})
    with pytest.raises(ConfigurationError, match="IR_BM25"):
        scorer.rank(bad, k=10)


def test_explanation_is_the_translation_that_retrieved_the_document() -> None:
    scorer = BowFdScorer(hand_index(DOCS), v=1.0)
    hit = scorer.rank(query_of(toy_forest()), k=1, explain=True).hits[0]
    assert hit.doc_id == "D1"
    assert isinstance(hit.explanation, BowFdExplanation)
    (part,) = hit.explanation.sentences
    assert part.translation == "the house is burning"
    assert sorted(part.matched, key=lambda m: m.term) == [
        MatchedTerm("burning", 1, 1.0),
        MatchedTerm("house", 1, 2.0),
    ]
    assert part.smt == -4.25
    assert part.ir == 3.0
    assert part.in_sentence_list is None  # a query of one sentence
    assert sorted(hit.explanation.matched_terms()) == ["burning", "house"]


def test_feature_vector_of_the_best_derivation() -> None:
    scorer = BowFdScorer(hand_index(DOCS), v=1.0)
    phi = scorer.feature_vector(query_of(toy_forest()), scorer.index.docno("D1"))
    # "the house is burning": edges the (P −0.5, WP 1), house (P −0.25, WP 1),
    # "is burning" (P −0.75, WP 2) and three glue edges.
    # The per-term IR features split IR_BM25 by term: house 2.0, burning 1.0.
    assert phi == {
        P: -1.5, WP: 4.0, GLUE: 3.0, IR_FEATURE: 3.0, "ir:house": 2.0, "ir:burning": 1.0
    }  # fmt: skip
    w = {**TOY_WEIGHTS, IR_FEATURE: 1.0}
    assert sum(w.get(n, 0.0) * x for n, x in phi.items()) == -1.25


# Per-term IR weights (Hieber & Riezler 2015, §3: "sparse, lexicalized, real-valued IR features",
# w_ir = v·1 by default): with δ_burning = −1 and δ_home = +1 (v = 1) "burning" earns nothing and
# "home" twice its bm25.
#   D1: "the house is burning" −4.25 + 2.0 + 0 = −2.25 loses to "the house burns" −4.0 + 2.0
#       = −2.0 (and to nothing else: "the house"+"is burning" −4.75 + 2.0 = −2.75)
#   D2: "the home burns" −5.25 + 2·2.5 = −0.25
#   D3 and D5 use no reweighted term: −3.25 and −3.875 as before.
TERM_WEIGHTS = {**TOY_WEIGHTS, "ir:burning": -1.0, "ir:home": 1.0, "ir:unseen": 4.0}
HAND_TERMS = [("D2", -0.25), ("D1", -2.0), ("D3", -3.25), ("D5", -3.875)]


@pytest.mark.parametrize("engine", ["compiled", "reference"])
def test_per_term_ir_weights_hand_worked(engine: Engine) -> None:
    scorer = BowFdScorer(hand_index(DOCS), v=1.0, engine=engine)
    query = query_of(toy_forest(), weights=TERM_WEIGHTS)
    ranking = scorer.rank(query, k=10, explain=True)
    assert [(h.doc_id, h.score) for h in ranking.hits] == HAND_TERMS
    d1 = next(h for h in ranking.hits if h.doc_id == "D1")
    assert isinstance(d1.explanation, BowFdExplanation)
    (part,) = d1.explanation.sentences
    assert part.translation == "the house burns"
    assert (part.smt, part.ir) == (-4.0, 2.0)
    phi = scorer.feature_vector(query, scorer.index.docno("D2"))
    assert (phi[IR_FEATURE], phi["ir:home"]) == (2.5, 2.5)
    w = {**TERM_WEIGHTS, IR_FEATURE: 1.0}
    assert sum(w.get(n, 0.0) * x for n, x in phi.items()) == -0.25


def test_per_term_ir_weights_must_be_finite() -> None:
    scorer = BowFdScorer(hand_index(DOCS), v=1.0)
    bad = query_of(toy_forest(), weights={**TOY_WEIGHTS, "ir:house": float("inf")})
    with pytest.raises((ConfigurationError, InvalidInputError), match="ir:house"):
        scorer.rank(bad, k=10)
    prep = prepare_sentence(toy_forest(), toy_forest().edge_weights(TOY_WEIGHTS), scorer.index)
    with pytest.raises(ConfigurationError, match="house"):
        with_term_weights(prep, {"ir:house": float("nan")})


def test_beam_keeps_the_best_incoming_edges() -> None:
    # beam=1 keeps the best edge per node by SMT value: the, house, burns, S02 ← S01 X12
    # (−2.25 over −2.75) and S03 ← S02 X23 (−4.0 over −4.25): one derivation,
    # "the house burns". D1 earns only "house": −4.0 + 2.0; "home" and "that" are gone, so
    # D2 and D3 are no candidates; D5: −4.0 + 0.125.
    scorer = BowFdScorer(hand_index(DOCS), v=1.0, beam=1)
    hits = scorer.rank(query_of(toy_forest()), k=10).hits
    assert [(h.doc_id, h.score) for h in hits] == [("D1", -2.0), ("D5", -3.875)]
    wide = BowFdScorer(hand_index(DOCS), v=1.0, beam=5)
    assert [(h.doc_id, h.score) for h in wide.rank(query_of(toy_forest()), k=10).hits] == HAND


# --- multi-sentence queries ---------------------------------------------------------------------
def _list(docs: list[int], scores: list[float], vit: float, complete: bool) -> SentenceRanking:
    return SentenceRanking(np.array(docs, dtype=np.int32), np.array(scores), vit, complete, {})


def test_product_of_experts_with_minimum_score_smoothing() -> None:
    s1 = _list([1, 2, 3], [-1.0, -2.0, -3.0], -9.0, complete=False)  # truncated: floor −3
    s2 = _list([2, 4], [0.5, -0.5], -2.0, complete=True)  # every candidate: floor = Viterbi −2
    docs, scores = combine_sentences([s1, s2])
    # d2 = −2 + 0.5; d1 = −1 + (−2); d4 = (−3) + (−0.5); d3 = −3 + (−2)
    assert docs.tolist() == [2, 1, 4, 3]
    assert scores.tolist() == [-1.5, -3.0, -3.5, -5.0]


def small_forest() -> Hypergraph:
    """Second sentence: X → home (P −0.5, WP 1: −1.0) | house (P −1.0, WP 1: −1.5); S glue."""
    b = HypergraphBuilder()
    x = b.add_node("X", (0, 1))
    b.add_edge(x, [], ["home"], {P: -0.5, WP: 1}, rule_id=0)
    b.add_edge(x, [], ["house"], {P: -1.0, WP: 1}, rule_id=1)
    s = b.add_node("S", (0, 1))
    b.add_edge(s, [x], target_yield([nt(1, "S")]), {GLUE: 1})
    return b.build(s)


def test_two_sentences_by_hand() -> None:
    # Sentence 2 (Viterbi "home" −1.25): D1 "house" −1.75 + 2.0 = 0.25; D2 "home" −1.25 + 2.5
    # = 1.25; nobody else shares a word. With K' = 2: sentence 1's list is D1 −1.25,
    # D2 −2.75 (4 candidates: truncated); sentence 2's is D2 1.25, D1 0.25 (complete).
    # D1 = −1.25 + 0.25 = −1.0; D2 = −2.75 + 1.25 = −1.5.
    scorer = BowFdScorer(hand_index(DOCS), v=1.0, per_sentence_k=2)
    hits = scorer.rank(query_of(toy_forest(), small_forest()), k=2).hits
    assert [(h.doc_id, h.score) for h in hits] == [("D1", -1.0), ("D2", -1.5)]
    # K' = 3 adds D3 (sentence 1: −3.25; sentence 2's list is complete: its Viterbi −1.25)
    scorer3 = BowFdScorer(hand_index(DOCS), v=1.0, per_sentence_k=3)
    hits3 = scorer3.rank(query_of(toy_forest(), small_forest()), k=3).hits
    assert [(h.doc_id, h.score) for h in hits3] == [("D1", -1.0), ("D2", -1.5), ("D3", -4.5)]


# --- the fast search against the reference, and the reference against brute force ----------
TERMS = (*WORDS, "z")  # "z" is in no forest


def random_docs(rng: random.Random, n: int) -> dict[str, dict[str, float]]:
    docs = {}
    for i in range(n):
        words = rng.sample(TERMS, rng.randint(1, len(TERMS)))
        docs[f"d{i}"] = {w: rng.randint(1, 12) / 4 for w in words}  # exact binary fractions
    return docs


def brute_force_score(
    hg: Hypergraph,
    smt: np.ndarray,
    bm25: Mapping[str, float],
    v: float,
    delta: Mapping[str, float] | None = None,
) -> float:
    """max over every derivation of Σ_e smt[e] + Σ_{words t of e} (v + δ_t)·bm25(t)."""
    delta = delta or {}
    best = -np.inf
    for tree in all_trees(hg, hg.goal):
        s = 0.0
        for e in tree.preorder():
            s += float(smt[e])
            for t in hg.edges[e].target_terminals:
                s += (v + delta.get(t, 0.0)) * bm25.get(t, 0.0)
        best = max(best, s)
    return best


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32 - 1),
    n_docs=st.integers(1, 12),
    v=st.sampled_from([0.0, 0.5, 1.0, 2.0, -0.5]),
    k=st.integers(1, 6),
)
def test_fast_equals_reference_on_random_forests(seed: int, n_docs: int, v: float, k: int) -> None:
    rng = random.Random(seed)
    hg = random_forest(rng, max_nodes=7, max_derivations=60)
    weights = {f: float(rng.randint(-2, 2)) for f in ("f1", "f2", "f3")}
    smt = np.array(hg.edge_weights(weights))
    docs = random_docs(rng, n_docs)
    index = hand_index(docs)
    if not all_trees(hg, hg.goal):  # no derivation: a decoder never hands such a forest on
        with pytest.raises(InternalError):
            prepare_sentence(hg, smt, index)
        assume(False)
    cand, ref = reference_scores(hg, smt, index, v)
    # the reference is the brute-force maximum over derivations
    for d, s in zip(cand.tolist(), ref.tolist(), strict=True):
        assert s == brute_force_score(hg, smt, docs[index.doc_id(d)], v)
    # candidates: the documents sharing a word with some edge
    forest_words = {t for e in hg.edges for t in e.target_terminals}
    expected = [n for n, d in enumerate(docs.values()) if forest_words & set(d)]
    assert cand.tolist() == expected
    prep = prepare_sentence(hg, smt, index)
    fast = rank_sentence(prep, v, k)
    pos = top_k_order(cand, ref, k)
    assert fast.docs.tolist() == cand[pos].tolist()
    assert fast.scores.tolist() == ref[pos].tolist()


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32 - 1),
    n_docs=st.integers(1, 12),
    v=st.sampled_from([0.0, 1.0, 2.0]),
    k=st.integers(1, 6),
)
def test_per_term_weights_fast_equals_reference_on_random_forests(
    seed: int, n_docs: int, v: float, k: int
) -> None:
    # δ_t in [−2, 2] (exact binary fractions): some terms earn more, some less, some a
    # negative bonus (then the search must not use its bounds)
    rng = random.Random(seed)
    hg = random_forest(rng, max_nodes=7, max_derivations=60)
    assume(bool(all_trees(hg, hg.goal)))
    weights = {f: float(rng.randint(-2, 2)) for f in ("f1", "f2", "f3")}
    delta = {t: rng.randint(-8, 8) / 4 for t in rng.sample(TERMS, rng.randint(1, len(TERMS)))}
    weights.update({f"ir:{t}": x for t, x in delta.items()})
    smt = np.array(hg.edge_weights(weights))
    docs = random_docs(rng, n_docs)
    index = hand_index(docs)
    cand, ref = reference_scores(hg, smt, index, v, weights)
    for d, s in zip(cand.tolist(), ref.tolist(), strict=True):
        assert s == brute_force_score(hg, smt, docs[index.doc_id(d)], v, delta)
    scorer = BowFdScorer(index, v=v)
    (prep,) = scorer.prepare(query_of(hg, weights=weights))
    fast = rank_sentence(prep, v, k)
    pos = top_k_order(cand, ref, k)
    assert fast.docs.tolist() == cand[pos].tolist()
    assert fast.scores.tolist() == ref[pos].tolist()
    # the feature vector of each document's best derivation scores it exactly
    for d, s in zip(cand.tolist(), ref.tolist(), strict=True):
        phi = scorer.feature_vector([prep], d, v)
        w = {**weights, IR_FEATURE: v}
        assert sum(w.get(n, 0.0) * x for n, x in phi.items()) == pytest.approx(s, abs=1e-9)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), beam=st.integers(1, 3), v=st.sampled_from([0.5, 1.5]))
def test_beam_equals_reference_on_the_pruned_forest(seed: int, beam: int, v: float) -> None:
    rng = random.Random(seed)
    hg = random_forest(rng, max_nodes=7, max_derivations=60)
    weights = {f: float(rng.randint(-2, 2)) for f in ("f1", "f2", "f3")}
    smt = np.array(hg.edge_weights(weights))
    index = hand_index(random_docs(rng, 6))
    try:
        prep = prepare_sentence(hg, smt, index, beam=beam)
    except InternalError:  # no derivation of the goal
        assume(False)
        raise
    pruned = prep.hypergraph
    assert all(len(pruned.incoming(x)) <= beam for x in range(pruned.num_nodes))
    cand, ref = reference_scores(pruned, prep.smt, index, v)
    fast = rank_sentence(prep, v, 4)
    pos = top_k_order(cand, ref, 4)
    assert fast.docs.tolist() == cand[pos].tolist()
    assert fast.scores.tolist() == ref[pos].tolist()


def test_a_word_twice_in_a_derivation_earns_twice() -> None:
    b = HypergraphBuilder()
    x = b.add_node("X", (0, 1))
    b.add_edge(x, [], ["a", "a"], {"f1": -1.0})
    b.add_edge(x, [], ["b"], {"f1": 0.0})
    hg = b.build(x)
    index = hand_index({"dA": {"a": 1.5}, "dB": {"b": 1.75}})
    # dA: "a a" = −1 + 2·1.5 = 2.0 beats "b" = 0; dB: "b" = 0 + 1.75. The top-1 search must
    # not prune dA: its upper bound counts "a" twice (−1 + 2·1.5), not once (−1 + 1.5 < 1.75).
    query = query_of(hg, weights={"f1": 1.0})
    hits = BowFdScorer(index).rank(query, k=1).hits
    assert [(h.doc_id, h.score) for h in hits] == [("dA", 2.0)]


def test_forest_without_derivation_is_an_internal_error() -> None:
    # the decoders' pass-through rules give every sentence a derivation: a forest without
    # one is a bug, not the caller's input
    b = HypergraphBuilder()
    x = b.add_node("X", (0, 1))
    b.add_node("S", (0, 1))
    b.add_edge(x, [], ["a"], {})
    hg = b.build(1)
    with pytest.raises(InternalError, match="no derivation"):
        BowFdScorer(hand_index({"d": {"a": 1.0}})).rank(query_of(hg), k=1)


# --- LEX features -------------------------------------------------------------------------------
def test_rule_lex_features() -> None:
    rule = Rule(
        "X",
        ("das", nt(1), "haus", "ein"),
        ("the", nt(1), "house", "of"),
        alignment=((0, 0), (2, 2)),
    )
    assert rule_lex_features(rule) == ("lex:das_the", "lex:haus_house", "ins:of", "del:ein")


def test_lex_weights_change_lexical_choice(
    toy_bundle: ModelBundle, toy_index: InvertedIndex
) -> None:
    q = decode_query(toy_bundle.decoder(), "das haus ist klein", "de")
    lex = LexFeatures(toy_bundle.grammar)
    fired = {f for e in q.forests[0].hypergraph.edges for f in lex.of_edge(e)}
    assert "lex:haus_house" in fired and "lex:haus_home" in fired
    d8 = toy_index.docno("d8")  # "nothing relevant here at all": no bonus anywhere
    plain = BowFdScorer(toy_index, v=1.0, bundle=toy_bundle)
    assert plain.feature_vector(q, d8).get("lex:haus_house") == 1.0
    pushed = BowFdScorer(toy_index, v=1.0, bundle=toy_bundle, lex_weights={"lex:haus_home": 50.0})
    phi = pushed.feature_vector(q, d8)
    assert phi.get("lex:haus_home") == 1.0
    assert "lex:haus_house" not in phi
    with pytest.raises(ConfigurationError, match="grammar"):
        BowFdScorer(toy_index, lex_weights={"lex:haus_home": 1.0}).rank(q, k=1)


# --- end to end with a trained toy model ----------------------------------------------------------
def test_bowfd_retrieves_the_alternative_translation(
    toy_bundle: ModelBundle, toy_index: InvertedIndex
) -> None:
    q = decode_query(toy_bundle.decoder(), "das haus ist klein", "de")
    fast = BowFdScorer(toy_index, v=1.0).rank(q, k=8, explain=True)
    ref = BowFdScorer(toy_index, v=1.0, engine="reference").rank(q, k=8)
    assert [(h.doc_id, h.score) for h in fast.hits] == [(h.doc_id, h.score) for h in ref.hits]
    by_id = {h.doc_id: h for h in fast.hits}
    # the "home" page is retrieved through "the home is small", not the 1-best's "house"
    expl = by_id["d2"].explanation
    assert isinstance(expl, BowFdExplanation)
    assert "home" in expl.sentences[0].translation.split()
    assert set(expl.matched_terms()) >= {"home"}


def test_registry_parameters_and_signature(toy_index: InvertedIndex) -> None:
    scorer = get_scorer("bowfd", toy_index, v=0.5, beam=3, per_sentence_k=200)
    sig = scorer.signature()
    assert "method:bowfd" in sig and "v:0.5" in sig and "beam:3" in sig
    assert "sentence_k:200" in sig
    for bad in ({"v": float("nan")}, {"beam": 0}, {"per_sentence_k": 0}, {"engine": "gpu"},
                {"lex_weights": {"LogPEgivenF": 1.0}}):  # fmt: skip
        with pytest.raises(ConfigurationError):
            get_scorer("bowfd", toy_index, **bad)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32 - 1),
    n_docs=st.integers(2, 14),
    v=st.sampled_from([0.0, 0.5, 1.0, 2.0]),
    k=st.integers(1, 4),
)
def test_shards_sharing_a_board_merge_to_the_top_k(
    seed: int, n_docs: int, v: float, k: int
) -> None:
    """Two halves of the documents ranked one after the other through one board (what
    shards searched at once share): the first posts the scores it found, the second prunes by
    them, and their lists merge to the top k of all documents."""
    hg, smt, docs, _rng = _board_case(seed, n_docs)
    names = list(docs)
    parts = [(0, names[: n_docs // 2]), (1, names[n_docs // 2 :])]
    cells, ranked = _through_one_board(hg, smt, docs, parts, v, k, seeded=False)
    ranks, _ = board_ranks(k)
    for slot, r in ranked:
        if r.info["bounds"]:  # it posted the scores it found, at each rank
            for col, m in enumerate(ranks.tolist()):
                if m <= len(r.scores):
                    assert cells[slot, col] >= r.scores[m - 1]
    _assert_merged_top_k(hg, smt, docs, ranked, v, k)


def _board_case(
    seed: int, n_docs: int
) -> tuple[Hypergraph, np.ndarray, dict[str, dict[str, float]], random.Random]:
    """A random forest with a derivation, its SMT weights and ``n_docs`` random documents."""
    rng = random.Random(seed)
    hg = random_forest(rng, max_nodes=7, max_derivations=60)
    assume(all_trees(hg, hg.goal))
    smt = np.array(hg.edge_weights({f: float(rng.randint(-2, 2)) for f in ("f1", "f2", "f3")}))
    return hg, smt, random_docs(rng, n_docs), rng


def _through_one_board(
    hg: Hypergraph,
    smt: np.ndarray,
    docs: Mapping[str, Mapping[str, float]],
    parts: Sequence[tuple[int, Sequence[str]]],
    v: float,
    k: int,
    *,
    seeded: bool,
) -> tuple[np.ndarray, list[tuple[int, SentenceRanking]]]:
    """Each part (a board slot's documents) ranked in turn through one board, its documents
    by id; ``seeded``: a slot's later parts start from its earlier parts' scores (a shard's
    segments)."""
    cells = np.full((2, len(board_ranks(k)[0])), -np.inf)
    out: list[tuple[int, SentenceRanking]] = []
    for slot, part in parts:
        index = hand_index({n: docs[n] for n in part})
        earlier = [r.scores for s, r in out if s == slot]
        own = np.concatenate(earlier) if seeded and earlier else None
        r = rank_sentence(prepare_sentence(hg, smt, index), v, k, board=Board(cells, slot),
                          seed=own)  # fmt: skip
        ids = np.array([index.doc_id(d) for d in r.docs.tolist()], dtype=object)
        out.append((slot, replace(r, docs=ids)))
    return cells, out


def _assert_merged_top_k(
    hg: Hypergraph,
    smt: np.ndarray,
    docs: Mapping[str, Mapping[str, float]],
    ranked: Sequence[tuple[int, SentenceRanking]],
    v: float,
    k: int,
) -> None:
    names = list(docs)
    got = [(s, d) for _, r in ranked for d, s in zip(r.docs, r.scores.tolist(), strict=True)]
    whole = hand_index(docs)
    cand, ref = reference_scores(hg, smt, whole, v)
    want = [(float(ref[p]), whole.doc_id(int(cand[p]))) for p in top_k_order(cand, ref, k)]
    assert sorted(got, key=lambda x: (-x[0], names.index(x[1])))[:k] == want


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n_docs=st.integers(1, 12),
    v=st.sampled_from([0.0, 0.5, 1.0, 2.0]),
    per_term=st.booleans(),
)
def test_compiled_bounds_equal_the_reference_and_bracket_every_score(
    seed: int, n_docs: int, v: float, per_term: bool
) -> None:
    rng = random.Random(seed)
    hg = random_forest(rng, max_nodes=7, max_derivations=60)
    assume(bool(all_trees(hg, hg.goal)))
    weights = {f: float(rng.randint(-2, 2)) for f in ("f1", "f2", "f3")}
    if per_term:  # δ_t ≥ 0: the bonuses stay ≥ 0, where bounds are used
        weights.update({f"ir:{t}": rng.randint(0, 8) / 4 for t in rng.sample(TERMS, 2)})
    index = hand_index(random_docs(rng, n_docs))
    (prep,) = BowFdScorer(index, v=v).prepare(query_of(hg, weights=weights))
    lower, upper = doc_bounds(prep, v)
    ref_lower, ref_upper = reference_bounds(prep, v)
    assert lower.tolist() == ref_lower.tolist()
    assert upper.tolist() == ref_upper.tolist()
    smt = np.array(hg.edge_weights(weights))
    cand, scores = reference_scores(hg, smt, index, v, weights)
    assert cand.tolist() == prep.docs.tolist()
    assert np.all(lower <= scores + 1e-9) and np.all(scores <= upper + 1e-9)


def test_a_board_prunes_from_the_lower_bounds_before_anything_is_scored() -> None:
    k = 8
    ranks, _ = board_ranks(k)
    cells = np.full((2, len(ranks)), -np.inf)
    lower = np.arange(20, dtype=np.float64)  # 19 is the best, 12 the 8th best
    assert Board(cells, 0).post_lower_bounds(lower, k) == 12.0
    for r, m in enumerate(ranks.tolist()):
        assert cells[0, r] == 20 - m  # the m-th best lower bound
    assert np.all(cells[1] == -np.inf)
    # slot 1 reads slot 0's 8th best; fewer than k candidates post nothing
    assert Board(cells, 1).floor(k) == 12.0
    assert Board(cells, 1).post_lower_bounds(np.full(4, 15.0), k) == -np.inf
    assert np.all(cells[1] == -np.inf)
    # once slot 1 has 4 documents at 15, the pair rule (its 4th best, slot 0's 4th best = 16)
    # says 8 documents reach min(15, 16)
    cells[1, list(ranks).index(4)] = 15.0
    assert Board(cells, 1).floor(k) == 15.0
    # a board's cells only rise
    Board(cells, 0).post_lower_bounds(lower - 100, k)
    assert cells[0, -1] == 12.0


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32 - 1),
    n_docs=st.integers(3, 30),
    v=st.sampled_from([0.0, 0.5, 1.0, 2.0]),
    k=st.integers(1, 4),
)
def test_a_shards_later_segment_seeded_with_its_earlier_ones_merges_to_the_top_k(
    seed: int, n_docs: int, v: float, k: int
) -> None:
    """Slot 0 is a shard of two segments: the second starts from the first's scores (its
    heap holds both, so it posts the shard's ranks); slot 1 is another shard on the board."""
    hg, smt, docs, rng = _board_case(seed, n_docs)
    names = list(docs)
    a, b = sorted(rng.sample(range(1, n_docs), 2))
    parts = [(0, names[:a]), (1, names[a:b]), (0, names[b:])]
    _, ranked = _through_one_board(hg, smt, docs, parts, v, k, seeded=True)
    _assert_merged_top_k(hg, smt, docs, ranked, v, k)
