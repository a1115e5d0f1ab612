"""``auto``: pick the aggregation the data can support, and say which and why.

A full confusion model (Dawid-Skene) wins when every worker has given many labels that can
be checked -- against another label on the same task or a gold answer -- and loses, often
below plain majority vote, when they have not: early in a project, at one or two labels per
task, or with many classes (K^2 - K error rates per worker). :class:`AutoAggregator` decides
between the candidates in two ways:

* with gold answers on at least ``min_gold`` labelled tasks: **cross-validation over the
  gold** -- each fold's gold is hidden, every candidate is fitted with the rest clamped, and
  the held-out gold answers are scored by mean log-probability (accuracy first would reward
  over-confident guesses equally); with ``calibrate_gold`` (50) or more *random* gold
  answers (the ``calibration`` mask), the best method's held-out probabilities on them fit
  the map that calibrates the final confidences (:mod:`labelq.aggregation.calibration`);
* otherwise **a rule on the evidence** (:func:`evidence`): no task with two labels -> ``mv``
  (nothing tells workers apart); at least ``min_support`` checkable labels per confusion
  cell for the typical label's worker -> ``ds`` (with task categories: ``ds-category`` when
  each category has that support, else ``wmv`` with one weight per worker and category,
  shrunk to the worker's own); in between -> ``wmv``, one weight per worker, which needs K^2
  times fewer labels: from agreement with the other labels on its tasks, or -- when the
  typical label's worker has ``EM_WEIGHT_LABELS`` (100) checkable labels -- fitted by
  one-coin EM with a uniform class prior (:meth:`AutoAggregator._em_weights`).

**Guarded by majority vote** (issue 33, :mod:`labelq.aggregation.guard`). Without gold
the labels cannot say whether a richer model's departures from the vote are right (a bloc
of workers agreeing on wrong answers looks reliable to every model fitted on agreement), so
the rule's choice -- or, for a project routed by the ``auto`` policy, that policy's own
worker model ``shrunk`` (``model=``) -- decides only among the classes the vote leaves
plausible (its 90 % credible set); it cannot overturn a clear majority. With gold the
guarded answer competes with every candidate on the held-out gold answers and is replaced
only by one that beats it by ``SWITCH_Z`` standard errors. ``disagreement_`` counts the
tasks where the richer model and the vote part and those where the vote's answer was kept;
``accuracy_`` is the accuracy estimate: with random gold answers an exact 95 % interval
from how many of them the chosen method answers right with their gold hidden; without them
the models' belief, unchecked, and no interval (issue 41, :mod:`labelq.aggregation.guard`);
``calibration_`` says whether the confidences are calibrated and on how many answers.

The chosen method is ``method_``, the reason ``reason_``, the evidence ``evidence_``;
``trustworthy_`` is False when the confidences rest on too little -- support below
``min_support`` and fewer than ``trust_gold`` gold answers to calibrate on (a calibration
fitted on n answers is itself uncertain by about 1/sqrt(n): 50 give +-0.14 at worst) --
``labelq export`` warns then.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike

from ..errors import InputError
from ._em import softmax_rows
from .base import (
    BaseAggregator,
    BoolArray,
    FloatArray,
    IntArray,
    LabelArrays,
    check_gold,
    count_matrix,
    rank_within_task,
)
from .calibration import MIN_ANSWERS, fit_binned_map, recalibrate
from .guard import ALPHA, AccuracyEstimate, accuracy_interval, credible_guard
from .majority import MajorityVote, common_log_odds
from .methods import build, fit

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = ["AutoAggregator", "Evidence", "evidence", "CANDIDATES", "label_agreement"]

#: candidates, simplest first (a tie in held-out score goes to the simpler); ``shrunk`` is
#: the ``auto`` policy's own worker model
CANDIDATES = ("mv", "wmv", "onecoin", "shrunk", "ds")
#: the name under which the guarded default (the no-gold answer) competes on gold
GUARDED = "guarded"
#: one-sided normal quantile: gold replaces the guarded default only when a candidate's
#: held-out log-likelihood beats it by this many standard errors (95 %)
SWITCH_Z = 1.645


@dataclass(frozen=True)
class Evidence:
    """How much the labels say about the workers.

    ``informative_share``: share of labelled tasks with two or more labels or a gold answer;
    ``labels_per_worker``: the median, over checkable labels (on such tasks), of the
    labelling worker's number of checkable labels (label-weighted, so a crowd of one-label
    workers beside one busy worker reads as the typical label sees it);
    ``support``: that number per confusion cell, ``labels_per_worker / K**2``;
    ``n_gold``: labelled tasks with a gold answer.
    """

    n_classes: int
    n_labels: int
    labelled_tasks: int
    informative_share: float
    labels_per_worker: float
    support: float
    n_gold: int


def evidence(d: LabelArrays, gold: ArrayLike | None = None) -> Evidence:
    """The :class:`Evidence` of label arrays ``d`` (``gold``: class index or -1 per task)."""
    g = check_gold(gold, d.n_tasks, d.n_classes)
    per_task = np.bincount(d.task, minlength=d.n_tasks)
    labelled = per_task > 0
    checkable_task = labelled & ((per_task >= 2) | (g >= 0))
    checkable = checkable_task[d.task]
    per_worker = np.bincount(d.worker[checkable], minlength=d.n_workers)
    lpw = float(np.median(per_worker[d.worker[checkable]])) if checkable.any() else 0.0
    n_lab = int(labelled.sum())
    return Evidence(n_classes=d.n_classes, n_labels=int(d.task.size), labelled_tasks=n_lab,
                    informative_share=float(checkable_task.sum() / n_lab) if n_lab else 0.0,
                    labels_per_worker=lpw, support=lpw / d.n_classes ** 2,
                    n_gold=int((labelled & (g >= 0)).sum()))


def _log_score(probas: FloatArray, answers: IntArray) -> FloatArray:
    out: FloatArray = np.log(np.maximum(probas[np.arange(answers.size), answers], 1e-6))
    return out


def _temperature(logp: FloatArray, answers: IntArray) -> float:
    """The power t in p^t / sum p^t that maximises the log-likelihood of ``answers``
    (grid search in log space: one parameter, a few dozen held-out rows).

    The grid reaches down to 0.01: a confusion model that multiplies 10 to 40 labels as if
    independent puts log-odds of tens of nats on its answers, and a crowd whose errors are
    correlated can need them divided by 20 or more (adult2: answers at confidence
    1 - 1e-9 right 83 % of the time). The log-likelihood is exact (log-softmax, no clip),
    so a confident wrong answer costs what it should."""
    grid = np.exp(np.linspace(np.log(0.01), np.log(5.0), 121))
    rows = np.arange(answers.size)
    best, best_ll = 1.0, -np.inf
    for t in grid:
        z = logp * t
        z = z - z.max(axis=1, keepdims=True)
        ll = float((z[rows, answers] - np.log(np.exp(z).sum(axis=1))).sum())
        if ll > best_ll + 1e-12:
            best, best_ll = float(t), ll
    return best


def label_agreement(d: LabelArrays) -> tuple[FloatArray, FloatArray]:
    """Per label: 1.0 where another label of its task can check it (else 0.0), and its
    agreement with the majority of those other labels (ties count by share)."""
    counts = count_matrix(d.task, d.label, d.n_tasks, d.n_classes).toarray()
    idx = np.arange(d.task.size)
    others = counts[d.task].copy()
    others[idx, d.label] -= 1
    top = others.max(axis=1)
    tied = (others == top[:, None]).sum(axis=1)
    agree: FloatArray = np.where((top > 0) & (others[idx, d.label] == top), 1.0 / tied, 0.0)
    checked: FloatArray = (top > 0).astype(float)
    return checked, agree


class AutoAggregator(BaseAggregator):
    r"""Choose among ``mv``, ``wmv``, ``onecoin``, ``ds`` (and ``ds-category`` when tasks
    have categories) by held-out likelihood on gold, or by the evidence rule without gold;
    see the module docstring.

    ``min_gold`` (default 8): labelled gold tasks needed to cross-validate (fewer are
    still clamped by the EM methods, but too few to choose on); ``folds`` (5);
    ``min_support`` (6): checkable labels per confusion cell a full confusion model needs,
    from the shared data sets subsampled to 2 and 3 labels per task (at 5 and below ``ds``
    fell behind ``wmv``; see docs/aggregation.md); ``trust_gold`` (50): gold answers that
    make the confidences trustworthy without that support; ``calibrate_gold`` (50,
    :data:`~labelq.aggregation.calibration.MIN_ANSWERS`): random gold answers needed to
    calibrate the confidences (a temperature, then shrunk bins); ``seed`` fixes the fold
    split.

    Without gold, a majority (or weighted majority) vote's confidence is the one-coin
    posterior :math:`p_{ik} \propto \exp(s_{ik})` of its (log-odds) vote scores, with majority
    vote's common log-odds from how often two labels on a task agree -- not the smoothed vote
    share, which says 2/3 for any single label of two classes whatever the workers' accuracy.

    ``model``: the richer model to use without gold instead of the evidence rule's
    choice (``shrunk`` for projects routed by the ``auto`` policy); ``alpha``: the vote's
    credible set is ``1 - alpha`` (:data:`labelq.aggregation.guard.ALPHA`).

    Learned: ``method_``, ``reason_``, ``evidence_``, ``scores_`` (held-out mean
    log-probability per candidate and ``guarded``, gold only), ``temperature_``,
    ``trustworthy_``, ``fitted_`` (the chosen aggregator, fitted on all labels),
    ``guarded_`` (the answers are ``method_`` guarded by majority vote), ``disagreement_``,
    ``accuracy_`` (:class:`~labelq.aggregation.guard.AccuracyEstimate`), ``calibration_``
    (``calibrated``, ``answers``: random gold answers, ``temperature``, ``spread``: of
    the bins' departures), ``vote_probas_``.
    """

    method_: str
    reason_: str
    evidence_: Evidence
    scores_: dict[str, float]
    temperature_: float
    trustworthy_: bool
    fitted_: BaseAggregator
    guarded_: bool
    accuracy_: AccuracyEstimate
    calibration_: dict[str, Any]
    disagreement_: dict[str, float | int]
    vote_probas_: FloatArray

    uses_gold = True
    uses_categories = True
    uses_calibration = True
    #: pseudo-labels at the crowd's accuracy added to each worker's checked labels
    VOTE_PRIOR = 5.0
    #: pseudo-labels at the worker's overall accuracy added to its checked labels in each
    #: task category
    CATEGORY_PRIOR = 2.0
    #: checkable labels per worker (the typical label's worker) from which, below the
    #: support a full confusion model needs, the vote's weights are fitted by one-coin EM
    #: instead of one step of agreement with the other labels
    EM_WEIGHT_LABELS = 100
    _weights_by_em = False
    _calibration: BoolArray | None = None

    def __init__(self, min_gold: int = 8, folds: int = 5, min_support: float = 6.0,
                 trust_gold: int = 50, calibrate_gold: int = MIN_ANSWERS, seed: int = 0,
                 model: str | None = None, alpha: float = ALPHA) -> None:
        if min_gold < 2:
            raise InputError(f"min_gold must be >= 2, got {min_gold}", field="min_gold")
        if folds < 2:
            raise InputError(f"folds must be >= 2, got {folds}", field="folds")
        if not min_support > 0:
            raise InputError(f"min_support must be > 0, got {min_support}",
                             field="min_support")
        self.min_gold, self.folds, self.min_support, self.seed = min_gold, folds, \
            min_support, seed
        self.trust_gold, self.calibrate_gold = trust_gold, calibrate_gold
        if model is not None and model not in CANDIDATES + ("ds-category",):
            raise InputError(f"model must be one of {', '.join(CANDIDATES)}, ds-category, "
                             f"got {model!r}", field="model")
        if not 0 <= alpha < 1:
            raise InputError(f"alpha must be in [0, 1), got {alpha}", field="alpha")
        self.model, self.alpha = model, alpha

    def fit(self, task: ArrayLike, worker: ArrayLike, label: ArrayLike, *,
            n_tasks: int | None = None, n_workers: int | None = None,
            n_classes: int | None = None, gold: ArrayLike | None = None,
            categories: ArrayLike | None = None,
            calibration: ArrayLike | None = None,
            predictions: Mapping[str, FloatArray] | None = None) -> Self:
        """Fit on label arrays with ``gold`` (class index or -1 per task), the tasks'
        ``categories`` (int per task) and ``calibration`` (bool per task: the gold answers
        that may calibrate; default all); returns ``self``. ``predictions``: models'
        probabilities, combined with the chosen answer (:mod:`labelq.aggregation.base`)."""
        return self.fit_with(task, worker, label,
                             {"gold": gold, "categories": categories,
                              "calibration": calibration, "predictions": predictions},
                             n_tasks=n_tasks, n_workers=n_workers, n_classes=n_classes)

    def _candidates(self, categories: ArrayLike | None) -> tuple[str, ...]:
        if categories is not None and np.unique(categories).size > 1:
            return CANDIDATES + ("ds-category",)
        return CANDIDATES

    def _fit_one(self, method: str, d: LabelArrays, gold: IntArray,
                 categories: ArrayLike | None,
                 weights: FloatArray | None = None) -> BaseAggregator:
        """``method`` fitted on ``d``; ``wmv`` with ``weights`` (from :meth:`_checked_weights`,
        which do not depend on the gold: computed once for every fold) or computed here."""
        if method == "wmv" and weights is None:
            weights = self._em_weights(d, gold) if self._weights_by_em else \
                self._checked_weights(d, categories)
        elif method != "wmv":
            weights = None
        cal = self._calibration if method == "shrunk" else None
        return fit(build(method, {}), d.task, d.worker, d.label, n_tasks=d.n_tasks,
                   n_workers=d.n_workers, n_classes=d.n_classes, gold=gold,
                   categories=categories, weights=weights, calibration=cal)

    def _em_weights(self, d: LabelArrays, gold: IntArray | None = None) -> FloatArray:
        """Per-worker log-odds ``log((K-1) p_j / (1 - p_j))`` (0 at or below chance) of the
        accuracies one-coin EM with a uniform class prior fits: the weighted vote iterated
        until its weights and posteriors agree. One step of agreement with the other labels
        (:meth:`_checked_weights`) blames a good worker for a bad partner's answers; with
        many checkable labels per worker EM untangles the two (web at 2 labels per task,
        ~140 checkable labels per worker, seeds 2, 11, 12, 13: 0.635, 0.658, 0.658, 0.642
        against 0.595, 0.605, 0.617, 0.610). The class prior stays uniform: a fitted one
        follows the workers' over-use of a class (web: 0.485)."""
        from .dawid_skene import OneCoinDawidSkene

        K = d.n_classes
        oc = OneCoinDawidSkene(class_prior="uniform").fit(
            d.task, d.worker, d.label, n_tasks=d.n_tasks, n_workers=d.n_workers,
            n_classes=K, gold=gold)
        if K < 2:
            return np.ones(d.n_workers)
        p = np.clip(oc.skills_, 1e-3, 1 - 1e-3)
        out: FloatArray = np.maximum(0.0, np.log((K - 1) * p / (1 - p)))
        return out

    def _checked_weights(self, d: LabelArrays,
                         categories: ArrayLike | None = None) -> FloatArray:
        """Per-worker log-odds from how often a worker's label agrees with the majority of
        the *other* labels on its task (ties count by share). ``wmv``'s default compares
        with a vote that includes the worker's own label, so at one label per task every
        worker reads as always right; here such labels say nothing, and a worker's accuracy
        is shrunk (``VOTE_PRIOR`` pseudo-labels) toward the crowd's (from
        :meth:`_common_log_odds`). 5 pseudo-labels beat 1, 2, 10 and 20 on the shared sets
        at 2 and 3 labels per task more often than not (docs/aggregation.md).

        With task ``categories`` (two or more), the weights are per (worker, category),
        each shrunk by ``CATEGORY_PRIOR`` (2) pseudo-labels toward that worker's overall
        accuracy: a specialist (athlete: workers who know one sport) is trusted where
        it agrees, and a worker with few labels in a category keeps its overall weight.
        On athlete at 2 and 3 labels per task (subsample seeds 2/3, 11, 12, 13) 0.5 to 3
        pseudo-labels score alike and 5 or more fall behind (athlete@3: 0.656 with 2, 0.650
        with 5, 0.648 with 20); athlete is the only shared set with categories, so this is
        fitted on one data set."""
        K = d.n_classes
        checked, agree = label_agreement(d)
        n = np.bincount(d.worker, weights=checked, minlength=d.n_workers)
        a = np.bincount(d.worker, weights=agree, minlength=d.n_workers)
        q = self._common_accuracy(d)
        m = self.VOTE_PRIOR
        p = (a + m * q) / (n + m)
        if categories is not None and np.unique(categories).size > 1:
            cat = np.asarray(categories, dtype=np.int64)
            C = int(cat.max()) + 1
            key = d.worker * C + cat[d.task]
            n_c = np.bincount(key, weights=checked, minlength=d.n_workers * C)
            a_c = np.bincount(key, weights=agree, minlength=d.n_workers * C)
            mc = self.CATEGORY_PRIOR
            p = (a_c.reshape(-1, C) + mc * p[:, None]) / (n_c.reshape(-1, C) + mc)
        p = np.clip(p, 1e-3, 1 - 1e-3)
        out: FloatArray = (np.maximum(0.0, np.log((K - 1) * p / (1 - p))) if K > 1
                           else np.ones(p.shape))
        return out

    def _fit(self, d: LabelArrays, gold: ArrayLike | None = None,
             categories: ArrayLike | None = None,
             calibration: ArrayLike | None = None) -> None:
        g = check_gold(gold, d.n_tasks, d.n_classes)
        # gold answers that may calibrate: a sample of tasks like the others (gold questions
        # served by a schedule), not tasks chosen for being hard (suggested or reviewed)
        cal = (g >= 0) if calibration is None else (g >= 0) & np.asarray(calibration, bool)
        # the same sample measures how far agreement departs from gold in ``shrunk``: a
        # population-level figure, like the temperature. Measured on 30 suggested answers
        # it inflated (adult2, bluebirds, possent_zheng: 0.05 below the guarded default),
        # though on the schools pool, whose decoys are a bias of its workers, it was right
        # (docs/aggregation.md)
        self._calibration = None if calibration is None else cal
        ev = evidence(d, g)
        self.evidence_, self.scores_, self.temperature_ = ev, {}, 1.0
        n_random = int((cal & (np.bincount(d.task, minlength=d.n_tasks) > 0)).sum())
        self.calibration_ = {"calibrated": False, "answers": n_random, "temperature": 1.0,
                             "spread": None}
        cands = self._candidates(categories)
        self._weights_by_em = False
        n_cat = int(np.unique(categories).size) if categories is not None else 1
        if self.model is not None:
            rich, rule_reason = self.model, f"the project's policy model ({self.model})"
        else:
            rich, rule_reason = self._choose_by_rule(ev, cands, n_cat)
        weights_by_em = self._weights_by_em
        fits = {"mv": self._fit_one("mv", d, g, categories)}  # reused if gold picks one
        vote = self._probas("mv", d, fits["mv"])
        rich_fit = fits[rich] = self._fit_one(rich, d, g, categories)
        rich_p = self._probas(rich, d, rich_fit)
        guarded = credible_guard(rich_p, vote, self.alpha)
        self.vote_probas_ = vote
        held = None
        if ev.n_gold >= self.min_gold:
            method, held = self._choose_on_gold(d, g, categories, cands, rich, cal)
        else:
            method = GUARDED
        self._weights_by_em = weights_by_em
        labelled = np.bincount(d.task, minlength=d.n_tasks) > 0
        n_lab = int(labelled.sum())
        differ, over = int(guarded.differ[labelled].sum()), int(guarded.overruled[labelled].sum())
        self.disagreement_ = {"tasks": n_lab, "differ": differ, "overruled": over,
                              "mean_abs_diff": round(float(
                                  np.abs(rich_p - vote)[labelled].sum(axis=1).mean() / 2)
                                  if n_lab else 0.0, 4)}
        if method == GUARDED:
            self.method_, self.guarded_ = rich, True
            self.fitted_ = rich_fit
            probas, labels = guarded.probas.copy(), guarded.labels.copy()
            guard_note = (f"; it differs from majority vote on {differ} of {n_lab} tasks, "
                          f"and on {over} of them the vote's {1 - self.alpha:.0%} credible "
                          f"set excludes its answer: the vote's answer kept there"
                          if rich != "mv" and differ else "")
            if ev.n_gold >= self.min_gold:
                self.reason_ = (f"{rule_reason}, guarded by majority vote: no candidate "
                                f"beats it on {ev.n_gold} held-out gold answers{guard_note}")
            else:
                self.reason_ = rule_reason + guard_note
        else:
            self.method_, self.guarded_ = method, False
            self.fitted_ = fits[method] if method in fits else \
                self._fit_one(method, d, g, categories)
            probas = self._probas(method, d, self.fitted_)
            labels = self.fitted_.labels_.copy()
            self.reason_ = (f"best held-out log-likelihood on {ev.n_gold} gold answers "
                            f"({min(self.folds, ev.n_gold)}-fold), better than majority-vote-"
                            f"guarded {rich} by more than {SWITCH_Z} standard errors")
        held_right = None
        if held is not None:
            held_right, calibrate = self._calibrate(*held)
            if calibrate is not None:
                probas = calibrate(probas, labels)
        probas[~labelled] = 1.0 / d.n_classes
        known = np.flatnonzero(g >= 0)  # gold answers stand, whichever method was chosen
        probas[known] = 0.0
        probas[known, g[known]] = 1.0
        labels[known] = g[known]
        self.probas_, self.labels_ = probas, labels
        self.trustworthy_ = ev.support >= self.min_support or \
            (bool(self.scores_) and ev.n_gold >= self.trust_gold)
        data = labelled & (g < 0)
        conf = probas[np.arange(d.n_tasks), labels][data]
        # an interval only from random gold answers, held out; else the models' belief
        self.accuracy_ = accuracy_interval(conf, held_right=held_right,
                                           floor=self._common_accuracy(d))

    def _calibrate(self, held_p: FloatArray, held_labels: IntArray, answers: IntArray
                   ) -> tuple[BoolArray | None,
                              Callable[[FloatArray, IntArray], FloatArray] | None]:
        """From the chosen method's held-out probabilities ``held_p``, answers and the
        gold ``answers`` of the random gold: whether each held-out answer was right (None
        without any) and, with ``calibrate_gold`` (50) or more, the map that calibrates
        the export's probabilities (a temperature, then shrunk bins:
        :mod:`labelq.aggregation.calibration`); sets ``temperature_`` and
        ``calibration_``."""
        n = int(answers.size)
        right: BoolArray = held_labels == answers
        self.calibration_ = {"calibrated": False, "answers": n, "temperature": 1.0,
                             "spread": None}
        if n < max(self.calibrate_gold, 1):  # a map fitted on a few moves more than it knows
            return (right if n else None), None
        logp = np.log(np.maximum(held_p, 1e-300))
        t = self.temperature_ = _temperature(logp, answers)
        tempered = softmax_rows(logp * t)
        mapping = fit_binned_map(tempered[np.arange(n), held_labels], right)
        self.calibration_ = {"calibrated": True, "answers": n, "temperature": round(t, 4),
                             "spread": round(mapping.spread, 4)}

        def calibrate(probas: FloatArray, labels: IntArray) -> FloatArray:
            # the guard's answer may not be the argmax: keep it, re-read its confidence
            p = softmax_rows(np.log(np.maximum(probas, 1e-300)) * t)
            return recalibrate(p, labels, mapping)

        return right, calibrate

    def _choose_by_rule(self, ev: Evidence, cands: tuple[str, ...],
                        n_categories: int) -> tuple[str, str]:
        if ev.informative_share == 0:
            return "mv", "no task has two labels or a gold answer: nothing tells workers apart"
        cell = f"{ev.support:.1f} checkable labels per confusion cell"
        if "ds-category" in cands:
            # C matrices per worker: C times the labels needed. Categories that matter make
            # a category-blind confusion matrix wrong, so without that support: one weight
            # per (worker, category), shrunk to the worker's own (see _checked_weights)
            per = ev.support / n_categories
            if per >= self.min_support:
                return "ds-category", (f"{per:.1f} checkable labels per cell of each of "
                                       f"{n_categories} categories (>= {self.min_support:g})")
            return "wmv", (f"only {per:.1f} checkable labels per cell of each of "
                           f"{n_categories} categories (< {self.min_support:g}): one weight "
                           f"per worker and category")
        if ev.support >= self.min_support:
            return "ds", f"{cell} (>= {self.min_support:g})"
        if ev.labels_per_worker >= self.EM_WEIGHT_LABELS:
            self._weights_by_em = True
            return "wmv", (f"only {cell} (< {self.min_support:g}) but {ev.labels_per_worker:g} "
                           f"checkable labels per worker (>= {self.EM_WEIGHT_LABELS}): one "
                           f"weight per worker, fitted by one-coin EM")
        return "wmv", f"only {cell} (< {self.min_support:g}): one weight per worker"

    def _choose_on_gold(self, d: LabelArrays, g: IntArray, categories: ArrayLike | None,
                        cands: tuple[str, ...], rich: str, cal: BoolArray
                        ) -> tuple[str, tuple[FloatArray, IntArray, IntArray]]:
        """Cross-validate every candidate and the guarded default on the gold; returns the
        choice and, for the calibration and the accuracy estimate, the final method's
        held-out probabilities, answers and the gold answers of the gold in ``cal``.

        The guarded default stands unless a candidate's held-out log-likelihood beats it
        by ``SWITCH_Z`` standard errors of the paired per-answer differences: a handful of
        gold answers that cannot tell two models apart do not overturn the rule that
        keeps the export at or above majority vote. The calibration and the accuracy
        estimate use the held-out answers of the gold in ``cal`` only (a sample like the
        other tasks): gold chosen where the models disagree would teach that every answer
        is as doubtful as those."""
        per_task = np.bincount(d.task, minlength=d.n_tasks)
        labelled = per_task > 0
        gold_tasks = np.flatnonzero(labelled & (g >= 0))
        rng = np.random.default_rng(self.seed)
        fold = rng.permutation(gold_tasks.size) % min(self.folds, gold_tasks.size)
        names = tuple(dict.fromkeys((*cands, rich)))
        held = {m: np.empty((gold_tasks.size, d.n_classes)) for m in (*names, GUARDED)}
        guarded_labels = np.empty(gold_tasks.size, dtype=np.int64)
        keep = self._thin_gold(d, g, gold_tasks, per_task, rng)
        for f in np.unique(fold):
            hide = gold_tasks[fold == f]
            g_f = g.copy()
            g_f[hide] = -1
            # the hidden gold questions keep as many labels as a task typically has
            k = keep | ~np.isin(d.task, hide)
            d_f = LabelArrays(d.task[k], d.worker[k], d.label[k], d.n_tasks, d.n_workers,
                              d.n_classes)
            weights = self._checked_weights(d_f, categories)
            for m in names:
                fitted = self._fit_one(m, d_f, g_f, categories, weights)
                held[m][fold == f] = self._probas(m, d_f, fitted)[hide]
            gd = credible_guard(held[rich][fold == f], held["mv"][fold == f], self.alpha)
            held[GUARDED][fold == f] = gd.probas
            guarded_labels[fold == f] = gd.labels
        answers = g[gold_tasks]
        per = {m: _log_score(held[m], answers) for m in held}
        self.scores_ = {m: float(v.mean()) for m, v in per.items()}
        best = max(names, key=lambda m: (round(self.scores_[m], 9), -names.index(m)))
        diff = per[best] - per[GUARDED]
        se = float(diff.std(ddof=1) / np.sqrt(diff.size)) if diff.size > 1 else np.inf
        choice = best if diff.mean() > SWITCH_Z * se and diff.mean() > 0 else GUARDED
        sample = cal[gold_tasks]
        labels = (guarded_labels if choice == GUARDED else np.argmax(held[choice], axis=1))
        return choice, (held[choice][sample], labels[sample], answers[sample])

    @staticmethod
    def _thin_gold(d: LabelArrays, g: IntArray, gold_tasks: IntArray,
                   per_task: IntArray, rng: np.random.Generator) -> BoolArray:
        """A mask over labels keeping, of each gold task, a random subset of as many labels
        as a task to export has, and every other label. The counts are matched by
        quantile: the gold task whose label count ranks r-th of n gets the (r + 1/2)/n
        quantile of the other tasks' counts (or its own, if fewer), so gold drawn like the
        tasks keeps its labels and gold labelled more heavily is thinned to look like them. Gold questions are exempt from the label cap and answered by many workers;
        scored on all their labels they would be easier than the tasks they stand for, and
        the choice, the temperature and the accuracy estimate would all be optimistic
        (`labelq demo`: gold questions ~6 labels, tasks 3-4; its accuracy interval missed
        the truth on 3 of 6 seeds before this).

        Which labels a gold task keeps is drawn to match *who* labels the tasks, too: each
        of its labels is weighted by its worker's share of the tasks' labels over their
        share of the gold questions' labels (a weighted draw without replacement). Gold on
        suspicion serves a suspect annotator gold questions and little else, so without it
        the gold was answered by a worse crowd than the tasks and the estimate ran low
        (`labelq demo` with suspicion, issue 41: the interval held on 4 of 10 seeds)."""
        data = per_task[(per_task > 0) & (g < 0)]
        if data.size == 0 or gold_tasks.size == 0:
            out: BoolArray = np.ones(d.task.size, dtype=bool)
            return out
        n = per_task[gold_tasks]
        rank = np.empty(n.size, dtype=np.int64)
        rank[np.lexsort((rng.random(n.size), n))] = np.arange(n.size)  # ties at random
        target = np.quantile(data, (rank + 0.5) / n.size, method="inverted_cdf").astype(
            np.int64)
        limit = np.full(d.n_tasks, np.iinfo(np.int64).max)
        limit[gold_tasks] = target
        on_gold = np.isin(d.task, gold_tasks)
        on_data = (g[d.task] < 0)
        share_data = np.bincount(d.worker[on_data], minlength=d.n_workers) / max(
            int(on_data.sum()), 1)
        share_gold = np.bincount(d.worker[on_gold], minlength=d.n_workers) / max(
            int(on_gold.sum()), 1)
        ratio = np.divide(share_data, share_gold, out=np.zeros(d.n_workers),
                          where=share_gold > 0)
        weight = np.where(on_gold, ratio[d.worker], 1.0)
        out = rank_within_task(d.task, rng, weight) < limit[d.task]
        return out

    def _probas(self, method: str, d: LabelArrays, fitted: BaseAggregator) -> FloatArray:
        if method in ("mv", "wmv"):
            assert isinstance(fitted, MajorityVote)  # what aggregate() builds for them
            return self._vote_posterior(d, fitted)
        out: FloatArray = fitted.probas_.copy()
        return out

    def _vote_posterior(self, d: LabelArrays, fitted: MajorityVote) -> FloatArray:
        """One-coin posterior of the vote scores (see the class docstring)."""
        K = d.n_classes
        scores = np.asarray(fitted.scores_, dtype=float)
        if getattr(fitted, "weight_unit_", None) is None:  # plain majority vote
            scores = scores * self._common_log_odds(d)
        if K == 1 or not np.any(scores):
            out: FloatArray = fitted.probas_.copy()
            return out
        return softmax_rows(scores)

    @classmethod
    def _common_accuracy(cls, d: LabelArrays) -> float:
        """The accuracy q behind :meth:`_common_log_odds` (what one label is worth)."""
        z = cls._common_log_odds(d)
        return float(np.exp(z) / (np.exp(z) + d.n_classes - 1))

    @staticmethod
    def _common_log_odds(d: LabelArrays) -> float:
        """:func:`~.majority.common_log_odds` (what one label of the vote is worth)."""
        return common_log_odds(d)
