"""Boards shared by shard workers on one machine (:mod:`service.retrieval.bowfd.boards`):
every test that starts processes, Ray or a browser, reads the shared data or runs long (the
integration tier, tests/README.md); the rest are in :mod:`tests.collection.test_boards`."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

from service.retrieval.bowfd.boards import (
    new_board_name,
    open_board,
    release_board,
)


@pytest.mark.process  # starts a process
def test_processes_share_a_board_and_release_it() -> None:
    name = new_board_name()
    board, path = open_board(name, 3)
    assert path is not None and path.exists()
    assert board.tolist() == [-np.inf] * 3  # nothing known yet
    # another process opens the same board, reads this one's post and posts its own
    board[0] = -4.5
    child = textwrap.dedent(f"""
        from service.retrieval.bowfd.boards import open_board
        b, path = open_board({name!r}, 3)
        assert path is not None and b[0] == -4.5, b
        b[2] = -1.25
    """)
    subprocess.run([sys.executable, "-c", child], check=True)
    assert board.tolist() == [-4.5, -np.inf, -1.25]
    again, _ = open_board(name, 3)  # a second search of the same query in this process
    assert again.tolist() == board.tolist()
    release_board(path)
    assert not path.exists()
    assert board[2] == -1.25  # a search still running keeps its mapping
    fresh, fresh_path = open_board(name, 3)  # opened after the release: a new board
    assert fresh.tolist() == [-np.inf] * 3
    release_board(fresh_path)
    release_board(None)  # nothing to release
