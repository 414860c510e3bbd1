"""The limit of open files: raised at start toward what a process that maps indexes needs (as
the JVM does for Lucene), and, where it is still too low, an error that names the limit
instead of calling a sound index broken."""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

import pytest

from service.index.inverted import InvertedIndex


def run_limited(code: str, soft: int, hard: int) -> subprocess.CompletedProcess[str]:
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))

    return subprocess.run(
        [sys.executable, "-c", code], preexec_fn=limit, capture_output=True, text=True, timeout=120
    )


@pytest.mark.process  # starts a process
def test_the_soft_limit_is_raised_to_the_hard_one_and_never_lowered() -> None:
    code = (
        "import resource\n"
        "from service.core.processes import raise_open_files_limit as r\n"
        "print(r(), r(100), resource.getrlimit(resource.RLIMIT_NOFILE)[0])"
    )
    done = run_limited(code, 256, 4096)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["4096", "4096", "4096"]  # at most the hard limit; 100 < 4096


@pytest.mark.process  # starts a process
def test_an_index_past_the_limit_names_the_limit_not_a_broken_file(
    toy_index: InvertedIndex,
) -> None:
    code = (
        "import os\n"
        "from service.errors import OutOfFilesError\n"
        "from service.index.inverted import InvertedIndex\n"
        "held = []\n"  # a few descriptors short of the limit: the index's arrays need more
        "while len(os.listdir('/proc/self/fd')) < 250:\n    held.append(open(os.devnull))\n"
        f"try:\n    InvertedIndex.load({str(toy_index.path)!r})\n"
        "except OutOfFilesError as e:\n    print('OUT', e)\n"
    )
    done = run_limited(code, 256, 256)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("OUT "), done.stdout
    assert "limit 256" in done.stdout and "ulimit -n" in done.stdout
    assert Path(toy_index.path).name in done.stdout
