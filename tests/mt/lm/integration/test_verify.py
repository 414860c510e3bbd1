"""Tests of the verification against KenLM (service.mt.lm.verify) on the demo bundle's LM: every
listed n-gram and random queries equal KenLM's bit for bit, one wrong score is caught, and the
structure of state minimisation equals ArpaLM's."""

from __future__ import annotations

import json
import random
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from service.errors import DataFormatError
from service.mt.lm import (
    ArpaLM,
    KenLM,
    LmTable,
    cache_path,
    load_lm_table,
)
from service.mt.lm.assemble import assemble
from service.mt.lm.read_arpa import read_arpa
from service.mt.lm.verify import RANDOM_QUERIES, verify_table
from tests.mt.lm.structure import (
    assert_kenlm_minimises_alike,
    assert_structures_agree,
    structure_queries,
)
from tests.mt.lm.toy_lm import (
    DEMO_LM,
)

# --- the demo LM -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def demo_table(tmp_path_factory: pytest.TempPathFactory) -> tuple[LmTable, Path]:
    """The demo LM's table, built and verified once (about 20 s), and its cache directory."""
    cache_dir = tmp_path_factory.mktemp("demo-lm")
    return load_lm_table(DEMO_LM, cache_dir=cache_dir, verify=True), cache_dir


@pytest.mark.slow
def test_demo_lm_equals_kenlm_on_every_ngram_and_random_queries(
    demo_table: tuple[LmTable, Path],
) -> None:
    table, cache_dir = demo_table
    manifest = json.loads((cache_path(DEMO_LM, cache_dir) / "manifest.json").read_text())
    # the build compared every listed n-gram (all but <s>) and 20,000 random queries
    assert manifest["verification"]["ngrams"] == sum(manifest["counts"]) - 1
    assert manifest["verification"]["random_queries"] == RANDOM_QUERIES
    assert table.verified and table.order == 3
    # and, independently, through service.mt.lm.KenLM: listed n-grams and random queries
    kenlm = KenLM(DEMO_LM)
    lines = [
        ln.split("\t")[1].split(" ")
        for ln in DEMO_LM.read_text(encoding="utf-8").splitlines()
        if ln.count("\t") >= 1 and not ln.startswith("\\")
    ]
    rng = random.Random(3)
    ngrams = rng.sample(lines, 3000)
    vocab = list(table.vocab)
    queries: list[tuple[list[str], str]] = []
    for ngram in ngrams:
        if ngram[-1] != "<s>":
            queries.append((ngram[:-1], ngram[-1]))
    for q in range(5000):
        base = rng.choice(lines)
        words = [rng.choice(vocab) for _ in range(3)] + base
        n = rng.randint(1, 3)
        words = words[-n:]
        words = [w if rng.random() > 0.1 else f"oov{q}" for w in words]
        if n > 1 and rng.random() < 0.25:
            words[0] = "<s>"
        if words[-1] == "<s>":
            words[-1] = "</s>"
        queries.append((words[:-1], words[-1]))
    assert len(queries) >= 7000
    for context, word in queries:
        assert table.logp(context, word) == kenlm.logp(context, word), (context, word)


@pytest.mark.slow
def test_the_verification_catches_a_wrong_score(tmp_path: Path) -> None:
    arpa = read_arpa(DEMO_LM)
    built = assemble(arpa)
    verify_table(built, arpa, random_queries=100)
    table = built.table
    probs = table.probs.copy()
    slot = int(np.flatnonzero(table.keys)[1234])
    probs[slot] = np.nextafter(probs[slot], np.float32(0))  # one ulp
    wrong = replace(built, table=replace(table, probs=probs))
    with pytest.raises(DataFormatError, match="differs from KenLM"):
        verify_table(wrong, arpa, random_queries=100)


@pytest.mark.slow
def test_demo_lm_structure_equals_arpalms(demo_table: tuple[LmTable, Path]) -> None:
    table, _ = demo_table
    arpalm = ArpaLM(DEMO_LM)
    # the flags in bulk: as many per-slot flags as suffixes of two words or more, and the
    # per-word flags word by word
    suffixes = {ng[i:] for ng in arpalm.entries for i in range(1, len(ng))}
    assert int(np.count_nonzero(table.left_ext)) == sum(len(s) >= 2 for s in suffixes)
    for word, i in table.vocab.items():
        assert bool(table.uni_left_ext[i]) == ((word,) in suffixes), word
    # the queries on a sample of the listed n-grams and random word tuples
    rng = random.Random(11)
    ngrams = rng.sample(sorted(arpalm.entries), 3000)
    queries = structure_queries(arpalm, rng, ngrams, 3000)
    assert_structures_agree(table, arpalm, queries)
    assert_kenlm_minimises_alike(table, KenLM(DEMO_LM), queries)
