"""Majority vote and weighted majority vote."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike

from ..errors import InputError
from .base import BaseAggregator, FloatArray, IntArray, LabelArrays, Seed, count_matrix

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = ["MajorityVote", "WeightedMajorityVote", "vote_probas", "common_log_odds"]


def vote_probas(scores: FloatArray, smoothing: float) -> FloatArray:
    """Laplace-smoothed vote shares ``(s_ik + a) / (sum_k s_ik + K a)``; uniform on empty rows."""
    n_classes = scores.shape[1]
    num = scores + smoothing
    den = num.sum(axis=1, keepdims=True)
    empty = den[:, 0] <= 0
    den[empty] = 1.0
    out: FloatArray = num / den
    out[empty] = 1.0 / n_classes
    return out


def _pick(scores: FloatArray, tie_break: str, rng: Seed) -> IntArray:
    out: IntArray
    if tie_break == "first":
        out = np.argmax(scores, axis=1).astype(np.int64)
        return out
    # random: add a tiny random key that only matters between exactly equal scores
    gen = np.random.default_rng(rng)
    top = scores.max(axis=1, keepdims=True)
    keys = np.where(scores == top, gen.random(scores.shape), -1.0)
    out = np.argmax(keys, axis=1).astype(np.int64)
    return out



def common_log_odds(d: LabelArrays) -> float:
    """log((K-1) q / (1-q)) for the accuracy q with which two labels on a task agree as
    often as they do: P(agree) = q^2 + (1-q)^2/(K-1); 1 (a guess) without pairs. What one
    label of a plain vote is worth, in the one-coin posterior of the vote (here and in
    ``auto``'s)."""
    K = d.n_classes
    counts = count_matrix(d.task, d.label, d.n_tasks, K).toarray()
    n = counts.sum(axis=1)
    pairs = float((n * (n - 1)).sum())
    if K < 2 or pairs == 0:
        return 1.0
    agree = float((counts * (counts - 1)).sum()) / pairs
    # solve K q^2 - 2 q + 1 - (K-1) agree = 0 for the root above chance (1/K)
    disc = max(4 - 4 * K * (1 - (K - 1) * agree), 0.0)
    q = float(np.clip((2 + np.sqrt(disc)) / (2 * K), 1.0 / K + 1e-3, 0.999))
    return float(np.log((K - 1) * q / (1 - q)))


class MajorityVote(BaseAggregator):
    r"""Majority vote: the class answered most often.

    .. math:: \hat y_i = \arg\max_k \sum_{l: t_l = i} [y_l = k], \qquad
              p_{ik} = \frac{n_{ik} + a}{n_i + K a}

    ``smoothing`` ``a`` (default 1, Laplace) keeps a single label from reading as certain
    (one label of two classes gives confidence 2/3); it never changes the chosen class.

    Ties: ``tie_break="first"`` (default) picks the lowest class index, deterministic;
    ``"random"`` picks uniformly among the tied classes with ``rng`` (a seed or Generator).
    Tasks without labels get class 0 and uniform probabilities.
    """

    #: the (weighted) vote counts per (task, class) of the last fit
    scores_: FloatArray

    def _label_posterior(self, d: LabelArrays) -> FloatArray:
        """The one-coin posterior of the vote (``auto``'s, :meth:`~.auto.AutoAggregator.
        _vote_posterior`): vote shares are not probabilities (2/3 for any lone label), and
        the models' evidence is weighed against this (issue 42)."""
        from ._em import softmax_rows

        scores = np.asarray(self.scores_, dtype=float)
        if getattr(self, "weight_unit_", None) is None:
            scores = scores * common_log_odds(d)
        if d.n_classes < 2 or not np.any(scores):
            return self.probas_
        out: FloatArray = softmax_rows(scores)
        return out

    def __init__(self, smoothing: float = 1.0, tie_break: str = "first",
                 rng: Seed = None) -> None:
        if smoothing < 0:
            raise InputError(f"smoothing must be >= 0, got {smoothing}", field="smoothing")
        if tie_break not in ("first", "random"):
            raise InputError(f"tie_break must be 'first' or 'random', got {tie_break!r}",
                             field="tie_break")
        self.smoothing, self.tie_break, self.rng = smoothing, tie_break, rng

    def _scores(self, d: LabelArrays) -> FloatArray:
        out: FloatArray = count_matrix(d.task, d.label, d.n_tasks, d.n_classes).toarray()
        return out

    def _fit(self, d: LabelArrays) -> None:
        scores = self._scores(d)
        self.scores_ = scores
        self.probas_ = vote_probas(scores, self.smoothing)
        self.labels_ = _pick(scores, self.tie_break, self.rng)


class WeightedMajorityVote(MajorityVote):
    r"""Weighted majority vote (e.g. BBTA's aggregation, Zhang, Ma & Sugiyama 2015, eq. 1).

    .. math:: s_{ik} = \sum_{l: t_l = i} w_{j_l, c_i}\,[y_l = k], \qquad
              \hat y_i = \arg\max_k s_{ik}, \qquad p_{ik} = \frac{s_{ik} + a}{\sum_k s_{ik} + K a}

    ``weights`` (passed to ``fit``; non-negative) is either per worker, shape (n_workers,),
    or per (worker, category), shape (n_workers, n_categories) together with
    ``categories`` (int (n_tasks,)) -- BBTA's context-dependent weights plug in directly.
    Without weights, each worker gets the log-odds of its smoothed agreement ``p_j`` with the
    plain majority vote, ``w_j = max(0, log((K-1) p_j / (1 - p_j)))`` (one step of iterative
    weighted voting; a worker at or below chance gets weight 0). The smoothing ``a`` is in
    units of the mean positive weight, so it has the same strength as in :class:`MajorityVote`.
    Ties as in :class:`MajorityVote`.
    """

    uses_categories = True

    #: the mean positive weight (the unit of ``smoothing``) of the last fit
    weight_unit_: float

    def fit(self, task: ArrayLike, worker: ArrayLike, label: ArrayLike, *,
            n_tasks: int | None = None, n_workers: int | None = None,
            n_classes: int | None = None, weights: ArrayLike | None = None,
            categories: ArrayLike | None = None,
            predictions: Mapping[str, FloatArray] | None = None) -> Self:
        """Fit on label arrays with ``weights`` per worker or per (worker, category) and
        the tasks' ``categories`` (see the class docstring); returns ``self``."""
        return self.fit_with(task, worker, label,
                             {"weights": weights, "categories": categories,
                              "predictions": predictions},
                             n_tasks=n_tasks, n_workers=n_workers, n_classes=n_classes)

    def _scores(self, d: LabelArrays, weights: ArrayLike | None = None,
                categories: ArrayLike | None = None) -> FloatArray:
        if weights is None:
            weights = agreement_weights(d)
        w = np.asarray(weights, dtype=float)
        if np.any(~np.isfinite(w)) or np.any(w < 0):
            raise InputError("weights must be finite and >= 0", field="weights")
        if w.ndim == 1:
            if w.shape[0] < d.n_workers:
                raise InputError(f"weights has {w.shape[0]} entries, need n_workers="
                                 f"{d.n_workers}", field="weights")
            per_label = w[d.worker]
        elif w.ndim == 2:
            if categories is None:
                raise InputError("per-(worker, category) weights need categories=",
                                 field="categories")
            cat = np.asarray(categories, dtype=np.int64)
            if cat.shape != (d.n_tasks,):
                raise InputError(f"categories must have shape ({d.n_tasks},), got {cat.shape}",
                                 field="categories")
            if w.shape[0] < d.n_workers or (cat.size and cat.max() >= w.shape[1]):
                raise InputError(f"weights shape {w.shape} does not cover n_workers="
                                 f"{d.n_workers} and the categories", field="weights")
            per_label = w[d.worker, cat[d.task]]
        else:
            raise InputError(f"weights must be 1-D or 2-D, got shape {w.shape}", field="weights")
        pos = w[w > 0]
        self.weight_unit_ = float(pos.mean()) if pos.size else 1.0
        out: FloatArray = count_matrix(d.task, d.label, d.n_tasks, d.n_classes,
                                       per_label).toarray()
        return out

    def _fit(self, d: LabelArrays, weights: ArrayLike | None = None,
             categories: ArrayLike | None = None) -> None:
        scores = self._scores(d, weights=weights, categories=categories)
        self.scores_ = scores
        self.probas_ = vote_probas(scores, self.smoothing * self.weight_unit_)
        self.labels_ = _pick(scores, self.tie_break, self.rng)


def agreement_weights(d: LabelArrays) -> FloatArray:
    """Per-worker log-odds weight of agreeing with the plain majority vote (see WMV)."""
    mv = np.argmax(count_matrix(d.task, d.label, d.n_tasks, d.n_classes).toarray(), axis=1)
    agree = np.bincount(d.worker, weights=(d.label == mv[d.task]).astype(float),
                        minlength=d.n_workers)
    total = np.bincount(d.worker, minlength=d.n_workers)
    p = (agree + 1.0) / (total + 2.0)  # Beta(1,1) smoothing: no worker is certain
    k = d.n_classes
    out: FloatArray = (np.maximum(0.0, np.log((k - 1) * p / (1.0 - p))) if k > 1
                       else np.ones(d.n_workers))
    return out
