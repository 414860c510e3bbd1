"""Dense fixtures: a tiny deterministic encoder (so the suite does not wait on a real model)
and a copy of the toy index with its vectors."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import numpy as np
import pytest

from service.dense.encoders import ENCODERS, Encoder, register_encoder
from service.dense.passages import PassageParams
from service.dense.vectors import build_vectors
from service.index.inverted import InvertedIndex

DIM = 32


class HashEncoder(Encoder):
    """Each word hashed to a signed unit in one of :data:`DIM` columns, summed: documents that
    share words with the query are near it (a lexical encoder, enough to test the plumbing)."""

    default_model = "hash32"

    def __init__(self, model: str | None = None) -> None:
        super().__init__()
        self.model = model or self.default_model
        self.dim = DIM
        self.calls = 0

    def _encode(self, texts: list[str], is_query: bool) -> np.ndarray:
        self.calls += 1
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in text.lower().split():
                h = hashlib.blake2b(word.encode(), digest_size=4).digest()
                out[i, h[0] % DIM] += 1.0 if h[1] % 2 else -1.0
            out[i, DIM - 1] += 0.01  # never all zero
        return out


if "test-hash" not in ENCODERS:
    register_encoder("test-hash")(HashEncoder)


@pytest.fixture
def hash_encoder() -> HashEncoder:
    return HashEncoder()


def copy_index(src: Path, dst: Path) -> InvertedIndex:
    shutil.copytree(src, dst)
    return InvertedIndex.load(dst)


@pytest.fixture
def dense_index(
    toy_index: InvertedIndex, tmp_path: Path, hash_encoder: HashEncoder
) -> InvertedIndex:
    """The toy index with vectors (two passages of at most 60 characters per document)."""
    index = copy_index(Path(toy_index.path), tmp_path / "idx")
    build_vectors(index, hash_encoder, PassageParams(chars=60, max_passages=2))
    return index
