"""Weight optimisers for tuning: MERT, PRO and the listwise losses of Chen et al. 2017.

Every optimiser is an :class:`Optimizer`: ``optimize(weights, lists, rng)`` takes the current
weights and the training lists (k-best lists of :class:`~.lists.KbestEntry`) and returns new
weights. They are registered by name in :data:`OPTIMIZERS` (:func:`get_optimizer`):

- ``mert`` — Och (2003): coordinate line search; along a direction ``r`` each candidate's score
  ``w·φ + γ r·φ`` is a line in ``γ``, the exact upper envelope of each list's lines gives the
  intervals of ``γ`` in which each candidate is the 1-best, and a sweep over all lists' breakpoints
  sums BLEU sufficient statistics to find the ``γ`` with the best corpus BLEU. Directions are the
  feature axes plus random unit directions; the current point and random restarts are
  searched, the best local optimum wins. The result is rescaled to the L1 norm of the input
  weights (corpus BLEU of 1-best output does not depend on the scale).
- ``pro`` — Hopkins & May (2011): per list sample Γ = 5000 candidate pairs, keep those whose
  sentence BLEU differs by more than 0.05, take the Ξ = 50 with the largest difference, and fit
  an L2-regularised logistic regression (L-BFGS, no intercept) on the feature differences
  (both signs); the weights are its coefficients.
- ``listnet`` — top-one ListNet (Chen et al. 2017, §3.1.2): cross entropy between the softmax of the
  BLEU scores and the softmax of the model scores ``s = w·φ`` over each list.
- ``listmle`` — ListMLE (Chen et al. 2017, eq. 5): negative log Plackett–Luce likelihood under ``s``
  of the permutation that sorts the list by sentence BLEU.
- ``listmle-top5`` — top-k ListMLE (Xia et al. 2008): only the first k = 5 factors.
- ``listmle-te`` — top-rank enhanced ListMLE (Chen et al. 2017, §4): factor ``j`` weighted by the
  position cost ``c(j) = (n − j + 1) / Σ_{t=1..n} t`` with ``n`` the list's length.

The listwise losses (:mod:`service.core.learning`, shared with learning to rank) are minimised by
Algorithm 2 of Chen et al. 2017: epochs over the training lists in shuffled mini-batches of 10,
each batch's summed gradient applied by AdaDelta (Zeiler 2012, ρ = 0.95, ε = 1e-6; its running
averages start from zero at every call, i.e. every outer iteration, so the first steps are about
√ε small). The paper says ``eval(·)`` is sentence BLEU but not its scale; we use BLEU in percent
(0–100) for ListNet's target distribution, since in [0, 1] the softmax is almost uniform and the
loss pulls all scores together (``bleu_scale`` changes it). ListMLE only uses the BLEU order
(ties keep the k-best order). The paper does not normalise the weights and neither do we: the
listwise losses fix the scale of ``w`` themselves.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Literal

import numpy as np
from numpy.typing import NDArray

from service.core.csr import ptr_from_counts
from service.core.jit import compiled as jit
from service.core.learning import (
    NEG,
    AdaDelta,
    listmle_loss_grad,
    listnet_loss_grad,
    position_costs,
)
from service.errors import ConfigurationError, InvalidInputError
from service.mt.tuning.bleu import STATS_SIZE, bleu_from_matrix
from service.mt.tuning.lists import FeatureSpace, FloatArray, KbestEntry, ListArrays

Merge = Literal["aggregate", "merge"]


class Optimizer(ABC):
    """One weight-update step of the tuning loop; subclasses implement :meth:`optimize_arrays`."""

    name: ClassVar[str] = ""
    # How the loop builds the training set for this optimiser unless told otherwise.
    default_merge: ClassVar[Merge] = "aggregate"

    def optimize(
        self,
        weights: Mapping[str, float],
        lists: Sequence[Sequence[KbestEntry]],
        rng: np.random.Generator | None = None,
    ) -> dict[str, float]:
        """New weights from the current ``weights`` and the training ``lists``."""
        nonempty = [lst for lst in lists if lst]
        if not nonempty:
            raise InvalidInputError(f"{self.name}: no k-best entries to tune on (all lists empty)")
        space = FeatureSpace.of(weights, nonempty)
        arrays = [space.arrays(lst) for lst in nonempty]
        w = self.optimize_arrays(space.vector(weights), arrays, rng or np.random.default_rng(0))
        return space.weights(w)

    @abstractmethod
    def optimize_arrays(
        self, w0: FloatArray, lists: Sequence[ListArrays], rng: np.random.Generator
    ) -> FloatArray:
        """The optimisation itself, on a weight vector and lists as arrays."""

    @abstractmethod
    def params(self) -> dict[str, Any]:
        """Every parameter that changes the result."""

    def signature(self) -> dict[str, Any]:
        return {"method": self.name, **self.params()}


class ListwiseOptimizer(Optimizer):
    """Algorithm 2 of Chen et al. 2017: AdaDelta over shuffled mini-batches of lists for some
    epochs."""

    def __init__(
        self, epochs: int = 100, batch_size: int = 10, rho: float = 0.95, eps: float = 1e-6
    ) -> None:
        if epochs < 1 or batch_size < 1:
            raise ConfigurationError(
                f"{self.name}: epochs ({epochs}) and batch_size ({batch_size}) must be >= 1"
            )
        if not (0.0 < rho < 1.0) or eps <= 0.0:
            raise ConfigurationError(f"{self.name}: need 0 < rho < 1 and eps > 0")
        self.epochs = epochs
        self.batch_size = batch_size
        self.rho = rho
        self.eps = eps

    def params(self) -> dict[str, Any]:
        return {
            "epochs": self.epochs,
            "batch_size": self.batch_size,
            "rho": self.rho,
            "eps": self.eps,
        }

    # hooks
    @abstractmethod
    def _aux(self, bleu: FloatArray, mask: NDArray[np.bool_]) -> FloatArray:
        """Per-entry data of the loss, from BLEU rows sorted best first (``[N, n]``)."""

    @abstractmethod
    def _loss_grad_scores(
        self, scores: FloatArray, aux: FloatArray, mask: NDArray[np.bool_]
    ) -> tuple[float, FloatArray]:
        """Loss summed over the rows and its gradient in the scores."""

    # shared machinery
    def pad(self, lists: Sequence[ListArrays]) -> tuple[FloatArray, NDArray[np.bool_], FloatArray]:
        """Features ``[N, n, d]``, mask ``[N, n]`` and loss data ``[N, n]``, each row's entries
        sorted by decreasing sentence BLEU (stable), padding at the end."""
        n_max = max(len(lst) for lst in lists)
        d = lists[0].features.shape[1]
        x = np.zeros((len(lists), n_max, d))
        bleu = np.zeros((len(lists), n_max))
        mask = np.zeros((len(lists), n_max), dtype=np.bool_)
        for i, lst in enumerate(lists):
            order = np.argsort(-lst.bleu, kind="stable")
            n = len(lst)
            x[i, :n] = lst.features[order]
            bleu[i, :n] = lst.bleu[order]
            mask[i, :n] = True
        return x, mask, self._aux(bleu, mask)

    def loss_grad(self, w: FloatArray, lists: Sequence[ListArrays]) -> tuple[float, FloatArray]:
        """The total loss over ``lists`` at ``w`` and its gradient in ``w``."""
        x, mask, aux = self.pad(lists)
        return self._batch(w, x, mask, aux)

    def _batch(
        self, w: FloatArray, x: FloatArray, mask: NDArray[np.bool_], aux: FloatArray
    ) -> tuple[float, FloatArray]:
        scores = x @ w
        loss, d_scores = self._loss_grad_scores(scores, aux, mask)
        grad: FloatArray = np.einsum("bn,bnd->d", d_scores, x)
        return loss, grad

    def optimize_arrays(
        self, w0: FloatArray, lists: Sequence[ListArrays], rng: np.random.Generator
    ) -> FloatArray:
        x, mask, aux = self.pad(lists)
        ada = AdaDelta(w0.size, self.rho, self.eps)
        w = w0.copy()
        n = len(lists)
        for _ in range(self.epochs):
            order = rng.permutation(n)
            for start in range(0, n, self.batch_size):
                idx = order[start : start + self.batch_size]
                _, grad = self._batch(w, x[idx], mask[idx], aux[idx])
                w = ada.step(w, grad)
        return w


class ListNet(ListwiseOptimizer):
    """Top-one ListNet; the target is ``softmax(bleu_scale · sentence BLEU)`` per list."""

    name = "listnet"

    def __init__(self, bleu_scale: float = 100.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if bleu_scale <= 0:
            raise ConfigurationError(f"listnet: bleu_scale must be > 0, got {bleu_scale}")
        self.bleu_scale = bleu_scale

    def params(self) -> dict[str, Any]:
        return {**super().params(), "bleu_scale": self.bleu_scale}

    def _aux(self, bleu: FloatArray, mask: NDArray[np.bool_]) -> FloatArray:
        z = np.where(mask, self.bleu_scale * bleu, NEG)
        z = z - z.max(axis=1, keepdims=True)
        p = np.where(mask, np.exp(z), 0.0)
        out: FloatArray = p / p.sum(axis=1, keepdims=True)
        return out

    def _loss_grad_scores(
        self, scores: FloatArray, aux: FloatArray, mask: NDArray[np.bool_]
    ) -> tuple[float, FloatArray]:
        return listnet_loss_grad(scores, aux, mask)


class ListMLE(ListwiseOptimizer):
    """ListMLE; ``top_k`` keeps the first k factors, ``position_cost`` weights factor j by
    ``c(j) = (n − j + 1) / Σ_{t=1..n} t`` (top-rank enhanced, Chen et al. 2017, eq. 6)."""

    name = "listmle"

    def __init__(
        self, top_k: int | None = None, position_cost: bool = False, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        if top_k is not None and top_k < 1:
            raise ConfigurationError(f"{self.name}: top_k must be >= 1, got {top_k}")
        self.top_k = top_k
        self.position_cost = position_cost

    def params(self) -> dict[str, Any]:
        return {**super().params(), "top_k": self.top_k, "position_cost": self.position_cost}

    def _aux(self, bleu: FloatArray, mask: NDArray[np.bool_]) -> FloatArray:
        return position_costs(mask.sum(axis=1), mask.shape[1], self.top_k, self.position_cost)

    def _loss_grad_scores(
        self, scores: FloatArray, aux: FloatArray, mask: NDArray[np.bool_]
    ) -> tuple[float, FloatArray]:
        return listmle_loss_grad(scores, aux, mask)


class ListMLETop5(ListMLE):
    name = "listmle-top5"

    def __init__(self, top_k: int = 5, **kwargs: Any) -> None:
        super().__init__(top_k=top_k, **kwargs)


class ListMLETE(ListMLE):
    name = "listmle-te"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(position_cost=True, **kwargs)


# --- MERT --------------------------------------------------------------------------------------
def _envelope_kernel(
    a: FloatArray,
    b: FloatArray,
    offsets: NDArray[np.int64],
    seg_line: NDArray[np.int64],
    seg_start: FloatArray,
    seg_count: NDArray[np.int64],
) -> None:  # pragma: no cover - compiled by numba; the Python body is the same algorithm
    """Upper envelope of the lines ``a_i + γ b_i`` of each list ``offsets[s]:offsets[s+1]``.

    Writes list ``s``'s segments, left to right, at ``seg_line/seg_start[offsets[s]:]`` —
    the line that is maximal from ``seg_start`` (−inf for the first) to the next segment's
    start — and their number in ``seg_count[s]``. Lines are visited by increasing slope
    (stable); of parallel lines the higher one is kept (the first of equal ones), and a
    stacked line whose segment would be empty is popped. Ties between crossing lines at one
    ``γ`` go to the line with the larger slope on its right, as in an open interval.
    """
    for s in range(offsets.shape[0] - 1):
        lo = offsets[s]
        hi = offsets[s + 1]
        order = np.argsort(b[lo:hi], kind="mergesort")
        cnt = 0
        for k in range(hi - lo):
            j = lo + order[k]
            if cnt > 0:
                t = seg_line[lo + cnt - 1]
                if b[j] == b[t]:
                    if a[j] <= a[t]:
                        continue
                    cnt -= 1
            x = -np.inf
            while cnt > 0:
                t = seg_line[lo + cnt - 1]
                x = (a[t] - a[j]) / (b[j] - b[t])
                if x <= seg_start[lo + cnt - 1]:
                    cnt -= 1
                    x = -np.inf
                else:
                    break
            seg_line[lo + cnt] = j
            seg_start[lo + cnt] = x
            cnt += 1
        seg_count[s] = cnt


def upper_envelopes(
    a: FloatArray, b: FloatArray, offsets: NDArray[np.int64], compiled: bool = True
) -> tuple[NDArray[np.int64], FloatArray, NDArray[np.int64]]:
    """``(seg_line, seg_start, seg_count)`` of :func:`_envelope_kernel` for all lists."""
    seg_line = np.zeros(a.shape[0], dtype=np.int64)
    seg_start = np.zeros(a.shape[0], dtype=np.float64)
    seg_count = np.zeros(offsets.shape[0] - 1, dtype=np.int64)
    kernel = jit(_envelope_kernel) if compiled else _envelope_kernel
    kernel(a, b, offsets, seg_line, seg_start, seg_count)
    return seg_line, seg_start, seg_count


class MertProblem:
    """The lists of one MERT call, concatenated: features ``[N, d]``, stats ``[N, 10]``."""

    def __init__(self, lists: Sequence[ListArrays], compiled: bool = True) -> None:
        self.x = np.concatenate([lst.features for lst in lists])
        self.stats = np.concatenate([lst.stats for lst in lists])
        lengths = np.array([len(lst) for lst in lists], dtype=np.int64)
        self.offsets = ptr_from_counts(lengths)
        self.list_of = np.repeat(np.arange(len(lists)), lengths)
        self.compiled = compiled

    def one_best(self, w: FloatArray) -> NDArray[np.int64]:
        """Index (into the concatenation) of each list's highest-scoring entry (first on ties)."""
        scores = self.x @ w
        out = np.empty(self.offsets.shape[0] - 1, dtype=np.int64)
        for s in range(out.shape[0]):
            lo, hi = self.offsets[s], self.offsets[s + 1]
            out[s] = lo + int(np.argmax(scores[lo:hi]))
        return out

    def bleu(self, w: FloatArray) -> float:
        """Corpus BLEU of the 1-best entries under ``w``."""
        total = self.stats[self.one_best(w)].sum(axis=0)
        return float(bleu_from_matrix(total[None, :])[0])

    def line_search(self, w: FloatArray, r: FloatArray) -> tuple[float, float]:
        """``(γ, BLEU)`` maximising the corpus BLEU of ``w + γ r`` (exactly, over all γ).

        The chosen γ is inside the best interval (its midpoint, or 1 beyond the last
        breakpoint for an unbounded one); of equally good intervals the one containing
        γ = 0 is kept, else the one closest to 0.
        """
        a = self.x @ w
        b = self.x @ r
        seg_line, seg_start, seg_count = upper_envelopes(a, b, self.offsets, self.compiled)
        pos = np.arange(a.shape[0])
        rank = pos - self.offsets[self.list_of]  # segment number within its list
        valid = rank < seg_count[self.list_of]
        first = valid & (rank == 0)
        events = np.flatnonzero(valid & (rank > 0))
        base = self.stats[seg_line[first]].sum(axis=0)
        if events.size == 0:
            return 0.0, float(bleu_from_matrix(base[None, :])[0])
        gammas = seg_start[events]
        deltas = self.stats[seg_line[events]] - self.stats[seg_line[events - 1]]
        order = np.argsort(gammas, kind="stable")
        gammas = gammas[order]
        cum = base[None, :] + np.cumsum(deltas[order], axis=0)
        # Interval i lies between the i-th and (i+1)-th distinct breakpoints; stats after the
        # last event at each distinct γ.
        last = np.flatnonzero(np.r_[gammas[1:] != gammas[:-1], True])
        bounds = gammas[last]
        stats = np.vstack([base[None, :], cum[last]])
        scores = bleu_from_matrix(stats.reshape(-1, STATS_SIZE))
        lows = np.r_[-np.inf, bounds]
        highs = np.r_[bounds, np.inf]
        best = float(scores.max())
        candidates = np.flatnonzero(scores >= best - 1e-12)
        points = np.array(
            [_inside(lo, hi) for lo, hi in zip(lows[candidates], highs[candidates], strict=True)]
        )
        contains_zero = (lows[candidates] < 0.0) & (highs[candidates] > 0.0)
        if np.any(contains_zero):
            return 0.0, float(scores[candidates[np.argmax(contains_zero)]])
        pick = int(np.argmin(np.abs(points)))
        return float(points[pick]), float(scores[candidates[pick]])


def _inside(lo: float, hi: float) -> float:
    if math.isinf(lo) and math.isinf(hi):
        return 0.0
    if math.isinf(lo):
        return hi - 1.0
    if math.isinf(hi):
        return lo + 1.0
    return (lo + hi) / 2.0


class MERT(Optimizer):
    """Och (2003) minimum error rate training by exact line search (see the module doc)."""

    name = "mert"
    default_merge = "merge"

    def __init__(
        self,
        restarts: int = 5,
        random_directions: int = 5,
        max_sweeps: int = 30,
        tol: float = 1e-6,
    ) -> None:
        if restarts < 0 or random_directions < 0 or max_sweeps < 1:
            raise ConfigurationError(
                "mert: restarts and random_directions must be >= 0 and max_sweeps >= 1"
            )
        self.restarts = restarts
        self.random_directions = random_directions
        self.max_sweeps = max_sweeps
        self.tol = tol

    def params(self) -> dict[str, Any]:
        return {
            "restarts": self.restarts,
            "random_directions": self.random_directions,
            "max_sweeps": self.max_sweeps,
        }

    def ascend(
        self, problem: MertProblem, w: FloatArray, rng: np.random.Generator
    ) -> tuple[FloatArray, float]:
        """Coordinate ascent from ``w``: per sweep, the best line search over the directions."""
        d = w.size
        bleu = problem.bleu(w)
        for _ in range(self.max_sweeps):
            dirs = list(np.eye(d))
            for _ in range(self.random_directions):
                v = rng.standard_normal(d)
                dirs.append(v / np.linalg.norm(v))
            best_gain, best_w = self.tol, None
            for r in dirs:
                gamma, value = problem.line_search(w, r)
                if value - bleu > best_gain:
                    best_gain, best_w = value - bleu, w + gamma * r
            if best_w is None:
                break
            w = best_w
            bleu = problem.bleu(w)
        return w, bleu

    def optimize_arrays(
        self, w0: FloatArray, lists: Sequence[ListArrays], rng: np.random.Generator
    ) -> FloatArray:
        problem = MertProblem(lists)
        best_w, best_bleu = self.ascend(problem, w0.copy(), rng)
        for _ in range(self.restarts):
            w, bleu = self.ascend(problem, rng.uniform(-1.0, 1.0, w0.size), rng)
            if bleu > best_bleu + self.tol:
                best_w, best_bleu = w, bleu
        norm0, norm = np.abs(w0).sum(), np.abs(best_w).sum()
        if norm0 > 0 and norm > 0:
            best_w = best_w * (norm0 / norm)
        return best_w


# --- PRO ---------------------------------------------------------------------------------------
class PRO(Optimizer):
    """Hopkins & May (2011) pairwise ranking optimisation (see the module doc)."""

    name = "pro"
    default_merge = "merge"

    def __init__(
        self,
        samples: int = 5000,
        threshold: float = 0.05,
        keep: int = 50,
        l2: float = 0.01,
        max_iter: int = 100,
    ) -> None:
        if samples < 1 or keep < 1 or threshold < 0 or l2 < 0 or max_iter < 1:
            raise ConfigurationError(
                "pro: need samples >= 1, keep >= 1, threshold >= 0, l2 >= 0, max_iter >= 1"
            )
        self.samples = samples
        self.threshold = threshold
        self.keep = keep
        self.l2 = l2
        self.max_iter = max_iter

    def params(self) -> dict[str, Any]:
        return {
            "samples": self.samples,
            "threshold": self.threshold,
            "keep": self.keep,
            "l2": self.l2,
            "max_iter": self.max_iter,
        }

    def sample_pairs(
        self, lists: Sequence[ListArrays], rng: np.random.Generator
    ) -> tuple[FloatArray, FloatArray]:
        """Feature differences ``[M, d]`` and labels ±1 of the kept pairs, both orientations."""
        xs: list[FloatArray] = []
        ys: list[FloatArray] = []
        for lst in lists:
            n = len(lst)
            if n < 2:
                continue
            i = rng.integers(n, size=self.samples)
            j = rng.integers(n, size=self.samples)
            diff = lst.bleu[i] - lst.bleu[j]
            ok = np.abs(diff) > self.threshold
            i, j, diff = i[ok], j[ok], diff[ok]
            top = np.argsort(-np.abs(diff), kind="stable")[: self.keep]
            x = lst.features[i[top]] - lst.features[j[top]]
            y = np.sign(diff[top])
            xs.extend([x, -x])
            ys.extend([y, -y])
        if not xs:
            d = lists[0].features.shape[1]
            return np.zeros((0, d)), np.zeros(0)
        return np.concatenate(xs), np.concatenate(ys)

    def fit(self, x: FloatArray, y: FloatArray) -> FloatArray:
        """L2-regularised logistic regression without intercept, by L-BFGS from 0."""
        from scipy.optimize import minimize
        from scipy.special import expit

        l2 = self.l2

        def objective(w: FloatArray) -> tuple[float, FloatArray]:
            margin = y * (x @ w)
            loss = float(np.logaddexp(0.0, -margin).sum() + 0.5 * l2 * w @ w)
            grad: FloatArray = -(x.T @ (y * expit(-margin))) + l2 * w
            return loss, grad

        res = minimize(
            objective,
            np.zeros(x.shape[1]),
            jac=True,
            method="L-BFGS-B",
            options={"maxiter": self.max_iter},
        )
        out: FloatArray = np.asarray(res.x, dtype=np.float64)
        return out

    def optimize_arrays(
        self, w0: FloatArray, lists: Sequence[ListArrays], rng: np.random.Generator
    ) -> FloatArray:
        x, y = self.sample_pairs(lists, rng)
        if x.shape[0] == 0:
            return w0.copy()  # no pair differs enough in BLEU: nothing to learn
        return self.fit(x, y)


# --- registry ----------------------------------------------------------------------------------
OPTIMIZERS: dict[str, type[Optimizer]] = {
    cls.name: cls for cls in (MERT, PRO, ListNet, ListMLE, ListMLETop5, ListMLETE)
}


def get_optimizer(name: str, **params: Any) -> Optimizer:
    """The optimiser registered as ``name``, built with ``params``."""
    cls = OPTIMIZERS.get(name)
    if cls is None:
        raise ConfigurationError(
            f"unknown tuning method {name!r}; choose one of {', '.join(OPTIMIZERS)}"
        )
    try:
        return cls(**params)
    except TypeError as exc:
        raise ConfigurationError(f"bad parameters for tuning method {name!r}: {exc}") from exc
