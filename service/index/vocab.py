"""The index vocabulary: term ↔ id, stored compactly.

Terms are sorted (by code point, which is UTF-8 byte order), so a term's id is its rank.
On disk they are one UTF-8 blob, each term followed by ``\\n``, plus int64 start offsets
(``V + 1`` of them). Looking up ids needs a dict; it is built lazily on the first lookup
(one ``decode().split()`` of the blob, measured in bench/bench_index.py), so opening an index
stays a handful of memory maps.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import pairwise

import numpy as np
import numpy.typing as npt

from service.core.csr import ptr_from_counts
from service.errors import DataFormatError

SEP = "\n"


def encode_terms(terms: Sequence[str]) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64]]:
    """The blob and offsets of ``terms``, which must be sorted, distinct and free of ``\\n``."""
    for a, b in pairwise(terms):
        if not a < b:
            raise ValueError(f"terms must be sorted and distinct: {a!r} before {b!r}")
    encoded = [t.encode("utf-8") for t in terms]
    if any(SEP.encode() in t or not t for t in encoded):
        bad = next(t for t in terms if SEP in t or not t)
        raise ValueError(f"a term must be non-empty and contain no newline: {bad!r}")
    lengths = np.fromiter((len(t) + 1 for t in encoded), dtype=np.int64, count=len(encoded))
    offsets = ptr_from_counts(lengths)
    blob = np.frombuffer(b"".join(t + b"\n" for t in encoded), dtype=np.uint8)
    return blob, offsets


class Vocabulary:
    """Sorted terms in one blob; ``id(term)`` through a lazily built dict."""

    def __init__(
        self, blob: npt.NDArray[np.uint8], offsets: npt.NDArray[np.int64], where: str = "vocab"
    ) -> None:
        self._blob = blob
        self._offsets = offsets
        self._where = where
        self._ids: dict[str, int] | None = None
        self._list: list[str] | None = None

    def __len__(self) -> int:
        return len(self._offsets) - 1

    def term(self, term_id: int) -> str:
        """The term with id ``term_id``."""
        start, end = int(self._offsets[term_id]), int(self._offsets[term_id + 1]) - 1
        return bytes(self._blob[start:end]).decode("utf-8")

    def terms(self) -> list[str]:
        """All terms in id order."""
        if len(self) == 0:
            return []
        try:
            terms = bytes(self._blob).decode("utf-8")[:-1].split(SEP)
        except UnicodeDecodeError as exc:
            raise DataFormatError(self._where, None, f"vocabulary is not UTF-8 ({exc})") from exc
        if len(terms) != len(self):
            raise DataFormatError(
                self._where, None, f"{len(terms)} terms in the blob, {len(self)} offsets"
            )
        return terms

    def term_list(self) -> list[str]:
        """All terms in id order, decoded once and kept (the id lookup's keys are the same
        strings): for reading many documents' token sequences."""
        if self._list is None:
            self._list = self.terms()
        return self._list

    @property
    def loaded(self) -> bool:
        """Whether the lookup dict has been built."""
        return self._ids is not None

    def build_lookup(self) -> dict[str, int]:
        """Build (once) and return the term → id dict."""
        if self._ids is None:
            terms = self.term_list()
            self._ids = dict(zip(terms, range(len(terms)), strict=True))
        return self._ids

    def id(self, term: str) -> int | None:
        """The id of ``term``, or None when it is not in the vocabulary."""
        return self.build_lookup().get(term)

    def ids(self, tokens: Iterable[str]) -> list[int]:
        """Ids of the known tokens, in order, repeats kept; unknown tokens are left out."""
        lookup = self.build_lookup()
        return [i for i in (lookup.get(t) for t in tokens) if i is not None]
