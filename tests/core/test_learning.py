"""AdaDelta and the position costs of the listwise losses (service.core.learning).

AdaDelta is checked against a two-step update worked by hand (Zeiler 2012, Algorithm 1), the
position costs against Chen et al. 2017, §4; the losses themselves are checked against
references through the tuning optimisers (tests/mt/tuning/test_listwise.py) and the
learning-to-rank objectives (tests/ltr/test_objectives.py).
"""

from __future__ import annotations

import numpy as np

from service.core.learning import AdaDelta, position_costs


def test_position_costs() -> None:
    c = position_costs(np.array([4, 2]), 5, None, True)
    np.testing.assert_allclose(c[0], [0.4, 0.3, 0.2, 0.1, 0.0])
    np.testing.assert_allclose(c[1], [2 / 3, 1 / 3, 0, 0, 0])
    np.testing.assert_allclose(position_costs(np.array([4]), 4, 2, False)[0], [1, 1, 0, 0])


def test_adadelta_two_steps_by_hand() -> None:
    ada = AdaDelta(2, rho=0.95, eps=1e-6)
    x = np.array([1.0, -1.0])
    # step 1, g = (2, 0): E[g²] = 0.05·4 = 0.2; Δx = −√1e-6 / √0.200001 · 2 = −0.0044721248;
    # E[Δx²] = 0.05 · 0.0044721248² = 1.0e-6 (coordinate 2: g = 0 gives Δx = 0)
    x = ada.step(x, np.array([2.0, 0.0]))
    np.testing.assert_allclose(x, [1.0 - 0.0044721248, -1.0], rtol=0, atol=1e-10)
    # step 2, g = (−1, 1): E[g²] = 0.95·0.2 + 0.05·1 = 0.24, and (0 + 0.05) = 0.05;
    # Δx₁ = √(0.99999e-6 + 1e-6) / √0.240001 = 0.0028867417 (moves up);
    # Δx₂ = −√1e-6 / √0.050001 = −0.0044721 (moves down)
    x = ada.step(x, np.array([-1.0, 1.0]))
    np.testing.assert_allclose(
        x, [1.0 - 0.0044721248 + 0.0028867417, -1.0 - 0.0044720913], rtol=0, atol=1e-9
    )
