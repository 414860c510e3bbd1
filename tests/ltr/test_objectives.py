"""Objectives of learning to rank: gradients against finite differences, hand-worked updates."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp

from service.errors import ConfigurationError
from service.ltr.objectives import (
    OBJECTIVES,
    GradientObjective,
    Hinge,
    ListMLE,
    OrdinalPerceptron,
    make_objective,
)


def toy_list(seed: int = 3) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(6, 4))
    rel = np.array([2, 1, 0, 0, 1, 0])
    w = rng.normal(size=4)
    return x, rel, w


def finite_difference(obj: GradientObjective, w, x, rel, unit, h=1e-6) -> np.ndarray:
    out = np.empty_like(w)
    for k in range(len(w)):
        e = np.zeros_like(w)
        e[k] = h
        out[k] = (obj.loss_grad(w + e, x, rel, unit)[0] - obj.loss_grad(w - e, x, rel, unit)[0]) / (
            2 * h
        )
    return out


def test_hinge_subgradient_equals_finite_differences() -> None:
    x, rel, w = toy_list()
    obj = Hinge(4)
    s = x @ w
    units = obj.units(rel)
    assert units == [0, 1, 4]  # relevant documents by level, then position
    violated = 0
    for i in units:
        margins = s - s[i] + (rel[i] - rel)
        lower = rel < rel[i]
        # away from kinks: no pair sits at the hinge's corner
        assert np.all(np.abs(margins[lower]) > 1e-3)
        violated += int(np.count_nonzero(margins[lower] > 0))
        loss, grad = obj.loss_grad(w, sp.csr_matrix(x), rel, i)
        np.testing.assert_allclose(grad, finite_difference(obj, w, x, rel, i), atol=1e-6)
        assert loss == pytest.approx(float(np.maximum(margins[lower], 0).sum()))
    assert violated > 0  # the check is not vacuous


def test_hinge_by_grades_is_the_sum_of_per_level_mean_hinges() -> None:
    # The slow definition: for each lower level, the mean of [s(d-) - s(d+) + Δ]+ over the
    # level's candidates; summed over the levels. Checked as a loss and by its gradient.
    x, rel, w = toy_list()
    obj = Hinge(4, pairs="grades")
    s = x @ w
    for i in obj.units(rel):
        expected = 0.0
        for level in sorted(set(rel.tolist())):
            if level < rel[i]:
                members = np.flatnonzero(rel == level)
                expected += float(np.mean(np.maximum(s[members] - s[i] + rel[i] - level, 0.0)))
        loss, grad = obj.loss_grad(w, sp.csr_matrix(x), rel, i)
        assert loss == pytest.approx(expected)
        np.testing.assert_allclose(grad, finite_difference(obj, w, x, rel, i), atol=1e-6)
    # one relevant document, three unjudged: grades averages what "all" sums
    x1 = np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 2.0], [0.0, 3.0]])
    rel1 = np.array([1, 0, 0, 0])
    all_loss, all_grad = Hinge(2).loss_grad(np.ones(2), x1, rel1, 0)
    g_loss, g_grad = Hinge(2, pairs="grades").loss_grad(np.ones(2), x1, rel1, 0)
    assert all_loss == 1 + 2 + 3 and g_loss == pytest.approx(2.0)
    np.testing.assert_allclose(g_grad, all_grad / 3)
    with pytest.raises(ConfigurationError, match="pairs"):
        Hinge(2, pairs="some")


def test_l2_pulls_towards_the_first_weights() -> None:
    # With no violated pair the hinge gradient is 0 and only the L2 term moves w: the
    # Adadelta step then follows l2·(w - w0), towards w0 — the weights of the first update.
    x = np.array([[5.0, 0.0], [0.0, 0.0]])
    rel = np.array([1, 0])
    w0 = np.array([1.0, 0.0])  # s(d+) = 5 > s(d-) + 1: no violated pair
    obj = Hinge(2, l2=0.5)
    w1, loss1 = obj.update(w0, sp.csr_matrix(x), rel)  # anchor = w0; nothing moves
    assert loss1 == 0.0 and np.array_equal(w1, w0)
    away = np.array([2.0, -2.0])  # still no violated pair
    w2, loss2 = obj.update(away, sp.csr_matrix(x), rel)
    assert loss2 == pytest.approx(0.5 * 0.5 * (1.0 + 4.0))  # ½·l2·‖w − w0‖²
    assert np.all(np.abs(w2 - w0) < np.abs(away - w0))  # each coordinate moved towards w0
    plain = Hinge(2)
    plain.update(w0, sp.csr_matrix(x), rel)
    w3, _ = plain.update(away, sp.csr_matrix(x), rel)
    assert np.array_equal(w3, away)  # without l2 nothing moves: the test can fail


def test_hinge_gradient_of_one_pair_is_the_feature_difference() -> None:
    x = np.array([[2.0, 0.0], [0.0, 1.0]])
    rel = np.array([1, 0])
    loss, grad = Hinge(2).loss_grad(np.zeros(2), x, rel, 0)
    assert loss == 1.0  # 0 - 0 + Δ with Δ = 1 - 0
    np.testing.assert_array_equal(grad, x[1] - x[0])


def test_hinge_adadelta_two_steps_by_hand() -> None:
    # d+ (level 1) with Φ = (2, 0), d− (level 0) with Φ = (0, 1), w0 = 0, ρ = 0.95, ε = 1e-6.
    # Step 1: s+ = s− = 0, loss 1 > 0, g = Φ(d−) − Φ(d+) = (−2, 1).
    #   E[g²] = 0.05·(4, 1) = (0.2, 0.05)
    #   Δw = −√(0 + 1e-6)/√(E[g²] + 1e-6) · g = (0.002/√0.200001, −0.001/√0.050001)
    #   E[Δw²] = 0.05·Δw²
    # Step 2: s+ = 2·Δw₁ ≈ 0.0089, s− = Δw₂ ≈ −0.0045: still violated, same g.
    #   E[g²] = 0.95·(0.2, 0.05) + 0.05·(4, 1) = (0.39, 0.0975)
    #   Δw' = −√(E[Δw²] + 1e-6)/√(E[g²] + 1e-6) · g
    x = np.array([[2.0, 0.0], [0.0, 1.0]])
    rel = np.array([1, 0])
    d1 = (0.002 / math.sqrt(0.200001), -0.001 / math.sqrt(0.050001))
    e1 = (0.05 * d1[0] ** 2, 0.05 * d1[1] ** 2)
    d2 = (
        2 * math.sqrt(e1[0] + 1e-6) / math.sqrt(0.39 + 1e-6),
        -1 * math.sqrt(e1[1] + 1e-6) / math.sqrt(0.0975 + 1e-6),
    )
    obj = Hinge(2)
    w1, loss1 = obj.update(np.zeros(2), sp.csr_matrix(x), rel)
    assert loss1 == 1.0
    np.testing.assert_allclose(w1, d1, rtol=1e-12)
    w2, loss2 = obj.update(w1, sp.csr_matrix(x), rel)
    assert loss2 == pytest.approx(1 + d1[1] - 2 * d1[0])
    np.testing.assert_allclose(w2, (d1[0] + d2[0], d1[1] + d2[1]), rtol=1e-12)


def test_frozen_weights_do_not_move() -> None:
    x, rel, w = toy_list()
    mask = np.array([True, False, True, False])
    for name in OBJECTIVES:
        obj = make_objective(name, 4, mask)
        w1, _ = obj.update(w.copy(), sp.csr_matrix(x), rel)
        out = obj.output(w1)
        assert out[1] == w[1] and out[3] == w[3], name
        assert not np.allclose(out[[0, 2]], w[[0, 2]]), name


@pytest.mark.parametrize("name", ["listnet", "listmle", "listmle-te"])
def test_listwise_gradients_equal_finite_differences(name: str) -> None:
    x, rel, w = toy_list(5)
    obj = make_objective(name, 4)
    assert isinstance(obj, GradientObjective)
    s = x @ w
    gaps = np.abs(s[:, None] - s[None, :])[~np.eye(len(s), dtype=bool)]
    assert gaps.min() > 1e-3  # the tie-break of ListMLE does not flip within ±h
    loss, grad = obj.loss_grad(w, sp.csr_matrix(x), rel, 0)
    assert loss > 0
    np.testing.assert_allclose(grad, finite_difference(obj, w, x, rel, 0), atol=1e-6)


def test_listnet_target_is_softmax_of_levels() -> None:
    obj = make_objective("listnet", 1)
    p = obj.target(np.array([2, 0, 0]))  # type: ignore[attr-defined]
    e2 = math.exp(2.0)
    np.testing.assert_allclose(p, [e2 / (e2 + 2), 1 / (e2 + 2), 1 / (e2 + 2)])


def test_listmle_factors_of_relevant_positions_only() -> None:
    # levels (1, 0, 1), scores (0, 5, 1): target order by level, ties by score: d3, d1, d2;
    # factors for the two relevant positions only:
    #   −s3 + log(e^s3 + e^s1 + e^s2)  and  −s1 + log(e^s1 + e^s2)
    s = np.array([0.0, 5.0, 1.0])
    rel = np.array([1, 0, 1])
    obj = ListMLE(1)
    np.testing.assert_array_equal(obj.target_order(s, rel), [2, 0, 1])
    loss, _ = obj.loss_grad_scores(s, rel, 0)
    expected = -1 + math.log(math.e**1 + 1 + math.e**5) + 0 + math.log(1 + math.e**5)
    assert loss == pytest.approx(expected)


def test_listmle_te_weights_factors_by_position_cost() -> None:
    # n = 3: c(1) = 3/6, c(2) = 2/6 (only two relevant positions)
    s = np.array([0.0, 5.0, 1.0])
    rel = np.array([1, 0, 1])
    obj = make_objective("listmle-te", 1)
    assert isinstance(obj, ListMLE)
    loss, _ = obj.loss_grad_scores(s, rel, 0)
    f1 = -1 + math.log(math.e**1 + 1 + math.e**5)
    f2 = 0 + math.log(1 + math.e**5)
    assert loss == pytest.approx(3 / 6 * f1 + 2 / 6 * f2)


def test_perceptron_ranks_share_ties() -> None:
    np.testing.assert_array_equal(OrdinalPerceptron.ranks(np.array([3, 1, 1, 0])), [1, 2, 2, 4])


def test_perceptron_uneven_margin_update_by_hand() -> None:
    # Levels (2, 1, 0) → ranks (1, 2, 3); g(1,2) = 1/2, g(1,3) = 2/3, g(2,3) = 1/6.
    # x1 = (1, 0), x2 = (0, 1), x3 = (1, 1); w0 = (1, 0): scores (1, 0, 1); τ = 1, η = 1.
    #   (1,2): (1 − 0)/(1/2) = 2  ≥ τ  → fine
    #   (1,3): (1 − 1)/(2/3) = 0  < τ  → u1 += 2/3, u3 −= 2/3
    #   (2,3): (0 − 1)/(1/6) = −6 < τ  → u2 += 1/6, u3 −= 1/6
    # u = (2/3, 1/6, −5/6); Σ u_j x_j = (2/3 − 5/6, 1/6 − 5/6) = (−1/6, −2/3)
    # w1 = (5/6, −2/3); the average after one query is w1.
    x = sp.csr_matrix(np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]))
    obj = OrdinalPerceptron(2, tau=1.0, rate=1.0, step="absolute")
    w1, violations = obj.update(np.array([1.0, 0.0]), x, np.array([2, 1, 0]))
    assert violations == 2
    np.testing.assert_allclose(w1, [5 / 6, -2 / 3])
    np.testing.assert_allclose(obj.output(w1), [5 / 6, -2 / 3])
    # A second query: levels (1, 0), x = ((0, 1), (0, 0)): scores (−2/3, 0), g = 1/2,
    # ratio −4/3 < 1 → u = (1/2, −1/2), w2 = w1 + (0, 1/2) = (5/6, −1/6);
    # averaged: (w1 + w2)/2 = (5/6, −5/12).
    w2, _ = obj.update(w1, sp.csr_matrix(np.array([[0.0, 1.0], [0.0, 0.0]])), np.array([1, 0]))
    np.testing.assert_allclose(w2, [5 / 6, -1 / 6])
    np.testing.assert_allclose(obj.output(w2), [5 / 6, -5 / 12])


def test_perceptron_relative_step_by_hand() -> None:
    # The first query above: d = Σ u_j x_j = (−1/6, −2/3) = (−1, −4)/6, ‖d‖ = √17/6.
    x = sp.csr_matrix(np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]))
    rel = np.array([2, 1, 0])
    # Both weights trainable: ‖w0‖ = ‖(3, 0)‖ = 3, so w1 = w0 + 0.1 · 3 · (−1, −4)/√17.
    obj = OrdinalPerceptron(2, tau=1.0, rate=0.1)
    w1, _ = obj.update(np.array([3.0, 0.0]), x, rel)
    np.testing.assert_allclose(w1, np.array([3.0, 0.0]) + 0.3 * np.array([-1.0, -4.0]) / 17**0.5)
    # Column 0 frozen: d = (0, −2/3) and the trainable norm ‖(0, 0)‖ = 0 counts as 1,
    # so w1 = (3, 0) + 0.1 · (0, −1). Scores (3, 0, 3) still violate (1,3) and (2,3).
    frozen = OrdinalPerceptron(2, np.array([False, True]), tau=1.0, rate=0.1)
    w1, violations = frozen.update(np.array([3.0, 0.0]), x, rel)
    assert violations == 2
    np.testing.assert_allclose(w1, [3.0, -0.1])


def test_perceptron_rejects_unknown_step() -> None:
    with pytest.raises(ConfigurationError, match="step"):
        OrdinalPerceptron(2, step="huge")


def test_unknown_objective_lists_the_valid_ones() -> None:
    with pytest.raises(ConfigurationError, match="hinge, listnet"):
        make_objective("svm", 3)
    with pytest.raises(ConfigurationError, match="bad options"):
        make_objective("hinge", 3, learning_rate=0.1)
