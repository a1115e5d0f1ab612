"""GLAD: worker ability times task easiness (Whitehill et al. 2009)."""

from __future__ import annotations

import numpy as np
from scipy.optimize import minimize

from ..errors import InputError
from ._em import safe_log, softmax_rows
from .base import BaseAggregator, LabelArrays, check_gold, count_matrix
from .dawid_skene import mv_shares

__all__ = ["GLAD"]


def _log_sigmoid(z: np.ndarray) -> np.ndarray:
    # log(1 / (1 + e^-z)) without overflow for large |z|
    return -np.logaddexp(0.0, -z)


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

    the M-step maximises the expected log-likelihood plus Gaussian priors
    :math:`\alpha_j \sim N(\mu_\alpha, 1)`, :math:`b_i \sim N(\mu_b, 1)` with a few L-BFGS
    steps on the analytic gradient (:math:`\partial/\partial z_l = q_l - \sigma_l`,
    :math:`q_l = T_{i y_l}`), all vectorised over labels. The priors keep a task with one
    label from reading as certain. Starts from majority-vote shares; stops when the largest
    change of any posterior is below ``tol``. ``gold`` clamps known answers.

    Learned: ``alphas_`` (n_workers,), ``betas_`` (n_tasks,), ``priors_``, ``n_iter_``.
    """

    uses_gold = True

    def __init__(self, alpha_prior: float = 1.0, beta_prior: float = 1.0,
                 smoothing: float = 0.3, tol: float = 1e-5, max_iter: int = 100,
                 m_step_iter: int = 25):
        if not tol > 0 or max_iter < 1 or m_step_iter < 1:
            raise InputError("tol must be > 0, max_iter and m_step_iter >= 1")
        self.alpha_prior, self.beta_prior, self.smoothing = alpha_prior, beta_prior, smoothing
        self.tol, self.max_iter, self.m_step_iter = tol, max_iter, m_step_iter

    def _fit(self, d: LabelArrays, gold=None) -> None:
        g = check_gold(gold, d.n_tasks, d.n_classes)
        K, n, W = d.n_classes, d.n_tasks, d.n_workers
        t, w, y = d.task, d.worker, d.label
        T, labelled = mv_shares(count_matrix(t, y, n, K).toarray())
        rows = np.flatnonzero(g >= 0)
        T[rows] = 0.0
        T[rows, g[rows]] = 1.0
        free = labelled & (g < 0)
        log_k1 = np.log(K - 1) if K > 1 else 0.0
        x = np.concatenate([np.full(W, self.alpha_prior), np.full(n, self.beta_prior)])

        def neg_q(x, q):
            a, b = x[:W], x[W:]
            beta = np.exp(b)
            z = a[w] * beta[t]
            ls, l1s = _log_sigmoid(z), _log_sigmoid(-z)
            val = np.sum(q * ls + (1 - q) * (l1s - log_k1))
            val -= 0.5 * np.sum((a - self.alpha_prior) ** 2) + 0.5 * np.sum((b - self.beta_prior) ** 2)
            r = q - np.exp(ls)  # dQ/dz per label
            ga = np.bincount(w, r * beta[t], minlength=W) - (a - self.alpha_prior)
            gb = np.bincount(t, r * z, minlength=n) - (b - self.beta_prior)
            return -val, -np.concatenate([ga, gb])

        it = 0
        converged = False
        for it in range(1, self.max_iter + 1):
            q = T[t, y]
            x = minimize(neg_q, x, args=(q,), jac=True, method="L-BFGS-B",
                         options={"maxiter": self.m_step_iter}).x
            mass = T[labelled].sum(axis=0) + self.smoothing
            prior = mass / mass.sum()
            z = x[:W][w] * np.exp(x[W:])[t]
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
        self.alphas_, self.betas_ = x[:W], np.exp(x[W:])
        self.priors_ = prior
        self.n_iter_, self.converged_ = it, converged
