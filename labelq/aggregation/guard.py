"""What ``auto`` does when the labels alone cannot tell which model is right.

**The credible-set guard.** A richer model (Dawid-Skene, one-coin EM, ``auto``'s own
worker model) moves a task's answer away from the majority vote when it believes the
minority's workers are better. Without gold nothing checks that belief: a bloc of workers
who agree on wrong answers looks reliable to every model fitted on agreement, and a full
confusion model fits each worker's habits whether or not they are right (issue 33: on
real data sets the candidate that predicts held-out labels best is ``ds`` on 12 of 13,
including five where it is 1.5 to 8.8 points *below* majority vote against the truth).
So the richer model may choose among the classes that the vote itself leaves plausible
-- its ``1 - alpha`` credible set under the one-coin posterior of the vote (each label
counts the crowd's common log-odds, from how often two labels on a task agree) -- and
the vote's answer stands where the richer model would leave that set. Near a tie (a
1-1 or 3-3 split, a 2-1 split of mediocre workers) the richer model decides; it cannot
overturn a clear majority. Where it does not overturn, the result is the richer model's.

``alpha`` is 0.1, the 90 % credible set. docs/aggregation.md ("Issue 33") gives the
measurements at 0.02, 0.05 and 0.1 on the 13 shared data sets, full and subsampled; 0.1
is the one at which the full sets all hold majority vote's accuracy (``adult2``, 4
classes, decides it), which makes it a choice made on those sets, and says so.

On a task where the vote's answer is kept, the probabilities reported are the vote's
posterior, so the answer is always the most probable class of the probabilities shown.

**The accuracy estimate** (:func:`accuracy_interval`, issue 41): an interval is claimed
only from *random* gold answers (gold questions served on a schedule, or audit answers drawn
from the labelled tasks: the ``calibration`` mask of :class:`~labelq.aggregation.auto.
AutoAggregator`), each scored on the answer the chosen method gives it with its own gold
hidden (cross-validated). They are a random sample of the labelled tasks, so the number of
them answered right is hypergeometric, and the interval is exact: the Clopper-Pearson
construction for a finite population (:func:`exact_interval`) -- every total of right
answers R among the n sampled plus N exported tasks that the sample does not reject at
2.5 % on either side, read as the exported tasks' accuracy (R - x) / N. It holds whatever
the confidences say and when every gold answer is right (20 of 20 right: 0.83-1.00 over
many tasks), and it is never zero-width unless nothing is uncertain. The point estimate is
the Jeffreys posterior mean (x + 1/2) / (n + 1). It holds when the random answers are
labelled like the tasks (gold exempt from the label cap is thinned to the tasks' label
counts first: ``AutoAggregator._thin_gold``).

The previous estimator (prediction-powered, stratified by confidence) missed on real data:
with all held-out answers right and at confidence ~1 its residual variance vanished
([1.000, 1.000] while the truth was 0.993), and without gold the "range of the models'
beliefs" missed 4 of 12 hidden sets. Tasks marked gold after loading (``labelq gold
mark``, e.g. from ``labelq gold suggest``) were chosen for being doubtful: they choose the
method but neither calibrate nor enter this estimate (a temperature fitted on 30 suggested
answers of adult2 took the expected calibration error from 0.18 to 0.39).

**Without random answers there is no interval** (basis ``models``): the estimate is the
models' belief (the mean confidence of the answers), unchecked -- models that multiply
labels as if their errors were independent are overconfident (adult2: answers at
confidence 1 - 1e-9 right 83 % of the time). :func:`audit_answers` says how many random
answers (``labelq gold audit NAME --n N``) the exact interval needs to bound the accuracy
to +-0.03, at the models' belief and at the accuracy of a single label (the crowd's
accuracy behind how often two labels on a task agree: aggregating should not do worse).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from .base import BoolArray, FloatArray, IntArray

__all__ = ["Guarded", "credible_guard", "AccuracyEstimate", "accuracy_interval", "ALPHA",
           "exact_interval", "audit_answers", "AUDIT_HALF_WIDTH"]

#: the vote's credible set is 1 - ALPHA
ALPHA = 0.1


@dataclass(frozen=True)
class Guarded:
    labels: IntArray  # (T,)
    probas: FloatArray  # (T, K)
    differ: BoolArray  # (T,): the richer model's answer is not the vote's
    overruled: BoolArray  # (T,): ... and lies outside the vote's credible set


def _argmax(p: FloatArray) -> IntArray:
    out: IntArray = np.argmax(p, axis=1).astype(np.int64)
    return out


def credible_guard(rich: ArrayLike, vote: ArrayLike, alpha: float = ALPHA) -> Guarded:
    """The richer model's posterior ``rich`` restricted to the classes whose vote
    posterior ``vote`` is at least ``alpha`` (the vote's own answer always is)."""
    r, v = np.asarray(rich, float), np.asarray(vote, float)
    T = r.shape[0]
    rows = np.arange(T)
    v_ans = _argmax(v)
    allowed = v >= alpha
    allowed[rows, v_ans] = True
    r_ans = _argmax(r)
    labels = _argmax(np.where(allowed, r, -1.0))
    overruled = labels != r_ans
    probas = r.copy()
    probas[overruled] = v[overruled]
    return Guarded(labels=labels, probas=probas, differ=r_ans != v_ans, overruled=overruled)


@dataclass(frozen=True)
class AccuracyEstimate:
    """The share of answers expected to be right and its basis: ``gold`` (random gold
    answers, held out: ``low``/``high`` the exact 95 % interval) or ``models`` (the models'
    belief, unchecked: no interval, ``low``/``high`` None; ``audit_n`` random answers
    would bound it to +-:data:`AUDIT_HALF_WIDTH` at that belief, ``audit_n_floor`` at
    ``floor``, the accuracy of a single label), or ``none`` (no labelled task)."""

    estimate: float
    low: float | None
    high: float | None
    basis: str  # "gold", "models" or "none"
    n_tasks: int
    n_gold: int
    n_right: int = 0
    audit_n: int | None = None
    audit_n_floor: int | None = None
    floor: float | None = None

    def as_dict(self) -> dict[str, float | int | str | None]:
        return {"estimate": _round(self.estimate), "low": _round(self.low),
                "high": _round(self.high), "basis": self.basis, "n_tasks": self.n_tasks,
                "n_gold": self.n_gold, "n_right": self.n_right, "audit_n": self.audit_n,
                "audit_n_floor": self.audit_n_floor, "floor": _round(self.floor)}


def _round(x: float | None) -> float | None:
    return None if x is None or x != x else round(float(x), 4)


#: the half-width :func:`audit_answers` aims at
AUDIT_HALF_WIDTH = 0.03
#: two-sided level of the exact interval
LEVEL = 0.95


def exact_interval(right: int, n: int, n_other: int, level: float = LEVEL
                   ) -> tuple[float, float]:
    """Exact interval for the share right among ``n_other`` tasks, from ``right`` of ``n``
    tasks drawn at random without replacement from the ``n + n_other``: the totals R
    (``right <= R <= right + n_other``) at which neither tail of the hypergeometric
    count of right answers in the sample is below ``(1 - level) / 2``, read as
    ``(R - right) / n_other``. Finite-population Clopper-Pearson: at least ``level``
    coverage whatever the accuracy, and it is wide where the sample is small or the
    other tasks are few (one other task: [0, 1] unless the sample rules a total out)."""
    from scipy.stats import hypergeom

    if not 0 <= right <= n or n_other < 1:
        raise ValueError(f"need 0 <= right <= n and n_other >= 1, got {right}, {n}, "
                         f"{n_other}")
    if n == 0:
        return 0.0, 1.0
    tail = (1.0 - level) / 2
    N = n + n_other

    def first(pred: Callable[[int], bool], lo: int, hi: int) -> int:
        """The smallest R in [lo, hi] with ``pred`` (monotone: False then True), else
        hi + 1."""
        if not pred(hi):
            return hi + 1
        while lo < hi:
            mid = (lo + hi) // 2
            if pred(mid):
                hi = mid
            else:
                lo = mid + 1
        return lo

    # P(X >= right | R) grows with R, P(X <= right | R) falls with it: bisect each end
    low_r = first(lambda r: float(hypergeom.sf(right - 1, N, r, n)) > tail,
                  right, right + n_other)
    high_r = first(lambda r: float(hypergeom.cdf(right, N, r, n)) <= tail,
                   right, right + n_other) - 1
    if high_r < low_r:  # (cannot happen at level < 1: the sample's own share is kept)
        return 0.0, 1.0
    return (low_r - right) / n_other, (high_r - right) / n_other


def audit_answers(accuracy: float, n_other: int, half_width: float = AUDIT_HALF_WIDTH,
                  level: float = LEVEL) -> int | None:
    """How many random answers, drawn from ``n_other`` labelled tasks, :func:`exact_interval`
    needs to bound the accuracy of the tasks left to +-``half_width`` when the answers are
    right at ``accuracy`` (the sample's right count rounded to the nearest); None when no
    sample of these tasks does (a few hundred tasks: the accuracy of those left is itself
    uncertain by more). Found by bisection (the width falls with n, up to the rounding)."""
    p = float(min(1.0, max(0.0, accuracy)))
    if n_other < 2:
        return None

    def half(n: int, other: int) -> float:
        lo, hi = exact_interval(int(round(p * n)), n, other, level)
        return (hi - lo) / 2

    # bisect with the other tasks fixed at n_other (the width then falls with n); the
    # audit answers come from those tasks, so check the n found with n_other - n left
    lo_n, hi_n = 1, 64
    while half(hi_n, n_other) > half_width:
        lo_n, hi_n = hi_n, hi_n * 2
        if hi_n >= n_other:
            return None
    while hi_n - lo_n > 1:
        mid = (lo_n + hi_n) // 2
        if half(mid, n_other) > half_width:
            lo_n = mid
        else:
            hi_n = mid
    for n in range(hi_n, min(n_other, hi_n + max(8, hi_n // 4))):
        if half(n, n_other - n) <= half_width:
            return n
    return None


def _clip(x: float) -> float:
    return float(min(1.0, max(0.0, x)))


def accuracy_interval(confidence: ArrayLike, *, held_right: ArrayLike | None = None,
                      floor: float | None = None) -> AccuracyEstimate:
    """The accuracy of answers whose confidences are ``confidence`` (one per exported task).

    With ``held_right`` (per random gold answer, held out: was the chosen method's answer
    right), the Jeffreys estimate and the exact interval of :func:`exact_interval`.
    Otherwise the models' belief (the mean confidence), with no interval and the random
    answers that would bound it (:func:`audit_answers`) at that belief and at ``floor``
    (the accuracy of a single label). See the module docstring."""
    c = np.asarray(confidence, float)
    N = c.size
    if N == 0:
        return AccuracyEstimate(float("nan"), None, None, "none", 0, 0)
    if held_right is not None and np.size(held_right) >= 1:
        r = np.asarray(held_right, float)
        n, x = int(r.size), int(round(float(r.sum())))
        low, high = exact_interval(x, n, N)
        est = min(high, max(low, (x + 0.5) / (n + 1.0)))
        return AccuracyEstimate(est, low, high, "gold", N, n, n_right=x)
    mean = _clip(float(c.mean()))
    f = None if floor is None else _clip(floor)
    return AccuracyEstimate(mean, None, None, "models", N, 0, audit_n=audit_answers(mean, N),
                            audit_n_floor=None if f is None else audit_answers(f, N),
                            floor=f)
