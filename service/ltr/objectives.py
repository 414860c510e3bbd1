"""Learning-to-rank objectives over one query's candidate list: losses and update rules.

A training query is a list of candidate documents with relevance levels ``rl`` (qrels level,
0 for unjudged) and their best-derivation feature vectors ``X`` (rows ``Φ(h*_d)``, computed
once per query and epoch, :mod:`service.ltr.forest`); a document's score is ``s = X · w``.
Every objective is an :class:`Objective` with ``update(w, X, rl) -> w``; they are registered by
name in :data:`OBJECTIVES` (:func:`make_objective`). Weights outside the ``trainable`` mask
never move (``freeze_smt``).

Gradient objectives (:class:`GradientObjective`) take Adadelta steps (Zeiler 2012; ρ = 0.95,
ε = 1e-6, as in Hieber & Riezler 2015, §4; :class:`service.core.learning.AdaDelta`) on
``∂L/∂w = Xᵀ ∂L/∂s``; its running averages persist across queries and epochs (one optimiser per
shard). ``l2 > 0`` adds ``l2 · ½‖w − w₀‖²`` to every step's loss, ``w₀`` the weights the
objective first saw (the run's start): regularisation towards the starting weights.

* ``hinge`` — Hieber & Riezler 2015, §4: pairs (d+, d−) with rl(d+) > rl(d−), margin Δ = rl(d+) −
  rl(d−), loss ``[s(d−) − s(d+) + Δ]+``, whose subgradient is ``Φ(d−) − Φ(d+)`` for each violated
  pair (0 at the kink); ``pairs="grades"`` averages the pairs within each lower level. Cyclic
  order: query by query, relevant document by relevant document (by decreasing level, then
  document number), one Adadelta step per relevant document over all
  its pairs with less relevant candidates.
* ``listnet`` — top-one ListNet (Chen et al. 2017, §3.1): the target distribution is ``softmax(rl)``
  over the candidates (Cao et al. 2007's exponential of the relevance level), so equally relevant
  documents share the target mass equally and ties need no breaking; one step per query.
* ``listmle`` — ListMLE (Chen et al. 2017, eq. 5): negative log Plackett–Luce likelihood of the
  target order, which sorts by decreasing ``rl`` and breaks ties by the current score (decreasing),
  then by document number — the most likely order consistent with the judgments. Only the factors of
  the relevant positions are kept (top-k ListMLE with k = the number of relevant candidates):
  the order among the unjudged (level 0) documents carries no information, and fitting it
  would only reward the tie-break. One step per query.
* ``listmle-te`` — top-rank enhanced ListMLE (Chen et al. 2017, §4): the same factors weighted by
  the position cost ``c(j) = (n − j + 1) / Σ_{t=1..n} t`` with ``n`` the list length.
* ``perceptron`` — ordinal regression with uneven margins (Shen & Joshi 2004, §4, Algorithm 2 with
  eqs. 3–5): ranks ``y`` from the levels (``y = 1 + #{candidates with a higher level}``, so equal
  levels share a rank), ``g(p, q) = 1/p − 1/q``; for each pair with ``g(y_j, y_l) > ε`` (j better)
  and ``(s_j − s_l) / g < τ``: ``u_j += g``, ``u_l −= g``; after all pairs of the query
  (sentence-level update) ``w ← w + η Σ_j u_j x_j``. The output is the averaged perceptron: the mean
  of ``w`` after every query so far. No Adadelta. Shen & Joshi 2004 learn every weight, so the scale
  of ``w`` is free and a fixed η only sets it; here the SMT weights may be frozen, and then a fixed
  η on raw BM25 feature differences (tens per pair, summed over ~100 candidates) moves ``v`` by
  orders of magnitude in one query. ``step="relative"`` (the default) therefore makes η relative:
  ``w ← w + η ‖w_trainable‖ d / ‖d‖`` with ``d = mask ⊙ Σ_j u_j x_j`` — the direction of
  Algorithm 2's update, a length of η times the current trainable weights' norm (1 if they
  are all 0). ``step="absolute"`` is Algorithm 2's update as written.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from service.core.learning import AdaDelta, listmle_loss_grad, listnet_loss_grad, position_costs
from service.errors import ConfigurationError

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
BoolArray = NDArray[np.bool_]


def _scores(x: Any, w: FloatArray) -> FloatArray:
    out: FloatArray = np.asarray(x @ w, dtype=np.float64).reshape(-1)
    return out


def _grad(x: Any, coef: FloatArray) -> FloatArray:
    """``Xᵀ coef``: the gradient in ``w`` of a loss whose gradient in the scores is ``coef``."""
    out: FloatArray = np.asarray(x.T @ coef, dtype=np.float64).reshape(-1)
    return out


class Objective(ABC):
    """The update rule of one learning-to-rank method (one instance per shard: it may keep
    state across queries and epochs)."""

    name: ClassVar[str] = ""

    def __init__(self, size: int, trainable: BoolArray | None = None) -> None:
        self.size = size
        self.mask = (
            np.ones(size, dtype=np.float64) if trainable is None else trainable.astype(np.float64)
        )
        if self.mask.shape != (size,):
            raise ConfigurationError(f"trainable mask has shape {self.mask.shape}, need {size}")

    @abstractmethod
    def update(self, w: FloatArray, x: Any, rel: IntArray) -> tuple[FloatArray, float]:
        """New weights after one query (``x``: ``[n × size]`` features, ``rel``: levels), and
        the query's loss before the update."""

    def output(self, w: FloatArray) -> FloatArray:
        """The weights to evaluate and keep (the averaged ones for the perceptron)."""
        return w

    def params(self) -> dict[str, Any]:
        return {}


class GradientObjective(Objective):
    """A loss minimised with Adadelta steps; subclasses define the units of a query (one
    step each) and the loss and its gradient in the scores for a unit."""

    def __init__(
        self,
        size: int,
        trainable: BoolArray | None = None,
        rho: float = 0.95,
        eps: float = 1e-6,
        l2: float = 0.0,
    ) -> None:
        super().__init__(size, trainable)
        if not (0.0 < rho < 1.0) or eps <= 0.0:
            raise ConfigurationError(f"{self.name}: need 0 < rho < 1 and eps > 0")
        if l2 < 0.0:
            raise ConfigurationError(f"{self.name}: need l2 >= 0, got {l2}")
        self.rho = rho
        self.eps = eps
        self.l2 = l2
        self.anchor: FloatArray | None = None  # the weights of the first update: the start
        self.ada = AdaDelta(size, rho, eps)

    def params(self) -> dict[str, Any]:
        out: dict[str, Any] = {"rho": self.rho, "eps": self.eps}
        if self.l2:
            out["l2"] = self.l2
        return out

    @abstractmethod
    def units(self, rel: IntArray) -> Sequence[int]:
        """The update units of a query, in order (one Adadelta step each)."""

    @abstractmethod
    def loss_grad_scores(
        self, scores: FloatArray, rel: IntArray, unit: int
    ) -> tuple[float, FloatArray]:
        """The unit's loss and its (sub)gradient in the scores."""

    def loss_grad(
        self, w: FloatArray, x: Any, rel: IntArray, unit: int
    ) -> tuple[float, FloatArray]:
        """The unit's loss at ``w`` and its (sub)gradient in ``w`` (before masking)."""
        loss, coef = self.loss_grad_scores(_scores(x, w), rel, unit)
        return loss, _grad(x, coef)

    def update(self, w: FloatArray, x: Any, rel: IntArray) -> tuple[FloatArray, float]:
        if self.anchor is None:
            self.anchor = np.array(w, dtype=np.float64)
        total = 0.0
        for unit in self.units(rel):
            loss, grad = self.loss_grad(w, x, rel, unit)
            if self.l2:
                diff = w - self.anchor
                loss += 0.5 * self.l2 * float(diff @ diff)
                grad = grad + self.l2 * diff
            total += loss
            w = self.ada.step(w, grad * self.mask)
        return w, total


class Hinge(GradientObjective):
    """Pairwise margin-rescaled hinge loss (Hieber & Riezler 2015, §4).

    ``pairs="all"`` sums over every violated pair, as the paper does; with ~100 unjudged
    candidates per query the level-0 pairs then make up most of the gradient.
    ``pairs="grades"`` weighs each less relevant level equally: the hinge losses of ``d+``
    against the candidates of one lower level are averaged over that level, and the levels
    summed (3 vs 2, 3 vs 1 and 3 vs 0 count once each).

    Either may add ``l2`` · ½‖w − w₀‖² (regularisation towards the starting weights ``w₀``,
    which the per-term IR weights start at 0), as every :class:`GradientObjective` can."""

    name = "hinge"

    def __init__(
        self, size: int, trainable: BoolArray | None = None, pairs: str = "all", **kwargs: Any
    ) -> None:
        super().__init__(size, trainable, **kwargs)
        if pairs not in ("all", "grades"):
            raise ConfigurationError(f"hinge: pairs must be 'all' or 'grades', got {pairs!r}")
        self.pairs = pairs

    def params(self) -> dict[str, Any]:
        out = super().params()
        if self.pairs != "all":
            out["pairs"] = self.pairs
        return out

    def units(self, rel: IntArray) -> Sequence[int]:
        """Relevant documents that have a less relevant candidate, by decreasing level."""
        lowest = int(rel.min()) if len(rel) else 0
        order = np.lexsort((np.arange(len(rel)), -rel))
        return [int(i) for i in order if rel[i] > 0 and rel[i] > lowest]

    def loss_grad_scores(
        self, scores: FloatArray, rel: IntArray, unit: int
    ) -> tuple[float, FloatArray]:
        i = unit
        margin = scores - scores[i] + (rel[i] - rel)
        violated = (rel < rel[i]) & (margin > 0)
        coef = violated.astype(np.float64)
        if self.pairs == "grades":
            _, inverse, counts = np.unique(rel, return_inverse=True, return_counts=True)
            coef /= counts[inverse]  # each level's pairs averaged over the level's candidates
        coef[i] = -float(coef.sum())
        return float((margin * coef)[violated].sum()), coef


class ListNet(GradientObjective):
    """Top-one ListNet with target ``softmax(scale · rl)``."""

    name = "listnet"

    def __init__(self, size: int, trainable: BoolArray | None = None, scale: float = 1.0,
                 **kwargs: Any) -> None:  # fmt: skip
        super().__init__(size, trainable, **kwargs)
        if not scale > 0:
            raise ConfigurationError(f"listnet: scale must be > 0, got {scale}")
        self.scale = scale

    def params(self) -> dict[str, Any]:
        return {**super().params(), "scale": self.scale}

    def units(self, rel: IntArray) -> Sequence[int]:
        return [0]

    def target(self, rel: IntArray) -> FloatArray:
        z = self.scale * (rel - rel.max())
        p = np.exp(z.astype(np.float64))
        out: FloatArray = p / p.sum()
        return out

    def loss_grad_scores(
        self, scores: FloatArray, rel: IntArray, unit: int
    ) -> tuple[float, FloatArray]:
        mask = np.ones((1, len(scores)), dtype=np.bool_)
        loss, grad = listnet_loss_grad(scores[None, :], self.target(rel)[None, :], mask)
        return loss, grad[0]


class ListMLE(GradientObjective):
    """ListMLE over the relevant positions of the target order (see the module docstring)."""

    name = "listmle"
    position_cost: ClassVar[bool] = False

    def units(self, rel: IntArray) -> Sequence[int]:
        return [0]

    def target_order(self, scores: FloatArray, rel: IntArray) -> IntArray:
        """Candidates by decreasing level, ties by decreasing score, then index."""
        out: IntArray = np.lexsort((np.arange(len(rel)), -scores, -rel)).astype(np.int64)
        return out

    def loss_grad_scores(
        self, scores: FloatArray, rel: IntArray, unit: int
    ) -> tuple[float, FloatArray]:
        n = len(scores)
        order = self.target_order(scores, rel)
        k = int(np.count_nonzero(rel > 0))
        cost = position_costs(np.array([n]), n, k, self.position_cost)
        mask = np.ones((1, n), dtype=np.bool_)
        loss, g = listmle_loss_grad(scores[order][None, :], cost, mask)
        coef = np.empty(n, dtype=np.float64)
        coef[order] = g[0]
        return loss, coef


class ListMLETE(ListMLE):
    """Top-rank enhanced ListMLE (Chen et al. 2017, §4)."""

    name = "listmle-te"
    position_cost = True


class OrdinalPerceptron(Objective):
    """Perceptron ordinal regression with uneven margins, sentence-level updates, averaged
    (Shen & Joshi 2004, Algorithm 2 with eqs. 3–5)."""

    name = "perceptron"

    def __init__(
        self,
        size: int,
        trainable: BoolArray | None = None,
        tau: float = 1.0,
        rate: float = 0.01,
        epsilon: float = 0.0,
        step: str = "relative",
    ) -> None:
        super().__init__(size, trainable)
        if not tau > 0 or not rate > 0 or epsilon < 0:
            raise ConfigurationError("perceptron: need tau > 0, rate > 0 and epsilon >= 0")
        if step not in ("relative", "absolute"):
            raise ConfigurationError(f"perceptron: step must be relative or absolute, got {step!r}")
        self.tau = tau
        self.rate = rate
        self.epsilon = epsilon
        self.step = step
        self.total = np.zeros(size, dtype=np.float64)
        self.count = 0

    def params(self) -> dict[str, Any]:
        return {"tau": self.tau, "rate": self.rate, "epsilon": self.epsilon, "step": self.step}

    def direction(self, w: FloatArray, d: FloatArray) -> FloatArray:
        """The update added to ``w`` for Algorithm 2's masked ``d = Σ_j u_j x_j``."""
        if self.step == "absolute":
            return self.rate * d
        norm_d = float(np.linalg.norm(d))
        if norm_d == 0.0:
            return np.zeros_like(d)
        scale = float(np.linalg.norm(w * self.mask)) or 1.0
        out: FloatArray = (self.rate * scale / norm_d) * d
        return out

    @staticmethod
    def ranks(rel: IntArray) -> IntArray:
        """``1 + #{candidates with a higher level}`` (equal levels share a rank)."""
        out: IntArray = 1 + (rel[None, :] > rel[:, None]).sum(axis=1).astype(np.int64)
        return out

    def coefficients(self, scores: FloatArray, rel: IntArray) -> tuple[FloatArray, float]:
        """``u`` of Algorithm 2 for one query, and the number of violated pairs."""
        y = self.ranks(rel).astype(np.float64)
        g = 1.0 / y[:, None] - 1.0 / y[None, :]  # g[j, l] = g(y_j, y_l) > 0 iff j ranks higher
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = (scores[:, None] - scores[None, :]) / g
        violated = (g > self.epsilon) & (ratio < self.tau)
        gv = np.where(violated, g, 0.0)
        u = gv.sum(axis=1) - gv.sum(axis=0)
        return u, float(violated.sum())

    def update(self, w: FloatArray, x: Any, rel: IntArray) -> tuple[FloatArray, float]:
        u, violations = self.coefficients(_scores(x, w), rel)
        if violations:
            w = w + self.direction(w, _grad(x, u) * self.mask)
        self.total += w
        self.count += 1
        return w, violations

    def output(self, w: FloatArray) -> FloatArray:
        if self.count == 0:
            return w
        out: FloatArray = self.total / self.count
        return out


OBJECTIVES: dict[str, type[Objective]] = {
    cls.name: cls for cls in (Hinge, ListNet, ListMLE, ListMLETE, OrdinalPerceptron)
}


def make_objective(
    name: str, size: int, trainable: BoolArray | None = None, **options: Any
) -> Objective:
    """The objective registered as ``name`` for a weight vector of ``size``."""
    cls = OBJECTIVES.get(name)
    if cls is None:
        raise ConfigurationError(
            f"unknown learning-to-rank objective {name!r}; choose one of {', '.join(OBJECTIVES)}"
        )
    try:
        return cls(size, trainable, **options)
    except TypeError as exc:
        raise ConfigurationError(f"bad options for objective {name!r}: {exc}") from exc
