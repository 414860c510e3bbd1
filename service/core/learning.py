"""What tuning the translation model and learning to rank share: AdaDelta and listwise losses.

:class:`AdaDelta` (Zeiler 2012, Algorithm 1) takes the gradient steps of the listwise tuning
optimisers (:mod:`service.mt.tuning.optimizers`, Chen et al. 2017, Algorithm 2) and of the
gradient objectives of learning to rank (:mod:`service.ltr.objectives`, Hieber & Riezler 2015,
§4). The listwise losses work on padded score matrices, one list per row: top-one ListNet
(:func:`listnet_loss_grad`, Chen et al. 2017, §3.1.2) and weighted ListMLE
(:func:`listmle_loss_grad`, Chen et al. 2017, eq. 5) with the factor weights of
:func:`position_costs` (all 1; top-k ListMLE, Xia et al. 2008; or the top-rank enhanced position
cost of Chen et al. 2017, §4).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]
NEG = -1e30  # score of padding positions: exp(NEG - finite) == 0 without inf/nan arithmetic


# --- AdaDelta ------------------------------------------------------------------------------------
class AdaDelta:
    """AdaDelta (Zeiler 2012, Algorithm 1): per-coordinate steps from running RMS averages.

    ``E[g²] ← ρE[g²] + (1−ρ)g²``; ``Δx = −√(E[Δx²] + ε) / √(E[g²] + ε) · g``;
    ``E[Δx²] ← ρE[Δx²] + (1−ρ)Δx²``; ``x ← x + Δx``. Minimises.
    """

    def __init__(self, size: int, rho: float = 0.95, eps: float = 1e-6) -> None:
        self.rho = rho
        self.eps = eps
        self.eg2 = np.zeros(size)
        self.edx2 = np.zeros(size)

    def step(self, x: FloatArray, grad: FloatArray) -> FloatArray:
        rho, eps = self.rho, self.eps
        self.eg2 = rho * self.eg2 + (1.0 - rho) * grad * grad
        dx = -np.sqrt(self.edx2 + eps) / np.sqrt(self.eg2 + eps) * grad
        self.edx2 = rho * self.edx2 + (1.0 - rho) * dx * dx
        out: FloatArray = x + dx
        return out


# --- listwise losses on padded score matrices ----------------------------------------------------
def listnet_loss_grad(
    scores: FloatArray, target: FloatArray, mask: NDArray[np.bool_]
) -> tuple[float, FloatArray]:
    """Top-one ListNet: ``Σ_lists −Σ_j P_y(j) log softmax(s)_j`` and its gradient in ``s``.

    ``scores`` and ``target`` (the target distribution per row, 0 on padding) are ``[B, n]``;
    ``mask`` marks real entries. Since ``Σ_j P_y(j) = 1``, ``∂L/∂s = softmax(s) − P_y``.
    """
    s = np.where(mask, scores, NEG)
    top = s.max(axis=1, keepdims=True)
    log_z = top + np.log(np.exp(s - top).sum(axis=1, keepdims=True))
    log_p = s - log_z
    loss = float(-(target * np.where(mask, log_p, 0.0)).sum())
    grad: FloatArray = np.exp(log_p) - target
    return loss, grad


def listmle_loss_grad(
    scores: FloatArray, cost: FloatArray, mask: NDArray[np.bool_]
) -> tuple[float, FloatArray]:
    """Weighted ListMLE ``Σ_lists Σ_j c_j (log Σ_{t≥j} e^{s_t} − s_j)`` and its gradient.

    Rows of ``scores`` ``[B, n]`` are in the target order (best BLEU first), padding last;
    ``cost`` holds ``c_j`` (1 for ListMLE, 0 beyond the top k, the position cost for TE, 0 on
    padding). With ``Z_j = log Σ_{t≥j} e^{s_t}``:
    ``∂L/∂s_t = e^{s_t} Σ_{j≤t} c_j e^{−Z_j} − c_t``, the sum taken in log space.
    """
    s = np.where(mask, scores, NEG)
    z = np.logaddexp.accumulate(s[:, ::-1], axis=1)[:, ::-1]
    loss = float((cost * (z - s)).sum())
    positive = cost > 0
    log_c = np.where(positive, np.log(np.where(positive, cost, 1.0)), NEG)
    acc = np.logaddexp.accumulate(log_c - z, axis=1)
    grad: FloatArray = np.exp(s + acc) - cost
    return loss, np.where(mask, grad, 0.0)


def position_costs(
    lengths: NDArray[np.int64], width: int, top_k: int | None, position_cost: bool
) -> FloatArray:
    """``c_j`` per list (rows) and position (columns, 0-based ``j − 1``); 0 on padding."""
    j = np.arange(1, width + 1)[None, :]
    n = np.asarray(lengths)[:, None]
    cost = np.where(j <= n, 1.0, 0.0)
    if top_k is not None:
        cost = np.where(j <= top_k, cost, 0.0)
    if position_cost:
        cost = cost * (n - j + 1) / (n * (n + 1) / 2.0)
    out: FloatArray = cost
    return out
