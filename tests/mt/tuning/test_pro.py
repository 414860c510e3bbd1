"""PRO: pair sampling (threshold, top Ξ) and the classifier on a separable toy set."""

from __future__ import annotations

import numpy as np
import pytest

from service.mt.tuning.lists import ListArrays
from service.mt.tuning.optimizers import PRO


def test_only_pairs_beyond_the_threshold_are_kept() -> None:
    # BLEU differences among the first three are ≤ 0.02; only pairs with the fourth count.
    feats = np.eye(4)
    lst = ListArrays(feats, np.array([0.30, 0.31, 0.32, 0.60]), np.zeros((4, 10), np.int64))
    x, y = PRO(samples=200, keep=50).sample_pairs([lst], np.random.default_rng(0))
    assert x.shape[0] > 0 and x.shape[0] % 2 == 0
    for row, label in zip(x, y, strict=True):
        # row = φ_i − φ_j with one of i, j the fourth candidate, labelled by its side
        assert abs(row[3]) == 1.0
        assert label == row[3]


def test_keep_limits_pairs_per_list() -> None:
    rng = np.random.default_rng(1)
    lists = [
        ListArrays(rng.normal(size=(20, 3)), rng.uniform(0, 1, 20), np.zeros((20, 10), np.int64))
        for _ in range(3)
    ]
    x, y = PRO(keep=7).sample_pairs(lists, np.random.default_rng(0))
    assert x.shape == (3 * 7 * 2, 3)  # Ξ pairs per list, each in both orientations
    np.testing.assert_array_equal(x[:7], -x[7:14])
    np.testing.assert_array_equal(y[:7], -y[7:14])


def test_recovers_the_separating_direction() -> None:
    rng = np.random.default_rng(3)
    u = np.array([1.0, -2.0, 0.5])
    u /= np.linalg.norm(u)
    lists = []
    for _ in range(40):
        x = rng.normal(size=(25, 3)) * 2.0
        bleu = 0.5 + 0.4 * np.tanh(x @ u / 2.0)  # BLEU increases with u·φ: pairs separable by u
        lists.append(ListArrays(x, bleu, np.zeros((25, 10), np.int64)))
    pro = PRO(l2=1e-4, max_iter=500)
    w = pro.optimize_arrays(np.array([-1.0, 1.0, 0.0]), lists, np.random.default_rng(0))
    cosine = float(w @ u / np.linalg.norm(w))
    assert cosine > 0.99
    x, y = pro.sample_pairs(lists, np.random.default_rng(5))
    assert np.all(np.sign(x @ w) == y)  # every sampled pair is ranked right


def test_no_informative_pair_keeps_the_weights() -> None:
    lst = ListArrays(np.eye(3), np.array([0.3, 0.31, 0.32]), np.zeros((3, 10), np.int64))
    w0 = np.array([0.5, -1.0, 2.0])
    assert PRO().optimize_arrays(w0, [lst], np.random.default_rng(0)).tolist() == pytest.approx(
        w0.tolist()
    )
