"""Boards shared by shard workers on one machine (service.collection.boards): every process
opening a query's board sees the others' posts; a board that cannot be shared is private."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np

from service.collection.boards import (
    PREFIX,
    _board_dir,
    new_board_name,
    open_board,
    release_board,
    sweep_boards,
)


def test_processes_share_a_board_and_release_it() -> None:
    name = new_board_name()
    board, path = open_board(name, 3)
    assert path is not None and path.exists()
    assert board.tolist() == [-np.inf] * 3  # nothing known yet
    # another process opens the same board, reads this one's post and posts its own
    board[0] = -4.5
    child = textwrap.dedent(f"""
        from service.collection.boards import open_board
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


def test_boards_that_cannot_be_shared_are_private() -> None:
    for name in ("not-a-board", PREFIX + "../escape", ""):
        board, path = open_board(name, 2)
        assert path is None and board.tolist() == [-np.inf, -np.inf]
    name = new_board_name()
    _, path = open_board(name, 2)
    assert path is not None
    other, other_path = open_board(name, 5)  # another shape: not this query's board
    assert other_path is None and len(other) == 5
    release_board(path)
    assert not list(_board_dir().glob(name + ".*"))  # no temporary file left behind


def test_boards_left_by_killed_searches_are_swept() -> None:
    _, old = open_board(new_board_name(), 2)
    _, fresh = open_board(new_board_name(), 2)
    assert old is not None and fresh is not None
    os.utime(old, (0, 0))  # untouched since 1970: its searches are long gone
    assert sweep_boards(max_age_s=3600) >= 1
    assert not old.exists() and fresh.exists()
    release_board(fresh)
