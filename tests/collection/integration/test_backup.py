"""Snapshots and restores of a collection: a snapshot is the commit it was taken at, even: the
tests that start processes, Ray or a browser, read the shared data or run long (the integration
tier, tests/README.md); the rest are in :mod:`tests.collection.test_backup`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from service.collection.backup import snapshot_collection
from service.collection.manifest import read_commit
from service.collection.reader import Collection
from tests.collection.test_backup import WRITER, live_collection
from tests.collection.test_live import ROOT


@pytest.mark.process  # starts a process
def test_a_snapshot_taken_while_a_writer_adds_and_merges(tmp_path: Path) -> None:
    """Snapshots taken while another process adds and merges: each is a whole commit of the
    collection (opens, holds the documents its commit says, every one readable)."""
    src = tmp_path / "c"
    live_collection(src)
    with subprocess.Popen(
        [sys.executable, "-c", WRITER, str(src)], stdout=subprocess.PIPE, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    ) as proc:  # fmt: skip
        try:
            assert proc.stdout is not None
            proc.stdout.readline()  # the writer is at work
            generations = set()
            for i in range(12):
                made = snapshot_collection(src, tmp_path / f"s{i}")
                generations.add(made.generation)
                coll = Collection(tmp_path / f"s{i}")
                assert coll.snapshot.n_docs == made.n_docs
                assert made.n_docs == read_commit(tmp_path / f"s{i}").n_docs
                for view in coll.snapshot.views():
                    live = np.ones(view.segment.n_docs, bool)
                    if view.index.live is not None:
                        live = view.index.live
                    for docno in np.flatnonzero(live)[:3]:
                        assert view.index.doc(int(docno)).text
            assert len(generations) > 1  # the writer did commit while snapshots were taken
        finally:
            proc.kill()
