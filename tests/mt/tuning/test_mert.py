"""MERT: exact upper envelopes and the line search against brute force on a fine grid."""

from __future__ import annotations

import numpy as np
import pytest

from service.core.csr import ptr_from_counts
from service.mt.tuning.bleu import bleu_from_matrix, bleu_stats
from service.mt.tuning.lists import ListArrays
from service.mt.tuning.optimizers import MERT, MertProblem, upper_envelopes


def envelope_value(
    a: np.ndarray,
    b: np.ndarray,
    seg_line: np.ndarray,
    seg_start: np.ndarray,
    lo: int,
    count: int,
    gamma: float,
) -> float:
    """The envelope's value at ``gamma`` from its segments (slow)."""
    k = max(i for i in range(count) if seg_start[lo + i] < gamma or i == 0)
    j = seg_line[lo + k]
    return float(a[j] + gamma * b[j])


@pytest.mark.parametrize("compiled", [False, True])
@pytest.mark.parametrize("seed", range(5))
def test_envelope_equals_brute_force(seed: int, compiled: bool) -> None:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 12, size=6)
    offsets = ptr_from_counts(lengths)
    n = int(offsets[-1])
    # small integers: parallel lines, identical lines and three lines through one point occur
    a = rng.integers(-4, 5, size=n).astype(np.float64)
    b = rng.integers(-3, 4, size=n).astype(np.float64)
    seg_line, seg_start, seg_count = upper_envelopes(a, b, offsets, compiled=compiled)
    for s in range(len(lengths)):
        lo, hi = offsets[s], offsets[s + 1]
        assert seg_start[lo] == -np.inf
        starts = seg_start[lo + 1 : lo + seg_count[s]]
        assert np.all(np.diff(starts) > 0)  # segments are non-empty and ordered
        for gamma in np.linspace(-12.3, 12.7, 301):
            brute = np.max(a[lo:hi] + gamma * b[lo:hi])
            value = envelope_value(a, b, seg_line, seg_start, lo, seg_count[s], gamma)
            assert value == pytest.approx(brute, abs=1e-12)


def test_compiled_envelope_equals_python() -> None:
    rng = np.random.default_rng(7)
    offsets = np.array([0, 30, 31, 80], dtype=np.int64)
    a, b = rng.normal(size=80), rng.normal(size=80)
    for x, y in zip(
        upper_envelopes(a, b, offsets, compiled=False),
        upper_envelopes(a, b, offsets, compiled=True),
        strict=True,
    ):
        np.testing.assert_array_equal(x, y)


# 3 sentences × 4 candidates × 2 features; candidate strings give real BLEU statistics.
REFS = ["the house is very small", "he reads a good book today", "we go home now"]
CANDS = [
    ["the house is small", "a house is very small", "the house is very small", "house small"],
    ["he reads a book", "he reads a good book today", "today he reads book", "he is reading"],
    ["we go home now", "we are going home", "now we go home", "we go now"],
]
FEATS = np.array(
    [
        [[2, 1], [1, 3], [-1, 2], [3, -2]],
        [[1, 1], [-2, 3], [2, -1], [0, 0]],
        [[-1, 2], [2, 0], [1, 1], [3, -3]],
    ],
    dtype=np.float64,
)


def toy_lists() -> list[ListArrays]:
    out = []
    for s in range(3):
        stats = np.array([bleu_stats(c.split(), REFS[s].split()).vector() for c in CANDS[s]])
        out.append(ListArrays(FEATS[s], np.zeros(4), stats))
    return out


def bleu_at(lists: list[ListArrays], points: np.ndarray) -> np.ndarray:
    """Corpus BLEU of the 1-best (first on ties) at every weight vector (row) of ``points``."""
    total = np.zeros((points.shape[0], lists[0].stats.shape[1]), dtype=np.int64)
    for lst in lists:
        total += lst.stats[np.argmax(points @ lst.features.T, axis=1)]
    return bleu_from_matrix(total)


def grid_bleu(
    lists: list[ListArrays], w: np.ndarray, r: np.ndarray, grid: np.ndarray
) -> np.ndarray:
    return bleu_at(lists, w[None, :] + grid[:, None] * r[None, :])


def test_line_search_equals_grid_search() -> None:
    problem = MertProblem(toy_lists())
    w = np.array([1.0, 0.5])
    r = np.array([-0.3, 1.0])
    gamma, value = problem.line_search(w, r)
    grid = np.arange(-60.0, 60.0, 0.001)  # every breakpoint |Δa / Δb| lies inside
    brute = grid_bleu(toy_lists(), w, r, grid)
    assert len(set(np.round(brute, 12))) > 2  # BLEU changes along the line
    assert brute.max() > problem.bleu(w)  # moving helps: the test can fail
    assert value == pytest.approx(brute.max(), abs=1e-12)
    assert problem.bleu(w + gamma * r) == pytest.approx(value, abs=1e-12)


@pytest.mark.parametrize("seed", range(4))
def test_line_search_random_directions(seed: int) -> None:
    problem = MertProblem(toy_lists())
    rng = np.random.default_rng(seed)
    w, r = rng.normal(size=2), rng.normal(size=2)
    gamma, value = problem.line_search(w, r)
    # breakpoints are where two candidates' lines cross; the grid must straddle all of them
    a, b = FEATS @ w, FEATS @ r
    cross = [
        (a[s, i] - a[s, j]) / (b[s, j] - b[s, i])
        for s in range(3)
        for i in range(4)
        for j in range(4)
        if b[s, j] != b[s, i]
    ]
    span = max(abs(x) for x in cross) + 1.0
    grid = np.linspace(-span, span, 200_001)
    brute = grid_bleu(toy_lists(), w, r, grid).max()
    assert value == pytest.approx(brute, abs=1e-12)
    assert problem.bleu(w + gamma * r) == pytest.approx(value, abs=1e-12)
    assert value >= problem.bleu(w) - 1e-12


def test_mert_finds_the_best_direction() -> None:
    lists = toy_lists()
    problem = MertProblem(lists)
    # BLEU of the 1-best depends only on the direction of w: brute force over angles
    angles = np.linspace(0, 2 * np.pi, 20_000, endpoint=False)
    best = bleu_at(lists, np.stack([np.cos(angles), np.sin(angles)], axis=1)).max()
    w0 = np.array([-1.0, -1.0])
    assert problem.bleu(w0) < best
    w = MERT(restarts=3, random_directions=2).optimize_arrays(w0, lists, np.random.default_rng(0))
    assert problem.bleu(w) == pytest.approx(best, abs=1e-12)
    assert np.abs(w).sum() == pytest.approx(2.0)  # rescaled to the input's L1 norm
