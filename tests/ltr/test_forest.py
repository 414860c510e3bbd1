"""Compact forests: best-derivation feature vectors and rankings against BOW-FD's own code."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from service.index.inverted import InvertedIndex
from service.ltr.examples import Decoding
from service.ltr.forest import CandidateRows, CompactSentence
from service.ltr.space import FeatureSpace
from service.mt.bundle import ModelBundle
from service.retrieval.bowfd import IR_FEATURE, fast_scores
from tests.ltr.conftest import TRAIN_QUERIES


def weights_with_lex(bundle: ModelBundle, v: float, terms: bool = False) -> dict[str, float]:
    w = dict(bundle.active_weights().weights)
    w[IR_FEATURE] = v
    # LEX weights that change which derivation wins for some documents
    w.update({"lex:haus_home": 0.8, "lex:haus_house": -0.3, "ins:the": 0.2, "lex:auto_car": 0.5})
    if terms:  # per-term IR weights: home and automobile earn more, house and car less
        w.update({"ir:home": 1.5, "ir:automobile": 0.75, "ir:house": -0.5, "ir:car": -1.0})
    return w


@pytest.mark.parametrize(("v", "terms"), [(1.3, False), (-0.4, False), (1.0, True), (0.5, True)])
def test_candidate_features_equal_the_reference(
    toy_bundle: ModelBundle, toy_index: InvertedIndex, v: float, terms: bool
) -> None:
    start = weights_with_lex(toy_bundle, v, terms)
    dec = Decoding(toy_bundle, toy_index, start, pop_limit=50, lex=True)
    space = FeatureSpace()
    docnos = np.arange(toy_index.n_docs, dtype=np.int64)
    compared = reweighted = 0
    for qid, text in TRAIN_QUERIES.items():
        dq = dec.decode(qid, text)
        sentences, preps = dec.compact(dq, space)
        w = space.vector(start)
        for cs, prep in zip(sentences, preps, strict=True):
            assert cs.num_edges <= prep.hypergraph.num_edges
            assert (prep.term_delta is not None) == (terms and cs.term_delta(w) is not None)
            reweighted += prep.term_delta is not None
            rows = CandidateRows.of(prep, docnos)
            phi = cs.candidate_features(rows, w, len(space)).toarray()
            for d in docnos.tolist():
                ref = dec.scorer.feature_vector([prep], d, v)
                ref = {n: x for n, x in ref.items() if x != 0.0}
                got = {n: x for n, x in space.weights(phi[d]).items() if x != 0.0}
                assert got.keys() == ref.keys(), (qid, d)
                for n in ref:
                    assert got[n] == pytest.approx(ref[n], abs=1e-9), (qid, d, n)
                compared += 1
            # w · Φ(h*_d) is the document's BOW-FD score of the sentence
            cand = np.searchsorted(prep.docs, docnos)
            inside = prep.docs[np.minimum(cand, len(prep.docs) - 1)] == docnos
            exact = fast_scores(prep, v, cand[inside])
            np.testing.assert_allclose(phi[inside] @ w, exact, rtol=1e-9, atol=1e-9)
            assert np.any(phi[:, 0] > 0)  # some document matched (IR_BM25 is column 0)
    assert compared >= len(TRAIN_QUERIES) * toy_index.n_docs
    assert (reweighted > 0) == terms


def test_compact_ranking_equals_the_scorer(
    toy_bundle: ModelBundle, toy_index: InvertedIndex
) -> None:
    start = weights_with_lex(toy_bundle, 1.0)
    dec = Decoding(toy_bundle, toy_index, start, pop_limit=50, lex=True)
    space = FeatureSpace()
    changed = dict(start)
    changed[IR_FEATURE] = 0.7
    changed["LanguageModel"] = changed.get("LanguageModel", 0.0) + 0.3
    termed = weights_with_lex(toy_bundle, 0.7, terms=True)
    for qid, text in TRAIN_QUERIES.items():
        dq = dec.decode(qid, text)
        sentences, _ = dec.compact(dq, space)
        for weights in (start, changed, termed):
            ref_preps = dec.scorer.prepare(replace(dq, weights=weights))
            ref_docs, ref_scores, _ = dec.scorer.rank_prepared(ref_preps, 8, weights[IR_FEATURE])
            w = space.vector(weights)
            preps = [cs.prepared(w, toy_index) for cs in sentences]
            docs, scores, _ = dec.scorer.rank_prepared(preps, 8, weights[IR_FEATURE])
            np.testing.assert_array_equal(docs, ref_docs)
            np.testing.assert_allclose(scores, ref_scores, rtol=1e-12)


def test_no_lex_columns_without_lex(toy_bundle: ModelBundle, toy_index: InvertedIndex) -> None:
    start = {**toy_bundle.active_weights().weights, IR_FEATURE: 1.0}
    dec = Decoding(toy_bundle, toy_index, start, pop_limit=50, lex=False)
    space = FeatureSpace()
    sentences, preps = dec.compact(dec.decode("q", "das haus ist groß"), space)
    cs: CompactSentence = sentences[0]
    assert cs.num_edges == len(preps[0].live.edges)
    assert cs.nbytes() > 0
    assert not any(n.startswith("lex:") for n in space.names)
    # LEX weights in the starting weights need their columns for exact scores
    lexed = weights_with_lex(toy_bundle, 1.0)
    dec = Decoding(toy_bundle, toy_index, lexed, pop_limit=50, lex=False)
    dec.compact(dec.decode("q", "das haus ist groß"), space)
    assert any(n.startswith("lex:") for n in space.names)
