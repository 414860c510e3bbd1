"""The LM table: an ARPA n-gram model as flat, read-only arrays that numba code can query.

The arrays have the layout of KenLM's probing model (Heafield 2011, "KenLM: Faster and Smaller
Language Model Queries", §2.1): per slot of an open-addressing hash table the key of an n-gram of
order >= 2 (:mod:`service.mt.lm.kernels`), its log10 probability and backoff and whether it is
a proper suffix of a listed n-gram (KenLM's left extension, Heafield, Koehn & Lavie 2011); per
word id the same for the unigrams. :class:`LmTable` holds them with the vocabulary, checks their
types and lengths, hands them to the compiled decoder (:meth:`LmTable.arrays`,
:meth:`LmTable.structure_arrays`) and answers the same queries from Python: scores
(:meth:`LmTable.logp`, equal to :meth:`service.mt.lm.KenLM.logp`) and the n-gram structure of
state minimisation (:class:`service.mt.lm.NgramStructure`).

:data:`ARRAYS` names the arrays in the order the cache stores them
(:mod:`service.mt.lm.cache`); :mod:`service.mt.lm.assemble` makes a table from an ARPA file.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np
from numpy.typing import NDArray

from service.mt.lm.kernels import backoff10, droppable, left_extends_ids, logp10
from service.mt.lm.symbols import BOS, EOS, LN10, UNK

ARRAYS = ("keys", "probs", "backoffs", "left_ext", "uni_probs", "uni_backoffs", "uni_left_ext")
SLOT_ARRAYS = ("keys", "probs", "backoffs", "left_ext")  # one entry per slot; others per word
DTYPES = {
    "keys": np.dtype(np.uint64),
    "probs": np.dtype(np.float32),
    "backoffs": np.dtype(np.float32),
    "left_ext": np.dtype(np.bool_),
    "uni_probs": np.dtype(np.float32),
    "uni_backoffs": np.dtype(np.float32),
    "uni_left_ext": np.dtype(np.bool_),
}


@dataclass(frozen=True, eq=False)
class LmTable:
    """An ARPA n-gram model as arrays for :func:`logp10`; immutable (arrays are read-only)."""

    order: int
    # LM word -> id, in the unigram order of the ARPA file
    vocab: Mapping[str, int] = field(repr=False)
    # open addressing, power-of-two size, 0 = empty slot; per slot an n-gram of order >= 2
    keys: NDArray[np.uint64] = field(repr=False)
    probs: NDArray[np.float32] = field(repr=False)  # per slot: log10 probability
    backoffs: NDArray[np.float32] = field(repr=False)  # per slot: log10 backoff
    # per slot: the n-gram is a proper suffix of a listed one (KenLM's left extension)
    left_ext: NDArray[np.bool_] = field(repr=False)
    uni_probs: NDArray[np.float32] = field(repr=False)  # per word id
    uni_backoffs: NDArray[np.float32] = field(repr=False)  # per word id
    uni_left_ext: NDArray[np.bool_] = field(repr=False)  # per word id, as left_ext
    verified: bool = False  # compared with KenLM when it was built
    unk: int = field(init=False)
    bos: int = field(init=False)
    eos: int = field(init=False)

    def __post_init__(self) -> None:
        vocab = self.vocab
        if not isinstance(vocab, MappingProxyType):
            vocab = MappingProxyType(dict(vocab))
            object.__setattr__(self, "vocab", vocab)
        for name in ARRAYS:
            arr = getattr(self, name)
            if arr.dtype != DTYPES[name] or arr.ndim != 1:
                raise ValueError(f"{name} must be a 1-d {DTYPES[name]} array, got {arr.dtype}")
            if arr.flags.writeable:
                arr = arr.view()
                arr.flags.writeable = False
                object.__setattr__(self, name, arr)
        size = self.keys.shape[0]
        if size < 2 or size & (size - 1):
            raise ValueError(f"the table needs a power-of-two size >= 2, got {size}")
        if len({getattr(self, name).shape for name in SLOT_ARRAYS}) != 1:
            raise ValueError("keys, probs, backoffs and left_ext differ in length")
        words = {getattr(self, name).shape[0] for name in ARRAYS if name not in SLOT_ARRAYS}
        if words != {len(vocab)}:
            raise ValueError("the vocabulary and the unigram arrays differ in length")
        for attr, word in (("unk", UNK), ("bos", BOS), ("eos", EOS)):
            if word not in vocab:
                raise ValueError(f"the vocabulary has no {word}")
            object.__setattr__(self, attr, vocab[word])

    def arrays(
        self,
    ) -> tuple[
        NDArray[np.uint64],
        NDArray[np.float32],
        NDArray[np.float32],
        NDArray[np.float32],
        NDArray[np.float32],
    ]:
        """``(keys, probs, backoffs, uni_probs, uni_backoffs)``: :func:`logp10`'s first five."""
        return self.keys, self.probs, self.backoffs, self.uni_probs, self.uni_backoffs

    def structure_arrays(
        self,
    ) -> tuple[
        NDArray[np.uint64],
        NDArray[np.float32],
        NDArray[np.float32],
        NDArray[np.bool_],
        NDArray[np.bool_],
    ]:
        """``(keys, backoffs, uni_backoffs, left_ext, uni_left_ext)``: what :func:`droppable`,
        :func:`left_extends_ids` and :func:`backoff10` read."""
        return self.keys, self.backoffs, self.uni_backoffs, self.left_ext, self.uni_left_ext

    def word_id(self, word: str) -> int:
        """The LM id of ``word``; the id of ``<unk>`` for a word the LM does not know."""
        return self.vocab.get(word, self.unk)

    def is_oov(self, word: str) -> bool:
        """KenLM's ``word not in model``: unknown words and ``<unk>`` itself."""
        return word == UNK or word not in self.vocab

    def logp10(self, context: Sequence[str], word: str) -> float:
        """log10 p(word | the last ``order - 1`` words of ``context``), as a Python float."""
        keep = self.order - 1
        tail = list(context)[max(0, len(context) - keep) :] if keep > 0 else []
        ids = np.array([self.word_id(w) for w in tail], dtype=np.int64)
        return float(logp10(*self.arrays(), ids, len(ids), self.word_id(word)))

    def logp(self, context: Sequence[str], word: str) -> float:
        """Natural-log p(word | context), equal to ``service.mt.lm.KenLM.logp``.

        ``context`` may start with ``<s>``; only its last ``order - 1`` words are used.
        """
        return self.logp10(context, word) * LN10

    # the structure queries of service.mt.lm.NgramStructure (KenLM's state minimisation)

    def _ids(self, words: Sequence[str]) -> NDArray[np.int64]:
        return np.array([self.word_id(w) for w in words], dtype=np.int64)

    def right_minimal(self, context: tuple[str, ...]) -> tuple[str, ...]:
        """``context`` without the oldest words that no later word can use (KenLM's right
        state): drops them while :func:`droppable` says so; the remaining suffix, as given."""
        ids = self._ids(context)
        start, n = 0, len(context)
        while start < n and droppable(
            self.keys, self.backoffs, self.uni_backoffs, ids[start:], n - start
        ):
            start += 1
        return tuple(context[start:])

    def left_extends(self, words: tuple[str, ...]) -> bool:
        """Whether ``words`` are a proper suffix of a listed n-gram (True for no words)."""
        if len(words) >= self.order:
            return False
        ids = self._ids(words)
        return bool(left_extends_ids(self.keys, self.left_ext, self.uni_left_ext, ids, len(ids)))

    def backoff(self, context: tuple[str, ...]) -> float:
        """The natural-log backoff of the n-gram ``context`` (0 if it is not listed)."""
        ids = self._ids(context)
        return float(backoff10(self.keys, self.backoffs, self.uni_backoffs, ids, len(ids))) * LN10

    @property
    def nbytes(self) -> int:
        """Bytes of the arrays (the vocabulary's strings not counted)."""
        return sum(int(getattr(self, name).nbytes) for name in ARRAYS)
