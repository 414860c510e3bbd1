"""Corpus cleaning: counts per rule on a hand-made corpus; sane invariants on real data: the tests
that start processes, Ray or a browser, read the shared data or run long (the integration tier,
tests/README.md); the rest are in :mod:`tests.text.test_clean`."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from service.data import read_parallel
from service.text.clean import clean_parallel
from service.text.normalize import normalize
from tests.text.test_clean import _SURVIVOR


@pytest.mark.data
@pytest.mark.parametrize("lang", ["de", "zh"])
def test_first_2000_lines(shared_data: Path, lang: str) -> None:
    path = shared_data / "parallel" / f"{lang}-en.tsv.gz"
    pairs = list(itertools.islice(read_parallel(path), 2000))
    kept_iter, report = clean_parallel(pairs, lang, "en")
    kept = list(kept_iter)
    assert report.complete and report.consistent()
    assert report.pairs_in == 2000
    assert report.pairs_kept == len(kept) > 1500
    for p in kept:
        assert 1 <= len(p.source) <= 80 and 1 <= len(p.target) <= 80
        assert max(len(p.source), len(p.target)) <= 9 * min(len(p.source), len(p.target))
        assert all(t and not t.isspace() and t == t.lower() for t in p.source + p.target)
    assert report.source_tokens == sum(len(p.source) for p in kept)
    assert report.target_tokens == sum(len(p.target) for p in kept)
    normalised = report.source_normalised.total + report.target_normalised.total
    assert normalised > 100  # the sample does contain placeholders and markup
    for pair in pairs:
        for side in (pair.foreign, pair.english):
            survivor = _SURVIVOR.search(normalize(side))
            assert survivor is None, (side, survivor)
