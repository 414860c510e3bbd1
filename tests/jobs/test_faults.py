"""Faults around training jobs: a disk that fills up while a job
writes its weights version, and malformed training inputs, each end as a failed job with a
message that names the problem, while the active weights keep serving."""

from __future__ import annotations

import errno
import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from service.core.settings import Settings
from service.index.inverted import InvertedIndex
from service.jobs.store import JobStore
from service.jobs.worker import execute
from service.mt.bundle import ModelBundle, load_bundle, weights_store
from service.mt.weights import ACTIVE


@pytest.fixture
def store(tmp_path: Path) -> JobStore:
    return JobStore(tmp_path / "jobs.sqlite3")


@pytest.fixture
def bundle_copy(toy_bundle: ModelBundle, tmp_path: Path) -> Path:
    return Path(shutil.copytree(toy_bundle.path, tmp_path / "de-en"))


def weights_files(bundle: Path, state_root: Path) -> dict[str, bytes]:
    """The bundle's weights and those of its state directory (where new versions go)."""
    state = weights_store(bundle, state_root).writable
    dirs = [bundle / "weights", *([state] if state.is_dir() else [])]
    return {f"{d.name}/{p.name}": p.read_bytes() for d in dirs for p in sorted(d.iterdir())}


def test_disk_full_while_writing_a_weights_version(
    store: JobStore, bundle_copy: Path, monkeypatch: pytest.MonkeyPatch, weights_root: Path
) -> None:
    state = weights_store(bundle_copy, weights_root).writable
    # the state directory exists (an earlier version was written): only the new file fails
    state.mkdir(parents=True)
    before = weights_files(bundle_copy, weights_root)
    real_write_text = Path.write_text

    def full_disk(self: Path, *args: Any, **kwargs: Any) -> int:
        if self.parent == state:  # the temporary file of atomic_write
            real_write_text(self, '{"trunc', encoding="utf-8")  # a partial write, then ENOSPC
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self))
        return real_write_text(self, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", full_disk)
    job = store.submit("selftest", {"steps": 1, "seconds": 0, "model": str(bundle_copy),
                                    "activate": True}, model=str(bundle_copy))  # fmt: skip
    claimed = store.claim_next(os.getpid())
    assert claimed is not None and claimed.id == job.id
    assert execute(store, claimed, Settings(weights_state_dir=weights_root)) == "failed"
    monkeypatch.undo()
    done = store.get(job.id)
    assert done.state == "failed"
    assert done.error is not None and "No space left on device" in done.error
    assert done.weights_version is None
    # nothing half-written is left, the pointer and every version are byte-identical
    assert weights_files(bundle_copy, weights_root) == before
    bundle = load_bundle(bundle_copy, state_root=weights_root)
    assert bundle.active_weights().version == before[f"weights/{ACTIVE}"].decode().strip()


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


QUERIES = "q1\tdas Haus ist groß\nq2\tdas Auto ist rot\n"
BAD_INPUTS = {
    # (qrels text, what the error must say)
    "malformed line": ("q1 0 d1 3\nq2 0 d3\n", r"qrels\.txt:2"),
    "unknown query ids": ("x1 0 d1 3\nx2 0 d3 2\n", r"2 qrels query ids not in the query file"),
    "nothing relevant": ("q1 0 d1 0\nq2 0 d3 0\n", r"2 without a relevant document"),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_malformed_training_inputs_fail_the_job_with_a_clear_error(
    case: str,
    store: JobStore,
    bundle_copy: Path,
    toy_index: InvertedIndex,
    tmp_path: Path,
    weights_root: Path,
) -> None:
    qrels_text, expected = BAD_INPUTS[case]
    queries = write(tmp_path / "queries.tsv", QUERIES)
    qrels = write(tmp_path / "qrels.txt", qrels_text)
    dev_qrels = write(tmp_path / "dev_qrels.txt", "q1 0 d1 3\n")
    before = weights_files(bundle_copy, weights_root)
    params = {"model": str(bundle_copy), "index": str(toy_index.path), "queries": str(queries),
              "qrels": str(qrels), "dev_queries": str(queries), "dev_qrels": str(dev_qrels),
              "epochs": 1}  # fmt: skip
    job = store.submit("ltr", params, model=str(bundle_copy))
    claimed = store.claim_next(os.getpid())
    assert claimed is not None
    assert execute(store, claimed, Settings(weights_state_dir=weights_root)) == "failed"
    error = store.get(job.id).error or ""
    assert re.search(expected, error), error
    assert "Traceback" not in error
    assert weights_files(bundle_copy, weights_root) == before
