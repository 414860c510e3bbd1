"""One registry of methods: every registered scorer declares how it runs over a collection's
segments (its ``segments``, a :class:`~service.retrieval.partials.Method` in the scorer's own
module), so a method cannot be added to search and be missing from collections."""

from __future__ import annotations

import pytest

from service.errors import ConfigurationError
from service.retrieval.base import SCORERS, configured_params, document_methods, scorer_class
from service.retrieval.partials import Method, get_method


def test_every_scorer_runs_over_a_collection() -> None:
    names = set(document_methods()) | {"tr"}  # tr ranks sentences, not documents
    assert names == set(SCORERS)
    for name in sorted(names):
        method = get_method(name)
        assert isinstance(method, Method)
        assert method is scorer_class(name).segments  # type: ignore[attr-defined]
        assert type(method).__module__ == scorer_class(name).__module__  # declared beside it
        configured_params(name, lambda _setting: None)  # an unknown name raises


@pytest.mark.parametrize("lookup", [get_method, scorer_class])
def test_an_unknown_method_names_the_known_ones(lookup: object) -> None:
    with pytest.raises(ConfigurationError, match="bowfd, dt, psq, tr"):
        lookup("bm25")  # type: ignore[operator]
