"""Tiny hand-made corpora for the index tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from service.data import write_docs
from service.records import Doc

# Seven documents. "the" is in 5 of them (rsj < 0), "cat" in 3, "dog" in 2, "fish" in 1.
SEVEN = [
    Doc("d1", "Cats", "the cat sat on the mat", "pets"),
    Doc("d2", "", "the dog chased the cat", "pets"),
    Doc("d3", "Fish", "a fish swims", "water"),
    Doc("d4", "", "the cat and the dog and the bird", "pets"),
    Doc("d5", "", "birds sing", "birds"),
    Doc("d6", "", "the end", "misc"),
    Doc("d7", "Dog", "the dog runs", "pets"),
]


@pytest.fixture
def seven_docs(tmp_path: Path) -> Path:
    path = tmp_path / "docs.jsonl.gz"
    write_docs(path, SEVEN)
    return path
