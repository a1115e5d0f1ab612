"""A model's predictions as one more source of labels (issue 42; pure numpy, no I/O).

A model is read like an annotator whose answers are richer than a class: its answer on task
i is the *cell* (predicted class k = argmax p_i, confidence bin b of max p_i), and what a
cell means is measured, not taken from the probabilities: P(cell | true class y), a table
of A = C x B cells by C classes per model (per task category too), learned by the same EM
as the annotators' accuracies (:func:`labelq.policies.worker_model.fit_em`) from the tasks
that have a human label or a gold answer beside the prediction:

    P(a | y) = (n[a, y] + 1) / (n[., y] + A)

with n[a, y] the soft count (EM posterior) of tasks of class y on which the model answered
a. The +1 per cell is a Dirichlet(1) prior that is the same for every class: a cell never
measured says nothing (likelihood ratio 1), so an untested model carries no weight and a
model whose answers do not depend on the truth (predictions shuffled across tasks) ends
with a table whose columns agree, i.e. ~no weight. A cell is never read in reverse: its
predicted class is taken as at least as likely as any other (a cell measured worse than
chance carries no weight, as an annotator's accuracy is clipped at chance), which keeps
the EM from a fixed point where an early, thinly measured table turned the model upside
down and the class prior followed it. Where tasks have categories, a
category's table is shrunk towards the model's overall table with the weight of
``CATEGORY_PRIOR`` answers per cell (a model may be good on one kind of task only).

The confidence bins are quantiles of the model's own confidences (``bins`` per model,
fixed when the predictions are given), so each bin holds a like share of its answers
whatever the model's calibration: a model confident on everything still has its most and
least confident fifth told apart. A task's evidence from the model is log P(a_i | y),
added to the annotators' log-likelihood; a task with no prediction (a row of NaN) gets
none. Tasks with only a prediction (no label, no gold) do not teach the table anything
(as a lone label says nothing of its annotator).

The model costs nothing, has no capacity, is never paused and never counts as a human
label: it is not a worker in the policy's masks, only evidence on each task's posterior.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ..errors import InputError
from .base import FloatArray, IntArray

__all__ = ["ModelSources", "ModelAccuracy", "BINS", "CATEGORY_PRIOR", "ROW_SUM_TOL",
           "answer_cells", "build_sources", "source_of", "combine", "COMBINE_ITERS",
           "measured", "jeffreys", "gold_reading"]

#: confidence bins per model (quantiles of its confidences; fewer when it has few
#: predictions, so that each (cell, class) expects >= ``MIN_PER_CELL`` answers)
BINS = 5
MIN_PER_CELL = 20
#: answers per cell with which a category's table is shrunk towards the model's overall one
CATEGORY_PRIOR = 2.0
#: EM steps of :func:`combine` (the tables settle in 3-5 on the shared data sets)
COMBINE_ITERS = 10
#: a prediction row must sum to 1 within this
ROW_SUM_TOL = 1e-3


@dataclass(frozen=True)
class ModelAccuracy:
    """A model's measured accuracy per true class: ``accuracy[k]`` = P(predicted class is k |
    the task is of class k), from the soft counts of EM (``answers[k]``: the tasks of class
    k it rests on, gold ones counted in full) with a 95 % interval ``low``/``high``
    (Jeffreys, Beta(right + 1/2, wrong + 1/2)); ``gold[k]``: gold answers among them.
    ``overall`` is the same over every class, with ``overall_low``/``overall_high``.
    ``gold_accuracy`` (with ``gold_low``/``gold_high``): the same measured on the gold
    answers alone (NaN without any) — fewer answers, but not resting on the annotators'
    fitted accuracies (docs/models.md: where annotators are biased the EM's reading is off
    by more than its interval)."""

    accuracy: FloatArray
    low: FloatArray
    high: FloatArray
    answers: FloatArray
    gold: IntArray
    overall: float
    overall_low: float
    overall_high: float
    gold_accuracy: FloatArray | None = None
    gold_low: FloatArray | None = None
    gold_high: FloatArray | None = None

    def to_dict(self) -> dict[str, object]:
        def listed(a: FloatArray | None) -> list[float] | None:
            return None if a is None else [float(x) for x in a]

        return {"accuracy": self.accuracy.tolist(), "low": self.low.tolist(),
                "high": self.high.tolist(), "answers": self.answers.tolist(),
                "gold": self.gold.tolist(), "overall": self.overall,
                "overall_low": self.overall_low, "overall_high": self.overall_high,
                "gold_accuracy": listed(self.gold_accuracy), "gold_low": listed(self.gold_low),
                "gold_high": listed(self.gold_high)}


def _jeffreys(right: FloatArray, n: FloatArray) -> tuple[FloatArray, FloatArray]:
    from scipy.stats import beta

    a, b = right + 0.5, np.maximum(n - right, 0.0) + 0.5
    # Brown, Cai & DasGupta's (2001) Jeffreys interval: 0 when none is right, 1 when all
    # are, so the interval always holds its own estimate right / n
    low = np.where((n > 0) & (right > 1e-9), beta.ppf(0.025, a, b), 0.0)
    high = np.where((n > 0) & (right < n - 1e-9), beta.ppf(0.975, a, b), 1.0)
    return np.asarray(low, float), np.asarray(high, float)


def jeffreys(right: FloatArray, n: FloatArray) -> tuple[FloatArray, FloatArray]:
    """The 95 % Jeffreys interval of ``right`` of ``n`` (each an array; module doc)."""
    return _jeffreys(np.asarray(right, float), np.asarray(n, float))


def gold_reading(probas: FloatArray, gold: IntArray
                 ) -> tuple[FloatArray, FloatArray, FloatArray, IntArray]:
    """A model's accuracy per true class on gold answers alone: (accuracy, low, high, n)
    per class, over the tasks with a gold answer (``gold`` >= 0) and a prediction (a row
    of ``probas`` not NaN); NaN where a class has none. Pass random gold only (loaded or
    audited: a sample like the other tasks); gold chosen for being doubtful is harder than
    the rest and would read the model worse than it is.

    Why it is the reading to show when there is gold (docs/models.md): the EM's reading
    rests on the annotators' fitted accuracies, and where their errors lean to one class
    (a one-coin model takes them as symmetric) the posterior it is measured against leans
    too — on ``moviereviews_bin`` it read 0.67 / 0.92 for a model of 0.73 / 0.88, with
    intervals that missed both; the gold answers do not depend on the annotators."""
    p = np.asarray(probas, float)
    g = np.asarray(gold, np.int64)
    C = p.shape[1]
    has = (g >= 0) & ~np.isnan(p).any(axis=1)
    pred = np.argmax(np.where(np.isnan(p), -1.0, p), axis=1)
    n = np.bincount(g[has], minlength=C)
    right = np.bincount(g[has & (pred == g)], minlength=C).astype(float)
    low, high = _jeffreys(right, n.astype(float))
    acc = np.where(n > 0, right / np.maximum(n, 1), np.nan)
    return (acc, np.where(n > 0, low, np.nan), np.where(n > 0, high, np.nan),
            n.astype(np.int64))


def answer_cells(probas: FloatArray, n_bins: int | None = None,
                 name: str = "predictions") -> tuple[IntArray, int]:
    """Per task the answer cell ``k * B + b`` of a model's probabilities (n_tasks x C; a row
    of NaN: no prediction, cell -1) and the number of bins B (quantile bins of the
    confidence, see the module doc). A row that is not a probability vector is an
    :class:`InputError` naming the source, row and value."""
    p = np.asarray(probas, dtype=float)
    if p.ndim != 2:
        raise InputError(f"{name}: expected an n_tasks x n_classes array, got shape {p.shape}",
                         field=name)
    nan = np.isnan(p)
    missing = nan.all(axis=1)
    part = nan.any(axis=1) & ~missing
    if part.any():
        i = int(np.argmax(part))
        raise InputError(f"{name}: row {i} is partly NaN (a missing prediction is a whole "
                         f"row of NaN)", field=name, index=i)
    q = np.where(nan, 0.5, p)
    bad = ~np.isfinite(q) | (q < 0) | (q > 1)
    if bad.any():
        i, k = (int(x) for x in np.argwhere(bad)[0])
        raise InputError(f"{name}: row {i}, class {k}: probability {float(p[i, k])!r} is not in "
                         f"[0, 1]", field=name, index=i)
    off = ~missing & (np.abs(q.sum(axis=1) - 1.0) > ROW_SUM_TOL)
    if off.any():
        i = int(np.argmax(off))
        raise InputError(f"{name}: row {i} sums to {q[i].sum():.6g}, not 1 (within "
                         f"{ROW_SUM_TOL:g})", field=name, index=i)
    C = p.shape[1]
    have = ~missing
    conf = q.max(axis=1)
    n = int(have.sum())
    B = n_bins if n_bins is not None else max(1, min(BINS, n // (MIN_PER_CELL * C * C)))
    cell = np.full(p.shape[0], -1, dtype=np.int64)
    if n == 0:
        return cell, B
    edges = np.quantile(conf[have], np.arange(1, B) / B) if B > 1 else np.empty(0)
    b = np.searchsorted(edges, conf[have], side="right")
    cell[have] = np.argmax(q[have], axis=1) * B + np.minimum(b, B - 1)
    return cell, B


@dataclass
class ModelSources:
    """The models of a state: ``names``, ``cell`` (M, T) answer cells (-1: no prediction),
    ``bins`` per model, ``counts`` (M, S, A, C) soft counts of the true class per
    (category, answer cell) and ``gold`` (M, C) gold answers behind them; A = C x max bins
    (a model with fewer bins leaves the rest of its cells empty)."""

    names: list[str]
    cell: IntArray
    bins: IntArray
    counts: FloatArray
    gold: IntArray
    gold_right: IntArray | None = None  # (M, C): gold answers it predicted right

    @property
    def n_cells(self) -> int:
        return int(self.counts.shape[2])

    def has_prediction(self) -> np.ndarray:
        """bool (T,): tasks with a prediction from any model."""
        return np.asarray((self.cell >= 0).any(axis=0), dtype=bool)

    def tables(self) -> FloatArray:
        """log P(cell | class) per model and category: (M, S, A, C)."""
        M, S, A, C = self.counts.shape
        glob = self.counts.sum(axis=1)  # (M, A, C)
        used = np.zeros((M, A, 1))
        for m, B in enumerate(self.bins):
            used[m, :C * int(B)] = 1.0  # cells a model with fewer bins never uses
        p = (glob + used) / (glob + used).sum(axis=1, keepdims=True)
        if S > 1:
            w = CATEGORY_PRIOR * used.sum(axis=1, keepdims=True)  # (M, 1, 1)
            per = (self.counts + (w * p)[:, None]) / (
                self.counts.sum(axis=2, keepdims=True) + w[:, None])
            return np.asarray(np.log(np.maximum(per, 1e-300)))
        return np.asarray(np.log(np.maximum(p, 1e-300)))[:, None]

    def loglik(self, task_category: IntArray) -> FloatArray:
        """The models' evidence per task, sum over models of log P(a_i | y): (T, C)."""
        M, T = self.cell.shape
        C = self.counts.shape[3]
        out = np.zeros((T, C))
        if M == 0:
            return out
        tab = self.tables()
        S = tab.shape[1]
        cat = np.zeros(T, np.int64) if S == 1 else np.asarray(task_category, np.int64)
        for m in range(M):
            has = self.cell[m] >= 0
            rows = tab[m, cat[has], self.cell[m, has]]  # (n, C)
            # never read in reverse: a cell's predicted class is at least as likely as any
            # other (as an annotator's accuracy is clipped at chance, worker_model)
            pred = self.cell[m, has] // int(self.bins[m])
            rows[np.arange(pred.size), pred] = rows.max(axis=1)
            # only the ratios between classes matter: subtract the row mean
            out[has] += rows - rows.mean(axis=1, keepdims=True)
        return out

    def refit(self, post: FloatArray, evidence: np.ndarray, task_category: IntArray,
              gold: IntArray) -> None:
        """Replace the counts by the posterior ``post`` (T, C) of the tasks with
        ``evidence`` (a human label or gold: bool (T,)); gold rows are one-hot."""
        M, S, A, C = self.counts.shape
        cat = np.asarray(task_category, np.int64) if S > 1 else np.zeros(post.shape[0],
                                                                           np.int64)
        is_gold = np.asarray(gold) >= 0
        for m in range(M):
            sel = (self.cell[m] >= 0) & evidence
            key = cat[sel] * A + self.cell[m, sel]
            for k in range(C):
                self.counts[m, :, :, k] = np.bincount(key, weights=post[sel, k],
                                                      minlength=S * A).reshape(S, A)
            g = sel & is_gold
            self.gold[m] = np.bincount(np.asarray(gold)[g], minlength=C)
            if self.gold_right is None:
                self.gold_right = np.zeros((M, C), np.int64)
            yes = g & (self.cell[m] // int(self.bins[m]) == np.asarray(gold))
            self.gold_right[m] = np.bincount(np.asarray(gold)[yes], minlength=C)

    def accuracy(self) -> dict[str, ModelAccuracy]:
        """Each model's measured accuracy per true class (:class:`ModelAccuracy`)."""
        M, S, A, C = self.counts.shape
        out: dict[str, ModelAccuracy] = {}
        for m, name in enumerate(self.names):
            glob = self.counts[m].sum(axis=0)  # (A, C)
            pred = np.arange(A) // int(self.bins[m])  # predicted class of each cell
            n = glob.sum(axis=0)
            right = np.array([glob[pred == k, k].sum() for k in range(C)])
            acc = np.where(n > 0, right / np.maximum(n, 1e-12), np.nan)
            low, high = _jeffreys(right, n)
            tot, ok = float(n.sum()), float(right.sum())
            lo, hi = _jeffreys(np.array([ok]), np.array([tot]))
            g_n = self.gold[m].astype(float)
            g_ok = (self.gold_right[m].astype(float) if self.gold_right is not None
                    else np.zeros(C))
            g_lo, g_hi = _jeffreys(g_ok, g_n)
            out[name] = ModelAccuracy(acc, low, high, n, self.gold[m].copy(),
                                      ok / tot if tot > 0 else float("nan"),
                                      float(lo[0]), float(hi[0]),
                                      np.where(g_n > 0, g_ok / np.maximum(g_n, 1.0), np.nan),
                                      np.where(g_n > 0, g_lo, np.nan),
                                      np.where(g_n > 0, g_hi, np.nan))
        return out


def build_sources(predictions: Mapping[str, FloatArray] | None, n_tasks: int, n_classes: int,
                  n_categories: int = 1) -> ModelSources:
    """:class:`ModelSources` for ``predictions`` (source name -> n_tasks x n_classes
    probabilities, a row of NaN where it gave none), with empty counts."""
    preds = dict(predictions or {})
    cells, bins = [], []
    for name, p in preds.items():
        arr = np.asarray(p, dtype=float)
        if arr.shape != (n_tasks, n_classes):
            raise InputError(f"predictions {name!r}: expected shape ({n_tasks}, {n_classes}) "
                             f"(tasks x classes), got {arr.shape}", field="predictions")
        c, B = answer_cells(arr, name=f"predictions {name!r}")
        cells.append(c)
        bins.append(B)
    M = len(preds)
    A = n_classes * max(bins, default=1)
    return ModelSources(names=list(preds), cell=(np.stack(cells) if cells else
                                                 np.empty((0, n_tasks), np.int64)),
                        bins=np.asarray(bins, np.int64),
                        counts=np.zeros((M, max(n_categories, 1), A, n_classes)),
                        gold=np.zeros((M, n_classes), np.int64))


def source_of(n_human: IntArray, has_prediction: np.ndarray, gold: IntArray | None = None
              ) -> list[str]:
    """Per task what its answer rests on: ``humans``, ``humans+model``, ``model`` or
    ``none`` (a gold task: ``humans``, its answer being known)."""
    h = np.asarray(n_human) > 0
    if gold is not None:
        h = h | (np.asarray(gold) >= 0)
    p = np.asarray(has_prediction, bool)
    names = np.array(["none", "model", "humans", "humans+model"])
    out: list[str] = names[h.astype(int) * 2 + p.astype(int)].tolist()
    return out


def combine(sources: ModelSources, human: FloatArray, evidence: np.ndarray,
            task_category: IntArray, gold: IntArray, iters: int = COMBINE_ITERS
            ) -> FloatArray:
    """The posterior of every task with the models' evidence added to ``human`` (T, C),
    an aggregator's posterior from the labels alone (for a task without labels: the class
    prior), the models' tables learned by EM from the tasks with ``evidence`` (a label or
    gold) against that posterior — the annotators' side held fixed, as an aggregator fitted
    them. Gold rows stay one-hot. ``sources``' counts hold the final tables."""
    log_h = np.log(np.maximum(np.asarray(human, float), 1e-300))
    g = np.asarray(gold, np.int64)
    known = np.flatnonzero(g >= 0)
    C = log_h.shape[1]
    sources.counts[:] = 0.0

    def post() -> FloatArray:
        z = log_h + sources.loglik(task_category)
        z -= z.max(axis=1, keepdims=True)  # subtract the row max: exp never overflows
        p = np.exp(z)
        p /= p.sum(axis=1, keepdims=True)
        p[known] = np.eye(C)[g[known]]
        return p

    for _ in range(max(iters, 1)):
        sources.refit(post(), evidence, task_category, g)
    return post()


def measured(sources: ModelSources, evidence: np.ndarray) -> bool:
    """Whether every model rests on enough tasks with ``evidence`` (a label or gold) to
    judge annotators by: ``MIN_PER_CELL`` per (cell, class) of its table. Before that, a
    table measured on a few tasks would judge the annotators, the greedy routing would
    follow its errors, and the labels collected would teach them back to it (``temp`` with
    a simulated model: labels collected 0.51 right, answers 0.47)."""
    C = sources.counts.shape[3]
    for m in range(len(sources.names)):
        n = int(((sources.cell[m] >= 0) & evidence).sum())
        if n < MIN_PER_CELL * C * int(sources.bins[m]) * C:
            return False
    return True
