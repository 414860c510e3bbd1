"""Language models behind one stateful protocol, for the decoder's LM feature.

The decoder scores target words left to right through hashable LM states, so that hypotheses
with equal states recombine (Chiang 2007 §5.3 and §5.3.2 "cube pruning": +LM items are split by
their LM boundary words; Hieber & Riezler 2015, §3, use the same forest with a 4-gram model). The
protocol, :class:`LanguageModel`:

* ``begin_state()``: the context ``<s>`` at a sentence start; ``null_state()``: no context at
  all (for scoring a fragment whose left context is not known yet, e.g. the first words of a
  partial hypothesis in cube pruning);
* ``score(state, word) -> (logprob, next_state)``: natural-log ``p(word | state)``;
* ``end_score(state)``: natural-log ``p(</s> | state)``;
* ``is_oov(word)``, ``order``;
* helpers built on ``score``: ``score_words`` (a word sequence from a state), ``right_state``
  (the state that only the last ``order - 1`` words determine) and ``sentence_score``.

ARPA files and KenLM store log10 probabilities; :meth:`LanguageModel.score` converts them to
the natural log in this one place (:data:`~service.mt.lm.symbols.LN10`), so every feature value
is on one scale.

Implementations: :class:`service.mt.lm.KenLM` (the real one, over the ``kenlm`` module),
:class:`service.mt.lm.ArpaLM` (a slow pure-Python model over the ARPA reader with the textbook
backoff computation, the reference that the tests compare KenLM against) and :class:`NoLM`
(always 0, one state; the decoder's ``--no-lm`` mode).

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

:class:`~service.mt.lm.ArpaLM` answers them from the ARPA text (the reference); KenLM's states
are opaque, so :class:`~service.mt.lm.KenLM` answers through :class:`service.mt.lm.LmTable`
(the same ARPA file as arrays); :class:`NoLM` has no structure.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Hashable, Iterable, Sequence
from typing import Protocol, runtime_checkable

from service.mt.lm.symbols import BOS, EOS, LN10

State = Hashable


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
        """Natural-log p(word | context words): the ``ContextScore`` of ``service.mt.lm.states``.

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
