"""Paired significance tests over per-query scores.

* :func:`randomization_test`: the paired (Fisher) randomization test recommended by Smucker,
  Allan & Carterette (CIKM 2007): under the null hypothesis the two systems' labels are
  exchangeable per query, so each per-query difference keeps or flips its sign with
  probability 1/2. The two-sided p-value is the share of permutations whose mean difference
  is at least as extreme as the observed one, counting the observed labelling itself:
  ``(1 + #{|mean*| >= |mean|}) / (1 + permutations)``.
* :func:`bootstrap_test`: the paired bootstrap (Efron & Tibshirani; as in Sakai 2006): resample
  queries with replacement; the p-value is the share of resamples whose mean difference,
  shifted to the null (minus the observed mean), is at least as extreme as the observed one.

Both are seeded and deterministic: the same inputs and seed give the same p-value.

* :func:`detectable_difference`: the smallest mean difference a paired test on these queries
  detects with the given power (normal approximation, ``(z_{1-α/2} + z_{power}) · sd / √n``
  with ``sd`` the standard deviation of the per-query differences): how large an effect the
  query set can show at all, to read a non-significant result by.
"""

from __future__ import annotations

from collections.abc import Mapping
from statistics import NormalDist

import numpy as np

from service.errors import InvalidInputError

_CHUNK = 1000
_EPS = 1e-12


def _paired(a: Mapping[str, float], b: Mapping[str, float]) -> np.ndarray:
    if set(a) != set(b):
        only = sorted(set(a) ^ set(b))[:5]
        raise InvalidInputError(f"paired test needs the same queries on both sides; differ: {only}")
    if not a:
        raise InvalidInputError("paired test needs at least one query")
    keys = sorted(a)
    return np.array([a[k] - b[k] for k in keys], dtype=np.float64)


def randomization_test(
    a: Mapping[str, float], b: Mapping[str, float], permutations: int = 10_000, seed: int = 0
) -> float:
    """Two-sided p-value that systems ``a`` and ``b`` (per-query scores) differ."""
    diffs = _paired(a, b)
    observed = abs(diffs.mean())
    rng = np.random.default_rng(seed)
    extreme = 0
    done = 0
    while done < permutations:
        m = min(_CHUNK, permutations - done)
        signs = rng.integers(0, 2, size=(m, diffs.size), dtype=np.int8) * 2 - 1
        means = np.abs(signs @ diffs) / diffs.size
        extreme += int(np.count_nonzero(means >= observed - _EPS))
        done += m
    return (1 + extreme) / (1 + permutations)


def bootstrap_test(
    a: Mapping[str, float], b: Mapping[str, float], samples: int = 10_000, seed: int = 0
) -> float:
    """Two-sided paired-bootstrap p-value that systems ``a`` and ``b`` differ."""
    diffs = _paired(a, b)
    observed = diffs.mean()
    rng = np.random.default_rng(seed)
    extreme = 0
    done = 0
    while done < samples:
        m = min(_CHUNK, samples - done)
        idx = rng.integers(0, diffs.size, size=(m, diffs.size))
        means = diffs[idx].mean(axis=1)
        extreme += int(np.count_nonzero(np.abs(means - observed) >= abs(observed) - _EPS))
        done += m
    return (1 + extreme) / (1 + samples)


def detectable_difference(
    a: Mapping[str, float], b: Mapping[str, float], alpha: float = 0.05, power: float = 0.8
) -> float:
    """The minimum mean difference detectable at two-sided level ``alpha`` with ``power``, for
    queries whose paired differences vary as those of ``a`` and ``b`` do (sample standard
    deviation; needs two queries or more)."""
    if not (0.0 < alpha < 1.0 and 0.0 < power < 1.0):
        raise InvalidInputError(f"alpha and power must lie in (0, 1), got {alpha}, {power}")
    diffs = _paired(a, b)
    if diffs.size < 2:
        raise InvalidInputError("a detectable difference needs at least two queries")
    z = NormalDist()
    k = z.inv_cdf(1.0 - alpha / 2.0) + z.inv_cdf(power)
    return float(k * diffs.std(ddof=1) / np.sqrt(diffs.size))
