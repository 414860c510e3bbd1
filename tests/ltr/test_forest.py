"""Compact forests: best-derivation feature vectors and rankings against BOW-FD's own code."""

from __future__ import annotations

import pickle
from dataclasses import fields, replace
from pathlib import Path

import numpy as np
import pytest

from service.forest.hypergraph import Hyperedge, Hypergraph, HypergraphArrays, Node
from service.index.inverted import InvertedIndex
from service.ltr.examples import Decoding
from service.ltr.forest import CandidateRows, CompactSentence
from service.ltr.space import FeatureSpace
from service.ltr.task import start_weights
from service.mt.bundle import ModelBundle, load_bundle
from service.retrieval.bowfd import IR_FEATURE, PreparedSentence, fast_scores, prepare_sentence
from service.retrieval.bowfd.prepare import LiveForest
from tests.ltr.conftest import TRAIN_QUERIES

ROOT = Path(__file__).resolve().parents[2]


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


# --- the array-backed forest of prepared() against the object-built one ----------------------
def object_forest(cs: CompactSentence, index: InvertedIndex) -> Hypergraph:
    """The reference: the live forest built from one Node and Hyperedge object per live node
    and edge (what CompactSentence.hypergraph made before it was array-backed)."""
    words = [index.term(int(t)) for t in cs.terms.tolist()]
    n_terms = len(words)
    nodes = [Node(i, "X", (0, 0)) for i in range(cs.num_nodes)]
    occ, optr = cs.occ_term.tolist(), cs.occ_ptr.tolist()
    tptr, tails = cs.tail_ptr.tolist(), cs.tail_nodes.tolist()
    edges = [
        Hyperedge(
            e,
            head,
            tuple(tails[tptr[e] : tptr[e + 1]]),
            tuple(words[t] for t in occ[optr[e] : optr[e + 1]] if t < n_terms),
            {},
            (0, 0),
        )
        for e, head in enumerate(cs.edge_head.tolist())
    ]
    return Hypergraph(nodes, edges, cs.goal)


def object_prepared(cs: CompactSentence, w: np.ndarray, index: InvertedIndex) -> PreparedSentence:
    """The reference of CompactSentence.prepared: BOW-FD's preparation of the object forest."""
    prep = prepare_sentence(object_forest(cs, index), cs.edge_weights(w), index)
    delta = cs.term_delta(w)
    if delta is None:
        return prep
    by_term = dict(zip(cs.terms.tolist(), delta.tolist(), strict=True))
    return replace(prep, term_delta=np.array([by_term[t] for t in prep.terms.tolist()]))


def assert_same_forest(cs: CompactSentence, index: InvertedIndex) -> None:
    hg, ref = cs.hypergraph(index), object_forest(cs, index)
    assert hg.array_backed and not ref.array_backed
    assert (hg.goal, hg.num_nodes, hg.num_edges) == (ref.goal, ref.num_nodes, ref.num_edges)
    a, r = hg.arrays(), ref.arrays()
    for f in fields(HypergraphArrays):  # vocabulary in the same (first-seen) order
        x, y = getattr(a, f.name), getattr(r, f.name)
        if isinstance(y, np.ndarray):
            assert x.dtype == y.dtype and not x.flags.writeable, f.name
            np.testing.assert_array_equal(x, y, err_msg=f.name)
        else:
            assert x == y, f.name
    for e in range(ref.num_edges):  # the same target words per edge
        lo, hi = a.term_ptr[e], a.term_ptr[e + 1]
        assert tuple(a.vocabulary[i] for i in a.term_ids[lo:hi]) == ref.edges[e].target
    assert list(hg.nodes) == list(ref.nodes)
    assert list(hg.edges) == list(ref.edges)
    assert all(e.features == {} for e in hg.edges)
    assert [hg.incoming(v) for v in range(hg.num_nodes)] == [
        ref.incoming(v) for v in range(ref.num_nodes)
    ]


def assert_same_prepared(got: PreparedSentence, ref: PreparedSentence) -> None:
    """Every array of the prepared sentences (and of their live forests) is identical."""
    for rec_got, rec_ref, names in (
        (
            got,
            ref,
            [f.name for f in fields(PreparedSentence) if f.name not in ("hypergraph", "live")],
        ),
        (got.live, ref.live, [f.name for f in fields(LiveForest)]),
    ):
        for name in names:
            x, y = getattr(rec_got, name), getattr(rec_ref, name)
            if isinstance(y, np.ndarray):
                assert isinstance(x, np.ndarray) and x.dtype == y.dtype, name
                np.testing.assert_array_equal(x, y, err_msg=name)
            else:
                assert x == y, name


def test_array_backed_forest_equals_the_object_forest(
    toy_bundle: ModelBundle, toy_index: InvertedIndex
) -> None:
    start = weights_with_lex(toy_bundle, 1.0)
    dec = Decoding(toy_bundle, toy_index, start, pop_limit=50, lex=True)
    space = FeatureSpace()
    changed = {**start, IR_FEATURE: 0.7, "LanguageModel": start.get("LanguageModel", 0.0) + 0.3}
    termed = weights_with_lex(toy_bundle, 0.7, terms=True)
    for qid, text in TRAIN_QUERIES.items():
        sentences, _ = dec.compact(dec.decode(qid, text), space)
        for cs in sentences:
            assert_same_forest(cs, toy_index)
            for weights in (start, changed, termed):
                w = space.vector(weights)
                assert_same_prepared(cs.prepared(w, toy_index), object_prepared(cs, w, toy_index))


DEMO_QUERIES = {
    "q1": "Wie füge ich eine Tabelle ein? Markieren Sie die Zellen und wählen Sie Format - Zellen.",
    "q2": "Lesen und Schreiben von Werten in Bereiche. Makros in LibreOffice Calc müssen häufig "
    "Werte aus Tabellen lesen und in Tabellen schreiben.",
    "q3": "Fügt das hervorgehobene Wort einem Benutzerwörterbuch hinzu.",
}


def test_array_backed_forest_equals_the_object_forest_on_the_demo(weights_root: Path) -> None:
    bundle = load_bundle(ROOT / "models" / "demo-de-en", state_root=weights_root)
    index = InvertedIndex.load(ROOT / "indexes" / "demo")
    start = start_weights(bundle.active_weights().weights, 1.0)
    dec = Decoding(bundle, index, start, pop_limit=100, lex=True)
    space = FeatureSpace()
    sentences = [
        cs
        for qid, text in DEMO_QUERIES.items()
        for cs in dec.compact(dec.decode(qid, text), space)[0]
    ]
    w0 = space.vector(start)
    rng = np.random.default_rng(7)
    perturbed = w0 * (1 + 0.3 * rng.standard_normal(len(w0)))
    ties = 0
    for cs in sentences:
        assert_same_forest(cs, index)
        for w in (w0, perturbed):
            got = cs.prepared(w, index)
            assert_same_prepared(got, object_prepared(cs, w, index))
            ties += len(got.best_through) - len(np.unique(got.best_through))
    assert len(sentences) >= 4
    assert ties > 0  # terms tied on best_through: their order is the vocabulary's


# --- pickles of CompactSentence made before it shared LiveTopology ---------------------------
OLD_FIELDS = ("goal", "edge_head", "in_ptr", "in_edges", "tail_ptr", "tail_nodes", "occ_ptr",
              "occ_term", "terms", "ir_cols", "features")  # fmt: skip


def test_old_pickles_load(toy_bundle: ModelBundle, toy_index: InvertedIndex) -> None:
    start = weights_with_lex(toy_bundle, 1.0, terms=True)
    dec = Decoding(toy_bundle, toy_index, start, pop_limit=50, lex=True)
    space = FeatureSpace()
    sentences, preps = dec.compact(dec.decode("t1", TRAIN_QUERIES["t1"]), space)
    cs, prep = sentences[0], preps[0]
    _ = cs.occurrences  # a cached property the old examples pickled with them
    # the state an old pickle holds: the instance dict under the old attribute names
    state = {name: getattr(cs, name) for name in OLD_FIELDS}
    state["occurrences"] = cs.occurrences
    old = object.__new__(CompactSentence)
    old.__dict__.update(state)
    loaded = pickle.loads(pickle.dumps(old, protocol=pickle.HIGHEST_PROTOCOL))
    assert type(loaded) is CompactSentence and set(vars(loaded)) == set(state)
    w = space.vector(start)
    rows = CandidateRows.of(prep, np.arange(toy_index.n_docs, dtype=np.int64))
    np.testing.assert_array_equal(
        loaded.candidate_features(rows, w, len(space)).toarray(),
        cs.candidate_features(rows, w, len(space)).toarray(),
    )
    assert_same_prepared(loaded.prepared(w, toy_index), cs.prepared(w, toy_index))
    assert_same_forest(loaded, toy_index)
