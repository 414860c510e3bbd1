"""Writers that cannot destroy or wedge a collection: a rebuild over a live collection, an: the
tests that start processes, Ray or a browser, read the shared data or run long (the integration
tier, tests/README.md); the rest are in :mod:`tests.collection.test_writers`."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from service.collection.manifest import read_commit
from service.collection.reader import Collection
from service.collection.writer import CollectionWriter
from service.records import Doc
from tests.collection.test_live import ROOT, corpus
from tests.collection.test_writers import CHILD, _alive, _children, build


@pytest.mark.slow
def test_kill_9_of_a_parallel_writer_leaves_no_worker_and_no_lock(tmp_path: Path) -> None:
    out = tmp_path / "c"
    build(corpus(20, 1), out)
    before = read_commit(out)
    with subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(CHILD), str(out)],
        stdout=subprocess.PIPE, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
    ) as proc:  # fmt: skip
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == b"ready"
        workers = _children(proc.pid)
        assert workers, "the writer started no worker process"
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [p for p in workers if _alive(p)], "worker processes outlived the writer"
    assert read_commit(out) == before  # nothing committed, nothing lost
    with CollectionWriter(out, lock_timeout=1.0) as w:  # the lock is free at once
        assert not [p for p in (out / "segments").iterdir() if p.name.startswith(".")]
        w.add([Doc("z", "", "red car", "a")])
        w.commit()
    assert Collection(out).snapshot.n_docs == 21
    assert not [p for p in out.parent.iterdir() if p.name.startswith(".c.")]
