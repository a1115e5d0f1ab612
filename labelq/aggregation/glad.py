"""GLAD: worker ability times task easiness (Whitehill et al. 2009)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike

from ..errors import InputError
from ._em import safe_log, softmax_rows
from .base import BaseAggregator, FloatArray, IntArray, LabelArrays, check_gold, count_matrix
from .dawid_skene import mv_shares

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = ["GLAD"]


def _log_sigmoid(z: FloatArray) -> FloatArray:
    # log(1 / (1 + e^-z)) without overflow for large |z|
    out: FloatArray = -np.logaddexp(0.0, -z)
    return out


class GLAD(BaseAggregator):
    r"""GLAD (Generative model of Labels, Abilities, and Difficulties).

    Whitehill, J., Ruvolo, P., Wu, T., Bergsma, J. & Movellan, J. (2009). Whose vote
    should count more. *NIPS 22*.

    Worker :math:`j` has ability :math:`\alpha_j \in \mathbb R`, task :math:`i` inverse
    difficulty :math:`\beta_i = e^{b_i} > 0`; the label is correct with probability
    :math:`\sigma(\alpha_j \beta_i)`, and wrong answers are spread evenly over the other
    :math:`K-1` classes. EM: the E-step is

    .. math:: T_{ik} \propto \rho_k \prod_{l \in i} \sigma_l^{[y_l=k]}
              \Big(\frac{1-\sigma_l}{K-1}\Big)^{[y_l \ne k]},

    the M-step raises the expected log-likelihood plus Gaussian priors
    :math:`\alpha_j \sim N(\mu_\alpha, 1)`, :math:`b_i \sim N(\mu_b, 1)` with
    ``m_step_iter`` diagonal Newton steps on the analytic gradient
    (:math:`\partial/\partial z_l = q_l - \sigma_l`, :math:`q_l = T_{i y_l}`), all
    vectorised over labels (crowd-kit runs a generic optimiser here, hence its minutes). The priors keep a task with one
    label from reading as certain. Starts from majority-vote shares; stops when the largest
    change of any posterior is below ``tol``. ``gold`` clamps known answers.

    Learned: ``alphas_`` (n_workers,), ``betas_`` (n_tasks,), ``priors_``, ``n_iter_``.
    """

    uses_gold = True

    #: learned: worker abilities (n_workers,), task inverse difficulties (n_tasks,), the
    #: class prior (K,), EM iterations run and whether they converged
    alphas_: FloatArray
    betas_: FloatArray
    priors_: FloatArray
    n_iter_: int
    converged_: bool

    def __init__(self, alpha_prior: float = 1.0, beta_prior: float = 1.0,
                 smoothing: float = 0.3, tol: float = 1e-5, max_iter: int = 100,
                 m_step_iter: int = 3) -> None:
        if not tol > 0 or max_iter < 1 or m_step_iter < 1:
            raise InputError("tol must be > 0, max_iter and m_step_iter >= 1")
        self.alpha_prior, self.beta_prior, self.smoothing = alpha_prior, beta_prior, smoothing
        self.tol, self.max_iter, self.m_step_iter = tol, max_iter, m_step_iter

    def fit(self, task: ArrayLike, worker: ArrayLike, label: ArrayLike, *,
            n_tasks: int | None = None, n_workers: int | None = None,
            n_classes: int | None = None, gold: ArrayLike | None = None,
            predictions: Mapping[str, FloatArray] | None = None) -> Self:
        """Fit on label arrays, ``gold`` (class index or -1 per task) clamped; returns
        ``self``."""
        return self.fit_with(task, worker, label, {"gold": gold, "predictions": predictions},
                             n_tasks=n_tasks,
                             n_workers=n_workers, n_classes=n_classes)

    def _fit(self, d: LabelArrays, gold: ArrayLike | None = None) -> None:
        g = check_gold(gold, d.n_tasks, d.n_classes)
        K, n, W = d.n_classes, d.n_tasks, d.n_workers
        t, w, y = d.task, d.worker, d.label
        T, labelled = mv_shares(count_matrix(t, y, n, K).toarray())
        rows = np.flatnonzero(g >= 0)
        T[rows] = 0.0
        T[rows, g[rows]] = 1.0
        free = labelled & (g < 0)
        log_k1 = np.log(K - 1) if K > 1 else 0.0
        a = np.full(W, self.alpha_prior)
        b = np.full(n, self.beta_prior)
        it = 0
        converged = False
        for it in range(1, self.max_iter + 1):
            q = T[t, y]
            a, b = self._m_step(a, b, q, t, w, n, W)
            mass = T[labelled].sum(axis=0) + self.smoothing
            prior = mass / mass.sum()
            z = a[w] * np.exp(b)[t]
            log_wrong = _log_sigmoid(-z) - log_k1
            logits = np.bincount(t, log_wrong, minlength=n)[:, None] + safe_log(prior)[None]
            logits += np.bincount(t * K + y, _log_sigmoid(z) - log_wrong,
                                  minlength=n * K).reshape(n, K)
            T_new = T.copy()
            T_new[free] = softmax_rows(logits[free])
            delta = float(np.abs(T_new - T).max()) if T.size else 0.0
            T = T_new
            if delta < self.tol:
                converged = True
                break
        self.probas_ = T
        self.alphas_, self.betas_ = a, np.exp(b)
        self.priors_ = prior
        self.n_iter_, self.converged_ = it, converged

    def _m_step(self, a: FloatArray, b: FloatArray, q: FloatArray, t: IntArray, w: IntArray,
                n: int, W: int) -> tuple[FloatArray, FloatArray]:
        """``m_step_iter`` rounds of diagonal Newton steps, first on every alpha_j, then on
        every b_i (a generalised EM step: it raises the expected log-likelihood without
        maximising it, which is all EM needs, at the cost of two passes over the labels)."""
        for _ in range(self.m_step_iter):
            beta = np.exp(b)[t]
            z = a[w] * beta
            sig = np.exp(_log_sigmoid(z))
            grad = np.bincount(w, (q - sig) * beta, minlength=W) - (a - self.alpha_prior)
            # the alpha-problem is concave: Hessian -sum s(1-s) beta^2 - 1 (prior)
            hess = np.bincount(w, sig * (1 - sig) * beta ** 2, minlength=W) + 1.0
            a = a + np.clip(grad / hess, -0.5, 0.5)  # damped: big jumps can flip signs
            z = a[w] * beta
            sig = np.exp(_log_sigmoid(z))
            grad = np.bincount(t, (q - sig) * z, minlength=n) - (b - self.beta_prior)
            # Fisher scoring in b = log beta (the exact Hessian may be positive there)
            hess = np.bincount(t, sig * (1 - sig) * z ** 2, minlength=n) + 1.0
            b = b + np.clip(grad / hess, -1.0, 1.0)
        return a, b
