"""One-coin workers on C > 2 classes: the math of ``optkg-workers`` and ``optkg-multi`` beyond
two classes (Chen, Lin & Zhou 2013, Section 5: Dirichlet task posteriors, "apply the
optimistic KG"; the paper's appendix with the derivations is not in our copy, so the
derivation is ours and written out here).

Model. Task i has class probabilities theta_i ~ Dir(alpha_i); worker j a reliability
rho_j ~ Beta(c_j, d_j). The worker reports the true class Y ~ Cat(theta_i) with probability
rho_j, otherwise one of the other C - 1 classes uniformly:

    P(Z = k | theta, rho) = theta_k rho + (1 - theta_k)(1 - rho) / (C - 1),

which for C = 2 is the paper's theta rho + (1 - theta)(1 - rho) of Section 4.

Update after label k (exact, then moment-matched like the paper's binary step). With
1 - theta_k = sum_{m != k} theta_m the posterior is a mixture over the latent class m:

    p(theta, rho | Z = k) = sum_m w_m Dir(theta; alpha + e_m) Beta(rho; c + [m = k], d + [m != k]),
    w_k ∝ alpha_k c,   w_m ∝ alpha_m d / (C - 1)  (m != k).

The weights depend on the worker only through r = c / (c + d) (its mean reliability):
w_k ∝ alpha_k r, w_m ∝ alpha_m (1 - r) / (C - 1). The rho marginal is
w_k Beta(c + 1, d) + (1 - w_k) Beta(c, d + 1), matched by ``_beta._match_mixture`` exactly as
in the binary case. The theta marginal sum_m w_m Dir(alpha + e_m) is replaced by the
Dirichlet with the same means, m_c = (alpha_c + w_c) / (A + 1) (A = sum alpha), and the same
*total* variance sum_c Var(theta_c): a Dirichlet with means m and concentration s has
sum_c Var = sum_c m_c (1 - m_c) / (s + 1), so s = sum_c m_c (1 - m_c) / sum_c Var_c - 1.
Var_c is assembled from positive terms (the mean of the components' variances plus the
spread w_c (1 - w_c) / (A + 1)^2), as in the binary code. For C = 2 the two classes have the
same variance and this is the paper's Beta moment matching (checked against ``_beta`` in the
tests). At r = 1/C the label carries no information: the weights are alpha / A, the mixture
has mean and variance of Dir(alpha), and the task is unchanged.

Reward. With the loss L(alpha) = 1 - max_k I_k(alpha) (``_dirichlet``), the reward of label
k is R_k = L(alpha) - L(alpha~(k, r)) and R+ = max_k R_k, the binary definition. Since R+
depends on the worker only through r, each task keeps R+ on a fixed grid of r values
(``GRID``, plus r = 1/C where R+ = 0) and a pair's reward is the linear interpolation at the
worker's current r. This is the one approximation beyond the paper's: exact R+ for every
(task, worker) pair needs C quadratures per pair and a worker's r
moves with each of its labels, i.e. a full column of pairs per step; with the grid a label
costs len(GRID) * C quadratures for the labelled task and interpolation for the rest.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from . import _beta, _dirichlet
from .base import FloatArray

__all__ = ["DirichletWorkerState", "GRID", "grid_for", "mixture_weights", "task_update",
           "worker_update", "reward_grid", "reward_row", "interpolate"]

# mean reliabilities where R+ is computed (each point costs C quadratures per label); workers
# mostly sit between 0.5 and 1, the prior mean is 0.8
GRID = np.array([0.0, 0.5, 0.65, 0.8, 0.9, 1.0])


def grid_for(n_classes: int) -> FloatArray:
    """``GRID`` with 1/C added (the reliability of a random guess, where R+ = 0)."""
    return np.unique(np.concatenate([GRID, [1.0 / n_classes]]))


def _raw_weights(alpha: FloatArray, r: ArrayLike, k: int) -> tuple[FloatArray, FloatArray]:
    """Unnormalised mixture weights (..., C) for label k and the sum of all but each one,
    formed directly (no 1 - w cancellation when one weight is close to 1)."""
    C = alpha.shape[-1]
    r = np.asarray(r, dtype=float)[..., None]
    onehot = np.arange(C) == k
    raw = np.where(onehot, alpha * r, alpha * (1.0 - r) / (C - 1))
    total = raw.sum(axis=-1, keepdims=True)
    # sum over m != c of raw_m: for c = k the (1 - r) terms of the other alphas; for c != k
    # alpha_k r plus the (1 - r) terms of the alphas other than k and c
    rest = alpha.sum(axis=-1, keepdims=True) - alpha[..., k:k + 1]
    others = np.where(onehot, (1.0 - r) * rest / (C - 1),
                      alpha[..., k:k + 1] * r + (1.0 - r) * (rest - alpha) / (C - 1))
    return raw / total, others / total


def mixture_weights(alpha: ArrayLike, r: ArrayLike, k: int) -> FloatArray:
    """w (..., C): posterior weight of latent class m after a label k from reliability r."""
    return _raw_weights(np.asarray(alpha, dtype=float), r, k)[0]


def task_update(alpha: ArrayLike, r: ArrayLike, k: int) -> FloatArray:
    """Moment-matched Dirichlet after label k from a worker of mean reliability r.

    ``alpha`` (..., C) broadcasts against ``r`` (...)."""
    alpha = np.asarray(alpha, dtype=float)
    w, w_rest = _raw_weights(alpha, r, k)
    A = alpha.sum(axis=-1, keepdims=True)
    rest = A - alpha
    m = (alpha + w) / (A + 1.0)
    mc = (rest + w_rest) / (A + 1.0)  # 1 - m, formed directly
    var = ((w * (alpha + 1.0) * rest + w_rest * alpha * (rest + 1.0))
           / ((A + 1.0) ** 2 * (A + 2.0)) + w * w_rest / (A + 1.0) ** 2)
    s = (m * mc).sum(axis=-1, keepdims=True) / var.sum(axis=-1, keepdims=True) - 1.0
    return m * s


def worker_update(alpha: ArrayLike, c: float, d: float, k: int) -> tuple[FloatArray, float, float]:
    """(alpha~, c~, d~) after worker Beta(c, d) labels task Dir(alpha) with class k; both
    factors use the pre-update parameters, as in ``_beta.worker_update``."""
    alpha = np.asarray(alpha, dtype=float)
    r = c / (c + d)
    w, w_rest = _raw_weights(alpha, r, k)
    c2, d2 = _beta._match_mixture(c, d, w[..., k], w_rest[..., k])
    return task_update(alpha, r, k), float(c2), float(d2)


def reward_grid(alpha: ArrayLike, grid: FloatArray) -> FloatArray:
    """R+ (n, G) of each task row of ``alpha`` (n, C) at the mean reliabilities ``grid``;
    exactly 0 at r = 1/C (an uninformative worker)."""
    alpha = np.atleast_2d(np.asarray(alpha, dtype=float))
    n, C = alpha.shape
    out = np.zeros((n, grid.size))
    live = np.flatnonzero(~np.isclose(grid, 1.0 / C, rtol=0, atol=1e-12))
    if n == 0 or live.size == 0:
        return out
    r = grid[live]
    # rows: task x grid point x label
    new = np.stack([task_update(alpha[:, None, :], r[None, :], k) for k in range(C)], axis=2)
    losses = _dirichlet._loss(_dirichlet.prob_largest(
        np.concatenate([alpha, new.reshape(-1, C)]), coarse=True))
    base, after = losses[:n], losses[n:].reshape(n, live.size, C)
    out[:, live] = (base[:, None, None] - after).max(axis=2)
    return out


@functools.lru_cache(maxsize=1 << 14)
def _reward_row_cached(alpha: bytes, grid: bytes) -> FloatArray:
    row = reward_grid(np.frombuffer(alpha)[None, :], np.frombuffer(grid))[0]
    row.setflags(write=False)
    return row


def reward_row(alpha: FloatArray, grid: FloatArray) -> FloatArray:
    """``reward_grid(alpha[None, :], grid)[0]`` for one task, memoised on the exact bytes of
    ``alpha`` and ``grid`` (a pure function, so the result is the same array of floats).
    Many tasks reach bit-identical states: every task's first label from a worker still at
    the prior mean reliability leads to one of C states, and the quadratures are the cost of
    a label."""
    return _reward_row_cached(np.ascontiguousarray(alpha, dtype=float).tobytes(),
                              np.ascontiguousarray(grid, dtype=float).tobytes())


def interpolate(values: FloatArray, grid: FloatArray, r: FloatArray) -> FloatArray:
    """Linear interpolation of ``values`` (n, G) at reliabilities ``r`` (W,) -> (n, W)."""
    r = np.clip(np.asarray(r, dtype=float), grid[0], grid[-1])
    idx = np.clip(np.searchsorted(grid, r, side="right") - 1, 0, grid.size - 2)
    f = (r - grid[idx]) / (grid[idx + 1] - grid[idx])
    return values[:, idx] * (1.0 - f) + values[:, idx + 1] * f


@dataclass
class DirichletWorkerState:
    """C > 2 classes: tasks Dir(alpha[i]), workers Beta(c[j], d[j]) (``c``, ``d`` may be
    (categories, workers) for ``optkg-multi``); ``reward[i]`` task i's R+ on ``grid`` (a pure
    function of alpha[i], serialised because recomputing it for every task costs
    len(grid) * C quadratures per task)."""

    alpha: FloatArray  # float (n_tasks, C)
    c: FloatArray
    d: FloatArray
    reward: FloatArray  # float (n_tasks, len(grid))
    # (reward, r, values) of the last ``pair_values``; derivable, never serialised
    pair_cache: tuple[FloatArray, FloatArray, FloatArray] | None = field(
        default=None, repr=False, compare=False)

    @property
    def grid(self) -> FloatArray:
        return grid_for(self.alpha.shape[1])

    @classmethod
    def fresh(cls, n_tasks: int, n_classes: int, prior: float, c: FloatArray,
              d: FloatArray) -> DirichletWorkerState:
        alpha = np.full((n_tasks, n_classes), float(prior))
        row = reward_grid(alpha[:1], grid_for(n_classes)) if n_tasks else np.zeros((1, 0))
        return cls(alpha, c, d, np.repeat(row, n_tasks, axis=0).reshape(n_tasks, -1))

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k).tolist() for k in ("alpha", "c", "d", "reward")}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DirichletWorkerState:
        alpha = np.asarray(data["alpha"], dtype=float)
        n, C = len(data["alpha"]), (alpha.shape[1] if alpha.ndim == 2 else 0)
        alpha = alpha.reshape(n, C)
        if "reward" in data:
            reward = np.asarray(data["reward"], dtype=float).reshape(n, -1)
        else:
            reward = reward_grid(alpha, grid_for(C))
        return cls(alpha, np.asarray(data["c"], dtype=float), np.asarray(data["d"], dtype=float),
                   reward)

    def values(self, tasks: ArrayLike, r: ArrayLike) -> FloatArray:
        """Interpolated R+ (len(tasks), len(r)) of tasks with workers of reliability r."""
        return interpolate(self.reward[np.asarray(tasks, dtype=np.int64)], self.grid,
                           np.atleast_1d(r))

    def pair_values(self, r: FloatArray) -> FloatArray:
        """``values(all tasks, r)`` (n_tasks, len(r)), recomputing only the rows whose reward
        grid and the columns whose r changed since the last call (one of each per label);
        the result equals the full interpolation."""
        r = np.asarray(r, dtype=float)
        cache = self.pair_cache
        if cache is None or cache[2].shape != (len(self.reward), r.size):
            out = self.values(np.arange(len(self.reward)), r)
        else:
            out = cache[2]
            rows = np.flatnonzero((self.reward != cache[0]).any(axis=1))
            cols = np.flatnonzero(r != cache[1])
            if rows.size:
                out[rows] = self.values(rows, r)
            if cols.size:
                out[:, cols] = self.values(np.arange(len(self.reward)), r[cols])
        self.pair_cache = (self.reward.copy(), r.copy(), out)
        return out

    def values_per_task(self, tasks: ArrayLike, r: FloatArray) -> FloatArray:
        """Interpolated R+ (len(tasks),) of each task with its own worker reliability r."""
        grid = self.grid
        r = np.clip(np.asarray(r, dtype=float), grid[0], grid[-1])
        idx = np.clip(np.searchsorted(grid, r, side="right") - 1, 0, grid.size - 2)
        f = (r - grid[idx]) / (grid[idx + 1] - grid[idx])
        rows = self.reward[np.asarray(tasks, dtype=np.int64)]
        take = np.arange(len(rows))
        return rows[take, idx] * (1.0 - f) + rows[take, idx + 1] * f

    def learn(self, i: int, c_idx: int | tuple[int, int], label: int, max_strength: float) -> None:
        """Moment-matched update of task i and worker ``c_idx`` (an index into c and d), the
        worker's c + d capped at ``max_strength`` (mean kept), and task i's reward grid."""
        alpha, c, d = worker_update(self.alpha[i], float(self.c[c_idx]), float(self.d[c_idx]),
                                    label)
        if not (np.isfinite(alpha).all() and (alpha > 0).all()
                and all(np.isfinite(v) and v > 0 for v in (c, d))):
            raise ValueError(f"moment matching failed for task {i}")
        if c + d > max_strength:
            c, d = c * max_strength / (c + d), d * max_strength / (c + d)
        self.alpha[i], self.c[c_idx], self.d[c_idx] = alpha, c, d
        self.reward[i] = reward_row(alpha, self.grid)

    def proba(self) -> FloatArray:
        """I_k(alpha) per task (P(class k has the largest theta)), rows normalised."""
        if len(self.alpha) == 0:
            return np.empty((0, self.alpha.shape[1]))
        uniq, inverse = np.unique(self.alpha, axis=0, return_inverse=True)
        p = _dirichlet.prob_largest(uniq)[inverse.reshape(-1)]
        return p / p.sum(axis=1, keepdims=True)
