"""The compiled top-k kernel equals the numpy reference on random corpora and queries."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from service.data import write_docs
from service.index import InvertedIndex, build_docs_index
from service.records import Doc

WORDS = [f"w{i}" for i in range(12)]


def _random_index(tmp_path: Path, rng: np.random.Generator, policy: str) -> InvertedIndex:
    n_docs = int(rng.integers(1, 40))
    docs = []
    for i in range(n_docs):
        if i and rng.random() < 0.3:  # a copy of an earlier document: exact score ties
            docs.append(Doc(f"d{i}", "", docs[int(rng.integers(0, i))].text))
            continue
        words = rng.choice(WORDS, size=int(rng.integers(0, 15)), p=_zipf(len(WORDS)))
        docs.append(Doc(f"d{i}", "", " ".join(words)))
    path = tmp_path / "docs.jsonl"
    write_docs(path, docs)
    build_docs_index(path, tmp_path / "ix", tokenizer="regex", rsj_policy=policy)
    return InvertedIndex.load(tmp_path / "ix")


def _zipf(n: int) -> np.ndarray:
    p = 1 / np.arange(1, n + 1)
    return p / p.sum()


@pytest.mark.parametrize("seed", range(25))
def test_kernel_equals_reference(tmp_path: Path, seed: int) -> None:
    rng = np.random.default_rng(seed)
    policy = ["floor", "drop", "keep"][seed % 3]
    index = _random_index(tmp_path, rng, policy)
    for _ in range(10):
        n_terms = int(rng.integers(0, index.n_terms + 1))
        ids = rng.choice(index.n_terms, size=n_terms, replace=False)
        weights = rng.choice([0.0, 1.0, 2.0, 0.5, -1.0, 0.3], size=n_terms)
        k = int(rng.integers(1, index.n_docs + 3))
        fast, reached = index.rank_counted(ids, weights, k)
        slow = index.rank_reference(ids, weights, k)
        # the count is of the documents a full ranking holds (DT's retrieved)
        weighted = [t for t, w in zip(ids.tolist(), weights.tolist(), strict=True) if w != 0]
        assert reached == len(index.docs_containing_any(weighted))
        assert reached == len(index.rank_reference(ids, weights, index.n_docs + 1).docs)
        np.testing.assert_array_equal(fast.docs, slow.docs)
        np.testing.assert_array_equal(fast.scores, slow.scores)
        assert fast.docs.dtype == np.int32 and fast.scores.dtype == np.float32
