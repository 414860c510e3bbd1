"""The compiled unique k-best (service/forest/kbest/compiled.py, kernel.py) against the reference:
the tests that start processes, Ray or a browser, read the shared data or run long (the
integration tier, tests/README.md); the rest are in :mod:`tests.forest.test_kbest_kernel`."""

from __future__ import annotations

import pytest

from service.forest.kbest import unique_kbest
from service.mt.bundle import ModelBundle
from service.mt.decoder.compiled import CompiledDecoder
from service.mt.decoder.reference import ReferenceDecoder
from tests.forest.test_kbest_kernel import SENTENCES, assert_same, records


@pytest.mark.slow
def test_demo_forests_equal_the_reference(demo: ModelBundle) -> None:
    weights = demo.active_weights().weights
    ref_decoder = ReferenceDecoder(demo.grammar, demo.lm, weights)
    fast_decoder = demo.decoder()
    assert isinstance(fast_decoder, CompiledDecoder)
    short = 0
    for i, text in enumerate(SENTENCES):
        toks = tuple(text.split())
        built = ref_decoder.forest(toks).hypergraph  # edge objects made while decoding
        for k, limit in ((5, 2000), (20, 200)):
            got = assert_same(built, weights, k, limit)
            short += len(got) < k
            # an array-backed forest of the compiled decoder: the same lists
            a, b = fast_decoder.forest(toks).hypergraph, fast_decoder.forest(toks).hypergraph
            assert a.array_backed
            compiled = unique_kbest(a, weights, k, max_derivations=limit)
            reference = unique_kbest(b, weights, k, max_derivations=limit, engine="reference")
            assert records(compiled) == records(reference) == records(got)
        if i == 0:  # one long run through a forest of heavy ambiguity
            assert len(assert_same(built, weights, 100, 20_000)) < 10
    assert short >= 3  # spurious ambiguity: fewer than k strings within the bound
