"""Semiring axioms on sample values, the edge-weight embedding and the registry."""

from __future__ import annotations

import itertools
import math
from typing import Any

import pytest

from service.errors import ConfigurationError
from service.forest.semiring import (
    BOOLEAN,
    COUNTING,
    LOG,
    REAL,
    SEMIRINGS,
    TROPICAL,
    Semiring,
    get_semiring,
    logaddexp,
)

SAMPLES: dict[str, list[Any]] = {
    "tropical": [-math.inf, -3.5, 0.0, 1.25, 7.0],
    "log": [-math.inf, -2.0, 0.0, 0.5, 3.0],
    "real": [0.0, 0.5, 1.0, 2.0, 3.25],
    "counting": [0, 1, 2, 5],
    "boolean": [False, True],
}


def same(x: Any, y: Any) -> bool:
    if isinstance(x, float) or isinstance(y, float):
        return math.isclose(x, y, rel_tol=1e-12, abs_tol=1e-12)
    return bool(x == y)


def axiom_violations(s: Semiring[Any], values: list[Any]) -> list[str]:
    """Every commutative-semiring axiom that fails on ``values`` (empty: all hold)."""
    bad: list[str] = []
    zero, one = s.zero, s.one
    for a in values:
        if not same(s.plus(a, zero), a) or not same(s.plus(zero, a), a):
            bad.append(f"0 is not the identity of plus at {a}")
        if not same(s.times(a, one), a) or not same(s.times(one, a), a):
            bad.append(f"1 is not the identity of times at {a}")
        if not same(s.times(a, zero), zero) or not same(s.times(zero, a), zero):
            bad.append(f"0 does not annihilate {a}")
    for a, b in itertools.product(values, repeat=2):
        if not same(s.plus(a, b), s.plus(b, a)):
            bad.append(f"plus is not commutative at {a}, {b}")
        if not same(s.times(a, b), s.times(b, a)):
            bad.append(f"times is not commutative at {a}, {b}")
    for a, b, c in itertools.product(values, repeat=3):
        if not same(s.plus(s.plus(a, b), c), s.plus(a, s.plus(b, c))):
            bad.append(f"plus is not associative at {a}, {b}, {c}")
        if not same(s.times(s.times(a, b), c), s.times(a, s.times(b, c))):
            bad.append(f"times is not associative at {a}, {b}, {c}")
        if not same(s.times(a, s.plus(b, c)), s.plus(s.times(a, b), s.times(a, c))):
            bad.append(f"times does not distribute over plus at {a}, {b}, {c}")
    return bad


@pytest.mark.parametrize("name", sorted(SEMIRINGS))
def test_axioms_hold_on_samples(name: str) -> None:
    assert axiom_violations(SEMIRINGS[name], SAMPLES[name]) == []


def test_every_registered_semiring_has_samples() -> None:
    assert set(SAMPLES) == set(SEMIRINGS)


class _MinusPlus(Semiring[float]):
    """Not a semiring: ``plus`` is subtraction."""

    name = "broken"

    @property
    def zero(self) -> float:
        return 0.0

    @property
    def one(self) -> float:
        return 1.0

    def plus(self, a: float, b: float) -> float:
        return a - b

    def times(self, a: float, b: float) -> float:
        return a * b

    def from_weight(self, w: float) -> float:
        return w


def test_the_axiom_check_catches_a_non_semiring() -> None:
    bad = axiom_violations(_MinusPlus(), [0.0, 1.0, 2.0])
    assert any("commutative" in b for b in bad)
    assert any("associative" in b for b in bad)


@pytest.mark.parametrize(
    ("semiring", "w", "expected"),
    [
        (TROPICAL, -1.5, -1.5),
        (LOG, -1.5, -1.5),
        (REAL, math.log(0.25), 0.25),
        (COUNTING, -1.5, 1),
        (BOOLEAN, -1.5, True),
    ],
)
def test_from_weight(semiring: Semiring[Any], w: float, expected: Any) -> None:
    assert same(semiring.from_weight(w), expected)


@pytest.mark.parametrize(
    ("semiring", "values", "total"),
    [
        (TROPICAL, [-1.0, 2.0, 0.5], 2.0),
        (LOG, [math.log(1.0), math.log(2.0), math.log(3.0)], math.log(6.0)),
        (REAL, [1.0, 2.0, 3.0], 6.0),
        (COUNTING, [1, 2, 3], 6),
    ],
)
def test_sum_of_values(semiring: Semiring[Any], values: list[Any], total: Any) -> None:
    assert same(semiring.sum(values), total)


def test_empty_sum_and_product_are_the_identities() -> None:
    assert TROPICAL.sum([]) == -math.inf
    assert TROPICAL.product([]) == 0.0
    assert COUNTING.sum([]) == 0
    assert COUNTING.product([]) == 1


def test_logaddexp_is_stable_for_large_and_infinite_arguments() -> None:
    assert logaddexp(1000.0, 1000.0) == pytest.approx(1000.0 + math.log(2.0))
    assert logaddexp(-math.inf, -math.inf) == -math.inf
    assert logaddexp(-math.inf, 3.0) == 3.0
    assert logaddexp(-1000.0, 0.0) == 0.0


def test_get_semiring_by_name() -> None:
    assert get_semiring("tropical") is TROPICAL
    assert get_semiring("log") is LOG


def test_unknown_semiring_lists_the_valid_names() -> None:
    with pytest.raises(ConfigurationError, match="boolean, counting, log, real, tropical"):
        get_semiring("maxplus")
