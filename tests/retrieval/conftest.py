"""Fixtures for retrieval tests: a small trained de-en bundle and a tiny English index."""

from __future__ import annotations

from pathlib import Path

import pytest

from service.data import write_docs
from service.index import build_docs_index
from service.index.inverted import InvertedIndex
from service.mt.bundle import ModelBundle
from service.records import Doc

TOY_DOCS = [
    Doc("d1", "Houses", "the house is big . a big house is an old house", "t"),
    Doc("d2", "Home", "at home : the home is small and the home is new", "t"),
    Doc("d3", "Cars", "the car is red . a red car and a new car", "t"),
    Doc("d4", "Automobiles", "an automobile is a car ; the automobile is large", "t"),
    Doc("d5", "Books", "the book is old . an old book", "t"),
    Doc("d6", "Dogs", "the dog is small and the dog is old", "t"),
    Doc("d7", "Trees", "a tree is large ; the tree is big and old", "t"),
    Doc("d8", "Misc", "nothing relevant here at all", "t"),
]


@pytest.fixture(scope="session")
def toy_index(tmp_path_factory: pytest.TempPathFactory) -> InvertedIndex:
    root = tmp_path_factory.mktemp("index")
    write_docs(root / "docs.jsonl", TOY_DOCS)
    build_docs_index(root / "docs.jsonl", root / "idx")
    return InvertedIndex.load(root / "idx")


@pytest.fixture(scope="session")
def toy_paths(toy_bundle: ModelBundle, toy_index: InvertedIndex) -> tuple[Path, Path]:
    return toy_bundle.path, toy_index.path
