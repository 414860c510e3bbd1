"""Toy learning-to-rank data over the shared toy bundle and index (tests/conftest.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from service.core.settings import Settings
from service.index.inverted import InvertedIndex
from service.ltr.backends import InlineBackend
from service.ltr.shard import ShardSpec
from service.mt.bundle import ModelBundle, load_bundle

# German queries of the synthetic corpus (tests/synthetic.py) and the toy documents d1..d8 of
# tests/conftest.py that answer them: level 3 for the document about the thing, lower levels
# for the documents using the rarer translation (home, automobile, large).
TRAIN_QUERIES = {
    "t1": "das haus ist groß",
    "t2": "ein auto ist rot",
    "t3": "das buch ist alt",
    "t4": "ein hund ist klein",
    "t5": "ein baum ist groß",
    "t6": "das haus ist klein",
}
TRAIN_QRELS = [
    ("t1", "d1", 3), ("t1", "d2", 1), ("t2", "d3", 3), ("t2", "d4", 2), ("t3", "d5", 3),
    ("t4", "d6", 3), ("t5", "d7", 3), ("t5", "d4", 1), ("t6", "d2", 2), ("t6", "d1", 1),
]  # fmt: skip
DEV_QUERIES = {"v1": "das haus ist neu", "v2": "ein auto", "v3": "ein baum ist alt"}
DEV_QRELS = [("v1", "d2", 2), ("v1", "d1", 1), ("v2", "d3", 3), ("v2", "d4", 3), ("v3", "d7", 2)]


def write_queries(path: Path, queries: dict[str, str]) -> Path:
    path.write_text("".join(f"{q}\t{t}\n" for q, t in queries.items()), encoding="utf-8")
    return path


def write_qrels(path: Path, qrels: list[tuple[str, str, int]]) -> Path:
    path.write_text("".join(f"{q} 0 {d} {r}\n" for q, d, r in qrels), encoding="utf-8")
    return path


@pytest.fixture
def ltr_data(tmp_path: Path) -> dict[str, Path]:
    """Training and dev files laid out like the shared data: ``data/clir/lohelp-de/``."""
    root = tmp_path / "data"
    lohelp = root / "clir" / "lohelp-de"
    lohelp.mkdir(parents=True)
    return {
        "queries": write_queries(lohelp / "queries.train.tsv", TRAIN_QUERIES),
        "qrels": write_qrels(lohelp / "qrels.train.txt", TRAIN_QRELS),
        "dev_queries": write_queries(lohelp / "queries.dev.tsv", DEV_QUERIES),
        "dev_qrels": write_qrels(lohelp / "qrels.dev.txt", DEV_QRELS),
        "root": root,
    }


@pytest.fixture
def bundle_copy(toy_bundle: ModelBundle, tmp_path: Path, weights_root: Path) -> ModelBundle:
    """A private copy of the toy bundle: training writes weight versions into it."""
    dest = tmp_path / "de-en"
    shutil.copytree(toy_bundle.path, dest)
    return load_bundle(dest, state_root=weights_root)


@pytest.fixture
def ltr_settings(
    bundle_copy: ModelBundle, toy_index: InvertedIndex, ltr_data: dict[str, Path]
) -> Settings:
    return Settings(
        data_dir=ltr_data["root"],
        model_bundles=[bundle_copy.path],
        doc_indexes=[toy_index.path],
        pop_limit=50,
    )


@pytest.fixture
def specs(
    toy_bundle: ModelBundle, toy_index: InvertedIndex, ltr_data: dict[str, Path]
) -> tuple[list[ShardSpec], dict[str, float]]:
    from tests.ltr.test_training import make_specs  # a test module that imports this one

    return make_specs(toy_bundle, toy_index, ltr_data, 2, lex=True)


@pytest.fixture
def inline_weights(toy_bundle: ModelBundle, toy_index: InvertedIndex, specs) -> dict[str, float]:
    from tests.ltr.test_backends import two_epochs  # a test module that imports this one

    _, weights = two_epochs(InlineBackend(toy_bundle, toy_index), *specs)
    return weights
