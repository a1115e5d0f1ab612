"""One-coin worker model with hierarchical shrinkage, fitted by MAP-EM (pure numpy).

Model: task i has a true class y_i ~ Categorical(prior); worker j on a task of category s
answers the true class with probability acc[j, s] and each other class with probability
(1 - acc[j, s]) / (C - 1). The accuracies have a three-level prior:

* the population: mu = (correct + mu0 * m0) / (labels + m0) over all labels, or with
  ``per_worker`` the mean of the workers' raw accuracies correct_j / labels_j, each weighted
  by labels_j / (labels_j + m) and mu0 counted as m0 / m such workers — what a worker
  nobody has judged yet is expected to be, when prolific workers differ from the rest;
* a worker: acc_j = (correct_j + m * mu) / (labels_j + m) — a worker with few labels stays
  near the population, and a prolific one is judged on the *agreement* of its labels with
  the posterior, never on its volume;
* a worker on a category: acc_js = (correct_js + m * acc_j) / (labels_js + m) — a thin
  category falls back to the worker's overall accuracy.

"correct" are the soft counts of EM: sum over the worker's labels of the posterior
probability of the class it answered. Gold tasks enter with their known class (posterior
one-hot), so they count as exact evidence about the worker.

**Agreement calibrated against gold** (``calibrate``, issue 34). Agreement is a biased
measurement of accuracy: where a bloc of workers agrees on wrong answers, agreement rates
the bloc above its accuracy and the dissenters below theirs, and no amount of agreement
evidence removes that bias, whereas a gold answer is unbiased. So the agreement-based
accuracy a_j (the shrunk accuracy from the agreement counts alone) is read as a_j =
acc_j + b_j, with a bias of variance b² across workers, estimated from the workers who have
≥ 2 gold answers: per worker, (a_j − g_j)² minus the sampling variances of both estimates
(g_j (1 − g_j) / (n_gold − 1) of the gold rate g_j, a_j (1 − a_j) / (n_agree + m) of the
agreement estimate) is an unbiased estimate of b_j²; b² is their mean (weighted by the gold
answers) less one standard error, floored at 0 (the same one-standard-deviation benefit of
the doubt as the policy's gate: agreement is discounted only when gold shows it is off).
The agreement evidence of a worker then has error variance a (1 − a) / n + b² as a
measurement of its accuracy, i.e. it is worth n / (1 + n b² / (a (1 − a))) labels of
unbiased evidence: its soft counts are multiplied by that factor (``agree_weight``), the
gold counts are not. A worker with many agreeing labels is thus capped at about
a (1 − a) / b² labels' worth of agreement, and a few gold answers can outweigh it. Without
gold, or where gold confirms agreement (b² = 0), nothing changes. Accuracies are clipped to
[1/C, 0.99]: a worker never counts as better than near-perfect, and a worker worse than
chance counts as chance (its labels carry no weight) instead of being read in reverse,
which on sparse data is more often a wrong EM fixed point than a real adversary.

**One public home** (issue 43): the ``auto`` policy (:mod:`labelq.policies.auto`) and the
``shrunk`` aggregation method (:mod:`labelq.aggregation.shrunk`) both fit this model, through
this module's names; models' predictions enter it as sources (:class:`ModelSources`, built by
:func:`build_sources`, :mod:`labelq.policies._model_source`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._model_source import ModelSources, build_sources
from .base import FloatArray

__all__ = ["Fit", "shrunk_accuracy", "label_loglik", "task_loglik", "posterior", "loo_correct",
           "agreement_bias", "fit_em", "gold_task_all", "copied_labels", "shown_class",
           "label_weights", "SUGGESTED_WEIGHT",
           "ModelSources", "build_sources"]

ACC_MAX = 0.99
#: EM steps at least, when models' predictions are sources: their tables start empty at
#: every fit and need ~10 steps to settle (at 3, the policy's default, a simulated model of
#: accuracy 0.90 / 0.69 per class read as 0.82 / 0.60 at 2 labels per task; at 10 as
#: 0.88 / 0.65; tests/policies/test_model_source.py's pools)
SOURCE_ITERS = 10
#: what a label given with the model's answer shown and agreeing with it counts for in a
#: task's posterior (issue 42, docs/models.md "Independence": an opinion partly the model's)
SUGGESTED_WEIGHT = 0.5


@dataclass
class Fit:
    """Soft counts per (worker, category) and the class prior, from the last E-step."""

    correct: FloatArray  # float (W, S)
    total: FloatArray  # float (W, S)
    class_prior: FloatArray  # float (C,)
    agree_weight: FloatArray | None = None  # float (W,): what one agreement label counts
    bias2: float = 0.0  # b², the variance of agreement's bias against gold (module doc)
    anchored: bool = False  # gold records (>= 2 workers with >= 2 answers) checked agreement


def shrunk_accuracy(correct: np.ndarray, total: np.ndarray, n_classes: int, mu0: float,
                    m0: float, m: float, per_worker: bool = False
                    ) -> tuple[np.ndarray, np.ndarray, float]:
    """(acc[W, S], acc_worker[W], mu): the three levels of the prior, see the module doc."""
    if per_worker:
        n = total.sum(axis=1)
        w = n / (n + m)
        raw = correct.sum(axis=1) / np.maximum(n, 1e-12)
        mu = (float((w * raw).sum()) + mu0 * m0 / m) / (float(w.sum()) + m0 / m)
    else:
        mu = (correct.sum() + mu0 * m0) / (total.sum() + m0)
    worker = (correct.sum(axis=1) + m * mu) / (total.sum(axis=1) + m)
    acc = (correct + m * worker[:, None]) / (total + m)
    lo = 1.0 / n_classes
    return np.clip(acc, lo, ACC_MAX), np.clip(worker, lo, ACC_MAX), float(mu)


def label_loglik(acc: np.ndarray, n_classes: int) -> tuple[np.ndarray, np.ndarray]:
    """(log P(answer = y | y), log P(answer = z | y != z)) for accuracies ``acc``."""
    return np.log(acc), np.log((1.0 - acc) / (n_classes - 1))


def task_loglik(task: np.ndarray, cat_worker_acc: np.ndarray, label: np.ndarray,
                n_tasks: int, n_classes: int, weight: np.ndarray | None = None
                ) -> np.ndarray:
    """Sum over each task's labels of log P(label | y), as an (n_tasks, C) array; each
    label's term times its ``weight`` (default 1)."""
    hit, miss = label_loglik(cat_worker_acc, n_classes)
    if weight is not None:
        hit, miss = hit * weight, miss * weight
    out = np.zeros((n_tasks, n_classes))
    out += np.bincount(task, weights=miss, minlength=n_tasks)[:, None]
    np.add.at(out, (task, label), hit - miss)
    return out


def posterior(loglik: np.ndarray, log_prior: np.ndarray) -> np.ndarray:
    z = loglik + log_prior
    z -= z.max(axis=1, keepdims=True)  # subtract the row max: exp never overflows
    p = np.exp(z)
    return p / p.sum(axis=1, keepdims=True)


def loo_correct(task: np.ndarray, label: np.ndarray, hit: np.ndarray, miss: np.ndarray,
                loglik: np.ndarray, log_prior: np.ndarray, acc: np.ndarray) -> np.ndarray:
    """Per label: the probability that it is right, judged against the posterior of its
    task *without* it (leave one out) — the agreement of a worker with the others, so its
    own label never vouches for it. ``hit``/``miss`` are the label's log-likelihood terms
    (inside ``loglik``) and ``acc`` the accuracy they came from."""
    C = loglik.shape[1]
    rows = loglik[task] - miss[:, None]
    rows[np.arange(task.size), label] -= hit - miss
    q = posterior(rows, log_prior)[np.arange(task.size), label]
    return acc * q / (acc * q + (1.0 - acc) * (1.0 - q) / (C - 1))


def agreement_bias(agree_acc: np.ndarray, agree_n: np.ndarray, gold_right: np.ndarray,
                   gold_n: np.ndarray, m: float) -> float:
    """b²: the variance of the bias of agreement-based accuracies ``agree_acc`` (per worker,
    on ``agree_n`` labels of agreement) against the gold record (``gold_right`` of
    ``gold_n``), from the workers with >= 2 gold answers (module doc); 0 when fewer than
    two such workers."""
    has = gold_n >= 2
    if has.sum() < 2:
        return 0.0
    a, n, g = agree_acc[has], gold_n[has], gold_right[has] / gold_n[has]
    per = (a - g) ** 2 - g * (1.0 - g) / (n - 1.0) - a * (1.0 - a) / (agree_n[has] + m)
    w = n / n.sum()
    mean = float((w * per).sum())
    se = float(np.sqrt((w ** 2 * (per - mean) ** 2).sum() * has.sum() / (has.sum() - 1)))
    return max(0.0, mean - se)


def shown_class(cell: np.ndarray, bins: np.ndarray, tasks: np.ndarray) -> np.ndarray:
    """Per task of ``tasks``: the class the labeling page shows as the suggestion — the top
    class of the first model that predicted it (``cell``: (M, T) answer cells, -1 none;
    ``bins``: per model) — or -1 where no model did. O(M × len(tasks)): the live policy
    asks it for one label at a time."""
    cells = np.asarray(cell)[:, np.asarray(tasks, np.int64)]
    top = np.full(cells.shape[1], -1, np.int64)
    for m in range(cells.shape[0] - 1, -1, -1):  # the first model last: it wins
        has = cells[m] >= 0
        top[has] = cells[m, has] // int(bins[m])
    return top


def copied_labels(sources: ModelSources, task: np.ndarray, label: np.ndarray,
                  suggested: np.ndarray) -> np.ndarray:
    """bool per label: given with a model's answer shown (``suggested``) and agreeing with
    it — the top class of the first model that predicted its task (the page shows the
    latest-loaded model's; the models of one project rarely disagree on which is shown).
    The one reading of the rule: ``fit_em``, the ``shrunk`` export and the live ``auto``
    policy's per-label update (:mod:`labelq.policies.auto`) all call it."""
    top = shown_class(sources.cell, sources.bins, task)
    out: np.ndarray = np.asarray(suggested, bool) & (top == np.asarray(label))
    return out


def label_weights(copied: np.ndarray) -> np.ndarray | None:
    """Each label's weight in its task's posterior: ``SUGGESTED_WEIGHT`` for a copied
    label, 1 for the others; None when no label is copied (all count in full)."""
    return np.where(copied, SUGGESTED_WEIGHT, 1.0) if copied.any() else None


def gold_task_all(task: np.ndarray, gold: np.ndarray, n_tasks: int) -> np.ndarray:
    """Per task its gold class or -1, from the per-label ``gold``."""
    out = np.full(n_tasks, -1, dtype=np.int64)
    g = gold >= 0
    out[task[g]] = gold[g]
    return out


def fit_em(task: np.ndarray, worker: np.ndarray, label: np.ndarray, category: np.ndarray,
           gold: np.ndarray, n_tasks: int, n_workers: int, n_categories: int,
           n_classes: int, *, mu0: float, m0: float, m: float, iters: int,
           start: Fit | None = None, tol: float = 1e-4, per_worker: bool = False,
           calibrate: bool | np.ndarray = True, sources: ModelSources | None = None,
           task_category: np.ndarray | None = None, judge_by_models: bool = False,
           suggested: np.ndarray | None = None) -> Fit:
    """MAP-EM over the labels (``category`` and ``gold`` are per label: the task's category
    and its known class or -1), from the soft counts of ``start`` (or none).

    Only labels with evidence count for their worker: on gold tasks (right or wrong for
    sure) and on tasks with another label (:func:`loo_correct`). A label alone on its task
    says nothing about its worker and is left out of the counts (counting it as "as right
    as the worker is believed to be" would let the class prior and the worker drift
    together, until a worker answering mostly one class looks perfect).

    With ``calibrate`` (the default) and gold answers, each worker's agreement counts are
    discounted by how far agreement departs from gold across the workers (module doc).
    ``calibrate`` may also be a bool per label: the gold answers that measure that
    departure (a sample of gold like the other tasks; gold chosen where labels disagree
    would make agreement look worse than it is everywhere else). Every gold answer still
    counts as evidence about its worker.

    ``sources`` (issue 42, :mod:`labelq.policies._model_source`): models' predictions as
    one more source of evidence on each task (``task_category``: per task). Their tables
    start empty (no weight) and are refitted in the same EM from the posterior of the tasks
    with a human label or gold. With ``judge_by_models`` (the aggregator ``shrunk``), from
    the second step on a label alone on its task counts for its worker against the models'
    evidence, as against another label; without (the policy) the annotators are judged as
    without models, against each other and gold. In the policy the judgement would steer
    the routing: a model measured on a few tasks judges the annotators, the greedy choice
    follows, and the labels it collects teach the model back its own errors (``temp`` with a
    simulated model at 1 label per task: labels collected 0.51 right, answers 0.47; without
    it 0.69 and 0.85).

    ``suggested`` (bool per label, issue 42): given with the model's answer shown on the
    labeling page. Where such a label agrees with the model (:func:`copied_labels`) it is
    not independent of it, so it counts ``SUGGESTED_WEIGHT`` in its task's posterior, is
    no agreement evidence for its annotator, and does not teach the models' tables (its
    task teaches them only through its other labels or gold). A suggested label that
    disagrees with the model counts in full."""
    W, S, C = n_workers, n_categories, n_classes
    cell = worker * S + category
    is_gold = gold >= 0
    per_task = np.bincount(task, minlength=n_tasks)
    agree = ~is_gold & (per_task[task] >= 2)
    copied = (copied_labels(sources, task, label, suggested)
              if sources is not None and suggested is not None
              else np.zeros(task.size, bool))
    lw = label_weights(copied)
    agree &= ~copied

    def counts(sel: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
        return np.bincount(cell[sel], weights=None if weights is None else weights[sel],
                           minlength=W * S).astype(float).reshape(W, S)

    total_agree, total_gold = counts(agree), counts(is_gold)
    gold_right = counts(is_gold, (label == gold).astype(float))
    total = total_agree + total_gold
    cal_gold = is_gold & np.asarray(calibrate, dtype=bool)  # a bool broadcasts
    calibrated = bool(cal_gold.any())
    cal_total = counts(cal_gold).sum(axis=1)
    cal_right = counts(cal_gold, (label == gold).astype(float)).sum(axis=1)
    anchored = calibrated and int((cal_total >= 2).sum()) >= 2
    fit = start if start is not None else Fit(np.zeros((W, S)), np.zeros((W, S)),
                                              np.full(C, 1.0 / C))
    labelled = per_task > 0
    prev = None
    weight, bias2 = np.ones(W), 0.0
    if sources is not None:
        sources.counts[:] = 0.0  # every fit starts with untested models (no weight)
        cat_t = (np.zeros(n_tasks, np.int64) if task_category is None
                 else np.asarray(task_category, np.int64))
        evidence = np.bincount(task[~copied], minlength=n_tasks) > 0
        evidence[task[is_gold]] = True
    for step in range(max(iters, 1) if sources is None else max(iters, SOURCE_ITERS)):
        acc, _, _ = shrunk_accuracy(fit.correct, fit.total, C, mu0, m0, m, per_worker)
        a = acc[worker, category]
        hit, miss = label_loglik(a, C)
        loglik = task_loglik(task, a, label, n_tasks, C, lw)
        if sources is not None and step > 0:
            # the models' evidence, measured at the last step; with ``judge_by_models`` a
            # lone label now has a check (the prediction beside it) and counts for its worker
            loglik = loglik + sources.loglik(cat_t)
            if judge_by_models and step == 1:
                agree = agree | (~is_gold & (per_task[task] == 1) & ~copied
                                 & sources.has_prediction()[task])
                total_agree = counts(agree)
                total = total_agree + total_gold
        log_prior = np.log(fit.class_prior)
        right = loo_correct(task, label, hit, miss, loglik, log_prior, a)
        correct_agree = counts(agree, right)
        if calibrated:
            _, a_agree, _ = shrunk_accuracy(correct_agree, total_agree, C, mu0, m0, m,
                                            per_worker)
            n_agree = total_agree.sum(axis=1)
            bias2 = agreement_bias(a_agree, n_agree, cal_right, cal_total, m)
            weight = 1.0 / (1.0 + n_agree * bias2 / (a_agree * (1.0 - a_agree)))
            total = total_agree * weight[:, None] + total_gold
        correct = correct_agree * weight[:, None] + gold_right
        post = posterior(loglik[labelled], log_prior)
        if is_gold.any():
            gold_task = np.full(n_tasks, -1)
            gold_task[task[is_gold]] = gold[is_gold]
            g = gold_task[labelled]
            post[g >= 0] = np.eye(C)[g[g >= 0]]
        if sources is not None:
            full = posterior(loglik, log_prior)
            full[labelled] = post
            if lw is not None:  # the tables learn from the independent labels only: the
                # posterior without the labels that copy a shown suggestion
                ind = task_loglik(task, a, label, n_tasks, C, (~copied).astype(float))
                if step > 0:
                    ind = ind + sources.loglik(cat_t)
                full = posterior(ind, log_prior)
            if is_gold.any():
                full[gold_task >= 0] = np.eye(C)[gold_task[gold_task >= 0]]
            sources.refit(full, evidence, cat_t, gold_task_all(task, gold, n_tasks))
        # class shares shrunk half-way to uniform, so that no class can take over
        shares = post.sum(axis=0) + 1.0
        fit = Fit(correct, total, 0.5 * shares / shares.sum() + 0.5 / C, weight, bias2,
                  anchored)
        if prev is not None and sources is None and float(
                np.abs(correct - prev).max(initial=0.0)) < tol:
            break
        prev = correct
    return fit
