"""Dawid-Skene (full confusion matrices) and its one-coin special case."""

from __future__ import annotations

import numpy as np

from ..errors import InputError
from ._em import run_em, safe_log
from .base import BaseAggregator, LabelArrays, check_gold, count_matrix

__all__ = ["DawidSkene", "OneCoinDawidSkene", "mv_shares"]


def mv_shares(A_task_label: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Initial posteriors: each task's share of votes per class (uniform when unlabelled)."""
    counts = np.asarray(A_task_label, dtype=float)
    n = counts.sum(axis=1)
    labelled = n > 0
    T = np.full_like(counts, 1.0 / counts.shape[1])
    T[labelled] = counts[labelled] / n[labelled, None]
    return T, labelled


def _check_em_params(tol: float, max_iter: int, smoothing: float) -> None:
    if not tol > 0:
        raise InputError(f"tol must be > 0, got {tol}", field="tol")
    if max_iter < 1:
        raise InputError(f"max_iter must be >= 1, got {max_iter}", field="max_iter")
    if smoothing < 0:
        raise InputError(f"smoothing must be >= 0, got {smoothing}", field="smoothing")


class _EMAggregator(BaseAggregator):
    uses_gold = True

    def __init__(self, smoothing: float = 0.3, tol: float = 1e-6, max_iter: int = 300):
        _check_em_params(tol, max_iter, smoothing)
        self.smoothing, self.tol, self.max_iter = smoothing, tol, max_iter

    def _prior(self, T: np.ndarray, labelled: np.ndarray) -> np.ndarray:
        k = T.shape[1]
        # unlabelled tasks carry no evidence; they must not pull the prior toward itself
        mass = T[labelled].sum(axis=0) + self.smoothing
        return mass / max(mass.sum(), 1e-300) if mass.sum() > 0 else np.full(k, 1.0 / k)

    def _finish(self, d: LabelArrays, res, labelled: np.ndarray, gold: np.ndarray) -> None:
        self.probas_ = res.posteriors
        self.n_iter_, self.converged_ = res.n_iter, res.converged
        self.labelled_ = labelled


class DawidSkene(_EMAggregator):
    r"""Dawid-Skene EM: one full confusion matrix per worker.

    Dawid, A. P. & Skene, A. M. (1979). Maximum likelihood estimation of observer
    error-rates using the EM algorithm. *Applied Statistics* 28(1), 20-28.

    Worker :math:`j` answers :math:`y` on a task of true class :math:`k` with probability
    :math:`\pi_{jky}`; classes have prior :math:`\rho_k`. With :math:`n_{ijy}` the number of
    times :math:`j` answered :math:`y` on task :math:`i` (repeats count),

    .. math::
        T_{ik} \propto \rho_k \prod_{j,y} \pi_{jky}^{n_{ijy}} \quad\text{(E-step)}, \qquad
        \pi_{jky} = \frac{\sum_i T_{ik} n_{ijy} + \alpha}{\sum_{i,y'} T_{ik} n_{ijy'} + K\alpha},
        \quad \rho_k = \frac{\sum_i T_{ik} + \alpha}{n + K\alpha} \quad\text{(M-step)}.

    Starts from majority-vote shares (like crowd-kit), ``smoothing`` :math:`\alpha` is a
    symmetric Dirichlet pseudo-count (0 gives the 1979 maximum-likelihood fit; the default
    0.3, chosen by the sweep in docs/aggregation.md, keeps every answer possible, so a task
    with one label is never certain). Stops when
    the largest change of any posterior and any :math:`\pi` is below ``tol``. ``gold``
    (passed to ``fit``; class index or -1 per task) clamps known answers to one-hot.

    Learned: ``errors_`` (n_workers, K, K) with ``errors_[j, k, y] = P(j answers y | k)``,
    ``priors_`` (K,), ``n_iter_``, ``converged_``.

    >>> DawidSkene().fit([0, 0, 1], [0, 1, 0], [1, 1, 0]).labels_
    array([1, 0])
    """

    def _m_step_factory(self, d: LabelArrays, labelled: np.ndarray):
        K, W, a = d.n_classes, d.n_workers, self.smoothing

        def m_step(counts, T):
            c = counts.reshape(W, K, K)  # (worker, answer y, true k)
            pi = (c + a) / np.maximum(c.sum(axis=1, keepdims=True) + K * a, 1e-300)
            prior = self._prior(T, labelled)
            return safe_log(pi).reshape(W * K, K), safe_log(prior), pi
        return m_step

    def _fit(self, d: LabelArrays, gold=None) -> None:
        g = check_gold(gold, d.n_tasks, d.n_classes)
        A = count_matrix(d.task, d.worker * d.n_classes + d.label, d.n_tasks,
                         d.n_workers * d.n_classes)
        init, labelled = mv_shares(count_matrix(d.task, d.label, d.n_tasks,
                                                d.n_classes).toarray())
        res = run_em(A, init, self._m_step_factory(d, labelled), g, labelled,
                     self.tol, self.max_iter)
        self._finish(d, res, labelled, g)
        self.errors_ = res.params.transpose(0, 2, 1)  # (worker, true k, answer y)
        self.priors_ = self._prior(res.posteriors, labelled)


class OneCoinDawidSkene(_EMAggregator):
    r"""One-coin Dawid-Skene: each worker has one accuracy :math:`p_j`.

    The confusion matrix is :math:`\pi_{jkk} = p_j`, :math:`\pi_{jky} = (1-p_j)/(K-1)` for
    :math:`y \ne k` (errors spread evenly). The M-step is

    .. math:: p_j = \frac{\sum_i \sum_k T_{ik} n_{ijk} + \alpha}{n_j + 2\alpha}

    (expected share of correct answers, Beta(1+alpha, 1+alpha) smoothing); the E-step,
    prior, initialisation, stopping rule and ``gold`` are those of :class:`DawidSkene`.
    Learned: ``skills_`` (n_workers,) = :math:`p_j`, ``priors_``, ``n_iter_``.
    """

    def _fit(self, d: LabelArrays, gold=None) -> None:
        g = check_gold(gold, d.n_tasks, d.n_classes)
        K, W, a = d.n_classes, d.n_workers, self.smoothing
        A = count_matrix(d.task, d.worker * K + d.label, d.n_tasks, W * K)
        init, labelled = mv_shares(count_matrix(d.task, d.label, d.n_tasks, K).toarray())
        eye = np.eye(K, dtype=bool)

        def m_step(counts, T):
            c = counts.reshape(W, K, K)
            correct = c[:, eye].sum(axis=1)
            total = c.sum(axis=(1, 2))
            p = (correct + a) / np.maximum(total + 2 * a, 1e-300)
            if K == 1:
                pi = np.ones((W, 1, 1))
            else:
                pi = np.where(eye[None], p[:, None, None], ((1 - p) / (K - 1))[:, None, None])
            return safe_log(pi).reshape(W * K, K), safe_log(self._prior(T, labelled)), p

        res = run_em(A, init, m_step, g, labelled, self.tol, self.max_iter)
        self._finish(d, res, labelled, g)
        self.skills_ = res.params
        self.priors_ = self._prior(res.posteriors, labelled)
