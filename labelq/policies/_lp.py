"""The sampled LP of Ho, Jabbari & Vaughan (ICML 2013), solved with HiGHS for its dual.

Relaxed offline assignment LP (paper §4.2), restricted to the sampled workers (§5.1):

.. math::

    \\min \\sum_{i,j} y_{ij} + \\lambda \\sum_i u_i \\quad\\text{s.t.}\\quad
    \\sum_i y_{ij} \\le M_j \\;\\forall j,\\qquad
    \\sum_j q_{ij} y_{ij} + u_i \\ge \\gamma C_\\epsilon \\;\\forall i,\\qquad
    0 \\le y_{ij} \\le 1,\\; u_i \\ge 0.

The task weights are the duals of the coverage rows, ``x_i ≥ 0`` (paper §4.3).

*Groups.* Tasks with identical q columns (same category: q̂ depends on the worker and the
category only) are interchangeable, so the LP is solved over groups: ȳ_gj ∈ [0, 1] is the
share of group g's tasks worker j takes (she takes ``size_g ȳ_gj`` of them), and the
symmetric solution y_ij = ȳ_gj is optimal for the per-task LP with x_i = x_g. This is an
exact reformulation (the duals of the two LPs have equal optima and the symmetric dual is
feasible in the per-task one) and turns a 10^5-variable, highly degenerate LP (~40 s in
HiGHS for 1000 tasks x 90 workers) into one with (categories x workers) variables.

*Slack.* ``u_i`` with penalty ``λ`` is *our* addition: the paper assumes the sampled LP is
feasible and, when it is not, suggests the requester "discard some of the tasks or lower his
desired error" (§5.1, note on feasibility). The elastic slack does that automatically — a task
that cannot be covered keeps its slack and its weight is capped at ``λ`` (so it ranks first
for every worker with a positive q̂) — and on a feasible LP with ``λ`` above every optimal
``x_i`` it changes nothing.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.optimize import linprog

__all__ = ["solve_sampled_lp"]


def solve_sampled_lp(q: np.ndarray, capacity: np.ndarray, cover: float, penalty: float,
                     sizes: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Solve the (elastic, grouped) sampled LP; return weights ``x`` and slacks ``u`` per row.

    ``q`` is (n_groups, n_sample): the q̂ of each sampled worker on each group of identical
    tasks (``sizes[g]`` tasks; default one task per row), ``capacity`` (n_sample,) the M_j,
    ``cover`` the per-task right-hand side γC_ε, ``penalty`` the slack price λ per task.
    Pairs with q̂ = 0 are left out: they never help coverage, so y = 0 there.
    """
    q = np.asarray(q, dtype=float)
    n, m = q.shape
    size = np.ones(n) if sizes is None else np.asarray(sizes, dtype=float)
    if n == 0:
        return np.zeros(0), np.zeros(0)
    rows, cols = np.nonzero(q > 0)  # variable k is the pair (rows[k], cols[k])
    k = rows.size
    # A_ub: coverage rows 0..n-1 (negated >=), capacity rows n..n+m-1.
    a_cov = sp.coo_matrix((-q[rows, cols], (rows, np.arange(k))), shape=(n, k))
    a_cap = sp.coo_matrix((size[rows], (cols, np.arange(k))), shape=(m, k))
    a_slack = sp.vstack([-sp.identity(n), sp.coo_matrix((m, n))])
    a_ub = sp.hstack([sp.vstack([a_cov, a_cap]), a_slack]).tocsc()
    b_ub = np.concatenate([np.full(n, -float(cover)), np.asarray(capacity, dtype=float)])
    c = np.concatenate([size[rows], float(penalty) * size])
    bounds = np.zeros((k + n, 2))
    bounds[:k, 1] = 1.0
    bounds[k:, 1] = np.inf
    res = linprog(c, A_ub=a_ub, b_ub=b_ub, bounds=bounds, method="highs")
    if res.status != 0:  # the elastic LP is always feasible and bounded; this is a solver fault
        raise RuntimeError(f"HiGHS failed on the sampled LP: {res.message}")
    # marginals are d(objective)/d(b_ub) <= 0 for the negated coverage rows; a group row's
    # marginal is the sum of its tasks' duals, so x_g = -marginal / size_g
    x = np.maximum(-np.asarray(res.ineqlin.marginals[:n], dtype=float) / size, 0.0)
    u = np.asarray(res.x[k:], dtype=float)
    return x, u
