"""Feature names ↔ columns of the weight vector learned by learning to rank
(Hieber & Riezler 2015, §4).

The BOW-FD score of a document is ``w · Φ(h*_d)`` with ``Φ`` the features of its best
derivation: the SMT features of the edges, ``IR_BM25`` (whose weight is ``v``), the per-term IR
features ``ir:<t>`` (weights δ_t added to ``v``) and, with LEX, the sparse lexical indicator
features. A :class:`FeatureSpace` numbers them; it only grows
(columns are appended as forests reveal new features), so a matrix built when the space had
``n`` columns stays valid: its columns are the first ``n``. ``IR_BM25`` is always column 0.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
from numpy.typing import NDArray

from service.retrieval.bowfd import IR_FEATURE, is_ir_term_feature
from service.retrieval.lex import is_lex_feature

FloatArray = NDArray[np.float64]
IR_COLUMN = 0


class FeatureSpace:
    """An append-only numbering of feature names (``IR_BM25`` first)."""

    def __init__(self, names: Iterable[str] = ()) -> None:
        self.names: list[str] = []
        self._col: dict[str, int] = {}
        self.column(IR_FEATURE)
        for n in names:
            self.column(n)

    def __len__(self) -> int:
        return len(self.names)

    def __contains__(self, name: object) -> bool:
        return name in self._col

    def column(self, name: str) -> int:
        """The column of ``name``, appended if new."""
        c = self._col.get(name)
        if c is None:
            c = self._col[name] = len(self.names)
            self.names.append(name)
        return c

    def columns(self, names: Iterable[str]) -> NDArray[np.int64]:
        return np.array([self.column(n) for n in names], dtype=np.int64)

    def vector(self, weights: Mapping[str, float], size: int | None = None) -> FloatArray:
        """``weights`` as a dense vector over the first ``size`` columns (absent names: 0)."""
        n = len(self.names) if size is None else size
        return np.array([float(weights.get(name, 0.0)) for name in self.names[:n]])

    def weights(self, vec: FloatArray) -> dict[str, float]:
        """The dense vector ``vec`` (over the first ``len(vec)`` columns) as a name → value map."""
        return {name: float(x) for name, x in zip(self.names, vec.tolist(), strict=False)}

    def trainable(self, *, smt: bool, lex: bool, ir_terms: bool = True) -> NDArray[np.bool_]:
        """Which columns move: with ``ir_terms`` the per-term IR features (``ir:<t>``) and not
        ``IR_BM25``, else ``IR_BM25``; LEX features if ``lex``; the rest (SMT) if ``smt``
        (``freeze_smt`` turns it off).

        With per-term weights, ``v`` is the *default* weight of Hieber & Riezler 2015, §3: each
        term's weight starts at ``v`` and learns its own δ_t, and a term without one (unseen in
        training) keeps ``v``. Learning ``v`` too would move every term at once, and the hinge then
        shrinks all IR weights together: with ~100 candidates per query most preference pairs are
        violated, and shrinking every score difference lowers their loss (measured on zh:
        ``v`` fell from 1.0 to 0.11 within 200 training queries and the stopping MAP dropped
        from .46 to .38 in one epoch; with ``v`` fixed it rose to .466)."""
        out = np.empty(len(self.names), dtype=np.bool_)
        for i, name in enumerate(self.names):
            if name == IR_FEATURE:
                out[i] = not ir_terms
            elif is_ir_term_feature(name):
                out[i] = ir_terms
            elif is_lex_feature(name):
                out[i] = lex
            else:
                out[i] = smt
        return out
