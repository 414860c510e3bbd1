"""The reference n-gram model: ArpaLM, the textbook backoff computation over the ARPA reader.

``p(w | h) = p*(h w)`` if ``h w`` is listed, else ``b(h) · p(w | h[1:])`` with ``b(h) = 1`` for
an unlisted ``h`` (Chen & Goodman 1998, §2; the ARPA back-off format), in float64 on the numbers
as written, one dict lookup at a time. It is slow and obviously right: the tests compare KenLM
(:class:`service.mt.lm.KenLM`), the LM table (:class:`service.mt.lm.LmTable`) and the
minimised states of :mod:`service.mt.lm.states` against it. It reads the file with the one ARPA
reader (:func:`service.mt.lm.read_arpa.read_arpa`, through :meth:`ArpaFile.entries
<service.mt.lm.read_arpa.ArpaFile.entries>`), so it accepts and refuses the files the table
does, and answers the n-gram structure of state minimisation (:class:`service.mt.lm.NgramStructure`;
Heafield 2011, "KenLM", §4.1) from the listed n-grams by brute force.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property
from pathlib import Path

from service.errors import ConfigurationError
from service.mt.lm.model import LanguageModel, NgramStructure, State
from service.mt.lm.symbols import BOS, LN10, UNK


class ArpaLM(LanguageModel):
    """A pure-Python model of an ARPA file with the exact backoff computation (slow; the
    reference). States are the tuples of the last ``order - 1`` words, unknown words mapped to
    ``<unk>``.
    """

    def __init__(self, path: str | Path) -> None:
        from service.mt.lm.read_arpa import read_arpa  # numba only when a file is read

        self.path = Path(path)
        arpa = read_arpa(self.path)
        self.order = arpa.order
        self.entries: dict[tuple[str, ...], tuple[float, float]] = arpa.entries()
        self.vocab = set(arpa.words)

    def begin_state(self) -> State:
        return (BOS,)

    def null_state(self) -> State:
        return ()

    def _score10(self, state: State, word: str) -> tuple[float, State]:
        if not isinstance(state, tuple):
            raise ConfigurationError(f"ArpaLM states are tuples of words, got {state!r}")
        if word not in self.vocab:
            word = UNK
        context: tuple[str, ...] = state
        backoff = 0.0
        for start in range(len(context) + 1):
            history = context[start:]
            entry = self.entries.get((*history, word))
            if entry is not None:
                log10p = backoff + entry[0]
                break
            hist_entry = self.entries.get(history)
            if hist_entry is not None:
                backoff += hist_entry[1]
        else:  # pragma: no cover - the word is a listed unigram, so the loop always breaks
            raise AssertionError(word)
        keep = self.order - 1
        nxt = (*context, word)[-keep:] if keep else ()
        return log10p, nxt

    def is_oov(self, word: str) -> bool:
        return word not in self.vocab or word == UNK

    def log10_prob(self, ngram: Sequence[str]) -> float:
        """The listed log10 probability of an n-gram (KeyError if it is not listed)."""
        return self.entries[tuple(ngram)][0]

    def log10_backoff(self, ngram: Sequence[str]) -> float:
        """The listed log10 backoff weight of an n-gram (0 if none is given)."""
        return self.entries[tuple(ngram)][1]

    # --- the n-gram structure (NgramStructure), from the entries

    def structure(self) -> NgramStructure:
        return self

    def _lm_words(self, words: Sequence[str]) -> tuple[str, ...]:
        vocab = self.vocab
        return tuple(w if w in vocab else UNK for w in words)

    @cached_property
    def _left_extendable(self) -> frozenset[tuple[str, ...]]:
        """The proper suffixes of the listed n-grams."""
        return frozenset(ng[i:] for ng in self.entries for i in range(1, len(ng)))

    @cached_property
    def _right_extended(self) -> frozenset[tuple[str, ...]]:
        """The contexts of the listed n-grams and of their unlisted suffixes.

        The suffixes count because KenLM inserts an unlisted suffix of a listed n-gram into its
        tables (a "blank" with the backed-off probability, for SRILM-pruned files) and marks
        the blank's context as extended, as it marks a listed n-gram's. In a file that lists
        every suffix of its n-grams (KenLM's ``lmplz`` writes such files) these are exactly the
        listed n-grams' contexts.
        """
        present = self._left_extendable.union(self.entries)
        return frozenset(ng[:-1] for ng in present if len(ng) >= 2)

    def right_minimal(self, context: tuple[str, ...]) -> tuple[str, ...]:
        """``context`` without its oldest words while the n-gram they begin is unlisted, or
        listed with backoff 0 and the context of no n-gram (see :attr:`_right_extended`)."""
        words = self._lm_words(context)
        start = 0
        while start < len(words):
            ngram = words[start:]
            if ngram in self._right_extended:
                break
            entry = self.entries.get(ngram)
            if entry is not None and entry[1] != 0.0:
                break
            start += 1
        return tuple(context[start:])

    def left_extends(self, words: tuple[str, ...]) -> bool:
        """Whether ``words`` are a proper suffix of a listed n-gram (True for no words)."""
        return not words or self._lm_words(words) in self._left_extendable

    def backoff(self, context: tuple[str, ...]) -> float:
        """The natural-log backoff of the n-gram ``context`` (0 if it is not listed)."""
        entry = self.entries.get(self._lm_words(context)) if context else None
        return entry[1] * LN10 if entry is not None else 0.0
