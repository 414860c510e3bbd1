"""API fixtures: an app over the toy bundle, the toy document index and a tiny pool index."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from service.api.app import create_app
from service.collection import build_collection
from service.core.settings import Settings
from service.index import build_pool_index
from service.index.build import build_params
from service.index.inverted import InvertedIndex
from service.mt.bundle import ModelBundle
from tests.conftest import TOY_DOCS

ROOT = Path(__file__).resolve().parents[2]
POOL = [
    ("p1", "the house is big"),
    ("p2", "a red car"),
    ("p3", "the old book is small"),
    ("p4", "a big home"),
]


def write_pool(path: Path, rows: list[tuple[str, str]]) -> Path:
    path.write_text("".join(f"{i}\t{t}\n" for i, t in rows), encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def pool_index(tmp_path_factory: pytest.TempPathFactory) -> InvertedIndex:
    root = tmp_path_factory.mktemp("pool")
    build_pool_index(write_pool(root / "pool.tsv", POOL), root / "idx")
    return InvertedIndex.load(root / "idx")


def bare_settings(jobs: Path, **overrides: object) -> Settings:
    """No models or indexes (for what needs only the app itself), no embedded worker, the job
    store in the directory ``jobs``; ``overrides`` set these or other fields."""
    fields: dict[str, object] = {
        "model_bundles": [],
        "doc_indexes": [],
        "pool_indexes": [],
        "job_store": jobs / "jobs.sqlite3",
        "embedded_worker": False,
    }
    fields.update(overrides)
    return Settings.model_validate(fields)


def demo_settings(jobs: Path, **overrides: object) -> Settings:
    """The committed demo: German bundle, LibreOffice help pages and their paragraphs."""
    fields: dict[str, object] = {
        "model_bundles": [ROOT / "models" / "demo-de-en"],
        "doc_indexes": [ROOT / "indexes" / "demo"],
        "pool_indexes": [ROOT / "indexes" / "demo-pool"],
    }
    fields.update(overrides)
    return bare_settings(jobs, **fields)


MakeClient = Callable[..., TestClient]


@pytest.fixture
def make_client(
    toy_bundle: ModelBundle,
    toy_index: InvertedIndex,
    pool_index: InvertedIndex,
    tmp_path: Path,
) -> Iterator[MakeClient]:
    """``make_client(**settings)``: a started TestClient; settings override the toy paths."""
    clients: list[TestClient] = []

    def make(**overrides: object) -> TestClient:
        fields: dict[str, object] = {
            "model_bundles": [toy_bundle.path],
            "doc_indexes": [toy_index.path],
            "pool_indexes": [pool_index.path],
            "job_store": tmp_path / "jobs.sqlite3",
            "embedded_worker": False,  # tests that need a worker start one themselves
        }
        fields.update(overrides)
        client = TestClient(create_app(Settings.model_validate(fields)))
        client.__enter__()
        clients.append(client)
        return client

    yield make
    for c in clients:
        c.__exit__(None, None, None)


@pytest.fixture
def client(make_client: MakeClient) -> TestClient:
    return make_client()


@pytest.fixture
def bundle_copy(toy_bundle: ModelBundle, tmp_path: Path) -> Path:
    """A private copy of the toy bundle: these tests write and activate weights versions."""
    return Path(shutil.copytree(toy_bundle.path, tmp_path / "bundle" / "de-en"))


@pytest.fixture
def coll_path(tmp_path: Path) -> Path:
    out = tmp_path / "coll"
    build_collection(TOY_DOCS, out, build_params("docs"), shards=2)
    return out
