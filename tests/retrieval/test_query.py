"""Query decoding: sentences, tokenisation, one forest each, errors."""

from __future__ import annotations

import pytest

from service.errors import InvalidInputError
from service.forest.inference import viterbi
from service.mt.bundle import ModelBundle
from service.retrieval.query import decode_query


def test_two_sentences_two_forests(toy_bundle: ModelBundle) -> None:
    dec = toy_bundle.decoder()
    q = decode_query(dec, "Das Hund ist klein. Das Buch ist alt.", "de")
    assert q.sentences == (("das", "hund", "ist", "klein", "."), ("das", "buch", "ist", "alt", "."))
    best = [viterbi(f.hypergraph, q.weights).tokens for f in q.forests]
    assert best[0][:4] == ("the", "dog", "is", "small")
    assert best[1][:4] == ("the", "book", "is", "old")


@pytest.mark.parametrize("text", ["", "   ", "%s <b></b>"])
def test_empty_queries_are_refused(toy_bundle: ModelBundle, text: str) -> None:
    with pytest.raises(InvalidInputError):
        decode_query(toy_bundle.decoder(), text, "de")
