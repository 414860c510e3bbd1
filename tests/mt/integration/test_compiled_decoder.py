"""The compiled decoder against the reference decoder: identical forests, objects on demand: the
tests that start processes, Ray or a browser, read the shared data or run long (the integration
tier, tests/README.md); the rest are in :mod:`tests.mt.test_compiled_decoder`."""

from __future__ import annotations

from pathlib import Path

import pytest

from service.forest.inference import fast_viterbi
from service.forest.kbest import unique_kbest
from service.mt.bundle import ModelBundle
from service.mt.decoder import DecoderConfig
from service.mt.decoder.compiled import CompiledDecoder
from service.mt.decoder.reference import ReferenceDecoder
from tests.mt.test_compiled_decoder import _dev_sentences, arrays_difference, forest_difference


@pytest.mark.slow
@pytest.mark.data
@pytest.mark.parametrize("pop", [50, 200, 1000])
@pytest.mark.parametrize("use_lm", [True, False])
def test_forests_equal_the_reference(
    demo: ModelBundle, shared_data: Path, pop: int, use_lm: bool
) -> None:
    config = DecoderConfig(pop_limit=pop, use_lm=use_lm)
    weights = demo.active_weights().weights
    ref = ReferenceDecoder(demo.grammar, demo.lm, weights, config)
    fast = CompiledDecoder(demo.grammar, demo.lm, weights, config, demo.lm_table)
    count = {50: 14, 200: 10, 1000: 4}[pop]
    for toks in _dev_sentences(shared_data, count, seed=pop + use_lm):
        a, b = ref.forest(toks), fast.forest(toks)
        assert forest_difference(a, b) is None, (toks, forest_difference(a, b))
        assert arrays_difference(a, b) is None, (toks, arrays_difference(a, b))
        assert a.stats.pops == b.stats.pops
        assert a.stats.minus_lm_nodes == b.stats.minus_lm_nodes


@pytest.mark.slow
@pytest.mark.data
@pytest.mark.parametrize(("minimise", "rules"), [(True, "lazy"), (False, "all"), (False, "lazy")])
def test_search_variants_equal_the_reference(
    demo: ModelBundle, shared_data: Path, minimise: bool, rules: str
) -> None:
    """The non-default searches (unminimised LM states, rules as a cube axis) match too."""
    config = DecoderConfig(pop_limit=50, minimise_lm_states=minimise, cube_rules=rules)  # type: ignore[arg-type]
    weights = demo.active_weights().weights
    ref = ReferenceDecoder(demo.grammar, demo.lm, weights, config)
    fast = CompiledDecoder(demo.grammar, demo.lm, weights, config, demo.lm_table)
    for toks in _dev_sentences(shared_data, 6, seed=3):
        a, b = ref.forest(toks), fast.forest(toks)
        assert forest_difference(a, b) is None, (toks, forest_difference(a, b))
        assert arrays_difference(a, b) is None, (toks, arrays_difference(a, b))


@pytest.mark.data
def test_viterbi_and_kbest_equal_the_reference(demo: ModelBundle, shared_data: Path) -> None:
    weights = demo.active_weights().weights
    ref = ReferenceDecoder(demo.grammar, demo.lm, weights)
    fast = demo.decoder()
    assert isinstance(fast, CompiledDecoder)
    for toks in _dev_sentences(shared_data, 6, seed=7):
        a, b = ref.forest(toks), fast.forest(toks)
        da, db = fast_viterbi(a.hypergraph, weights), fast_viterbi(b.hypergraph, weights)
        assert (da.tokens, da.score, da.features) == (db.tokens, db.score, db.features)
        assert db.score == pytest.approx(b.best_score, abs=1e-9)
        # a fixed number of derivations: the default time budget would depend on speed
        ka = unique_kbest(a.hypergraph, weights, 100, max_derivations=20_000)
        kb = unique_kbest(b.hypergraph, weights, 100, max_derivations=20_000)
        assert [(d.tokens, d.score) for d in ka] == [(d.tokens, d.score) for d in kb]
