"""Semirings for dynamic programming over translation forests.

Hieber & Riezler 2015 (§3, "Dynamic Programming on Hypergraphs") compute the score of the best
translation with the inside algorithm under the tropical semiring ⟨R, max, +, −∞, 0⟩ (the paper
writes ``×`` for the log-domain product, i.e. ``+`` on scores); posteriors need the log semiring and
counting derivations needs the counting semiring (Goodman 1999). The algorithms in
:mod:`service.forest.inference` are written once against :class:`Semiring` and run under any of
these; a hyperedge weight ``W(e; w) = w · φ(e)`` (a log-domain score) enters a semiring through
:meth:`Semiring.from_weight`.

Pick a semiring by name with :func:`get_semiring`; ``SEMIRINGS`` is the registry.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Iterable
from typing import Any, ClassVar, Generic, TypeVar

from service.errors import ConfigurationError

T = TypeVar("T")


class Semiring(ABC, Generic[T]):
    """A commutative semiring ⟨K, ⊕, ⊗, 0̄, 1̄⟩ and the embedding of edge scores into K.

    Subclasses give ``zero``, ``one``, ``plus``, ``times`` and ``from_weight``. A semiring whose
    ``plus`` always returns one of its arguments is *selective* (max-plus): only those support
    Viterbi backpointers.
    """

    name: ClassVar[str]
    selective: ClassVar[bool] = False

    @property
    @abstractmethod
    def zero(self) -> T:
        """The identity of ⊕ and annihilator of ⊗."""

    @property
    @abstractmethod
    def one(self) -> T:
        """The identity of ⊗."""

    @abstractmethod
    def plus(self, a: T, b: T) -> T:
        """a ⊕ b: combines alternative derivations."""

    @abstractmethod
    def times(self, a: T, b: T) -> T:
        """a ⊗ b: combines the parts of one derivation."""

    @abstractmethod
    def from_weight(self, w: float) -> T:
        """The semiring value of a hyperedge with log-domain score ``w = w · φ(e)``."""

    def sum(self, values: Iterable[T]) -> T:
        """⊕ over ``values`` (``zero`` when empty)."""
        total = self.zero
        for v in values:
            total = self.plus(total, v)
        return total

    def product(self, values: Iterable[T]) -> T:
        """⊗ over ``values`` (``one`` when empty)."""
        total = self.one
        for v in values:
            total = self.times(total, v)
        return total

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class Tropical(Semiring[float]):
    """Max-plus ⟨R ∪ {−∞}, max, +, −∞, 0⟩ on log-domain scores: the Viterbi semiring."""

    name = "tropical"
    selective = True

    @property
    def zero(self) -> float:
        return -math.inf

    @property
    def one(self) -> float:
        return 0.0

    def plus(self, a: float, b: float) -> float:
        return a if a >= b else b

    def times(self, a: float, b: float) -> float:
        return a + b

    def from_weight(self, w: float) -> float:
        return w


def logaddexp(a: float, b: float) -> float:
    """log(exp(a) + exp(b)) without overflow; −∞ is the identity."""
    if a < b:
        a, b = b, a
    if b == -math.inf:
        return a
    return a + math.log1p(math.exp(b - a))


class Log(Semiring[float]):
    """⟨R ∪ {−∞}, logaddexp, +, −∞, 0⟩: sums of probabilities kept in the log domain."""

    name = "log"

    @property
    def zero(self) -> float:
        return -math.inf

    @property
    def one(self) -> float:
        return 0.0

    def plus(self, a: float, b: float) -> float:
        return logaddexp(a, b)

    def times(self, a: float, b: float) -> float:
        return a + b

    def from_weight(self, w: float) -> float:
        return w


class Real(Semiring[float]):
    """⟨R≥0, +, ×, 0, 1⟩: (unnormalised) probabilities; edge weight ``exp(w · φ(e))``."""

    name = "real"

    @property
    def zero(self) -> float:
        return 0.0

    @property
    def one(self) -> float:
        return 1.0

    def plus(self, a: float, b: float) -> float:
        return a + b

    def times(self, a: float, b: float) -> float:
        return a * b

    def from_weight(self, w: float) -> float:
        return math.exp(w)


class Counting(Semiring[int]):
    """⟨N, +, ×, 0, 1⟩ with every edge worth 1: the inside value is the number of derivations."""

    name = "counting"

    @property
    def zero(self) -> int:
        return 0

    @property
    def one(self) -> int:
        return 1

    def plus(self, a: int, b: int) -> int:
        return a + b

    def times(self, a: int, b: int) -> int:
        return a * b

    def from_weight(self, w: float) -> int:
        return 1


class Boolean(Semiring[bool]):
    """⟨{F, T}, ∨, ∧, F, T⟩: the inside value says whether a node has any derivation."""

    name = "boolean"
    selective = True

    @property
    def zero(self) -> bool:
        return False

    @property
    def one(self) -> bool:
        return True

    def plus(self, a: bool, b: bool) -> bool:
        return a or b

    def times(self, a: bool, b: bool) -> bool:
        return a and b

    def from_weight(self, w: float) -> bool:
        return True


TROPICAL = Tropical()
LOG = Log()
REAL = Real()
COUNTING = Counting()
BOOLEAN = Boolean()

SEMIRINGS: dict[str, Semiring[Any]] = {s.name: s for s in (TROPICAL, LOG, REAL, COUNTING, BOOLEAN)}


def get_semiring(name: str) -> Semiring[Any]:
    """The semiring registered under ``name``; an unknown name lists the valid ones."""
    try:
        return SEMIRINGS[name]
    except KeyError:
        valid = ", ".join(sorted(SEMIRINGS))
        raise ConfigurationError(f"unknown semiring {name!r}; choose one of: {valid}") from None
