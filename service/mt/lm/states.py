"""Language-model states of +LM items (Chiang 2007, §5.3.2; Huang & Chiang 2007), minimised as
KenLM's chart states are (Heafield 2011, §4.1; Heafield, Koehn & Lavie 2011, "Left language
model state for syntactic machine translation").

An n-gram LM cannot score a partial translation completely: its first words lack their left
context until the item is combined with what precedes it. A +LM item therefore keeps a
:class:`Boundary` and the score of every word whose probability no longer depends on what
precedes it. Combining items under a rule (:func:`combine`) scores exactly the words that gain
their context, so the LM scores on the edges of a derivation add up to the LM score of its
whole string; the goal edge (:func:`finish`) adds ``<s>`` and ``</s>``. Two items with equal
boundaries are indistinguishable to every future LM query and recombine (their boundary is the
state key), so the smaller the boundaries, the more hypotheses recombine and the further a
fixed pop limit reaches.

The boundary of an item with words ``w1 .. wm`` (``h = order - 1``):

* **left state** ``w1 .. wj``: the longest prefix (at most ``h`` words) each of whose prefixes
  ``w1 .. wi`` is a proper suffix of some listed n-gram (``left_extends``). Only these words'
  probabilities can change with the words before the item, so only they wait for their context;
  their scores with the history inside the item form the heuristic :func:`estimate`. The item
  is **full** when it has words after its left state: those are scored inside it. (Where
  ``w1 .. wj+1`` is no listed n-gram's suffix, no longer context matches anything ending in
  ``wj+1``, and every n-gram containing ``w1 .. wj+1`` is unlisted too, so the later words'
  scores are final; only ``wj+1`` still owes the backoffs of the contexts longer than ``j``
  that end in ``wj``, which :func:`charge` adds when the context is known.)
* **right state**: the last ``h`` words, minus the oldest word as long as that context is
  unlisted, or listed with backoff 0 and the context of no longer n-gram (``right_minimal``):
  then ``p(w | c1 .. ck) = p(w | c2 .. ck)`` for every ``w``. It is computed word by word
  (dropping a word can never be undone by a later word).

Both rules are exact: every derivation's LM features still add up to its sentence score
(the tests check it against :func:`sentence_logprob` on random derivations and LMs). They
need the model's structure (:class:`service.mt.lm.NgramStructure`: which n-grams are listed,
extend to the right or left, and their backoffs); :data:`NO_STRUCTURE` (no minimisation) keeps
the first and last ``h`` words, the textbook boundary, and works for any ``logp``.

:func:`combine` is the reference. The decoder's hot loop uses :func:`combine_ids`, the same
computation over interned contexts (:class:`ContextTable`: every context of at most ``h`` words
gets an int id, and each (context id, word) step is memoised with its log-probability and the
id of the next, minimised context; left-state steps and charges are memoised too), so that
scoring a word is one dict lookup. It also returns the :func:`estimate` of the new boundary,
whose words are scored on the way. The tests check it against :func:`combine` and
:func:`estimate` on random inputs, and the compiled kernel (:mod:`service.mt.decoder.kernel`)
repeats the same arithmetic in the same order.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Protocol

from service.mt.lm.model import NgramStructure
from service.mt.lm.symbols import BOS, EOS

# log p(word | context): natural log; ``context`` holds at most n-1 preceding words and may
# start with "<s>".
ContextScore = Callable[[tuple[str, ...], str], float]


class _NoStructure:
    """No minimisation: every context is kept, every prefix extends (the textbook boundary)."""

    def right_minimal(self, context: tuple[str, ...]) -> tuple[str, ...]:
        return context

    def left_extends(self, words: tuple[str, ...]) -> bool:
        return True

    def backoff(self, context: tuple[str, ...]) -> float:
        return 0.0


NO_STRUCTURE: NgramStructure = _NoStructure()


@dataclass(frozen=True, slots=True)
class Boundary:
    """What the LM needs to know about a partial translation."""

    left: tuple[str, ...]  # the left state: at most n-1 words, not yet scored
    right: tuple[str, ...]  # the right state: the context for what follows
    full: bool  # words follow the left state (scored inside the item)


def _history(ctx: Sequence[str], h: int) -> tuple[str, ...]:
    return tuple(ctx[-h:]) if h > 0 else ()


Piece = str | Boundary  # a target terminal, or the boundary of a tail item


@dataclass(frozen=True, slots=True)
class Combination:
    boundary: Boundary
    logprob: float  # natural-log LM score of the words newly given their context
    scored: int  # how many words were scored


def charge(context: tuple[str, ...], j: int, structure: NgramStructure) -> float:
    """The backoffs a full item's first word after its ``j``-word left state still owes once
    ``context`` (ending in that left state) is known: those of its suffixes longer than ``j``,
    shortest first."""
    total = 0.0
    for length in range(j + 1, len(context) + 1):
        total += structure.backoff(context[-length:])
    return total


class _Scan:
    """The running state of :func:`combine` and :func:`finish` (the reference)."""

    def __init__(
        self, order: int, logp: ContextScore, structure: NgramStructure, ctx: tuple[str, ...]
    ) -> None:
        self.h = order - 1
        self.logp = logp
        self.structure = structure
        self.ctx = ctx
        self.left: list[str] = []
        self.full = False
        self.total = 0.0
        self.scored = 0
        self.est = 0.0

    def word(self, word: str, track_left: bool = True) -> None:
        lp = self.logp(self.ctx, word)
        left = self.left
        if (
            track_left
            and not self.full
            and len(left) < self.h
            and self.structure.left_extends((*left, word))
        ):
            left.append(word)
            self.est += lp
        else:
            self.full = True
            self.total += lp
            self.scored += 1
        self.ctx = self.structure.right_minimal(_history((*self.ctx, word), self.h))

    def item(self, boundary: Boundary, track_left: bool = True) -> None:
        for word in boundary.left:
            self.word(word, track_left)
        if boundary.full:
            self.full = True
            self.total += charge(self.ctx, len(boundary.left), self.structure)
            self.ctx = boundary.right


def combine(
    pieces: Sequence[Piece],
    order: int,
    logp: ContextScore,
    structure: NgramStructure = NO_STRUCTURE,
) -> Combination:
    """Concatenate terminals and tail items; score the words that gain their context."""
    scan = _Scan(order, logp, structure, ())
    for piece in pieces:
        if isinstance(piece, str):
            scan.word(piece)
        else:
            scan.item(piece)
    boundary = Boundary(tuple(scan.left), scan.ctx, scan.full)
    return Combination(boundary, scan.total, scan.scored)


def finish(
    item: Boundary, order: int, logp: ContextScore, structure: NgramStructure = NO_STRUCTURE
) -> float:
    """LM score of ``<s> item </s>`` not yet counted inside the item."""
    scan = _Scan(order, logp, structure, _history((BOS,), order - 1))
    scan.item(item, track_left=False)
    return scan.total + logp(scan.ctx, EOS)


def estimate(item: Boundary, logp: ContextScore, structure: NgramStructure = NO_STRUCTURE) -> float:
    """Heuristic score of the left state: each word with the history inside the item."""
    total = 0.0
    ctx: tuple[str, ...] = ()
    h = len(item.left)
    for word in item.left:
        total += logp(ctx, word)
        ctx = structure.right_minimal(_history((*ctx, word), h))
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

    Context id 0 is the empty context; left states are interned in the same table. ``step(cid,
    word)`` gives ``(logp(context, word), id of the minimised context after word)``; the steps
    of context ``cid`` are cached in ``succ[cid]``, so a caller in a hot loop can look them up
    directly and call :meth:`step` only on a miss. :meth:`left_step` and :meth:`charge` memoise
    the left-state extension and the backoff charge. Scores come from ``logp``, or, if ``lm``
    is given, from ``lm.state_logp(lm.context_state(context), word)`` with the state kept per
    context id (the same value as ``LanguageModel.logp``).
    """

    __slots__ = ("charges", "h", "ids", "lm", "logp", "lsucc", "states", "structure", "succ",
                 "words")  # fmt: skip

    def __init__(
        self,
        order: int,
        logp: ContextScore,
        lm: StateScorer | None = None,
        structure: NgramStructure = NO_STRUCTURE,
    ) -> None:
        self.h = max(order - 1, 0)
        self.logp = logp
        self.lm = lm
        self.structure = structure
        self.words: list[tuple[str, ...]] = [()]
        self.ids: dict[tuple[str, ...], int] = {(): 0}
        self.succ: list[dict[str, tuple[float, int]]] = [{}]
        self.lsucc: list[dict[str, int]] = [{}]
        self.states: list[Hashable | None] = [None]
        self.charges: dict[tuple[int, int], float] = {}

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
            self.lsucc.append({})
            self.states.append(None)
        return cid

    def step(self, cid: int, word: str) -> tuple[float, int]:
        """log p(word | context ``cid``) and the id of the minimised context after ``word``."""
        found = self.succ[cid].get(word)
        if found is None:
            ctx = self.words[cid]
            nxt = self.structure.right_minimal(_history((*ctx, word), self.h))
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

    def left_step(self, lid: int, word: str) -> int:
        """The id of left state ``lid`` extended by ``word``, or -1 if the left state ends
        (``lid`` has ``order - 1`` words, or the longer prefix extends no listed n-gram)."""
        found = self.lsucc[lid].get(word)
        if found is None:
            left = (*self.words[lid], word)
            ok = len(left) <= self.h and self.structure.left_extends(left)
            found = self.intern(left) if ok else -1
            self.lsucc[lid][word] = found
        return found

    def charge(self, cid: int, j: int) -> float:
        """:func:`charge` of context ``cid`` after a ``j``-word left state."""
        key = (cid, j)
        found = self.charges.get(key)
        if found is None:
            found = self.charges[key] = charge(self.words[cid], j, self.structure)
        return found


# A tail item for :func:`combine_ids`: (its left state, the context id of its left state, the
# context id of its right state, whether it is full, the sum of its left words' scores with
# the history inside the item, i.e. its unweighted :func:`estimate`).
IdTail = tuple[tuple[str, ...], int, int, bool, float]
EMPTY_TAIL: IdTail = ((), 0, 0, False, 0.0)


def id_tail(boundary: Boundary, table: ContextTable) -> IdTail:
    """The :data:`IdTail` of ``boundary`` (reference; the decoder builds it from ids)."""
    est = 0.0
    cid = 0
    for word in boundary.left:
        lp, cid = table.step(cid, word)
        est += lp
    return (
        boundary.left,
        table.intern(boundary.left),
        table.intern(boundary.right),
        boundary.full,
        est,
    )


def combine_ids(
    target: Sequence[str | int], tails: Sequence[IdTail], table: ContextTable
) -> tuple[float, float, int, int, bool]:
    """:func:`combine` over interned contexts, with the new boundary's :func:`estimate`.

    ``target`` holds terminals and tail indices (``int`` ``k`` stands for ``tails[k]``).
    Returns ``(logprob, estimate, left id, right id, full)``: the boundary is
    ``Boundary(table.words[left id], table.words[right id], full)``.
    """
    h = table.h
    succ = table.succ
    step = table.step
    left_step = table.left_step
    cid = 0
    left_id = 0
    nleft = 0
    full = False
    total = 0.0
    est = 0.0
    for sym in target:
        if type(sym) is str:
            words: Sequence[str] = (sym,)
            tail = None
        else:
            tail = tails[sym]  # type: ignore[index]
            if nleft == 0 and not full:
                # nothing before it: the new item's state is the tail's own
                words, left_id, cid, full, est = tail
                nleft = len(words)
                continue
            words = tail[0]
        for word in words:
            found = succ[cid].get(word)
            if found is None:
                found = step(cid, word)
            if not full and nleft < h:
                nl = left_step(left_id, word)
                if nl >= 0:
                    left_id = nl
                    nleft += 1
                    est += found[0]
                    cid = found[1]
                    continue
            full = True
            total += found[0]
            cid = found[1]
        if tail is not None and tail[3]:
            full = True
            total += table.charge(cid, len(words))
            cid = tail[2]
    return total, est, left_id, cid, full


def finish_ids(tail: IdTail, table: ContextTable, bos: int) -> float:
    """:func:`finish` over interned contexts; ``bos`` is the id of ``(<s>,)`` (or of ``()``
    for a unigram model)."""
    words, _, right, full, _ = tail
    cid = bos
    total = 0.0
    for word in words:
        lp, cid = table.step(cid, word)
        total += lp
    if full:
        total += table.charge(cid, len(words))
        cid = right
    return total + table.step(cid, EOS)[0]
