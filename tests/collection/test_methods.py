"""The collection's methods and the scorers are one set: every registered scorer runs over a
collection (its partial and merge in ``service.collection.methods``) and every collection
method is a registered scorer, so a method added to one registry and not the other fails here
rather than at a collection's first search."""

from __future__ import annotations

import pytest

from service.collection.methods import METHODS, get_method
from service.errors import ConfigurationError
from service.retrieval.base import configured_params, document_methods


def test_every_scorer_runs_over_a_collection_and_back() -> None:
    documents = set(document_methods())
    assert documents <= set(METHODS), sorted(documents - set(METHODS))
    for name in METHODS:  # tr ranks sentences, not documents: still a registered scorer
        configured_params(name, lambda _setting: None)  # an unknown name raises
    with pytest.raises(ConfigurationError):
        configured_params("bm25", lambda _setting: None)


def test_an_unknown_method_names_the_known_ones() -> None:
    with pytest.raises(ConfigurationError, match="bowfd, dt, psq, tr"):
        get_method("bm25")
