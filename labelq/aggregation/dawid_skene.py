"""Dawid-Skene (full confusion matrices) and its one-coin special case."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Protocol

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike

from ..errors import InputError
from ._em import EMResult, MStep, informative_tasks, run_em, safe_log
from .base import (
    BaseAggregator,
    BoolArray,
    FloatArray,
    IntArray,
    LabelArrays,
    check_gold,
    count_matrix,
)

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = ["EMAggregator", "DawidSkene", "OneCoinDawidSkene", "mv_shares"]


def mv_shares(A_task_label: FloatArray) -> tuple[FloatArray, BoolArray]:
    """Initial posteriors: each task's share of votes per class (uniform when unlabelled)."""
    counts = np.asarray(A_task_label, dtype=float)
    n = counts.sum(axis=1)
    labelled: BoolArray = n > 0
    T = np.full_like(counts, 1.0 / counts.shape[1])
    T[labelled] = counts[labelled] / n[labelled, None]
    return T, labelled


def _check_em_params(tol: float, max_iter: int, smoothing: float,
                     diag_prior: float = 0.0) -> None:
    if not tol > 0:
        raise InputError(f"tol must be > 0, got {tol}", field="tol")
    if max_iter < 1:
        raise InputError(f"max_iter must be >= 1, got {max_iter}", field="max_iter")
    if smoothing < 0:
        raise InputError(f"smoothing must be >= 0, got {smoothing}", field="smoothing")
    if not diag_prior >= 0:
        raise InputError(f"diag_prior must be >= 0, got {diag_prior}", field="diag_prior")


class _Run(Protocol):
    """One EM run, for at most ``n`` iterations (default: the aggregator's ``max_iter``)."""

    def __call__(self, n: int | None = None, /) -> EMResult: ...


class EMAggregator(BaseAggregator):
    """The Dawid-Skene family: EM over :mod:`labelq.aggregation._em`, ``gold`` clamped, a
    class-prior collapse guarded against (:meth:`_run_guarded`)."""

    uses_gold = True

    #: learned: EM iterations run, whether they converged, the tasks with a label
    n_iter_: int
    converged_: bool
    labelled_: BoolArray
    #: learned: the class prior was held at the label shares after a collapse
    collapsed_: bool
    #: learned: the iterations the refit ran, chosen by held-out likelihood (or None)
    stopped_at_: int | None
    #: learned: the class prior (K,), or per category (n_categories, K)
    priors_: FloatArray

    def __init__(self, smoothing: float = 0.3, tol: float = 1e-6, max_iter: int = 300,
                 diag_prior: float = 0.3) -> None:
        _check_em_params(tol, max_iter, smoothing, diag_prior)
        self.smoothing, self.tol, self.max_iter = smoothing, tol, max_iter
        self.diag_prior = diag_prior

    #: a fitted class prior below this share of the class's share of the labels is a
    #: collapse (see :meth:`_run_guarded`)
    COLLAPSE_RATIO = 0.1
    #: ... for a class given in at least this share of the labels
    COLLAPSE_MIN_SHARE = 0.05

    fixed_prior_: FloatArray | None = None

    def fit(self, task: ArrayLike, worker: ArrayLike, label: ArrayLike, *,
            n_tasks: int | None = None, n_workers: int | None = None,
            n_classes: int | None = None, gold: ArrayLike | None = None,
            predictions: Mapping[str, FloatArray] | None = None) -> Self:
        """Fit on label arrays, ``gold`` (class index or -1 per task) clamped; returns
        ``self``."""
        return self.fit_with(task, worker, label, {"gold": gold, "predictions": predictions},
                             n_tasks=n_tasks,
                             n_workers=n_workers, n_classes=n_classes)

    def _prior(self, T: FloatArray, labelled: BoolArray) -> FloatArray:
        """Class prior from the tasks in ``labelled`` (the M-step passes the informative
        ones: a one-label task's posterior is its own label, and counting it would let the
        prior run away to one class when workers look noisy); the label shares instead
        after a collapse (:meth:`_run_guarded`)."""
        if self.fixed_prior_ is not None:
            return self.fixed_prior_
        k = T.shape[1]
        mass = T[labelled].sum(axis=0) + self.smoothing
        out: FloatArray = (mass / max(mass.sum(), 1e-300) if mass.sum() > 0
                           else np.full(k, 1.0 / k))
        return out

    def _pseudo_counts(self, K: int) -> FloatArray:
        """Dirichlet pseudo-counts (answer y, true k) added to every confusion matrix."""
        out: FloatArray = self.smoothing + self.diag_prior * np.eye(K)
        return out

    def _fits_class_prior(self) -> bool:
        return True

    def _run_guarded(self, d: LabelArrays, run: _Run, fitted: BoolArray,
                     stop: Callable[[], int] | None = None) -> EMResult:
        """``run()`` (the EM), and again with the class prior held at the label shares if
        the fit *collapsed*: a class given in at least ``COLLAPSE_MIN_SHARE`` of the labels
        got a prior below ``COLLAPSE_RATIO`` times that share -- the model says it is
        (almost) never the truth and explains every label of it as a worker's error.

        With few labels per worker that fit can have the higher posterior (a confusion row
        of a class no task has sits at the prior's mode, which the data cannot beat), and
        EM slides there from majority vote: bluebirds at 2 labels per task (class 1 in 37 %
        of the labels, prior 0.01; accuracy 0.556 against 0.630 held), web at 2 (class 2:
        17 %, prior 0.002; 0.547 against 0.615). On the shared sets (full, and at 1-3
        labels per task with 4 seeds) the smallest ratio short of a collapse is 0.5
        (product, whose workers give the rare class twice as often as it is true).
        ``collapsed_`` says whether the guard acted.

        ``stop()`` (optional, :class:`DawidSkene`) returns the number of EM iterations the
        refit may run (``stopped_at_``); without it the refit runs to convergence. With it,
        a fit that reaches ``max_iter`` without converging is also rerun for ``stop()``
        iterations: its end point is wherever ``max_iter`` cut a slow slide (web at 3
        labels per task: on all 20 draws of ``bench.aggregation --draws``, the class prior
        creeping toward the class workers over-use), not a fixed point, and the held-out
        likelihood chooses where to stop instead. A converged fit is left alone."""
        self.fixed_prior_ = None
        self.stopped_at_ = None
        res = run()
        K = d.n_classes
        share = np.bincount(d.label, minlength=K) / max(d.label.size, 1)
        prior = self._prior(res.posteriors, fitted)
        self.collapsed_ = self._fits_class_prior() and bool(
            np.any((share >= self.COLLAPSE_MIN_SHARE) & (prior < self.COLLAPSE_RATIO * share)))
        if self.collapsed_:
            counts = share * d.label.size + self.smoothing
            self.fixed_prior_ = counts / counts.sum()
            if stop is not None:
                self.stopped_at_ = stop()
                res = run(self.stopped_at_)
            else:
                res = run()
        if stop is not None and self.stopped_at_ is None and not res.converged:
            self.stopped_at_ = stop()
            res = run(self.stopped_at_)
        return res

    def _finish(self, d: LabelArrays, res: EMResult, labelled: BoolArray,
                gold: IntArray) -> None:
        self.probas_ = res.posteriors
        self.n_iter_, self.converged_ = res.n_iter, res.converged
        self.labelled_ = labelled


class DawidSkene(EMAggregator):
    r"""Dawid-Skene EM: one full confusion matrix per worker.

    Dawid, A. P. & Skene, A. M. (1979). Maximum likelihood estimation of observer
    error-rates using the EM algorithm. *Applied Statistics* 28(1), 20-28.

    Worker :math:`j` answers :math:`y` on a task of true class :math:`k` with probability
    :math:`\pi_{jky}`; classes have prior :math:`\rho_k`. With :math:`n_{ijy}` the number of
    times :math:`j` answered :math:`y` on task :math:`i` (repeats count),

    .. math::
        T_{ik} \propto \rho_k \prod_{j,y} \pi_{jky}^{n_{ijy}} \quad\text{(E-step)}, \qquad
        \pi_{jky} = \frac{\sum_i T_{ik} n_{ijy} + \alpha + \beta[y = k]}
                        {\sum_{i,y'} T_{ik} n_{ijy'} + K\alpha + \beta},
        \quad \rho_k = \frac{\sum_i T_{ik} + \alpha}{n + K\alpha} \quad\text{(M-step)},

    the sums of the M-step running over the *informative* tasks only (two or more labels, or
    gold; see :mod:`labelq.aggregation._em`). This is MAP-EM with a Dirichlet prior
    :math:`(\alpha + \beta[y = k])_y` on each confusion row :math:`\pi_{jk\cdot}`:
    ``smoothing`` :math:`\alpha` keeps every answer possible (a task with one label is never
    certain), ``diag_prior`` :math:`\beta` says "a worker is a little more likely to be right
    than to give any one wrong answer", so a worker with one or two labels gets a mild
    confusion close to the prior, never an extreme one; with many labels the data win. Both 0
    give the 1979 maximum-likelihood fit. Starts from majority-vote shares (like crowd-kit).
    Stops when the largest change of any posterior and any :math:`\pi` is below ``tol``. ``gold``
    (passed to ``fit``; class index or -1 per task) clamps known answers to one-hot.

    Learned: ``errors_`` (n_workers, K, K) with ``errors_[j, k, y] = P(j answers y | k)``,
    ``priors_`` (K,), ``n_iter_``, ``converged_``, ``collapsed_`` (the class prior was held at
    the label shares after a collapse; see :meth:`EMAggregator._run_guarded`),
    ``stopped_at_`` (after a collapse, or when EM reached ``max_iter`` without converging,
    the iterations the refit ran, chosen by held-out likelihood: :meth:`_held_out_stop`;
    None otherwise).

    >>> DawidSkene().fit([0, 0, 1], [0, 1, 0], [1, 1, 0]).labels_
    array([1, 0])
    """

    #: learned: (n_workers, K, K), ``errors_[j, k, y] = P(j answers y | k)``
    errors_: FloatArray

    def _m_step_factory(self, d: LabelArrays, fitted: BoolArray) -> MStep:
        K, W = d.n_classes, d.n_workers
        pseudo = self._pseudo_counts(K)

        def m_step(counts: FloatArray, T: FloatArray
                   ) -> tuple[FloatArray, FloatArray, FloatArray]:
            c = counts.reshape(W, K, K) + pseudo  # (worker, answer y, true k)
            pi: FloatArray = c / np.maximum(c.sum(axis=1, keepdims=True), 1e-300)
            prior = self._prior(T, fitted)
            return safe_log(pi).reshape(W * K, K), safe_log(prior), pi
        return m_step

    def _fit(self, d: LabelArrays, gold: ArrayLike | None = None) -> None:
        g = check_gold(gold, d.n_tasks, d.n_classes)
        A = count_matrix(d.task, d.worker * d.n_classes + d.label, d.n_tasks,
                         d.n_workers * d.n_classes)
        init, labelled = mv_shares(count_matrix(d.task, d.label, d.n_tasks,
                                                d.n_classes).toarray())
        informative = informative_tasks(A, g)
        fitted = labelled & informative
        res = self._run_guarded(
            d, lambda n=None: run_em(A, init, self._m_step_factory(d, fitted), g, labelled,
                                     self.tol, n or self.max_iter, informative), fitted,
            stop=lambda: self._held_out_stop(d, A, init, g, labelled, fitted, informative))
        self._finish(d, res, labelled, g)
        self.errors_ = res.params.transpose(0, 2, 1)  # (worker, true k, answer y)
        self.priors_ = self._prior(res.posteriors, fitted)


    #: held-out folds and fold splits of :meth:`_held_out_stop`
    HOLDOUT_FOLDS = 5
    HOLDOUT_SPLITS = 3

    def _held_out_stop(self, d: LabelArrays, A: sp.csr_matrix, init: FloatArray, g: IntArray,
                       labelled: BoolArray, fitted: BoolArray, informative: BoolArray) -> int:
        """How many EM iterations the refit after a collapse (or after a fit that did not
        converge; :meth:`EMAggregator._run_guarded`) may run: the one where the
        held-out likelihood of whole tasks peaks. The informative non-gold tasks are split
        into ``HOLDOUT_FOLDS`` folds (``HOLDOUT_SPLITS`` seeded splits); each fold's tasks
        leave the M-step, and after every iteration their labels are scored by the marginal
        likelihood ``log sum_k rho_k prod_j pi_jk,y`` under the parameters fitted without
        them. The summed curve's first maximum is the answer (``max_iter`` when it only
        rises). A collapse says the converged fit is not to be trusted: the workers' 5-30
        labels let EM fit their matrices to noise, and the iterates that predict unseen
        tasks best are the earlier ones (bluebirds at 2 labels per task: 2 iterations,
        0.630 -> 0.648; web at 2: 3, 0.615 -> 0.632; docs/aggregation.md)."""
        idx = np.flatnonzero(fitted & (g < 0))
        if idx.size < self.HOLDOUT_FOLDS:
            return self.max_iter
        total = np.zeros(self.max_iter)
        for split in range(self.HOLDOUT_SPLITS):
            fold = np.random.default_rng(split).permutation(idx.size) % self.HOLDOUT_FOLDS
            for f in range(self.HOLDOUT_FOLDS):
                hold = np.zeros(d.n_tasks, dtype=bool)
                hold[idx[fold == f]] = True
                A_hold = A[hold]
                curve = np.empty(self.max_iter)

                def trace(it: int, E: FloatArray, log_prior: FloatArray,
                          A_hold: sp.csr_matrix = A_hold, curve: FloatArray = curve) -> None:
                    z = np.asarray(A_hold @ E) + log_prior
                    top = z.max(axis=1, keepdims=True)
                    curve[it - 1] = float((top[:, 0] + np.log(np.exp(z - top).sum(axis=1)))
                                          .sum())

                res = run_em(A, init, self._m_step_factory(d, fitted & ~hold), g, labelled,
                             self.tol, self.max_iter, informative & ~hold, trace=trace)
                curve[res.n_iter:] = curve[res.n_iter - 1]
                total += curve
        return int(np.argmax(total)) + 1


class OneCoinDawidSkene(EMAggregator):
    r"""One-coin Dawid-Skene: each worker has one accuracy :math:`p_j`.

    The confusion matrix is :math:`\pi_{jkk} = p_j`, :math:`\pi_{jky} = (1-p_j)/(K-1)` for
    :math:`y \ne k` (errors spread evenly). The M-step is

    .. math:: p_j = \frac{\sum_i \sum_k T_{ik} n_{ijk} + \alpha + \beta}{n_j + 2\alpha + \beta}

    (expected share of correct answers, a Beta(1+alpha+beta, 1+alpha) prior: ``diag_prior``
    beta leans a worker with little evidence toward better than chance); the E-step,
    prior, initialisation, informative tasks, stopping rule and ``gold`` are those of
    :class:`DawidSkene`.

    ``class_prior="uniform"`` holds the class prior at 1/K instead of fitting it: the model
    is then an iterated weighted majority vote, each worker's vote weighing
    :math:`\log((K-1) p_j / (1 - p_j))` -- what ``auto`` uses when workers have many
    checkable labels but not enough per confusion cell for :class:`DawidSkene`.
    Learned: ``skills_`` (n_workers,) = :math:`p_j`, ``priors_``, ``n_iter_``, ``collapsed_``.
    """

    #: learned: each worker's accuracy p_j (n_workers,)
    skills_: FloatArray

    def __init__(self, smoothing: float = 0.3, tol: float = 1e-6, max_iter: int = 300,
                 diag_prior: float = 0.3, class_prior: str = "fit") -> None:
        super().__init__(smoothing=smoothing, tol=tol, max_iter=max_iter,
                         diag_prior=diag_prior)
        if class_prior not in ("fit", "uniform"):
            raise InputError(f"class_prior must be 'fit' or 'uniform', got {class_prior!r}",
                             field="class_prior")
        self.class_prior = class_prior

    def _fits_class_prior(self) -> bool:
        return self.class_prior == "fit"

    def _prior(self, T: FloatArray, labelled: BoolArray) -> FloatArray:
        if self.class_prior == "uniform":
            return np.full(T.shape[1], 1.0 / T.shape[1])
        return super()._prior(T, labelled)

    def _fit(self, d: LabelArrays, gold: ArrayLike | None = None) -> None:
        g = check_gold(gold, d.n_tasks, d.n_classes)
        K, W, a, b = d.n_classes, d.n_workers, self.smoothing, self.diag_prior
        A = count_matrix(d.task, d.worker * K + d.label, d.n_tasks, W * K)
        init, labelled = mv_shares(count_matrix(d.task, d.label, d.n_tasks, K).toarray())
        informative = informative_tasks(A, g)
        fitted = labelled & informative
        eye = np.eye(K, dtype=bool)

        def m_step(counts: FloatArray, T: FloatArray
                   ) -> tuple[FloatArray, FloatArray, FloatArray]:
            c = counts.reshape(W, K, K)
            correct = c[:, eye].sum(axis=1)
            total = c.sum(axis=(1, 2))
            p: FloatArray = (correct + a + b) / np.maximum(total + 2 * a + b, 1e-300)
            pi: FloatArray
            if K == 1:
                pi = np.ones((W, 1, 1))
            else:
                pi = np.where(eye[None], p[:, None, None], ((1 - p) / (K - 1))[:, None, None])
            return safe_log(pi).reshape(W * K, K), safe_log(self._prior(T, fitted)), p

        # called as run() only: without ``stop`` the guard never caps the iterations
        res = self._run_guarded(d, lambda n=None: run_em(A, init, m_step, g, labelled,
                                                         self.tol, n or self.max_iter,
                                                         informative), fitted)
        self._finish(d, res, labelled, g)
        self.skills_ = res.params
        self.priors_ = self._prior(res.posteriors, fitted)
