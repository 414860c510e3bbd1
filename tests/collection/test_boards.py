"""Boards shared by shard workers on one machine (service.retrieval.bowfd.boards): every process
opening a query's board sees the others' posts; a board that cannot be shared is private."""

from __future__ import annotations

import os

import numpy as np

from service.retrieval.bowfd.boards import (
    PREFIX,
    _board_dir,
    new_board_name,
    open_board,
    release_board,
    sweep_boards,
)


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
