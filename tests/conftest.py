"""Shared fixtures. Tests never read the user's environment: settings are built explicitly."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from service.core.settings import get_settings
from service.data import write_docs
from service.index import build_docs_index
from service.index.inverted import InvertedIndex
from service.mt.bundle import ModelBundle, load_bundle
from service.mt.training.train import train_model
from service.records import Doc
from tests.synthetic import CONFIG, synthetic

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "models" / "demo-de-en"  # the committed demo bundle
SHARED_DATA = ROOT.parent / "shared" / "data"
FIXTURES = Path(__file__).resolve().parent / "data"


def _weights_state(factory: pytest.TempPathFactory) -> str:
    """One weights state directory per session, outside the checkout: bundles that tests load
    (the committed demo included) are never written to, and neither is the checkout's var/."""
    return str(factory.getbasetemp() / "weights-state")


@pytest.fixture(scope="session", autouse=True)
def _session_weights_state(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    # session fixtures (toy_bundle) load bundles before the per-test settings below apply
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CLIR_WEIGHTS_STATE_DIR", _weights_state(tmp_path_factory))
        get_settings.cache_clear()
        yield
    get_settings.cache_clear()


@pytest.fixture(scope="session")
def weights_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The session's weights state root, which the apps and commands tests start are told
    (CLIR_WEIGHTS_STATE_DIR) and library calls are given (``load_bundle(..., state_root=)``)."""
    return Path(_weights_state(tmp_path_factory))


@pytest.fixture(autouse=True)
def _fresh_settings(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
    for key in list(__import__("os").environ):
        if key.startswith("CLIR_"):
            monkeypatch.delenv(key)
    # An app started by a test runs no worker subprocess and keeps its jobs out of the checkout
    # unless the test asks otherwise.
    monkeypatch.setenv("CLIR_EMBEDDED_WORKER", "false")
    # apps started by tests skip the warm-up (tests/api/test_warmup.py runs it)
    monkeypatch.setenv("CLIR_WARM_UP", "false")
    monkeypatch.setenv("CLIR_JOB_STORE", str(tmp_path_factory.getbasetemp() / "jobs.sqlite3"))
    monkeypatch.setenv("CLIR_WEIGHTS_STATE_DIR", _weights_state(tmp_path_factory))
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


@pytest.fixture
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.fail(f"the shared data directory {SHARED_DATA} is missing")
    return SHARED_DATA


@pytest.fixture(scope="session")
def toy_bundle(tmp_path_factory: pytest.TempPathFactory) -> ModelBundle:
    root = tmp_path_factory.mktemp("bundle")
    par, lm = root / "p.tsv.gz", root / "lm.txt"
    synthetic(par, lm)
    train_model(par, lm, root / "de-en", CONFIG, log=lambda _m: None)
    return load_bundle(root / "de-en", state_root=_weights_state(tmp_path_factory))


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


@pytest.fixture(scope="session")
def local_ray() -> Iterator[None]:
    """One local Ray instance for the whole session (marker ``ray``), started by the first test
    that asks for it: every test that starts Ray runs in one xdist worker, one after another
    (:func:`pytest_collection_modifyitems`). The cluster tests start clusters of their own
    beside it and stop only what they started (tests/collection/integration/clusters.py)."""
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield
    finally:
        ray.shutdown()


def _set_nodeid(item: pytest.Item, nodeid: str) -> None:
    """Give ``item`` the node id ``nodeid`` (pytest 9 reads ``_id``, older ones ``_nodeid``;
    pytest-xdist 3.8 still writes its group suffix to ``_nodeid``, which pytest 9 ignores)."""
    if hasattr(item, "_id"):
        from _pytest.nodeid import NodeId

        item._id = NodeId.parse(nodeid)
    else:
        item._nodeid = nodeid
    if item.nodeid != nodeid:  # a pytest that reads neither: groups would silently not hold
        raise pytest.UsageError(f"cannot set the node id of {item.nodeid} (pytest changed?)")


#: why a test belongs to the integration tier (``tests/**/integration/``, tests/README.md)
TIER_MARKERS = ("slow", "ray", "browser", "data", "process")


def in_integration_tier(item: pytest.Item) -> bool:
    return "integration" in item.path.relative_to(ROOT / "tests").parts[:-1]


def tier_reasons(item: pytest.Item) -> list[str]:
    return [m for m in TIER_MARKERS if item.get_closest_marker(m) is not None]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``make test`` runs on both cores (pytest-xdist, ``--dist loadgroup``): a module's tests
    go to one worker together (its module fixtures are built once); every test that starts
    Ray — the session's local instance or a cluster of ``ray start`` processes — to one
    worker, one after another (Ray's processes do not compete with each other), and every
    browser test to one worker (one Chromium a session). xdist groups by the node id's
    ``@group`` suffix, set here."""
    grouped = bool(getattr(config.option, "loadgroup", False))  # set by xdist in its workers
    for item in items:
        nodeid = item.nodeid
        tail = nodeid.rpartition("::")[2]
        if item.name.startswith(f"{tail}[") and "[" not in tail:
            # schemathesis names each operation's item ("test[POST /v1/search]") but gives them
            # all the function's node id: xdist would run one of them
            nodeid = f"{nodeid.rpartition('::')[0]}::{item.name}"
        ray = item.get_closest_marker("ray") is not None or "local_ray" in item.fixturenames
        browser = item.get_closest_marker("browser") is not None
        group = "ray" if ray else "browser" if browser else nodeid.split("::")[0]
        if grouped:
            nodeid = f"{nodeid}@{group}"
        if nodeid != item.nodeid:
            _set_nodeid(item, nodeid)
    misplaced = [i.nodeid for i in items if in_integration_tier(i) != bool(tier_reasons(i))]
    if misplaced:  # the folder is the tier: a marker says why a test is in the slow one
        raise pytest.UsageError(
            f"a test's folder and its markers disagree (tests/README.md): {misplaced[:5]}; a "
            f"test under integration/ carries one of {TIER_MARKERS}, a test elsewhere none"
        )
    shared = [nodeid for nodeid, n in Counter(i.nodeid for i in items).items() if n > 1]
    if shared:  # xdist would run one test of each such id and never say so
        raise pytest.UsageError(f"several tests share a node id: {shared[:5]}")


@pytest.fixture(scope="module")
def demo(weights_root: Path) -> ModelBundle:
    """The committed demo bundle (one a module: tests may write weights versions)."""
    return load_bundle(DEMO, state_root=weights_root)
