"""How many human labels a project's model saved (issue 42), from the simulator's view.

**Definition.** A project has spent ``H`` human labels on its ``T`` data tasks (gold
questions aside) with a model's predictions routing them (``auto``). The labels the model
saved are ``(b* - h) * T``, with ``h = H / T`` and ``b*`` the human labels per task
``auto`` *without* the model needs to reach the accuracy ``auto`` *with* it reaches at
``h``, both measured on a **twin** of the project whose truth is known:

* the twin's tasks (``min(T, TWIN_TASKS)``) have classes drawn from the project's fitted
  class shares (the mean posterior of ``shrunk`` with the model, over the data tasks);
* its annotators are the project's, each answering with its fitted accuracy (``shrunk``'s
  one-coin accuracy, its categories weighted by its labels) and giving its share of the
  project's labels at most (a capacity of its share of each run's budget, +1). At about
  one label per task the fitted accuracies read high; ``gold_calibration=True`` shifts
  them together by the amount random gold says they are off, shrunk by its noise
  (:func:`calibrate_on_gold`) — off by default, as ``bench/savings_gold.py`` measured it
  no better overall (less bias, more spread; docs/models.md);
* the model answers each task with a cell (predicted class, confidence bin) drawn from
  its measured table P(cell | class) (:mod:`labelq.policies._model_source`, fitted in the
  same EM), on the same share of tasks the project's model predicted, its confidence in
  the cell's bin (so that the quantile bins the twin's policy draws are the project's);
* both runs use the project's ``auto`` settings (or ``auto``'s defaults when the project
  routes with another policy), no gold, the same tasks, annotators and model per seed;
* the run without the model is read at ``h`` times ``GRID`` (0.5 to 5, and no more than
  ``MAX_EXTRA`` = 3 labels per task beyond ``h``): ``b*`` is where the mean of its
  accuracy over the twins (its running maximum) first reaches the mean accuracy with the
  model, linearly between two grid points. Not reached by the last point: the saving is
  at least that (``at_least``). Reached below ``h``: the model cost labels (a negative
  saving).

Over ``seeds`` twins (each its own draw of truth, answers and model cells); the standard
error is a bootstrap over the twins; the spread is the simulation's, given the fitted
parameters, not the parameters' own uncertainty (a project measured on few labels is
read as its point estimate). The twin is a one-coin world: annotators whose errors lean to
one class (``moviereviews_bin``'s) are simulated as symmetric, so on such a project the
figure is the saving in the world the worker model believes in.

Pure numpy over the policies (no I/O, no SQL); :func:`labels_saved` is what the export's
model report calls. ``tests/foundation/test_model_savings.py`` sets it against the
simulator's truth (the real runner, with and without the model, on a synthetic project).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .aggregation.shrunk import ShrunkOneCoin
from .policies.base import FloatArray, IntArray, Observation, Problem
from .policies.registry import build

__all__ = ["Savings", "labels_saved", "twin_runs", "crossing", "calibrate_on_gold",
           "TWIN_TASKS", "GRID", "SEEDS", "MAX_EXTRA"]

#: tasks of the twin at most (the saving is scaled to the project's tasks)
TWIN_TASKS = 300
#: the run without the model is read up to this many labels per task beyond the project's
#: (a twin run's cost grows with its labels)
MAX_EXTRA = 3.0
#: the budgets the run without the model is read at, in multiples of the project's
GRID = (0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 4.0, 5.0)
#: twins (seeds) the figure averages over
SEEDS = 5
#: bootstrap resamples of the twins for the standard error
BOOT = 200


@dataclass(frozen=True)
class Savings:
    """The human labels a model saved (module doc): ``saved`` (mean over ``seeds``, with
    its standard error ``saved_se``; per seed in ``per_seed``), ``labels`` the project's
    human labels on ``tasks`` data tasks, ``accuracy_with`` the twin's accuracy with the
    model at that budget, ``labels_without`` what the run without it needs for it (mean),
    ``at_least``: on some seed the run without the model never reached it (a lower
    bound)."""

    saved: float
    saved_se: float
    per_seed: tuple[float, ...]
    labels: int
    tasks: int
    accuracy_with: float
    labels_without: float
    at_least: bool
    seeds: int
    twin_tasks: int
    # the random gold answers the twin's annotator accuracies were calibrated on (0: none,
    # the fitted accuracies as they are)
    calibrated_on: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"saved": round(self.saved, 1), "saved_se": round(self.saved_se, 1),
                "per_seed": [round(x, 1) for x in self.per_seed], "labels": self.labels,
                "tasks": self.tasks, "accuracy_with": round(self.accuracy_with, 4),
                "labels_without": round(self.labels_without, 1), "at_least": self.at_least,
                "seeds": self.seeds, "twin_tasks": self.twin_tasks,
                "calibrated_on": self.calibrated_on,
                "definition": "human labels auto without the model needs to reach the "
                              "accuracy auto with it reaches at this project's labels, "
                              "minus those labels, on simulated twins of the project "
                              "(docs/models.md)"}


def _accuracy(proba: FloatArray, truth: IntArray) -> float:
    """Accuracy of the argmax, ties as the expectation of a uniform tie break."""
    top = proba.max(axis=1, keepdims=True)
    tie = np.isclose(proba, top, rtol=0.0, atol=1e-12)
    return float(np.mean(tie[np.arange(truth.size), truth] / tie.sum(axis=1)))


def _run(spec: Mapping[str, Any], truth: IntArray, conf: FloatArray, share: FloatArray,
         preds: dict[str, FloatArray] | None, budgets: Sequence[float],
         rng: np.random.Generator) -> list[float]:
    """``auto`` on the twin (push decisions, each pair once, each annotator up to its
    share of the largest budget + 1): its accuracy at each of ``budgets`` (labels)."""
    T, C = truth.size, conf.shape[1]
    W = share.size
    policy = build(dict(spec))
    cap = np.ceil(share * budgets[-1]).astype(np.int64) + 1
    state = policy.init_state(Problem(n_tasks=T, n_workers=W, n_classes=C,
                                      budget=budgets[-1], predictions=preds))
    mask = np.ones((T, W), dtype=bool)
    given = np.zeros(W, np.int64)
    out: list[float] = []
    spent = 0
    while len(out) < len(budgets):
        while len(out) < len(budgets) and spent >= budgets[len(out)] - 1e-9:
            out.append(_accuracy(policy.predict_proba(state), truth))
        if len(out) == len(budgets):
            break
        pair = policy.select_pair(state, mask, rng) if mask.any() else None
        if pair is None:  # nothing left to ask: the rest of the budgets read as now
            acc = _accuracy(policy.predict_proba(state), truth)
            out += [acc] * (len(budgets) - len(out))
            break
        i, j = int(pair[0]), int(pair[1])
        y = int(truth[i])
        label = y if rng.random() < conf[j, y] else int(
            (y + 1 + rng.integers(C - 1)) % C)
        policy.update(state, Observation(task=i, worker=j, label=label))
        spent += 1
        mask[i, j] = False
        given[j] += 1
        if given[j] >= cap[j]:
            mask[:, j] = False
    return out


def _model_probas(table: FloatArray, bins: int, truth: IntArray, covered: float,
                  rng: np.random.Generator) -> FloatArray:
    """Predictions drawn from a measured table P(cell | class) ``table`` (A, C): per task
    a cell of its class; the cell's class gets a confidence inside its bin (the bins being
    equal shares of (1/C, 1) in order, the quantile bins of the draws keep them apart).
    ``covered``: share of tasks with a prediction (the others a row of NaN)."""
    T, C = truth.size, table.shape[1]
    p = np.full((T, C), np.nan)
    cdf = np.cumsum(table, axis=0)
    cdf /= cdf[-1]
    has = rng.random(T) < covered
    for i in np.flatnonzero(has):
        a = min(int(np.searchsorted(cdf[:, truth[i]], rng.random(), side="right")),
                table.shape[0] - 1)
        k, b = divmod(a, bins)
        top = 1.0 / C + (1.0 - 1.0 / C) * (b + 0.05 + 0.9 * rng.random()) / bins
        p[i] = (1.0 - top) / max(C - 1, 1)
        p[i, k] = top
    return p


def twin_runs(spec: Mapping[str, Any], prior: FloatArray, accuracy: FloatArray,
              share: FloatArray, tables: list[tuple[FloatArray, int, float]],
              h: float, n_tasks: int, seed: int, grid: Sequence[float] = GRID
              ) -> tuple[float, list[float]]:
    """One twin (module doc): (accuracy with the models at ``h`` labels per task, the
    accuracies without them at ``h`` x :data:`GRID`). ``accuracy`` per annotator,
    ``share`` its share of the labels, ``tables``: per model (P(cell | class) (A, C), its
    bins, the share of tasks it predicted)."""
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(42,)))
    C = prior.size
    truth = rng.choice(C, size=n_tasks, p=prior / prior.sum())
    acc = np.clip(accuracy, 1.0 / C, 0.99)
    conf = np.repeat(acc[:, None], C, axis=1)
    preds = {f"m{m}": _model_probas(t, b, truth, cov, rng)
             for m, (t, b, cov) in enumerate(tables)}
    budget = max(1, round(h * n_tasks))
    with_model = _run(spec, truth, conf, share, preds, [budget], rng)[0]
    budgets = [max(1, round(g * h * n_tasks)) for g in grid]
    without = _run(spec, truth, conf, share, None, budgets, rng)
    return with_model, without


def crossing(withs: list[float], withouts: list[list[float]],
             grid: Sequence[float] = GRID) -> tuple[float, bool]:
    """The budget, in multiples of h, at which the mean over twins of the accuracy without
    the model (``withouts``, at :data:`GRID`) first reaches the mean accuracy with it
    (``withs``), linear between grid points; the curve is read as its running maximum (a
    budget reaches what a smaller one reached). (the last grid point, True) when it never
    does."""
    target = float(np.mean(withs))
    acc = np.maximum.accumulate(np.mean(np.asarray(withouts, float), axis=0))
    grid = list(grid)
    if acc[0] >= target:
        return grid[0], False
    for g0, g1, a0, a1 in zip(grid, grid[1:], acc, acc[1:], strict=False):
        if a1 >= target:
            return g0 + (g1 - g0) * (target - a0) / max(a1 - a0, 1e-12), False
    return grid[-1], True


def calibrate_on_gold(accuracy: FloatArray, row: IntArray, right: Any,
                      n_classes: int) -> FloatArray:
    """``accuracy`` (one per annotator, above chance) shifted by one common amount δ in
    logit space: the δ̂ at which the expected number of right answers on the gold answered
    (``row``: the annotator of each, ``right``: whether it was right) equals the number
    right, shrunk by its noise — the posterior mean under a normal prior N(0, τ²) on δ
    with τ² estimated from the data (empirical Bayes, τ² = max(0, δ̂² − se²)): δ̂ (1 −
    se²/δ̂²)⁺, se the delta-method standard error of δ̂. One parameter from all the gold
    pooled: it corrects the fitted accuracies' common bias (module doc), without reading
    a few gold answers' luck as that bias (30 answers move an accuracy of 0.75 by ±0.08).
    Kept inside (1/C, 0.99], as the twin clips them."""
    lo_acc = 1.0 / n_classes
    a = np.clip(np.asarray(accuracy, float), lo_acc + 1e-6, 0.99)
    base = np.log(a - lo_acc) - np.log1p(-a)  # logit of the accuracy above chance
    target = float(np.sum(right))

    def shifted(d: float) -> FloatArray:
        out: FloatArray = lo_acc + (1.0 - lo_acc) / (1.0 + np.exp(-(base + d)))
        return out

    lo, hi = -10.0, 10.0  # (the expected count rises with δ: bisection)
    for _ in range(60):
        mid = (lo + hi) / 2
        if float(shifted(mid)[row].sum()) < target:
            lo = mid
        else:
            hi = mid
    d = (lo + hi) / 2
    p = shifted(d)[row]
    # se of δ̂: sd of the count of right answers over the count's slope in δ
    slope = float(np.sum((p - lo_acc) * (1.0 - p) / (1.0 - lo_acc)))
    se = float(np.sqrt(np.sum(p * (1.0 - p)))) / max(slope, 1e-12)
    d *= max(0.0, 1.0 - se * se / max(d * d, 1e-300))
    return np.clip(shifted(d), lo_acc, 0.99)


def labels_saved(task: IntArray, worker: IntArray, label: IntArray, *, n_tasks: int,
                 n_workers: int, n_classes: int, predictions: Mapping[str, FloatArray],
                 gold: IntArray | None = None, categories: IntArray | None = None,
                 policy: Mapping[str, Any] | None = None, seeds: int = SEEDS,
                 twin_tasks: int = TWIN_TASKS, random_gold: Any = None,
                 gold_calibration: bool = False) -> Savings | None:
    """The human labels the models saved on a project with these labels (module doc);
    None without a model or without a human label on a data task. ``gold``: per task its
    known class or -1 (gold tasks are left out of the count, their labels kept in the
    fit); ``random_gold``: bool per task, the gold whose answers are a random sample
    (None: all gold is); with ``gold_calibration`` (off by default: measured no better,
    docs/models.md) the twin's annotator accuracies are :func:`calibrate_on_gold` on the
    answers to random gold, where there are any;
    ``policy``: the project's policy spec (``auto``'s settings used when it is
    ``auto``)."""
    task = np.asarray(task, np.int64)
    worker = np.asarray(worker, np.int64)
    label = np.asarray(label, np.int64)
    g = np.full(n_tasks, -1, np.int64) if gold is None else np.asarray(gold, np.int64)
    data = g < 0
    on_data = data[task]
    T, H = int(data.sum()), int(on_data.sum())
    if not predictions or T == 0 or H == 0:
        return None
    cat = (np.zeros(n_tasks, np.int64) if categories is None
           else np.asarray(categories, np.int64))
    fit = ShrunkOneCoin().fit(task, worker, label, n_tasks=n_tasks, n_workers=n_workers,
                              n_classes=n_classes, gold=g, categories=cat,
                              predictions=dict(predictions))
    src = fit.model_sources_
    per_cat = np.zeros(fit.accuracy_.shape)
    np.add.at(per_cat, (worker, cat[task]), 1.0)
    used = per_cat.sum(axis=1) > 0
    acc = (fit.accuracy_ * per_cat).sum(axis=1)[used] / per_cat.sum(axis=1)[used]
    calibrated = 0
    if gold_calibration:
        scored = ~on_data & (g[task] >= 0)
        if random_gold is not None:
            scored &= np.asarray(random_gold, bool)[task]
        if scored.any():
            row = np.cumsum(used) - 1  # annotator -> its row of ``acc``
            acc = calibrate_on_gold(acc, row[worker[scored]],
                                    label[scored] == g[task[scored]], n_classes)
            calibrated = int(scored.sum())
    counts = np.bincount(worker[on_data], minlength=n_workers)[used].astype(float)
    share = counts / max(counts.sum(), 1.0)
    prior = fit.probas_[data].mean(axis=0)
    tables = []
    C = n_classes
    for m in range(len(src.names)):
        B = int(src.bins[m])
        glob = src.counts[m].sum(axis=0)[:C * B] + 1.0  # (A, C), the Dirichlet(1) prior
        tables.append((glob / glob.sum(axis=0, keepdims=True), B,
                       float((src.cell[m][data] >= 0).mean())))
    spec = dict(policy) if policy and policy.get("name") == "auto" else {"name": "auto"}
    h = H / T
    n = min(T, twin_tasks)
    grid = [g for g in GRID if (g - 1.0) * h <= MAX_EXTRA + 1e-9]
    withs, withouts = [], []
    for s in range(seeds):
        a_with, a_without = twin_runs(spec, prior, acc, share, tables, h, n, s, grid)
        withs.append(a_with)
        withouts.append(a_without)
    b, capped = crossing(withs, withouts, grid)
    per_seed = tuple((crossing([w], [c], grid)[0] - 1.0) * H
                     for w, c in zip(withs, withouts, strict=True))
    # the standard error: the crossing of the mean curves over seeds drawn with
    # replacement (a bootstrap over the twins)
    rng = np.random.default_rng(0)
    boot = []
    for _ in range(BOOT):
        pick = rng.integers(seeds, size=seeds)
        boot.append(crossing([withs[i] for i in pick], [withouts[i] for i in pick],
                             grid)[0])
    se = float(np.std(boot, ddof=1)) * H if seeds > 1 else float("nan")
    return Savings((b - 1.0) * H, se, per_seed, H, T, float(np.mean(withs)), b * H, capped,
                   seeds, n, calibrated)
