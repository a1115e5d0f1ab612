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

**The accuracy estimate** (:func:`accuracy_interval`): the mean confidence of the
answers, with an interval. With gold, a prediction-powered estimate (Angelopoulos et al.
2023), stratified by confidence (Fisch et al. 2024): within each confidence stratum, the
mean confidence of the exported answers corrected by the mean of (right - confidence) of
the held-out gold answers in that stratum, weighted by the stratum's share of the
exported answers, with the standard error of every term. Strata matter because gold
questions are not collected like the tasks: an adaptive policy stops asking about a task
once two labels agree, so most exported answers sit at confidence 0.99 and above while
the gold questions, asked on a schedule, spread lower (``labelq demo``: 173 of 300 answers
above 0.99, 4 of 40 gold answers); a single correction measured on the gold would be the
wrong one for most answers. A stratum with fewer than 5 held-out gold answers is not
corrected but estimated from those answers alone (their Jeffreys posterior; with none, a
coin's): where the gold does not reach the confidence most answers sit at, the interval
says so by being wide (an earlier version merged such strata with their neighbours and
its interval missed the demo's true accuracy on 4 of 10 seeds). It holds when, at the
same confidence, gold questions and tasks are alike. Tasks marked gold after loading (``labelq gold mark``, e.g. from ``labelq
gold suggest``) were chosen for being doubtful, so they choose the method but neither
calibrate nor enter this estimate: on them every model looks worse than it is elsewhere
(measured: a temperature fitted on 30 suggested answers of adult2 took the expected
calibration error from 0.18 to 0.39). Without such a sample the confidences are the
models' belief only, and those multiply labels as if their errors were independent: on
adult2 answers at confidence 1 - 1e-9 are right 83 % of the time. The interval then runs
from the accuracy of a single label (the crowd's accuracy behind how often two labels on a
task agree: aggregating should not do worse) or the lowest accuracy a candidate model (the
vote's posterior, the richer model) assigns to the exported answers, whichever is lower,
to the highest, widened by their sampling error -- honestly wide.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from .base import BoolArray, FloatArray, IntArray

__all__ = ["Guarded", "credible_guard", "AccuracyEstimate", "accuracy_interval", "ALPHA"]

#: the vote's credible set is 1 - ALPHA
ALPHA = 0.1
_Z = 1.959964  # two-sided 95 % normal quantile


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
    """The share of answers expected to be right, with a 95 % interval and its basis."""

    estimate: float
    low: float
    high: float
    basis: str  # "gold" or "models"
    n_tasks: int
    n_gold: int

    def as_dict(self) -> dict[str, float | int | str]:
        return {"estimate": round(self.estimate, 4), "low": round(self.low, 4),
                "high": round(self.high, 4), "basis": self.basis, "n_tasks": self.n_tasks,
                "n_gold": self.n_gold}


def _clip(x: float) -> float:
    return float(min(1.0, max(0.0, x)))


#: confidence strata of the gold estimate
STRATA = (0.8, 0.95, 0.99)
#: held-out gold answers a stratum needs for the prediction-powered correction; with fewer
#: its accuracy is the Jeffreys posterior of those answers alone (none: Beta(1/2, 1/2))
MIN_STRATUM = 5


def _strata() -> list[tuple[float, float]]:
    edges = [0.0, *STRATA, 1.0 + 1e-9]
    return list(zip(edges[:-1], edges[1:], strict=True))


def accuracy_interval(confidence: ArrayLike, *, held_right: ArrayLike | None = None,
                      held_conf: ArrayLike | None = None,
                      model_beliefs: list[FloatArray] | None = None,
                      floor: float | None = None) -> AccuracyEstimate:
    """The accuracy of answers whose confidences are ``confidence`` (one per task).

    With ``held_right``/``held_conf`` (held-out gold: was the answer right, and its
    confidence), the prediction-powered estimate mean(conf) + mean(right - held_conf).
    Otherwise, ``model_beliefs`` (each candidate model's probability of every answer)
    bound the interval from below and above, and ``floor`` (the accuracy of a single
    label) from below too (see the module docstring)."""
    c = np.asarray(confidence, float)
    N = c.size
    if N == 0:
        return AccuracyEstimate(float("nan"), 0.0, 1.0, "none", 0, 0)
    mean = float(c.mean())
    se_c = float(c.std(ddof=1) / np.sqrt(N)) if N > 1 else 0.5
    if held_right is not None and held_conf is not None and np.size(held_right) >= 2:
        hc = np.asarray(held_conf, float)
        r = np.asarray(held_right, float) - hc
        est, var = 0.0, 0.0
        right = np.asarray(held_right, float)
        for lo, hi in _strata():
            inc = (c >= lo) & (c < hi)
            inh = (hc >= lo) & (hc < hi)
            w = inc.mean()
            if w == 0:
                continue
            cs, rs = c[inc], r[inh]
            if rs.size >= MIN_STRATUM:
                est += w * (cs.mean() + rs.mean())
                var += w ** 2 * ((cs.var(ddof=1) / cs.size if cs.size > 1 else 0.0)
                                 + rs.var(ddof=1) / rs.size)
            else:  # too little gold where these answers sit: what that gold says, widely
                a, b = right[inh].sum() + 0.5, (1.0 - right[inh]).sum() + 0.5
                est += w * a / (a + b)
                var += w ** 2 * a * b / ((a + b) ** 2 * (a + b + 1.0))
        se = float(np.sqrt(var))
        return AccuracyEstimate(_clip(est), _clip(est - _Z * se), _clip(est + _Z * se),
                                "gold", N, int(r.size))
    beliefs = [mean] + [float(np.asarray(b, float).mean()) for b in (model_beliefs or [])]
    low = min(beliefs) if floor is None else min(min(beliefs), floor)
    return AccuracyEstimate(_clip(mean), _clip(low - _Z * se_c),
                            _clip(max(beliefs) + _Z * se_c), "models", N, 0)
