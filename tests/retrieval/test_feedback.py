"""RM3 feedback (Lavrenko & Croft 2001; Abdul-Jaleel et al. 2004): the vectorised relevance
model against the reference that re-reads each document's text, the expanded query's shape,
its ranking against the numpy BM25 reference, and the feedback stage of every document
method."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.errors import InvalidInputError
from service.index.inverted import Hits, InvertedIndex
from service.mt.bundle import ModelBundle
from service.retrieval.base import get_scorer
from service.retrieval.dt import one_best
from service.retrieval.explain import FeedbackExplanation
from service.retrieval.feedback import (
    FeedbackParams,
    document_weights,
    expand,
    interpolate,
    interpolate_reference,
    query_model,
    rank_expanded,
    rank_expanded_counted,
    relevance_model,
    relevance_model_reference,
    rerank_weights,
)
from service.retrieval.query import decode_query

DEMO_INDEX = Path(__file__).resolve().parents[2] / "indexes" / "demo"


@pytest.fixture(scope="module")
def demo_index() -> InvertedIndex:
    return InvertedIndex.load(DEMO_INDEX)


def test_doc_vectors_are_the_postings_transposed(toy_index: InvertedIndex) -> None:
    ptr, terms, tfs = toy_index.doc_vectors(range(toy_index.n_docs))
    for d in range(toy_index.n_docs):
        expected = {}
        for t in range(toy_index.n_terms):
            post = toy_index.postings(t)
            hit = np.flatnonzero(post.docs == d)
            if len(hit):
                expected[t] = int(post.tfs[hit[0]])
        row = slice(int(ptr[d]), int(ptr[d + 1]))
        assert dict(zip(terms[row].tolist(), tfs[row].tolist(), strict=True)) == expected
        assert list(terms[row]) == sorted(terms[row])  # ascending term ids
        assert int(tfs[row].sum()) == int(toy_index.doc_lengths[d])


def test_doc_vectors_refuse_an_unknown_document(toy_index: InvertedIndex) -> None:
    with pytest.raises(Exception, match="no document number"):
        toy_index.doc_vectors([toy_index.n_docs])


@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_relevance_model_equals_the_reference(
    demo_index: InvertedIndex, data: st.DataObject
) -> None:
    n = demo_index.n_docs
    docs = data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=12, unique=True))
    scores = data.draw(st.lists(st.floats(-30, 30), min_size=len(docs), max_size=len(docs)))
    weights = document_weights(scores, "posterior").tolist()
    fast = relevance_model(demo_index, docs, weights)
    slow = relevance_model_reference(demo_index, docs, weights)
    assert fast.keys() == slow.keys()
    for t in fast:
        assert math.isclose(fast[t], slow[t], rel_tol=1e-9, abs_tol=1e-15), demo_index.term(t)
    assert math.isclose(sum(fast.values()), 1.0, rel_tol=1e-9) or any(
        demo_index.rsj[t] == 0 for t in demo_index.doc_vectors(docs)[1]
    )


def test_document_weights() -> None:
    post = document_weights([2.0, 1.0, 1.0], "posterior")
    e = math.exp(-1.0)
    assert np.allclose(post, [1 / (1 + 2 * e), e / (1 + 2 * e), e / (1 + 2 * e)])
    assert np.allclose(document_weights([5.0, -3.0], "uniform"), [0.5, 0.5])
    assert np.allclose(document_weights([1000.0, 0.0], "posterior"), [1.0, 0.0])  # no overflow


@pytest.mark.parametrize("lam", [0.0, 0.3, 0.5, 1.0])
def test_the_expanded_query_mixes_the_query_and_the_relevance_model(
    demo_index: InvertedIndex, lam: float
) -> None:
    tokens = demo_index.tokenize("insert a table into the document")
    first = demo_index.bm25_topk(tokens, 50)
    params = FeedbackParams(docs=10, terms=7, original_weight=lam, form="interpolate")
    exp = expand(demo_index, tokens, first, params)
    weights = exp.weights()
    assert math.isclose(sum(weights.values()), 1.0, rel_tol=1e-9)
    original = {demo_index.term(t): w for t, w in query_model(demo_index, tokens).items()}
    # the relevance model's share: its top `terms` words renormalised, (1 − λ) of the mass
    rm = relevance_model(
        demo_index,
        first.docs[:10].tolist(),
        document_weights(first.scores[:10].tolist(), "posterior").tolist(),
    )
    top = dict(sorted(rm.items(), key=lambda kv: (-kv[1], kv[0]))[:7])
    total = sum(top.values())
    expected = {t: lam * w for t, w in original.items()}
    for t, w in top.items():
        term = demo_index.term(t)
        expected[term] = expected.get(term, 0.0) + (1 - lam) * w / total
    expected = {t: w for t, w in expected.items() if w > 0}
    assert weights.keys() == expected.keys()
    for t, w in expected.items():
        assert math.isclose(weights[t], w, rel_tol=1e-9), t
    assert set(exp.added) == set(weights) - set(original)
    assert [w for _, w in exp.terms] == sorted((w for _, w in exp.terms), reverse=True)
    assert exp.feedback_docs == tuple(first.docs[:10].tolist())


def test_the_expanded_query_ranks_as_the_bm25_reference(demo_index: InvertedIndex) -> None:
    tokens = demo_index.tokenize("sort a table by column")
    exp = expand(demo_index, tokens, demo_index.bm25_topk(tokens, 20), FeedbackParams())
    hits = rank_expanded(demo_index, exp, 100)
    ids = [demo_index.vocab.id(t) for t, _ in exp.terms]
    ref = demo_index.rank_reference(ids, [w for _, w in exp.terms], 100)
    assert hits.docs.tolist() == ref.docs.tolist()
    assert np.allclose(hits.scores, ref.scores, rtol=1e-6)


def test_nothing_to_feed_back_leaves_the_query_alone(demo_index: InvertedIndex) -> None:
    tokens = demo_index.tokenize("table")
    empty = expand(demo_index, tokens, [], FeedbackParams())
    assert empty.terms == (("table", 1.0),) and empty.added == ()


@pytest.mark.parametrize("method", ["dt", "psq"])
def test_a_mix_of_cut_rankings_bounds_its_count(
    toy_bundle: ModelBundle, toy_index: InvertedIndex, method: str
) -> None:
    """Both rankings read 1 deep and each found more: the union's size is unknown, so the
    count is the larger of the two, a lower bound of the union."""
    scorer = get_scorer(method, toy_index, bundle=toy_bundle)
    query = decode_query(toy_bundle.decoder(), "das haus ist groß", "de")
    params = FeedbackParams(docs=1, terms=5, form="interpolate", pool=1)
    ranking = scorer.rank(query, 1, feedback=params)
    everything = scorer.rank(query, 1000)
    own, _ = scorer.retrieved(everything, 1000, query)
    translation = [t for s in one_best(query) for t in s]
    top = scorer.rank(query, 1).hits
    expansion = expand(toy_index, translation, [(h.docno, h.score) for h in top], params)
    found, expanded = rank_expanded_counted(toy_index, expansion, 1000)
    assert own > 1 and len(found.docs) > 1  # both were cut at 1
    union = {h.docno for h in everything.hits} | set(found.docs.tolist())
    n, relation = scorer.retrieved(ranking, 1, query)
    assert (n, relation) == (max(expanded, own), "gte") and n <= len(union)


@pytest.mark.parametrize("form", ["rerank", "interpolate", "replace"])
@pytest.mark.parametrize("method", ["dt", "psq", "bowfd"])
def test_a_method_that_finds_nothing_is_not_expanded(
    toy_bundle: ModelBundle, toy_index: InvertedIndex, method: str, form: str
) -> None:
    scorer = get_scorer(method, toy_index, bundle=toy_bundle)
    query = decode_query(toy_bundle.decoder(), "xylophon", "de")  # passes through, no document
    plain = scorer.rank(query, 5)
    assert plain.hits == []
    ranking = scorer.rank(query, 5, feedback=FeedbackParams(form=form))  # type: ignore[arg-type]
    assert ranking.hits == [] and "expansion" not in ranking.info
    assert ranking.signature == plain.signature
    assert scorer.retrieved(ranking, 5, query) == scorer.retrieved(plain, 5, query)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"docs": 0}, "feedback docs"),
        ({"terms": 1001}, "feedback terms"),
        ({"original_weight": 1.5}, "original_weight"),
        ({"weighting": "softmax"}, "weighting"),
        ({"form": "combsum"}, "feedback form"),
        ({"mix": -0.1}, "feedback mix"),
        ({"pool": 0}, "feedback pool"),
        ({"original_weight": 0.0}, "original_weight must be above 0"),  # rerank: (1 − λ)/λ
    ],
)
def test_bad_parameters_are_refused_by_name(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        FeedbackParams(**kwargs)  # type: ignore[arg-type]


def test_signature_names_the_parameters() -> None:
    assert FeedbackParams().signature() == "rm3(10,10,0.7)+rerank@100"
    both = FeedbackParams(form="rerank+interpolate")
    assert both.signature() == "rm3(10,10,0.7)+rerank+mix(0.5@100)"
    # a method that cannot rank again interpolates, and says so
    assert FeedbackParams().for_method(False).signature() == "rm3(10,10,0.7)+mix(0.5@100)"
    assert FeedbackParams().for_method(True) == FeedbackParams()
    assert FeedbackParams(form="replace").for_method(False).form == "replace"
    replace = FeedbackParams(5, 20, 0.7, "uniform", form="replace")
    assert replace.signature() == "rm3(5,20,0.7,uniform)"
    mixed = FeedbackParams(mix=0.3, pool=50, form="interpolate")
    assert mixed.signature() == "rm3(10,10,0.7)+mix(0.3@50)"


@settings(max_examples=200, deadline=None)
@given(
    a=st.dictionaries(st.integers(0, 40), st.floats(-50, 50, width=32), max_size=25),
    b=st.dictionaries(st.integers(0, 40), st.floats(-50, 50, width=32), max_size=25),
    share=st.sampled_from([0.0, 0.25, 0.5, 1.0]),
    k=st.integers(1, 60),
)
def test_interpolation_equals_the_reference(
    a: dict[int, float], b: dict[int, float], share: float, k: int
) -> None:
    def hits(d: dict[int, float]) -> Hits:
        order = sorted(d.items(), key=lambda kv: (-kv[1], kv[0]))
        return Hits(
            np.array([x for x, _ in order], dtype=np.int32),
            np.array([y for _, y in order], dtype=np.float32),
        )

    fast = interpolate(hits(a), hits(b), share, k)
    slow = interpolate_reference(hits(a), hits(b), share, k)
    assert np.allclose(fast.scores, slow.scores, atol=1e-6)
    # equal scores may be ordered by rounding; each position's score set agrees
    assert len(fast.docs) == len(slow.docs) == min(k, len(a.keys() | b.keys()))
    if len(set(np.round(slow.scores, 5))) == len(slow.scores):
        assert fast.docs.tolist() == slow.docs.tolist()


@pytest.mark.parametrize("form", ["replace", "interpolate"])
@pytest.mark.parametrize("method", ["dt", "psq", "bowfd"])
def test_every_document_method_has_the_feedback_stage(
    toy_bundle: ModelBundle, toy_index: InvertedIndex, method: str, form: str
) -> None:
    scorer = get_scorer(method, toy_index, bundle=toy_bundle)
    query = decode_query(toy_bundle.decoder(), "das haus ist groß", "de")
    params = FeedbackParams(docs=3, terms=5, form=form, pool=6)  # type: ignore[arg-type]
    plain = scorer.rank(query, 10)
    ranking = scorer.rank(query, 4, explain=True, feedback=params)
    # the stage: the method's own top documents expand the 1-best translation; the result is
    # the expanded query's ranking, or that mixed with the method's own (both read 6 deep)
    translation = [t for s in one_best(query) for t in s]
    first = scorer.rank(query, 6 if form == "interpolate" else 3, explain=True)
    expansion = expand(toy_index, translation, [(h.docno, h.score) for h in first.hits], params)
    if form == "replace":
        expected = rank_expanded(toy_index, expansion, 4)
    else:
        own = Hits(
            np.array([h.docno for h in first.hits], dtype=np.int32),
            np.array([h.score for h in first.hits], dtype=np.float32),
        )
        expected = interpolate_reference(own, rank_expanded(toy_index, expansion, 6), 0.5, 4)
    assert [h.docno for h in ranking.hits] == expected.docs.tolist()
    assert np.allclose([h.score for h in ranking.hits], expected.scores, atol=1e-6)
    assert ranking.signature == f"{plain.signature}|fb:{params.signature()}"
    shown = ranking.info["expansion"]
    assert [t["term"] for t in shown["terms"]] == [t for t, _ in expansion.terms]
    assert scorer.query_terms(query, ranking) == {t for t, _ in expansion.terms}
    ids = [toy_index.vocab.id(t) for t, _ in expansion.terms]
    expanded = len(toy_index.docs_containing_any([i for i in ids if i is not None]))
    n, relation = scorer.retrieved(ranking, 4, query)
    if form == "replace":
        assert (n, relation) == (expanded, "eq")
    else:  # neither ranking is cut at 6 on the toy index: the union of the two, counted
        found = rank_expanded(toy_index, expansion, 1000).docs.tolist()
        assert len(first.hits) < 6 and len(found) < 6
        union = {h.docno for h in scorer.rank(query, 1000).hits} | set(found)
        assert (n, relation) == (len(union), "eq")
    own_expl = {h.docno: h.explanation for h in first.hits}
    for hit in ranking.hits:
        expl = hit.explanation
        assert isinstance(expl, FeedbackExplanation)
        held = {t for t, _ in expansion.terms if toy_index.contains(t, hit.docno)}
        assert {t for t, _ in expl.matched} == held
        assert set(expl.added) == held & set(expansion.added)
        if form == "interpolate":  # the method's own explanation rides along
            assert expl.first == own_expl.get(hit.docno)
        for term in expl.matched_terms():
            assert toy_index.contains(term, hit.docno) or expl.first is not None


def test_rerank_weights_are_rm3s_weighting_relative_to_the_query(demo_index: InvertedIndex) -> None:
    """δ_t = v·(1 − λ)/λ·n·P_cut(t|R), recomputed from the reference relevance model (the
    documents' stored text) and the query's own term count."""
    tokens = demo_index.tokenize("insert a table into the text document")
    first = demo_index.bm25_topk(tokens, 20)
    params = FeedbackParams(docs=5, terms=6, original_weight=0.6)
    expansion = expand(demo_index, tokens, first, params)
    weights = rerank_weights(expansion, params, 2.0, {"ir:table": 0.5, "LM": 1.0})
    docs = first.docs[:5].tolist()
    rm = relevance_model_reference(
        demo_index, docs, document_weights(first.scores[:5].tolist(), "posterior").tolist()
    )
    kept = sorted(rm.items(), key=lambda kv: (-kv[1], kv[0]))[:6]
    total = math.fsum(w for _, w in kept)
    n = sum(1 for t in tokens if (i := demo_index.vocab.id(t)) is not None and demo_index.rsj[i])
    expected = {"ir:table": 0.5, "LM": 1.0}
    for tid, w in kept:
        name = "ir:" + demo_index.term(tid)
        expected[name] = expected.get(name, 0.0) + 2.0 * (0.4 / 0.6) * n * w / total
    assert weights.keys() == expected.keys()
    assert all(math.isclose(weights[k], expected[k], rel_tol=1e-9) for k in expected)
    assert n == expansion.query_length and len(kept) == 6


@pytest.mark.parametrize("form", ["rerank", "rerank+interpolate"])
def test_bowfd_ranks_its_documents_again_with_the_relevance_model(
    toy_bundle: ModelBundle, toy_index: InvertedIndex, form: str
) -> None:
    """The rerank forms against a hand-composed pipeline on the reference engine: the first
    ranking's documents, BOW-FD again with the ``ir:`` weights the relevance model gives."""
    from dataclasses import replace

    from service.retrieval.bowfd import BowFdScorer

    scorer = get_scorer("bowfd", toy_index, bundle=toy_bundle)
    reference = BowFdScorer(toy_index, engine="reference", bundle=toy_bundle)
    query = decode_query(toy_bundle.decoder(), "das haus ist groß", "de")
    params = FeedbackParams(docs=3, terms=5, form=form, pool=6)  # type: ignore[arg-type]
    ranking = scorer.rank(query, 4, explain=True, feedback=params)
    first = reference.rank(query, 6)
    translation = [t for s in one_best(query) for t in s]
    own = [(h.docno, h.score) for h in first.hits]
    expansion = expand(toy_index, translation, own, params)
    weights = rerank_weights(expansion, params, reference.v, query.weights)
    assert any(k.startswith("ir:") for k in weights)
    restrict = np.array(sorted(d for d, _ in own), dtype=np.int32)
    preps = reference.prepare(replace(query, weights=weights), restrict)
    docs, scores, _ = reference.rank_prepared(preps, len(own))
    again = Hits(docs.astype(np.int32), scores.astype(np.float32))
    if form == "rerank":
        expected = Hits(again.docs[:4], again.scores[:4])
    else:
        expected = interpolate_reference(again, rank_expanded(toy_index, expansion, 6), 0.5, 4)
    assert [h.docno for h in ranking.hits] == expected.docs.tolist()
    assert np.allclose([h.score for h in ranking.hits], expected.scores, atol=1e-5)
    assert (
        ranking.signature.endswith(f"|fb:{params.signature()}") and "+rerank" in params.signature()
    )
    # the count is the method's own (rerank reorders its documents), or the union's bound
    n, _ = scorer.retrieved(ranking, 4, query)
    own_n, _ = scorer.retrieved(scorer.rank(query, 1000), 1000, query)
    assert n == own_n if form == "rerank" else n >= own_n
    shown = {t["term"] for t in ranking.info["expansion"]["terms"]}
    words = [w for f in query.forests for w in f.hypergraph.arrays().vocabulary]
    usable = {toy_index.term(t) for t in toy_index.term_ids(words) if toy_index.rsj[t]}
    if form == "rerank":  # only what the forest could use is shown
        assert shown == {t for t, _ in expansion.terms} & usable
    else:  # the expanded query ranks with every term
        assert shown == {t for t, _ in expansion.terms}
    for hit in ranking.hits:  # the second ranking's derivation rides along
        expl = hit.explanation
        assert isinstance(expl, FeedbackExplanation)
        if hit.docno in set(again.docs.tolist()):
            assert expl.first is not None


def test_a_method_without_a_forest_interpolates_in_the_rerank_forms(
    toy_bundle: ModelBundle, toy_index: InvertedIndex
) -> None:
    scorer = get_scorer("dt", toy_index, bundle=toy_bundle)
    query = decode_query(toy_bundle.decoder(), "das haus ist groß", "de")
    rerank = scorer.rank(query, 4, feedback=FeedbackParams(docs=3, terms=5, pool=6))
    mixed = scorer.rank(query, 4, feedback=FeedbackParams(docs=3, terms=5, form="interpolate",
                                                           pool=6))  # fmt: skip
    assert [(h.docno, h.score) for h in rerank.hits] == [(h.docno, h.score) for h in mixed.hits]
    assert rerank.signature == mixed.signature and "+rerank" not in rerank.signature
