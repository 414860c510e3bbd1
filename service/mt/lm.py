"""Language models behind one stateful protocol, for the decoder's LM feature.

The decoder scores target words left to right through hashable LM states, so that hypotheses
with equal states recombine (Chiang 2007 §5.3 and §5.3.2 "cube pruning": +LM items are split by
their LM boundary words; Hieber & Riezler 2015, §3, use the same forest with a 4-gram model). The
protocol:

* ``begin_state()``: the context ``<s>`` at a sentence start; ``null_state()``: no context at
  all (for scoring a fragment whose left context is not known yet, e.g. the first words of a
  partial hypothesis in cube pruning);
* ``score(state, word) -> (logprob, next_state)``: natural-log ``p(word | state)``;
* ``end_score(state)``: natural-log ``p(</s> | state)``;
* ``is_oov(word)``, ``order``;
* helpers built on ``score``: ``score_words`` (a word sequence from a state), ``right_state``
  (the state that only the last ``order - 1`` words determine) and ``sentence_score``.

ARPA files and KenLM store log10 probabilities; :meth:`LanguageModel.score` converts them to
the natural log in this one place (:data:`LN10`), so every feature value is on one scale.

Implementations: :class:`KenLM` (the real one, over the ``kenlm`` module), :class:`ArpaLM` (a
slow pure-Python reader of ARPA files with the textbook backoff computation, the reference that
the tests compare KenLM against) and :class:`NoLM` (always 0, one state; the decoder's
``--no-lm`` mode).

Structure. A decoder that keeps its own LM states minimal, as KenLM does (Heafield 2011,
"KenLM", §4.1; Heafield, Koehn & Lavie 2011, left-state minimisation), asks the model three
questions about n-grams (words the model does not know count as ``<unk>``), the
:class:`NgramStructure` protocol that :meth:`LanguageModel.structure` returns:

* ``right_minimal(context)``: ``context`` without its oldest words while the n-gram they
  begin is not listed, or is listed with backoff 0 and is the context of no longer n-gram
  (no later word can use the dropped word);
* ``left_extends(words)``: whether ``words`` are a proper suffix of a listed n-gram (a word to
  their left could still change a score; True for no words);
* ``backoff(context)``: the natural-log backoff of the n-gram ``context``, 0 if unlisted.

:class:`ArpaLM` answers them from the ARPA text (the reference); KenLM's states are opaque, so
:class:`KenLM` answers through :class:`service.mt.lm_table.LmTable` (the same ARPA file as
arrays); :class:`NoLM` has no structure.
"""

from __future__ import annotations

import math
import re
from abc import ABC, abstractmethod
from collections.abc import Hashable, Iterable, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from service.data.io import iter_lines
from service.errors import ConfigurationError, DataFormatError, MissingResourceError

BOS = "<s>"
EOS = "</s>"
UNK = "<unk>"

LN10 = math.log(10.0)  # log10 -> natural log: ln(p) = log10(p) * LN10

State = Hashable

_FIELD_SEP = re.compile(r"[ \t]+")  # ARPA separators; words may contain other whitespace


@runtime_checkable
class NgramStructure(Protocol):
    """What KenLM-style state minimisation needs to know about an n-gram model.

    Words unknown to the model count as ``<unk>``; contexts and words are oldest first.
    """

    def right_minimal(self, context: tuple[str, ...]) -> tuple[str, ...]:
        """The shortest suffix of ``context`` (at most ``order - 1`` words) that scores every
        later word as ``context`` does: its oldest words dropped while the n-gram they begin
        is unlisted, or listed with backoff 0 and no longer n-gram extends it to the right."""
        ...

    def left_extends(self, words: tuple[str, ...]) -> bool:
        """Whether some listed n-gram longer than ``words`` ends with them (True for ``()``)."""
        ...

    def backoff(self, context: tuple[str, ...]) -> float:
        """The natural-log backoff of the n-gram ``context``; 0 if unlisted or empty."""
        ...


class LanguageModel(ABC):
    """A stateful n-gram language model; subclasses give log10 scores through two hooks."""

    order: int
    STATE_CACHE_SIZE = 1 << 16

    @abstractmethod
    def begin_state(self) -> State:
        """The state after ``<s>``."""

    @abstractmethod
    def null_state(self) -> State:
        """The empty context (no words known to the left)."""

    @abstractmethod
    def _score10(self, state: State, word: str) -> tuple[float, State]:
        """log10 p(word | state) and the state after ``word``."""

    @abstractmethod
    def is_oov(self, word: str) -> bool:
        """True if ``word`` is not in the model's vocabulary (it is scored as ``<unk>``)."""

    def score(self, state: State, word: str) -> tuple[float, State]:
        """Natural-log p(word | state) and the next state."""
        log10p, nxt = self._score10(state, word)
        return log10p * LN10, nxt

    def state_logp(self, state: State, word: str) -> float:
        """Natural-log p(word | state) alone (``score`` without the next state)."""
        return self.score(state, word)[0]

    def end_score(self, state: State) -> float:
        """Natural-log p(</s> | state)."""
        return self._score10(state, EOS)[0] * LN10

    def score_words(self, state: State, words: Iterable[str]) -> tuple[float, State]:
        """Sum of natural-log probabilities of ``words`` from ``state``, and the final state."""
        total = 0.0
        for word in words:
            logp, state = self.score(state, word)
            total += logp
        return total, state

    def right_state(self, words: Sequence[str]) -> State:
        """The state after ``words``, determined by their last ``order - 1`` words only.

        For a fragment with at least ``order - 1`` words this equals the state reached by
        scoring the whole sentence up to the fragment's end, whatever came before it.
        """
        tail = words[len(words) - (self.order - 1) :] if self.order > 1 else ()
        return self.score_words(self.null_state(), tail)[1]

    def context_state(self, context: Sequence[str]) -> State:
        """The state after the words ``context``; a leading ``<s>`` means a sentence start.

        States are cached per context (the cache is emptied when it grows past
        :attr:`STATE_CACHE_SIZE`), so repeated queries for one boundary are cheap.
        """
        key = tuple(context)
        cache: dict[tuple[str, ...], State] = self.__dict__.setdefault("_state_cache", {})
        state = cache.get(key)
        if state is None:
            if key and key[0] == BOS:
                state = self.score_words(self.begin_state(), key[1:])[1]
            else:
                state = self.score_words(self.null_state(), key)[1]
            if len(cache) >= self.STATE_CACHE_SIZE:
                cache.clear()
            cache[key] = state
        return state

    def logp(self, context: Sequence[str], word: str) -> float:
        """Natural-log p(word | context words): the ``ContextScore`` of ``service.mt.lm_context``.

        ``context`` holds at most ``order - 1`` preceding words and may start with ``<s>``.
        """
        return self.state_logp(self.context_state(context), word)

    def sentence_score(self, words: Sequence[str], bos: bool = True, eos: bool = True) -> float:
        """Natural-log probability of a whole sentence (with ``<s>``/``</s>`` if asked)."""
        state = self.begin_state() if bos else self.null_state()
        total, state = self.score_words(state, words)
        if eos:
            total += self.end_score(state)
        return total

    def structure(self) -> NgramStructure | None:
        """The model's n-gram structure for state minimisation, or None if it has none."""
        return None


class NoLM(LanguageModel):
    """The null language model: every score is 0, there is a single state."""

    order = 1

    def begin_state(self) -> State:
        return ()

    def null_state(self) -> State:
        return ()

    def _score10(self, state: State, word: str) -> tuple[float, State]:
        return 0.0, ()

    def is_oov(self, word: str) -> bool:
        return False


class KenLM(LanguageModel):
    """KenLM (Heafield 2011) over the ``kenlm`` module; loads ARPA or KenLM binary files.

    States are ``kenlm.State`` objects: hashable and comparable by their words, minimised by
    KenLM to the words that can still matter (so more hypotheses recombine). A state is
    never mutated after it is returned.
    """

    def __init__(self, path: str | Path) -> None:
        import kenlm

        self.path = Path(path)
        if not self.path.is_file():
            raise MissingResourceError(f"{self.path}: language model file not found")
        config = kenlm.Config()
        config.arpa_complain = kenlm.ARPALoadComplain.NONE
        config.show_progress = False
        try:
            self._model: Any = kenlm.Model(str(self.path), config)
        except (OSError, RuntimeError) as exc:
            raise DataFormatError(
                self.path, None, f"KenLM cannot load this file as ARPA or KenLM binary: {exc}"
            ) from exc
        self._state_cls: Any = kenlm.State
        self.order = int(self._model.order)
        begin = kenlm.State()
        self._model.BeginSentenceWrite(begin)
        null = kenlm.State()
        self._model.NullContextWrite(null)
        self._begin = begin
        self._null = null

    def begin_state(self) -> State:
        return self._begin  # type: ignore[no-any-return]

    def null_state(self) -> State:
        return self._null  # type: ignore[no-any-return]

    def _score10(self, state: State, word: str) -> tuple[float, State]:
        out = self._state_cls()
        log10p = self._model.BaseScore(state, word, out)
        return float(log10p), out

    def state_logp(self, state: State, word: str) -> float:
        # the hot path of the decoder's LM cache misses: one KenLM call, same value as score()
        return float(self._model.BaseScore(state, word, self._state_cls())) * LN10

    def is_oov(self, word: str) -> bool:
        return word not in self._model

    def kenlm_sentence_score(
        self, words: Sequence[str], bos: bool = True, eos: bool = True
    ) -> float:
        """KenLM's own whole-sentence score (``Model.score``), converted to natural log."""
        return float(self._model.score(" ".join(words), bos=bos, eos=eos)) * LN10

    def structure(self) -> NgramStructure:
        """The LM table of the same ARPA file (:func:`service.mt.lm_table.load_lm_table`, not
        verified against KenLM), loaded on first use; ConfigurationError if ``path`` is not an
        ARPA file the table can read (e.g. a KenLM binary)."""
        table: NgramStructure | None = self.__dict__.get("_structure")
        if table is None:
            from service.mt.lm_table import load_lm_table  # numba only when needed

            try:
                table = load_lm_table(self.path, verify=False)
            except (DataFormatError, MissingResourceError) as exc:
                raise ConfigurationError(
                    f"{self.path}: LM state minimisation needs the language model as an ARPA "
                    f"file, and this one cannot be read as one ({exc})"
                ) from exc
            self._structure = table
        return table


class ArpaLM(LanguageModel):
    """A pure-Python ARPA reader with the exact backoff computation (slow; a test reference).

    ``p(w | h) = p*(h w)`` if ``h w`` is listed, else ``b(h) · p(w | h[1:])`` with ``b(h) = 1``
    for an unlisted ``h`` (Chen & Goodman 1998 §2; the ARPA back-off format). States are the
    tuples of the last ``order - 1`` words, unknown words mapped to ``<unk>``.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.entries: dict[tuple[str, ...], tuple[float, float]] = {}
        self.order = self._read(self.path)
        self.vocab = {ng[0] for ng in self.entries if len(ng) == 1}
        if UNK not in self.vocab:
            raise DataFormatError(self.path, None, f"the ARPA file has no {UNK} unigram")

    def _read(self, path: Path) -> int:
        declared: dict[int, int] = {}
        section = -1  # -1 before \data\, 0 in \data\, n in \n-grams:
        seen: dict[int, int] = {}
        for line_no, raw in iter_lines(path):
            line = raw.strip(" \t\r")
            if not line:
                continue
            if line == "\\data\\":
                section = 0
                continue
            if line == "\\end\\":
                break
            if line.startswith("\\") and line.endswith("-grams:"):
                try:
                    section = int(line[1:-7])
                except ValueError:
                    raise DataFormatError(path, line_no, f"bad section header {line!r}") from None
                seen[section] = 0
                continue
            if section == 0:
                if not line.startswith("ngram "):
                    raise DataFormatError(path, line_no, f"expected 'ngram N=count': {line!r}")
                n, _, count = line[6:].partition("=")
                declared[int(n)] = int(count)
            elif section > 0:
                fields = _FIELD_SEP.split(line)
                if len(fields) not in (section + 1, section + 2):
                    raise DataFormatError(
                        path,
                        line_no,
                        f"a {section}-gram line needs {section + 1} or "
                        f"{section + 2} fields, got {len(fields)}",
                    )
                try:
                    prob = float(fields[0])
                    backoff = float(fields[section + 1]) if len(fields) == section + 2 else 0.0
                except ValueError:
                    raise DataFormatError(path, line_no, f"bad number in {line!r}") from None
                self.entries[tuple(fields[1 : section + 1])] = (prob, backoff)
                seen[section] += 1
            else:
                raise DataFormatError(path, line_no, "text before the \\data\\ header")
        if not declared:
            raise DataFormatError(path, None, "not an ARPA file (no \\data\\ header)")
        if seen != declared:
            raise DataFormatError(
                path, None, f"n-gram counts {seen} differ from the header's {declared}"
            )
        return max(declared)

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


LANGUAGE_MODELS: dict[str, type[LanguageModel]] = {"kenlm": KenLM, "arpa": ArpaLM}


def load_language_model(path: str | Path | None, kind: str = "kenlm") -> LanguageModel:
    """Load an LM by kind (``kenlm`` or ``arpa``); ``None`` gives :class:`NoLM`."""
    if path is None:
        return NoLM()
    try:
        cls = LANGUAGE_MODELS[kind]
    except KeyError:
        raise ConfigurationError(
            f"unknown language model kind {kind!r}; choose one of {sorted(LANGUAGE_MODELS)}"
        ) from None
    return cls(path)  # type: ignore[call-arg]
