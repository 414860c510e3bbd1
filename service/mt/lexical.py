"""The lexical translation table w(e|f), w(f|e) (Koehn et al. 2003, §3.3; Chen et al. 2017, §2.2).

Relative frequencies of word-alignment links: ``w(e|f) = c(f, e) / Σ_e' c(f, e')`` and
``w(f|e) = c(f, e) / Σ_f' c(f', e)``, where an unaligned word is linked to NULL, so
``w(e|NULL)`` and ``w(NULL|f)`` exist and each conditional distribution sums to one over the
real words and NULL. The counts are estimated from the symmetrised alignments at training time
(:mod:`service.mt.training.lexical_counts`), which also gives the rule features their lexical
weights;
probabilistic structured queries and translation retrieval read the table from the model
bundle. NULL is written ``None`` in the API. Storage: the vocabularies and the link counts as
compact numpy arrays in one ``.npz`` file (no pickles), written atomically.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt

from service.core.csr import ptr_from_counts
from service.data.io import atomic_write
from service.errors import DataFormatError, InvalidInputError, MissingResourceError

FORMAT = "clir-lexical-table/1"

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]


class LexicalTable:
    """Link counts in two CSR layouts: rows by source word and rows by target word."""

    def __init__(
        self,
        source_words: list[str],
        target_words: list[str],
        f_ids: I64,
        e_ids: I64,
        counts: F64,
    ) -> None:
        """``source_words[0]`` and ``target_words[0]`` stand for NULL; one entry per pair."""
        self.source_words = source_words
        self.target_words = target_words
        self.source_ids = {w: k for k, w in enumerate(source_words) if k}
        self.target_ids = {w: k for k, w in enumerate(target_words) if k}
        order = np.lexsort((e_ids, f_ids))
        self.f_ids = np.asarray(f_ids, dtype=np.int64)[order]
        self.e_ids = np.asarray(e_ids, dtype=np.int64)[order]
        self.counts = np.asarray(counts, dtype=np.float64)[order]
        nf, ne = len(source_words), len(target_words)
        if len(self.f_ids) and (self.f_ids.max() >= nf or self.e_ids.max() >= ne):
            raise InvalidInputError("lexical table: a word id is outside its vocabulary")
        # by source word: e ascending within each row, w(e|f)
        self.f_indptr = ptr_from_counts(np.bincount(self.f_ids, minlength=nf))
        f_total = np.bincount(self.f_ids, weights=self.counts, minlength=nf)
        self.f_total = f_total  # links of each source word (see source_count)
        self.p_e_given_f = self.counts / np.where(f_total > 0, f_total, 1.0)[self.f_ids]
        # by target word: f ascending within each row, w(f|e)
        self.e_order = np.lexsort((self.f_ids, self.e_ids))
        self.e_indptr = ptr_from_counts(np.bincount(self.e_ids, minlength=ne))
        e_total = np.bincount(self.e_ids, weights=self.counts, minlength=ne)
        self.p_f_given_e = self.counts / np.where(e_total > 0, e_total, 1.0)[self.e_ids]

    # --- lookups -----------------------------------------------------------------------------

    def _fid(self, f: str | None) -> int:
        return 0 if f is None else self.source_ids.get(f, -1)

    def _eid(self, e: str | None) -> int:
        return 0 if e is None else self.target_ids.get(e, -1)

    def _entry(self, fid: int, eid: int) -> int:
        """Index of the pair (fid, eid) in the f-sorted arrays, -1 if never linked."""
        if fid < 0 or eid < 0:
            return -1
        lo, hi = self.f_indptr[fid], self.f_indptr[fid + 1]
        k = lo + int(np.searchsorted(self.e_ids[lo:hi], eid))
        return k if k < hi and self.e_ids[k] == eid else -1

    def prob_e_given_f(self, e: str | None, f: str | None) -> float:
        """w(e|f); 0.0 for a pair never linked or an unknown word."""
        k = self._entry(self._fid(f), self._eid(e))
        return float(self.p_e_given_f[k]) if k >= 0 else 0.0

    def prob_f_given_e(self, f: str | None, e: str | None) -> float:
        """w(f|e); 0.0 for a pair never linked or an unknown word."""
        k = self._entry(self._fid(f), self._eid(e))
        return float(self.p_f_given_e[k]) if k >= 0 else 0.0

    def source_count(self, f: str) -> int:
        """The source word ``f``'s links in the aligned corpus, NULL links included: at least
        its number of occurrences (a token aligned to several words counts each link); 0 for
        an unknown word."""
        k = self._fid(f)
        return int(self.f_total[k] + 0.5) if k > 0 else 0

    def count(self, f: str | None, e: str | None) -> float:
        k = self._entry(self._fid(f), self._eid(e))
        return float(self.counts[k]) if k >= 0 else 0.0

    def translations_of(
        self, f: str | None, n: int | None = None
    ) -> list[tuple[str | None, float]]:
        """Target words e with w(e|f), most probable first (ties: alphabetical, NULL first)."""
        fid = self._fid(f)
        if fid < 0:
            return []
        lo, hi = self.f_indptr[fid], self.f_indptr[fid + 1]
        out = [
            (self.target_words[e] if e else None, float(p))
            for e, p in zip(self.e_ids[lo:hi].tolist(), self.p_e_given_f[lo:hi], strict=True)
        ]
        out.sort(key=lambda ep: (-ep[1], ep[0] or ""))
        return out[:n] if n is not None else out

    def sources_of(self, e: str | None, n: int | None = None) -> list[tuple[str | None, float]]:
        """Source words f with w(f|e), most probable first (ties: alphabetical, NULL first)."""
        eid = self._eid(e)
        if eid < 0:
            return []
        idx = self.e_order[self.e_indptr[eid] : self.e_indptr[eid + 1]]
        out = [
            (self.source_words[f] if f else None, float(p))
            for f, p in zip(self.f_ids[idx].tolist(), self.p_f_given_e[idx], strict=True)
        ]
        out.sort(key=lambda fp: (-fp[1], fp[0] or ""))
        return out[:n] if n is not None else out

    def top_translations(self, n: int) -> dict[str, list[tuple[str | None, float]]]:
        """The ``n`` best translations of every source word (PSQ's candidate table)."""
        return {f: self.translations_of(f, n) for f in self.source_words[1:]}

    def __len__(self) -> int:
        return len(self.counts)

    # --- storage -------------------------------------------------------------------------------

    def save(self, path: str | Path) -> None:
        """Write the table atomically to ``path`` (an ``.npz`` file)."""
        for words in (self.source_words, self.target_words):
            bad = next((w for w in words[1:] if "\n" in w or not w), None)
            if bad is not None:
                raise InvalidInputError(f"lexical table: word {bad!r} cannot be stored")
        path = Path(path)
        with atomic_write(path) as tmp, open(tmp, "wb") as fh:
            np.savez(
                fh,
                format=np.frombuffer(FORMAT.encode(), dtype=np.uint8),
                source_words=_pack(self.source_words),
                target_words=_pack(self.target_words),
                f_ids=self.f_ids.astype(np.int32),
                e_ids=self.e_ids.astype(np.int32),
                counts=self.counts,
            )

    @classmethod
    def load(cls, path: str | Path) -> LexicalTable:
        path = Path(path)
        if not path.is_file():
            raise MissingResourceError(f"{path}: no lexical table; run `clir train-model` first")
        try:
            with np.load(path, allow_pickle=False) as z:
                fmt = z["format"].tobytes().decode()
                if fmt != FORMAT:
                    raise DataFormatError(path, None, f"format {fmt!r}, expected {FORMAT!r}")
                return cls(
                    _unpack(z["source_words"]),
                    _unpack(z["target_words"]),
                    z["f_ids"].astype(np.int64),
                    z["e_ids"].astype(np.int64),
                    z["counts"],
                )
        except (OSError, KeyError, ValueError, UnicodeDecodeError) as exc:
            raise DataFormatError(path, None, f"not a lexical table ({exc}); rebuild it") from exc


def _pack(words: list[str]) -> npt.NDArray[np.uint8]:
    return np.frombuffer("\n".join(words).encode("utf-8"), dtype=np.uint8)


def _unpack(data: npt.NDArray[np.uint8]) -> list[str]:
    return data.tobytes().decode("utf-8").split("\n")
