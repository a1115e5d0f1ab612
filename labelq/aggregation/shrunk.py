"""``shrunk``: the worker model of the ``auto`` policy, as an aggregation method.

The ``auto`` policy routes with a one-coin model per worker and task category, shrunk
population -> worker -> category, fitted by MAP-EM in which a label counts for its worker
only against the posterior of its task *without* it (:mod:`labelq.policies.worker_model`,
docs/auto.md). This class fits exactly that model over a set of labels, with the policy's
default hyper-parameters, so that the model an ``auto`` project routes with is also a
candidate of the export (``auto``'s aggregation), can be cross-validated on gold like the
other methods, and is what ``labelq aggregate --method shrunk`` gives for a file.

With gold, agreement is calibrated against it as in the policy (each worker's agreement
evidence discounted by how far the workers' agreement-based accuracies depart from their
gold records, :mod:`labelq.policies.worker_model`, issue 34).

Like the policy's refit it starts from equal workers (the majority vote) and runs
``iters`` EM steps (the policy runs 3 per refit; here 10 by default, to convergence on the
shared data sets).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike

from ..policies import worker_model as em
from .base import BaseAggregator, FloatArray, LabelArrays, check_gold

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = ["ShrunkOneCoin"]


class ShrunkOneCoin(BaseAggregator):
    r"""One-coin accuracies per (worker, category) with hierarchical shrinkage (``auto``'s
    own worker model): worker j answers the true class of a task of category s with
    probability :math:`a_{js}`, any other class with :math:`(1-a_{js})/(K-1)`;
    :math:`a_{js}` is shrunk towards the worker's :math:`a_j` by ``strength``
    pseudo-labels and :math:`a_j` towards the population mean (prior ``prior_accuracy``
    with the weight of ``prior_strength`` labels). Gold answers are clamped.

    Learned: ``accuracy_`` (W, S), ``class_prior_``, ``probas_``, ``labels_``; with
    predictions also ``model_sources_`` (the models' fitted tables, ``_model_source``).
    """

    uses_gold = True
    uses_categories = True
    uses_calibration = True
    uses_predictions = True  # a model is one more source in the same EM (issue 42)
    uses_suggested = True  # labels given with its answer shown, weighed apart (fit_em)

    #: learned: accuracy per (worker, category) (W, S) and the class prior (K,)
    accuracy_: FloatArray
    class_prior_: FloatArray
    model_sources_: em.ModelSources

    def __init__(self, prior_accuracy: float = 0.7, prior_strength: float = 10.0,
                 strength: float = 4.0, iters: int = 10) -> None:
        self.prior_accuracy, self.prior_strength = prior_accuracy, prior_strength
        self.strength, self.iters = strength, iters

    def fit(self, task: ArrayLike, worker: ArrayLike, label: ArrayLike, *,
            n_tasks: int | None = None, n_workers: int | None = None,
            n_classes: int | None = None, gold: ArrayLike | None = None,
            categories: ArrayLike | None = None,
            calibration: ArrayLike | None = None,
            predictions: Mapping[str, FloatArray] | None = None,
            suggested: ArrayLike | None = None) -> Self:
        """Fit on label arrays with ``gold`` (class index or -1 per task) clamped, the tasks'
        ``categories``, ``calibration`` (see :meth:`_fit`), models' ``predictions``
        (:mod:`labelq.aggregation.base`) and ``suggested`` (bool per label: given with the
        model's answer shown; ``worker_model.fit_em``); returns ``self``."""
        return self.fit_with(task, worker, label,
                             {"gold": gold, "categories": categories,
                              "calibration": calibration, "predictions": predictions,
                              "suggested": suggested},
                             n_tasks=n_tasks, n_workers=n_workers, n_classes=n_classes)

    def _fit(self, d: LabelArrays, gold: ArrayLike | None = None,
             categories: ArrayLike | None = None,
             calibration: ArrayLike | None = None,
             predictions: Mapping[str, FloatArray] | None = None,
             suggested: ArrayLike | None = None) -> None:
        """``calibration`` (bool per task): the gold answers that may measure how far
        agreement departs from gold (default all; see ``fit_em``'s ``calibrate``);
        ``predictions``: models as sources fitted in the same EM (``worker_model.build_sources``)."""
        K = d.n_classes
        g = check_gold(gold, d.n_tasks, K)
        cat = (np.zeros(d.n_tasks, dtype=np.int64) if categories is None
               else np.asarray(categories, dtype=np.int64))
        S = int(cat.max()) + 1 if cat.size else 1
        src = em.build_sources(predictions, d.n_tasks, K, S) if predictions else None
        sug = None if suggested is None else np.asarray(suggested, bool)
        model_ll = np.zeros((d.n_tasks, K))
        if K < 2 or d.task.size == 0:
            self.probas_ = np.full((d.n_tasks, K), 1.0 / K)
            self.accuracy_ = np.full((d.n_workers, S), self.prior_accuracy)
            self.class_prior_ = np.full(K, 1.0 / K)
        else:
            fit = em.fit_em(d.task, d.worker, d.label, cat[d.task], g[d.task], d.n_tasks,
                            d.n_workers, S, K, mu0=self.prior_accuracy,
                            m0=self.prior_strength, m=self.strength, iters=self.iters,
                            per_worker=True,
                            calibrate=True if calibration is None else
                            np.asarray(calibration, dtype=bool)[d.task],
                            sources=src, task_category=cat, judge_by_models=True,
                            suggested=sug)
            acc, _, _ = em.shrunk_accuracy(fit.correct, fit.total, K, self.prior_accuracy,
                                           self.prior_strength, self.strength, True)
            lw = (em.label_weights(em.copied_labels(src, d.task, d.label, sug))
                  if src is not None and sug is not None else None)
            ll = em.task_loglik(d.task, acc[d.worker, cat[d.task]], d.label, d.n_tasks, K,
                                lw)
            if src is not None:
                model_ll = src.loglik(cat)
            self.probas_ = em.posterior(ll + model_ll, np.log(fit.class_prior))
            self.accuracy_, self.class_prior_ = acc, fit.class_prior
        if src is not None:
            self.model_accuracy_ = src.accuracy()
            self.model_sources_ = src  # the measured tables (labelq.modelsavings' twin)
        unlabelled = (np.bincount(d.task, minlength=d.n_tasks) == 0) & ~np.any(
            model_ll != 0, axis=1)
        self.probas_[unlabelled] = 1.0 / K
        known = np.flatnonzero(g >= 0)
        self.probas_[known] = np.eye(K)[g[known]]
