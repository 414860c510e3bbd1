"""The listwise tuning optimisers (ListNet top-one, ListMLE, top-k, top-rank enhanced).

The fast padded implementations are checked against slow per-list references written from
the formulas of Chen et al. 2017, §3.1.2 and §4, and their gradients against finite
differences; AdaDelta and the position costs themselves are tested in tests/core/test_learning.py.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from service.errors import ConfigurationError
from service.mt.tuning.bleu import BleuStats
from service.mt.tuning.lists import KbestEntry, ListArrays
from service.mt.tuning.optimizers import (
    OPTIMIZERS,
    ListMLE,
    ListNet,
    ListwiseOptimizer,
    get_optimizer,
)


# --- slow references ------------------------------------------------------------------------
def ref_listnet(w: np.ndarray, lst: ListArrays, scale: float) -> float:
    n = len(lst)
    s = [float(lst.features[i] @ w) for i in range(n)]
    zy = sum(math.exp(scale * b) for b in lst.bleu)
    zs = sum(math.exp(v) for v in s)
    return -sum(
        math.exp(scale * lst.bleu[j]) / zy * math.log(math.exp(s[j]) / zs) for j in range(n)
    )


def ref_listmle(w: np.ndarray, lst: ListArrays, top_k: int | None, te: bool) -> float:
    n = len(lst)
    pi = sorted(range(n), key=lambda i: (-lst.bleu[i], i))  # the BLEU permutation
    s = [float(lst.features[i] @ w) for i in pi]
    m = n if top_k is None else min(top_k, n)
    loss = 0.0
    for j in range(m):  # 0-based j is position j + 1
        c = (n - j) / sum(range(1, n + 1)) if te else 1.0
        loss -= c * math.log(math.exp(s[j]) / sum(math.exp(s[t]) for t in range(j, n)))
    return loss


def random_lists(seed: int, lengths: list[int], d: int = 4) -> list[ListArrays]:
    rng = np.random.default_rng(seed)
    out = []
    for n in lengths:
        bleu = rng.integers(0, 6, size=n) / 10.0  # coarse values: ties occur
        out.append(ListArrays(rng.normal(size=(n, d)), bleu, np.zeros((n, 10), dtype=np.int64)))
    return out


OPTS = {
    "listnet": ListNet(bleu_scale=10.0),
    "listnet-100": ListNet(),
    "listmle": ListMLE(),
    "listmle-top3": ListMLE(top_k=3),
    "listmle-te": ListMLE(position_cost=True),
}


def reference(name: str, w: np.ndarray, lists: list[ListArrays]) -> float:
    if name.startswith("listnet"):
        scale = 10.0 if name == "listnet" else 100.0
        return sum(ref_listnet(w, lst, scale) for lst in lists)
    top_k = 3 if name == "listmle-top3" else None
    return sum(ref_listmle(w, lst, top_k, name == "listmle-te") for lst in lists)


@pytest.mark.parametrize("name", list(OPTS))
@pytest.mark.parametrize("seed", [0, 1])
def test_loss_equals_reference(name: str, seed: int) -> None:
    lists = random_lists(seed, [5, 1, 7, 3])  # unequal lengths: padding is exercised
    w = np.random.default_rng(seed + 10).normal(size=4)
    opt = OPTS[name]
    assert isinstance(opt, ListwiseOptimizer)
    loss, _ = opt.loss_grad(w, lists)
    assert loss == pytest.approx(reference(name, w, lists), rel=1e-10)


@pytest.mark.parametrize("name", list(OPTS))
@pytest.mark.parametrize("seed", [0, 1])
def test_gradient_equals_finite_differences(name: str, seed: int) -> None:
    lists = random_lists(seed, [6, 2, 4])
    w = np.random.default_rng(seed + 20).normal(size=4)
    opt = OPTS[name]
    assert isinstance(opt, ListwiseOptimizer)
    _, grad = opt.loss_grad(w, lists)
    h = 1e-6
    numeric = np.array(
        [
            (opt.loss_grad(w + h * e, lists)[0] - opt.loss_grad(w - h * e, lists)[0]) / (2 * h)
            for e in np.eye(4)
        ]
    )
    assert np.abs(grad).max() > 1e-3
    np.testing.assert_allclose(grad, numeric, rtol=1e-6, atol=1e-8)


def test_losses_by_hand() -> None:
    # two entries, equal model scores: ListMLE = log 2 (the second factor is log 1 = 0),
    # TE weights the first factor by c(1) = 2/3, top-1 keeps it whole; ListNet with equal
    # BLEU has a uniform target, so the cross entropy is log 2.
    lst = [ListArrays(np.array([[1.0], [1.0]]), np.array([0.4, 0.2]), np.zeros((2, 10), np.int64))]
    w = np.array([0.3])
    assert ListMLE().loss_grad(w, lst)[0] == pytest.approx(math.log(2))
    assert ListMLE(position_cost=True).loss_grad(w, lst)[0] == pytest.approx(2 / 3 * math.log(2))
    assert ListMLE(top_k=1).loss_grad(w, lst)[0] == pytest.approx(math.log(2))
    tied = [ListArrays(lst[0].features, np.array([0.3, 0.3]), lst[0].stats)]
    assert ListNet().loss_grad(w, tied)[0] == pytest.approx(math.log(2))
    # the worse-by-BLEU entry scored higher: loss log(1 + e^{s2 - s1}) = log(1 + e^2)
    wrong = [ListArrays(np.array([[0.0], [2.0]]), np.array([0.4, 0.2]), lst[0].stats)]
    assert ListMLE().loss_grad(np.array([1.0]), wrong)[0] == pytest.approx(math.log(1 + math.e**2))


def entry(tokens: str, feats: dict[str, float], bleu: float) -> KbestEntry:
    return KbestEntry(tuple(tokens.split()), feats, BleuStats.zero(), bleu)


EPOCHS = 200  # AdaDelta starts with steps of about √ε = 1e-3 and speeds up


@pytest.mark.parametrize("name", ["listnet", "listmle", "listmle-top5", "listmle-te"])
def test_optimize_learns_to_rank(name: str) -> None:
    # Every list ranks "good" > "mid" > "bad" by BLEU; feature f1 tracks BLEU, f2 opposes it.
    lists = []
    for i in range(12):
        lists.append(
            [
                entry("bad", {"f1": 0.0 + i % 3, "f2": 2.0}, 0.1),
                entry("mid", {"f1": 1.0 + i % 3, "f2": 1.0}, 0.3),
                entry("good", {"f1": 2.0 + i % 3, "f2": 0.0}, 0.5),
            ]
        )
    opt = get_optimizer(name, epochs=EPOCHS)
    w = opt.optimize({"f1": -1.0, "f2": 1.0}, lists, np.random.default_rng(0))
    for lst in lists:
        scores = [sum(w[k] * v for k, v in e.features.items()) for e in lst]
        assert scores[2] > scores[1] > scores[0]


def test_registry() -> None:
    assert set(OPTIMIZERS) == {"mert", "pro", "listnet", "listmle", "listmle-top5", "listmle-te"}
    top5 = get_optimizer("listmle-top5")
    assert isinstance(top5, ListMLE) and top5.top_k == 5 and not top5.position_cost
    te = get_optimizer("listmle-te", epochs=3)
    assert isinstance(te, ListMLE) and te.position_cost and te.epochs == 3
    assert te.signature()["method"] == "listmle-te"
    with pytest.raises(ConfigurationError, match="mert, pro, listnet"):
        get_optimizer("mira")
    with pytest.raises(ConfigurationError, match="bad parameters"):
        get_optimizer("listnet", nonsense=1)
    with pytest.raises(ConfigurationError, match="epochs"):
        get_optimizer("listmle", epochs=0)
