"""Category-aware Dawid-Skene: one confusion matrix per (worker, task category)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike

from ..errors import InputError
from ._em import informative_tasks, run_em, safe_log
from .base import FloatArray, LabelArrays, check_gold, count_matrix
from .dawid_skene import EMAggregator, mv_shares

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = ["CategoryDawidSkene"]


class CategoryDawidSkene(EMAggregator):
    r"""Dawid-Skene where a worker's confusion matrix depends on the task's category.

    Each task :math:`i` has a known category :math:`c_i` (e.g. the sport in ``athlete``).
    Worker :math:`j` answers :math:`y` on a class-:math:`k` task of category :math:`c` with
    probability :math:`\pi_{jcky}`. Categories where :math:`j` gave few labels are shrunk
    toward :math:`j`'s category-blind matrix :math:`\bar\pi_{jky}` (the M-step of
    :class:`DawidSkene` on all of :math:`j`'s labels) -- a Dirichlet prior centred there:

    .. math::
        \pi_{jcky} = \frac{\sum_{i: c_i = c} T_{ik} n_{ijy} + s\,\bar\pi_{jky}}
                          {\sum_{i: c_i = c,\, y'} T_{ik} n_{ijy'} + s}, \qquad
        \rho_{ck} = \frac{\sum_{i: c_i = c} T_{ik} + s\,\bar\rho_k}{n_c + s}.

    ``shrinkage`` :math:`s` is in pseudo-labels per true class: with many labels in a
    category the worker's own per-category rates win, with none the global ones are used.
    ``smoothing``, ``diag_prior``, ``tol``, ``max_iter``, ``gold``, the informative tasks
    and the initialisation are as in
    :class:`DawidSkene`; with a single category the model is exactly :class:`DawidSkene`
    (no shrinkage step).
    This is the specialisation idea of Kim & Chung's "D-type" model and of the
    context-dependent worker weights of BBTA (Zhang, Ma & Sugiyama 2015), in EM form.

    ``fit(..., categories=int array (n_tasks,))`` (``fit_data`` passes the data set's).
    Learned: ``errors_`` (n_workers, n_categories, K, K), ``global_errors_``
    (n_workers, K, K), ``priors_`` (n_categories, K), ``n_iter_``, ``converged_``.
    """

    uses_categories = True

    #: learned: (n_workers, n_categories, K, K) and the category-blind (n_workers, K, K)
    errors_: FloatArray
    global_errors_: FloatArray

    def __init__(self, shrinkage: float = 2.0, smoothing: float = 0.3, tol: float = 1e-6,
                 max_iter: int = 300, diag_prior: float = 0.3) -> None:
        super().__init__(smoothing=smoothing, tol=tol, max_iter=max_iter, diag_prior=diag_prior)
        if shrinkage < 0:
            raise InputError(f"shrinkage must be >= 0, got {shrinkage}", field="shrinkage")
        self.shrinkage = shrinkage

    def fit(self, task: ArrayLike, worker: ArrayLike, label: ArrayLike, *,
            n_tasks: int | None = None, n_workers: int | None = None,
            n_classes: int | None = None, gold: ArrayLike | None = None,
            categories: ArrayLike | None = None,
            predictions: Mapping[str, FloatArray] | None = None) -> Self:
        """Fit on label arrays with the tasks' ``categories`` (int per task; None: one
        category) and ``gold`` (class index or -1 per task) clamped; returns ``self``."""
        return self.fit_with(task, worker, label, {"categories": categories, "gold": gold,
                              "predictions": predictions},
                             n_tasks=n_tasks, n_workers=n_workers, n_classes=n_classes)

    def _fit(self, d: LabelArrays, categories: ArrayLike | None = None,
             gold: ArrayLike | None = None) -> None:
        g = check_gold(gold, d.n_tasks, d.n_classes)
        if categories is None:
            cat = np.zeros(d.n_tasks, dtype=np.int64)
        else:
            cat = np.asarray(categories, dtype=np.int64)
            if cat.shape != (d.n_tasks,):
                raise InputError(f"categories must have shape ({d.n_tasks},), got {cat.shape}",
                                 field="categories")
            if cat.size and cat.min() < 0:
                raise InputError("categories must be >= 0", field="categories")
        K, W, s = d.n_classes, d.n_workers, self.shrinkage
        pseudo = self._pseudo_counts(K)
        C = int(cat.max()) + 1 if cat.size else 1
        source = d.worker * C + cat[d.task]  # virtual worker = (worker, category)
        A = count_matrix(d.task, source * K + d.label, d.n_tasks, W * C * K)
        init, labelled = mv_shares(count_matrix(d.task, d.label, d.n_tasks, K).toarray())
        informative = informative_tasks(A, g)
        fitted = labelled & informative
        onehot_cat = np.zeros((d.n_tasks, C))
        onehot_cat[np.arange(d.n_tasks), cat] = fitted
        state: dict[str, FloatArray] = {}

        def m_step(counts: FloatArray, T: FloatArray
                   ) -> tuple[FloatArray, FloatArray, FloatArray]:
            c = counts.reshape(W, C, K, K)  # (worker, category, answer y, true k)
            tot = c.sum(axis=1) + pseudo
            glob = tot / np.maximum(tot.sum(axis=1, keepdims=True), 1e-300)
            rho = self._prior(T, fitted)
            pi: FloatArray
            rho_c: FloatArray
            if C == 1:  # nothing to shrink toward: exactly DawidSkene
                pi, rho_c = glob[:, None], rho[None]
            else:
                pi = (c + s * glob[:, None]) / np.maximum(c.sum(axis=2, keepdims=True) + s,
                                                          1e-300)
                per_cat = onehot_cat.T @ T  # (category, k) expected class counts
                rho_c = (per_cat + s * rho) / (per_cat.sum(axis=1, keepdims=True) + s)
            state.update(glob=glob, rho_c=rho_c)
            return safe_log(pi).reshape(W * C * K, K), safe_log(rho_c)[cat], pi

        res = run_em(A, init, m_step, g, labelled, self.tol, self.max_iter, informative)
        self._finish(d, res, labelled, g)
        self.errors_ = res.params.transpose(0, 1, 3, 2)
        self.global_errors_ = state["glob"].transpose(0, 2, 1)
        self.priors_ = state["rho_c"]
