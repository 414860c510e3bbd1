"""Pruning what the goal cannot reach: the reference on hand-made and random forests, and the: the
tests that start processes, Ray or a browser, read the shared data or run long (the integration
tier, tests/README.md); the rest are in :mod:`tests.mt.test_prune`."""

from __future__ import annotations

from pathlib import Path

import pytest

from service.forest.hypergraph import prune_unreachable
from service.forest.inference import fast_viterbi
from service.forest.kbest import unique_kbest
from service.mt.bundle import ModelBundle
from service.mt.decoder import Forest
from tests.mt.test_compiled_decoder import (
    _dev_sentences,
    arrays_difference,
    forest_difference,
)
from tests.mt.test_prune import _decoders


@pytest.mark.slow
@pytest.mark.data
@pytest.mark.parametrize("use_lm", [True, False])
def test_pruning_the_demo_bundle_changes_no_translation(
    demo: ModelBundle, shared_data: Path, use_lm: bool
) -> None:
    weights = demo.active_weights().weights
    _, fast = _decoders(demo, 200, use_lm, prune=True)
    _, whole = _decoders(demo, 200, use_lm, prune=False)
    for toks in _dev_sentences(shared_data, 12, seed=3):
        a, b = whole.forest(toks), fast.forest(toks)
        by_reference = Forest(toks, prune_unreachable(a.hypergraph), a.best_score, a.stats, use_lm)
        assert forest_difference(by_reference, b) is None, toks
        assert arrays_difference(by_reference, b) is None, toks
        da, db = fast_viterbi(a.hypergraph, weights), fast_viterbi(b.hypergraph, weights)
        assert (da.tokens, da.score, da.features) == (db.tokens, db.score, db.features)
        ka = unique_kbest(a.hypergraph, weights, 100, max_derivations=20_000)
        kb = unique_kbest(b.hypergraph, weights, 100, max_derivations=20_000)
        assert [(d.tokens, d.score, d.features) for d in ka] == [
            (d.tokens, d.score, d.features) for d in kb
        ]
        assert b.stats.nodes <= b.stats.search_nodes == a.stats.nodes
