"""Language-model boundary states of +LM items (Chiang 2007, §5.3.2; Huang & Chiang 2007).

An n-gram LM cannot score a partial translation completely: its first ``n-1`` words lack
their left context until the item is combined with what precedes it. A +LM item therefore
keeps a :class:`Boundary` — its first and last ``n-1`` words and its length — and the score of
every word that already has its full ``n-1``-word history inside the item. Combining items
under a rule (:func:`combine`) scores exactly the words that gain their full history, so the LM
scores on the edges of a derivation add up to the LM score of its whole string; the goal edge
(:func:`finish`) adds ``<s>`` and ``</s>``. Two items with equal boundaries are
indistinguishable to every future LM query and can be recombined (their boundary is the state
key). :func:`estimate` is the usual heuristic for the unscored prefix (its words scored with
the history available inside the item), used to order and prune items, never in the forest.

:func:`combine` is the reference. The decoder's hot loop uses :func:`combine_ids`, the same
computation over interned contexts (:class:`ContextTable`: every context of at most ``n-1``
words gets an int id, and each (context id, word) step is memoised with its log-probability and
the id of the next context), so that scoring a word is one dict lookup; it also returns the
:func:`estimate` of the new boundary, whose words are scored on the way. The tests check it
against :func:`combine` and :func:`estimate` on random inputs.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Protocol

BOS = "<s>"
EOS = "</s>"

# log p(word | context): natural log; ``context`` holds at most n-1 preceding words and may
# start with "<s>".
ContextScore = Callable[[tuple[str, ...], str], float]


@dataclass(frozen=True, slots=True)
class Boundary:
    """What the LM needs to know about a partial translation."""

    left: tuple[str, ...]  # first min(n-1, length) words: not yet scored
    right: tuple[str, ...]  # last min(n-1, length) words: context for what follows
    length: int


def _history(ctx: list[str], h: int) -> tuple[str, ...]:
    return tuple(ctx[-h:]) if h > 0 else ()


Piece = str | Boundary  # a target terminal, or the boundary of a tail item


@dataclass(frozen=True, slots=True)
class Combination:
    boundary: Boundary
    logprob: float  # natural-log LM score of the words newly given their full history
    scored: int  # how many words were scored


def combine(pieces: Sequence[Piece], order: int, logp: ContextScore) -> Combination:
    """Concatenate terminals and tail items; score the words that gain a full history."""
    h = order - 1
    ctx: list[str] = []
    left: list[str] = []
    pos = 0
    total = 0.0
    scored = 0
    for piece in pieces:
        words = (piece,) if isinstance(piece, str) else piece.left
        for word in words:
            if pos >= h:
                total += logp(tuple(ctx[-h:]) if h > 0 else (), word)
                scored += 1
            ctx.append(word)
            if len(left) < h:
                left.append(word)
            pos += 1
        if not isinstance(piece, str):
            hidden = piece.length - len(piece.left)
            if hidden > 0:
                # the rest of the item was scored inside it; its last words are the context
                ctx = list(piece.right)
                pos += hidden
    right = _history(ctx, h)
    return Combination(Boundary(tuple(left), right, pos), total, scored)


def finish(item: Boundary, order: int, logp: ContextScore) -> float:
    """LM score of ``<s> item </s>`` not yet counted inside the item."""
    h = order - 1
    ctx: list[str] = [BOS]
    total = 0.0
    for word in item.left:
        total += logp(_history(ctx, h), word)
        ctx.append(word)
    if item.length > len(item.left):
        ctx = list(item.right)
    return total + logp(_history(ctx, h), EOS)


def estimate(item: Boundary, logp: ContextScore) -> float:
    """Heuristic score of the unscored prefix: each word with the history inside the item."""
    total = 0.0
    for k, word in enumerate(item.left):
        total += logp(item.left[:k], word)
    return total


def sentence_logprob(words: Sequence[str], order: int, logp: ContextScore) -> float:
    """Reference: the LM score of ``<s> words </s>`` left to right."""
    h = order - 1
    ctx: list[str] = [BOS]
    total = 0.0
    for word in [*words, EOS]:
        total += logp(_history(ctx, h), word)
        ctx.append(word)
    return total


class StateScorer(Protocol):
    """An LM that scores through states (``service.mt.lm.LanguageModel`` is one)."""

    def context_state(self, context: Sequence[str]) -> Hashable: ...

    def state_logp(self, state: Hashable, word: str) -> float: ...


class ContextTable:
    """Interned LM contexts (tuples of at most ``order - 1`` words) and memoised steps.

    Context id 0 is the empty context. ``step(cid, word)`` gives ``(logp(context, word), id of
    the context after word)``; the steps of context ``cid`` are cached in ``succ[cid]``, so a
    caller in a hot loop can look them up directly and call :meth:`step` only on a miss.
    Scores come from ``logp``, or, if ``lm`` is given, from
    ``lm.state_logp(lm.context_state(context), word)`` with the state kept per context id
    (the same value as ``LanguageModel.logp``, without rebuilding the state on every miss).
    """

    __slots__ = ("h", "ids", "lm", "logp", "states", "succ", "words")

    def __init__(self, order: int, logp: ContextScore, lm: StateScorer | None = None) -> None:
        self.h = max(order - 1, 0)
        self.logp = logp
        self.lm = lm
        self.words: list[tuple[str, ...]] = [()]
        self.ids: dict[tuple[str, ...], int] = {(): 0}
        self.succ: list[dict[str, tuple[float, int]]] = [{}]
        self.states: list[Hashable | None] = [None]

    def intern(self, context: tuple[str, ...]) -> int:
        """The id of ``context`` (at most ``order - 1`` words)."""
        cid = self.ids.get(context)
        if cid is None:
            if len(context) > self.h:
                raise ValueError(f"context {context!r} is longer than {self.h} words")
            cid = len(self.words)
            self.ids[context] = cid
            self.words.append(context)
            self.succ.append({})
            self.states.append(None)
        return cid

    def step(self, cid: int, word: str) -> tuple[float, int]:
        """log p(word | context ``cid``) and the id of the context after ``word``."""
        found = self.succ[cid].get(word)
        if found is None:
            ctx = self.words[cid]
            nxt = (*ctx, word)[-self.h :] if self.h else ()
            lm = self.lm
            if lm is None:
                lp = self.logp(ctx, word)
            else:
                state = self.states[cid]
                if state is None:
                    state = self.states[cid] = lm.context_state(ctx)
                lp = lm.state_logp(state, word)
            found = (lp, self.intern(nxt))
            self.succ[cid][word] = found
        return found


# A tail item for :func:`combine_ids`: (its left words, the context id of its left words, the
# context id of its right words, how many words it has beyond its left words, the sum of its
# left words' scores with the history inside the item, i.e. its unweighted :func:`estimate`).
IdTail = tuple[tuple[str, ...], int, int, int, float]


def id_tail(boundary: Boundary, table: ContextTable) -> IdTail:
    """The :data:`IdTail` of ``boundary`` (reference; the decoder builds it from ids)."""
    left = table.intern(boundary.left)
    est = 0.0
    cid = 0
    for word in boundary.left:
        lp, cid = table.step(cid, word)
        est += lp
    hidden = boundary.length - len(boundary.left)
    return boundary.left, left, table.intern(boundary.right), hidden, est


def combine_ids(
    target: Sequence[str | int], tails: Sequence[IdTail], table: ContextTable
) -> tuple[float, float, int, int, int]:
    """:func:`combine` over interned contexts, with the new boundary's :func:`estimate`.

    ``target`` holds terminals and tail indices (``int`` ``k`` stands for ``tails[k]``).
    Returns ``(logprob, estimate, left id, right id, length)``: the boundary is
    ``Boundary(table.words[left id], table.words[right id], length)``.
    """
    h = table.h
    succ = table.succ
    step = table.step
    cid = 0
    left_cid = 0
    pos = 0
    total = 0.0
    est = 0.0
    for sym in target:
        if type(sym) is str:
            found = succ[cid].get(sym)
            if found is None:
                found = step(cid, sym)
            if pos >= h:
                total += found[0]
            else:
                est += found[0]
            cid = found[1]
            pos += 1
            if pos <= h:
                left_cid = cid
        else:
            left, left_id, right, hidden, left_est = tails[sym]  # type: ignore[index]
            if pos == 0:
                # from the empty context the left words get exactly the item's own history
                est = left_est
                cid = left_cid = left_id
                pos = len(left)
                if hidden > 0:
                    cid = right
                    pos += hidden
                continue
            for word in left:
                found = succ[cid].get(word)
                if found is None:
                    found = step(cid, word)
                if pos >= h:
                    total += found[0]
                else:
                    est += found[0]
                cid = found[1]
                pos += 1
                if pos <= h:
                    left_cid = cid
            if hidden > 0:
                cid = right
                pos += hidden
    return total, est, left_cid, cid, pos
