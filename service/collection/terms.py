"""The collection's term dictionary: an append-only list of every term any segment has held.

A term's global id is its line number in ``terms.txt`` (UTF-8, one term per line; index
terms hold no whitespace). Segments keep their own sorted vocabularies and map each local
term to its global id (``gid``), so the collection's document frequencies are one dense
array over global ids, summed from the segments' (:mod:`service.collection.stats`), and adding
a segment never renumbers another. Ids are never reused: a term whose documents are all
deleted keeps its id with df 0.

The file is appended and fsynced before the commit that refers to it; the commit records how
many terms and bytes it covers, so terms appended by an add that never committed are cut off
by the next writer.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import numpy.typing as npt

from service.errors import DataFormatError

TERMS_FILE = "terms.txt"


class TermDictionary:
    """Global term ids of a collection (the writer's side: term → id)."""

    def __init__(self, path: Path, n_terms: int, n_bytes: int) -> None:
        """Open ``path`` (the collection directory) at a commit of ``n_terms`` terms in
        ``n_bytes`` bytes; a longer file (an add that did not commit) is cut back."""
        self.file = path / TERMS_FILE
        self._ids: dict[str, int] = {}
        self._bytes = n_bytes
        if n_terms == 0 and not self.file.exists():
            self.file.touch()
        with self.file.open("rb") as fh:
            data = fh.read(n_bytes)
        if len(data) != n_bytes:
            raise DataFormatError(
                self.file, None, f"{len(data)} bytes, the commit says {n_bytes}: truncated"
            )
        terms = data.decode("utf-8").split("\n")[:-1] if n_bytes else []
        if len(terms) != n_terms:
            raise DataFormatError(self.file, None, f"{len(terms)} terms, the commit says {n_terms}")
        self._ids = {t: i for i, t in enumerate(terms)}
        if self.file.stat().st_size != n_bytes:
            os.truncate(self.file, n_bytes)

    def __len__(self) -> int:
        return len(self._ids)

    @property
    def n_bytes(self) -> int:
        return self._bytes

    def ids(self, terms: Iterable[str]) -> npt.NDArray[np.int64]:
        """The global ids of ``terms``, new terms appended (to the file, fsynced)."""
        out: list[int] = []
        new: list[str] = []
        for t in terms:
            i = self._ids.get(t)
            if i is None:
                i = self._ids[t] = len(self._ids)
                new.append(t)
            out.append(i)
        if new:
            data = "".join(t + "\n" for t in new).encode("utf-8")
            with self.file.open("ab") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            self._bytes += len(data)
        return np.asarray(out, dtype=np.int64)
