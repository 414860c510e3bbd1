"""What a ranking says is read by the scorer that made it (the terms it searched with, how
many documents it retrieved) and by each hit's explanation (the terms it says matched): the web
layer uses these three and never looks at method names or explanation keys."""

from __future__ import annotations

import pytest

from service.index.inverted import InvertedIndex
from service.mt.bundle import ModelBundle
from service.retrieval.base import document_methods
from service.retrieval.dt import one_best
from service.retrieval.query import decode_query
from service.retrieval.runner import make_scorer

QUERY = "Das Buch ist alt. Das Hund ist klein."


@pytest.mark.parametrize("method", document_methods())
def test_matched_terms_are_in_the_document_and_the_count_is_right(
    toy_bundle: ModelBundle, toy_index: InvertedIndex, method: str
) -> None:
    query = decode_query(toy_bundle.decoder(), QUERY, "de")
    scorer = make_scorer(method, toy_index, toy_bundle)
    full = scorer.rank(query, 1000, explain=True)
    assert full.hits
    searched = scorer.query_terms(query, full)
    for hit in full.hits:
        assert hit.explanation is not None
        matched = hit.explanation.matched_terms()
        assert matched, (method, hit.doc_id, hit.explanation)  # a retrieved document matched
        for term in matched:
            assert toy_index.contains(term, hit.docno), (method, term, hit.doc_id)
            assert term in searched, (method, term)
    # the whole ranking holds every document: its count is exact
    assert scorer.retrieved(full, 1000, query) == (len(full.hits), "eq")
    # cut after the first hit: an exact count, or a lower bound that is one
    first = scorer.rank(query, 1)
    n, relation = scorer.retrieved(first, 1, query)
    if relation == "eq":
        assert n == len(full.hits)
    else:
        assert 1 <= n <= len(full.hits)


def test_dt_searches_with_the_translation_and_others_with_the_forest(
    toy_bundle: ModelBundle, toy_index: InvertedIndex
) -> None:
    query = decode_query(toy_bundle.decoder(), QUERY, "de")
    translation = {t for sentence in one_best(query) for t in sentence}
    forest = {t for f in query.forests for t in f.hypergraph.arrays().vocabulary}
    assert translation <= forest
    for method, expected in (("dt", translation), ("bowfd", forest), ("psq", forest)):
        scorer = make_scorer(method, toy_index, toy_bundle)
        assert scorer.query_terms(query, scorer.rank(query, 10)) == expected
