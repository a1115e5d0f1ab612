"""The sampled LP of Ho, Jabbari & Vaughan (ICML 2013), solved with HiGHS for its dual.

Relaxed offline assignment LP (paper §4.2), restricted to the sampled workers (§5.1):

.. math::

    \\min \\sum_{i,j} y_{ij} + \\lambda \\sum_i u_i \\quad\\text{s.t.}\\quad
    \\sum_i y_{ij} \\le M_j \\;\\forall j,\\qquad
    \\sum_j q_{ij} y_{ij} + u_i \\ge \\gamma C_\\epsilon \\;\\forall i,\\qquad
    0 \\le y_{ij} \\le 1,\\; u_i \\ge 0.

The task weights are the duals of the coverage rows, ``x_i ≥ 0`` (paper §4.3). The slack
``u_i`` with penalty ``λ`` is *our* addition: the paper assumes the sampled LP is feasible and,
when it is not, suggests the requester "discard some of the tasks or lower his desired error"
(§5.1, note on feasibility). The elastic slack does that automatically — a task that cannot be
covered keeps its slack and its weight is capped at ``λ`` (so it ranks first for every worker
with a positive q̂) — and on a feasible LP with ``λ`` above every optimal ``x_i`` it changes
nothing.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.optimize import linprog

__all__ = ["solve_sampled_lp"]


def solve_sampled_lp(q: np.ndarray, capacity: np.ndarray, cover: float,
                     penalty: float) -> tuple[np.ndarray, np.ndarray]:
    """Solve the (elastic) sampled LP; return task weights ``x`` (n,) and slacks ``u`` (n,).

    ``q`` is (n_tasks, n_sample) with the (perturbed) q̂ of each sampled worker, ``capacity``
    (n_sample,) the M_j, ``cover`` the right-hand side γC_ε, ``penalty`` the slack price λ.
    Pairs with q̂ = 0 are left out of the LP: they can never help coverage, so y = 0 there.
    """
    q = np.asarray(q, dtype=float)
    n, m = q.shape
    if n == 0:
        return np.zeros(0), np.zeros(0)
    rows, cols = np.nonzero(q > 0)  # variable k is the pair (rows[k], cols[k])
    k = rows.size
    # A_ub: coverage rows 0..n-1 (negated >=), capacity rows n..n+m-1.
    a_cov = sp.coo_matrix((-q[rows, cols], (rows, np.arange(k))), shape=(n, k))
    a_cap = sp.coo_matrix((np.ones(k), (cols, np.arange(k))), shape=(m, k))
    a_slack = sp.vstack([-sp.identity(n), sp.coo_matrix((m, n))])
    a_ub = sp.hstack([sp.vstack([a_cov, a_cap]), a_slack]).tocsc()
    b_ub = np.concatenate([np.full(n, -float(cover)), np.asarray(capacity, dtype=float)])
    c = np.concatenate([np.ones(k), np.full(n, float(penalty))])
    bounds = np.zeros((k + n, 2))
    bounds[:k, 1] = 1.0
    bounds[k:, 1] = np.inf
    res = linprog(c, A_ub=a_ub, b_ub=b_ub, bounds=bounds, method="highs")
    if res.status != 0:  # the elastic LP is always feasible and bounded; this is a solver fault
        raise RuntimeError(f"HiGHS failed on the sampled LP: {res.message}")
    # marginals are d(objective)/d(b_ub) <= 0 for the negated coverage rows: x_i = -marginal
    x = np.maximum(-np.asarray(res.ineqlin.marginals[:n], dtype=float), 0.0)
    u = np.asarray(res.x[k:], dtype=float)
    return x, u
