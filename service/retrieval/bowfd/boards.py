"""Boards: one float per sentence of a BOW-FD query, shared by the shards searching it at the
same time on one machine (Hieber & Riezler 2015, §3: the bound-pruned search stops once no
candidate left can enter the top ``K'``).

A shard posts the ``K'``-th best score it has found for a sentence and prunes by the largest
posted: ``K'`` documents reach it, so a document below it cannot enter the merged list. Shards
in threads of one process share a numpy array; Ray shard workers on one node share a board in
shared memory, named per query by the caller (:func:`open_board`). Any value a board holds is
such a score, so a worker that finds no board (another node, no shared memory) just prunes by
its own, and a post lost to a race only prunes less: the rankings are the same either way. A
board outlives its query only if every process searching it died first; a shard worker removes
such leftovers when it starts (:func:`sweep_boards`).
"""

from __future__ import annotations

import contextlib
import mmap
import os
import tempfile
import threading
import time
import uuid
from pathlib import Path

import numpy as np
import numpy.typing as npt

PREFIX = "clir-board-"


def new_board_name() -> str:
    """A fresh name for one query's shared board."""
    return PREFIX + uuid.uuid4().hex


def _board_dir() -> Path:
    shm = Path("/dev/shm")
    return shm if shm.is_dir() and os.access(shm, os.W_OK) else Path(tempfile.gettempdir())


def private_board(n: int) -> npt.NDArray[np.float64]:
    """A board no other process sees (every cell −∞: nothing known yet)."""
    return np.full(n, -np.inf)


def open_board(name: str, n: int) -> tuple[npt.NDArray[np.float64], Path | None]:
    """The board ``name`` of ``n`` cells shared by the processes of this machine that open it
    (created, filled with −∞, on first use), and its file (to :func:`release_board` once the
    search is done); a private board and None when it cannot be shared."""
    if not name.startswith(PREFIX) or "/" in name or n < 1:
        return private_board(n), None
    path = _board_dir() / name
    try:
        if not path.exists():
            tmp = path.with_name(f"{name}.{os.getpid()}.{threading.get_ident()}")
            tmp.write_bytes(private_board(n).tobytes())  # complete before anyone can open it
            with contextlib.suppress(FileExistsError):
                os.link(tmp, path)  # atomic: the first one wins, the others open it
            tmp.unlink()
        with path.open("r+b") as fh:
            if os.fstat(fh.fileno()).st_size != 8 * n:
                return private_board(n), None
            shared = mmap.mmap(fh.fileno(), 8 * n)
    except OSError:
        return private_board(n), None
    return np.frombuffer(shared, dtype=np.float64), path


def release_board(path: Path | None) -> None:
    """Remove a shared board's name (processes still searching keep their mapping)."""
    if path is not None:
        with contextlib.suppress(OSError):
            path.unlink()


def sweep_boards(max_age_s: float = 3600.0) -> int:
    """Remove boards (and their temporary files) not touched for ``max_age_s`` seconds: what
    searches killed mid-query left behind. Returns how many were removed."""
    removed = 0
    now = time.time()
    for path in _board_dir().glob(PREFIX + "*"):
        with contextlib.suppress(OSError):
            if now - path.stat().st_mtime > max_age_s:
                path.unlink()
                removed += 1
    return removed
