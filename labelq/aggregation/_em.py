"""The EM loop shared by the Dawid-Skene family, over a sparse label-count matrix.

Labels are packed once into ``A`` (n_tasks x n_sources*K), ``A[i, v*K + y]`` = how many
times source ``v`` answered ``y`` on task ``i`` (a source is a worker, or a
(worker, category) pair for the category-aware model). With ``E[v*K + y, k] =
log P(v answers y | class k)``, both EM steps are one sparse product each:

* E-step: ``log T = A @ E + log prior`` (then a row softmax);
* M-step: ``counts[v, y, k] = (A.T @ T)`` reshaped -- expected answer counts per true class.

Each product costs O(labels x K), which is what makes 10 million labels take seconds.

Only *informative* tasks -- with two or more labels, or a gold answer -- enter the M-step.
A task with one label cannot tell a worker's error from the truth: its posterior is made
from that very label, so counting it back into the worker's confusion only confirms
whatever the model already believes. Fed back, it lets EM drift to a degenerate fit (at one
label per task: "every task is class 0, each worker answers at random"), which on the
shared data sets at one label per task scored 0.29 (dog), 0.23 (web), 0.50 (rte) where
majority vote scores 0.72, 0.56, 0.73. Such tasks are still inferred, in the E-step.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import scipy.sparse as sp

from .base import BoolArray, FloatArray, IntArray

__all__ = ["EMResult", "MStep", "Trace", "informative_tasks", "run_em", "softmax_rows",
           "safe_log"]

TINY = 1e-300


def safe_log(x: FloatArray) -> FloatArray:
    # log(0) -> log(1e-300) (~ -690): an impossible answer stays finite, so no NaN appears
    out: FloatArray = np.log(np.maximum(x, TINY))
    return out


def softmax_rows(logits: FloatArray) -> FloatArray:
    # subtract the row max so exp never overflows
    z: FloatArray = logits - logits.max(axis=1, keepdims=True)
    np.exp(z, out=z)
    z /= z.sum(axis=1, keepdims=True)
    return z


class EMResult:
    """The posteriors (n_tasks, K) EM ended at, the last M-step's watched ``params``, the
    iterations run and whether the change fell below ``tol``."""

    __slots__ = ("posteriors", "params", "n_iter", "converged")

    def __init__(self, posteriors: FloatArray, params: FloatArray, n_iter: int,
                 converged: bool) -> None:
        self.posteriors, self.params = posteriors, params
        self.n_iter, self.converged = n_iter, converged


#: ``m_step(AT_T, T) -> (E, log_prior, params)`` (see :func:`run_em`)
MStep = Callable[[FloatArray, FloatArray], tuple[FloatArray, FloatArray, FloatArray]]
#: ``trace(it, E, log_prior)`` (see :func:`run_em`)
Trace = Callable[[int, FloatArray, FloatArray], None]


def informative_tasks(A: sp.csr_matrix, gold: IntArray) -> BoolArray:
    """Tasks whose labels say something about the workers: two or more labels, or gold."""
    out: BoolArray = (np.asarray(A.sum(axis=1)).ravel() >= 2) | (gold >= 0)
    return out


def run_em(A: sp.csr_matrix, init: FloatArray, m_step: MStep, gold: IntArray,
           labelled: BoolArray, tol: float, max_iter: int,
           informative: BoolArray | None = None,
           trace: Trace | None = None) -> EMResult:
    """Iterate M-step / E-step from the posteriors ``init`` until parameters settle.

    ``m_step(AT_T, T) -> (E, log_prior, params)``: ``AT_T`` is ``A.T @ T`` (expected counts),
    ``E`` the (n_sources*K, K) log answer-probability matrix, ``log_prior`` (K,) or
    (n_tasks, K), ``params`` any array whose change is watched for convergence.
    Stops when the max abs change of both the posteriors and ``params`` is below ``tol``
    (not on the likelihood bound: with repeated labels the bound flattens long before the
    parameters settle). Gold rows (``gold >= 0``) stay clamped to one-hot; unlabelled
    rows keep ``init`` (uniform). ``informative`` (bool per task, default all) selects the
    rows of ``A`` the M-step counts (see the module docstring); the E-step covers all.
    ``trace(it, E, log_prior)``, if given, is called after every M-step (1-based ``it``).
    """
    if max_iter < 1:  # the callers check their own max_iter; this says why it matters
        raise ValueError(f"run_em needs max_iter >= 1 (one M-step), got {max_iter}")
    A_m = A if informative is None else sp.diags(informative.astype(float)) @ A
    AT = A_m.T.tocsr()
    T = init.copy()
    rows = np.flatnonzero(gold >= 0)
    T[rows] = 0.0
    T[rows, gold[rows]] = 1.0
    free = labelled & (gold < 0)
    params_old: FloatArray | None = None
    converged = False
    it = 0
    for it in range(1, max_iter + 1):
        E, log_prior, params = m_step(AT @ T, T)
        if trace is not None:
            trace(it, E, log_prior)
        T_new = T.copy()
        T_new[free] = softmax_rows((A @ E + log_prior)[free] if np.ndim(log_prior) == 1
                                   else (A @ E)[free] + log_prior[free])
        dt = float(np.abs(T_new - T).max()) if T.size else 0.0
        dp = float(np.abs(params - params_old).max()) if params_old is not None else np.inf
        T, params_old = T_new, params
        if max(dt, dp) < tol:
            converged = True
            break
    assert params_old is not None  # max_iter >= 1: the loop ran
    return EMResult(T, params_old, it, converged)
