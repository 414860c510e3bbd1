"""The decomposable BM25 term weights of Hieber & Riezler 2015, §3 ("Decomposable Retrieval
Features").

    bm25(t, d) = rsj(t, C) · tf_bm25(t, d)
    rsj(t, C)  = log((|C| − df(t, C) + 0.5) / (df(t, C) + 0.5))
    tf_bm25    = tf(t, d) / (k1·((1 − b) + b·dl/avdl) + tf(t, d))

Note that the paper's tf component has no ``(k1 + 1)`` factor in the numerator (Robertson and
Zaragoza's form; bm25s calls it "robertson"); rank_bm25's ``BM25Okapi`` has it, so its scores
are ``(k1 + 1)`` times ours — the same ranking.

rsj is negative for terms in more than half of the documents. :class:`RsjPolicy` says what the
index does with them; the choice is written into the index manifest and the scorers' signatures.
"""

from __future__ import annotations

from enum import StrEnum

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.floating]

K1 = 1.2  # a new index's k1 and b (the settings bm25_k1, bm25_b default to them)
B = 0.75


class RsjPolicy(StrEnum):
    """What to do with terms whose rsj is negative (df > |C|/2).

    * ``floor`` (default): rsj := max(rsj, 0). Matching a very common query word then adds
      nothing instead of lowering the score, so BM25 stays monotone in matched terms (a
      document never loses score for containing a query word) and BOW-FD's IR bonus never
      pushes a derivation away from a function word. The term keeps its postings, tf and df,
      so PSQ can still compute its own rsj from expected df.
    * ``drop``: the term keeps its df (and stays in the vocabulary) but its postings are
      removed: it neither scores nor makes a document a candidate. For a plain sum of term
      weights this ranks exactly like ``floor``; it differs where postings are read directly
      (PSQ's expected tf) and gives a smaller index.
    * ``keep``: the paper's formula unchanged; matching such a term lowers the score.
    """

    FLOOR = "floor"
    DROP = "drop"
    KEEP = "keep"


def rsj_raw(df: npt.ArrayLike, n_docs: int) -> npt.NDArray[np.float64]:
    """The Robertson/Spärck Jones weight log((N − df + 0.5)/(df + 0.5)), natural log, float64."""
    df64 = np.asarray(df, dtype=np.float64)
    return np.log((n_docs - df64 + 0.5) / (df64 + 0.5))


def rsj(df: npt.ArrayLike, n_docs: int, policy: RsjPolicy | str) -> npt.NDArray[np.float64]:
    """rsj under ``policy``: negative values become 0 for ``floor`` and ``drop``.

    (Under ``drop`` the index also removes those terms' postings; the weight is 0 either way.)
    ``df`` may be fractional, e.g. PSQ's expected document frequency.
    """
    raw = rsj_raw(df, n_docs)
    if RsjPolicy(policy) is RsjPolicy.KEEP:
        return raw
    return np.maximum(raw, 0.0)


def length_norm(doc_len: npt.ArrayLike, avdl: float, k1: float, b: float) -> FloatArray:
    """The per-document denominator term k1·((1 − b) + b·dl/avdl), float64."""
    dl = np.asarray(doc_len, dtype=np.float64)
    ratio = dl / avdl if avdl > 0 else np.zeros_like(dl)
    return k1 * ((1.0 - b) + b * ratio)


def tf_bm25(tf: npt.ArrayLike, norm: npt.ArrayLike) -> FloatArray:
    """The saturated term frequency tf/(norm + tf) with ``norm`` from :func:`length_norm`.

    ``tf`` may be fractional (PSQ's expected tf); tf = 0 gives 0.
    """
    tf64 = np.asarray(tf, dtype=np.float64)
    denom = np.asarray(norm, dtype=np.float64) + tf64
    out = np.zeros(np.broadcast(tf64, denom).shape, dtype=np.float64)
    np.divide(tf64, denom, out=out, where=denom > 0)
    return out
