"""Paired randomization and bootstrap tests."""

from __future__ import annotations

import random

import numpy as np
import pytest

from service.errors import InvalidInputError
from service.evaluation import bootstrap_test, detectable_difference, randomization_test


def _scores(seed: int, shift: float) -> tuple[dict[str, float], dict[str, float]]:
    rng = random.Random(seed)
    base = {f"q{i}": rng.random() for i in range(50)}
    better = {q: min(1.0, v + shift + rng.gauss(0, 0.02)) for q, v in base.items()}
    return better, base


@pytest.mark.parametrize("test", [randomization_test, bootstrap_test])
def test_clearly_better_run_is_significant(test) -> None:  # type: ignore[no-untyped-def]
    better, base = _scores(0, 0.1)
    assert test(better, base, 10_000, 7) < 0.01


@pytest.mark.parametrize("test", [randomization_test, bootstrap_test])
def test_identical_runs_give_p_one(test) -> None:  # type: ignore[no-untyped-def]
    _, base = _scores(1, 0.0)
    assert test(base, dict(base), 10_000, 7) == 1.0


@pytest.mark.parametrize("test", [randomization_test, bootstrap_test])
def test_same_seed_same_p_value(test) -> None:  # type: ignore[no-untyped-def]
    a, b = _scores(2, 0.005)
    first = test(a, b, 10_000, 42)
    assert first == test(a, b, 10_000, 42)
    assert 0.0 < first <= 1.0


def test_noise_is_not_significant() -> None:
    rng = random.Random(3)
    a = {f"q{i}": rng.random() for i in range(40)}
    b = {q: v + rng.choice([-0.01, 0.01]) for q, v in a.items()}
    assert randomization_test(a, b, 5000, 0) > 0.05


def test_randomization_matches_exact_enumeration() -> None:
    # with 8 queries all 256 sign assignments can be enumerated exactly
    import itertools

    a = {f"q{i}": v for i, v in enumerate([0.9, 0.8, 0.75, 0.6, 0.55, 0.7, 0.4, 0.95])}
    b = {f"q{i}": v for i, v in enumerate([0.7, 0.85, 0.5, 0.5, 0.5, 0.6, 0.45, 0.8])}
    d = [a[k] - b[k] for k in sorted(a)]
    obs = abs(sum(d) / len(d))
    exact = sum(
        abs(sum(s * x for s, x in zip(signs, d, strict=True)) / len(d)) >= obs - 1e-12
        for signs in itertools.product([-1, 1], repeat=len(d))
    ) / 2 ** len(d)
    assert randomization_test(a, b, 50_000, 0) == pytest.approx(exact, abs=0.01)


def test_mismatched_queries_are_an_error() -> None:
    with pytest.raises(InvalidInputError, match="same queries"):
        randomization_test({"q1": 1.0}, {"q2": 1.0})


def test_detectable_difference_hand_worked() -> None:
    # differences .1, -.1, .3, .1: sd (n-1) = sqrt(.08 / 3), se = sd / 2;
    # z(.975) + z(.8) = 1.959964 + 0.841621
    a = {"q1": 0.5, "q2": 0.3, "q3": 0.9, "q4": 0.2}
    b = {"q1": 0.4, "q2": 0.4, "q3": 0.6, "q4": 0.1}
    expected = (1.959964 + 0.841621) * (0.08 / 3) ** 0.5 / 2
    assert detectable_difference(a, b) == pytest.approx(expected, abs=1e-6)
    assert detectable_difference(a, b, power=0.5) == pytest.approx(
        1.959964 * (0.08 / 3) ** 0.5 / 2, abs=1e-6
    )


def test_an_effect_of_the_detectable_size_is_found_with_the_stated_power() -> None:
    rng = np.random.default_rng(3)
    n, sd = 100, 0.1
    base = {f"q{i}": 0.0 for i in range(n)}
    probe = {q: float(x) for q, x in zip(base, rng.normal(0.0, sd, n), strict=True)}
    mde = detectable_difference(probe, base)
    rejected = 0
    trials = 300
    for t in range(trials):
        diffs = rng.normal(mde, sd, n)
        run = {q: float(x) for q, x in zip(base, diffs, strict=True)}
        rejected += randomization_test(run, base, 1000, t) < 0.05
    assert 0.68 <= rejected / trials <= 0.92  # power 0.8 (the probe's sd is itself estimated)


def test_detectable_difference_rejects_bad_input() -> None:
    with pytest.raises(InvalidInputError, match="at least two"):
        detectable_difference({"q": 1.0}, {"q": 0.0})
    with pytest.raises(InvalidInputError, match="alpha and power"):
        detectable_difference({"q": 1.0, "r": 0.0}, {"q": 0.0, "r": 0.0}, power=1.0)
