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
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

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
