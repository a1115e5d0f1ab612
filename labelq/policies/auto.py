"""``auto``: labelq's own policy — the default, for any number of classes.

It combines what the paper policies each get right and guards against the ways they fail on
real data (issue 20):

* **Worker model that cannot run away** (``worker_model``): one-coin accuracies per worker and
  per (worker, category), with a population -> worker -> category shrinkage prior, fitted by
  MAP-EM over all labels. A worker is trusted for the agreement of its labels with the
  posterior, not for its volume; a thin category falls back to the worker's overall
  accuracy; gold answers enter as known classes. The fit is redone on a geometric schedule
  (after ``refit_growth`` times as many labels as at the last fit, at least ``refit_min``
  more), so its total cost stays a constant multiple of one fit over all labels; between
  fits a label updates its task's log-posterior and its worker's soft counts in O(C).
* **Every task first, then the doubtful ones**: a task with fewer than ``floor`` labels
  comes first (fewest labels first); after that the most uncertain task (1 - its top
  posterior) is asked. A task whose top posterior reaches ``confidence`` is *settled* and
  asked again only when no unsettled task is left (Toloka's dynamic overlap, as a
  priority). ``priority`` is this worker-independent index, so the live pipeline's
  priority index orders tasks by it.
* **Exploration that cannot lock in** (push, ``select_pair``): for the chosen task, the
  eligible worker whose shrunk accuracy on the task's category gives the most information
  per unit cost is asked (a worker nobody has judged yet sits at the population mean, ties
  broken at random), and a share ``explore`` (30 %) of the push decisions asks another
  eligible worker instead, drawn in proportion to the open tasks it can still take times
  the posterior variance of its accuracy (``explore_by=capacity``): a cross-check that keeps
  the estimates moving, so a worker misjudged early is corrected by the EM, spent where
  there is most to learn that can still be used (learning about a worker with three tasks
  left, or about one already well known, is worth little). An exploring ask goes to the
  most urgent task that already has a label (``cross_check``): while the floor is being
  filled the most urgent task is an empty one, and a lone label on it says nothing about
  its worker (docs/auto.md, "Round 5": +0.035 on ``rte`` and +0.05 on ``temp`` at 2 labels
  per task).
  ``thompson=true`` draws the accuracies from their posteriors instead (Thompson sampling,
  the default until ``docs/auto.md``, "Round 4": with many workers the largest of the
  unjudged workers' wide draws beat a known good worker's on most tasks; on ``web`` the
  labels it collected at 2 labels per task were no more accurate than the data set's
  average label).
* **Above-average workers first** (push, ``gate``): only the eligible pairs whose worker's
  accuracy on the task's category, plus one posterior standard deviation, reaches the
  population mean are considered while there is any such pair; a worker the evidence puts
  clearly below the mean (and a task that only such workers can label) waits until nothing
  better is left. An unjudged worker sits at the mean, so it still gets tried.
* **Cost-aware**: the value of a worker is the information one label of its sampled
  accuracy carries about a task's class, ``log C - H(label | class)``, divided by its cost:
  a cheap near-random worker is worth little per unit, whatever its price.
* **Pull** (``select_task`` for the asking worker): ``priority`` plus how much better the
  worker is on a task's category than on average, so a worker gets the categories it is
  good at among the tasks that need labels.
* **Trust checked against gold** (issue 34, docs/auto.md "Round 7"): agreement is a biased
  measurement of accuracy where a bloc agrees on wrong answers; with gold, each worker's
  agreement evidence is discounted by the variance of that bias measured on the gold
  records (``worker_model``), so gold anchors the trust; when a gold question is due, the one
  whose answer tells most about the asking worker's accuracy is picked
  (:meth:`gold_information`). Without gold a dense pool keeps its full exploration
  (``anchor``): the trusted workers' checks of each other would only confirm the
  agreement that made them trusted.

Decisions are random only through the ``rng`` passed in: ties among equally urgent tasks
are broken uniformly (so a replay is not biased by task order), the ``explore`` draws and,
with ``thompson``, the accuracy draws.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import _model_source as ms
from . import worker_model as em
from .base import FloatArray, IntArray, Observation, Policy, Problem
from .registry import register

__all__ = ["Auto", "AutoState"]


@dataclass
class AutoState:
    """Problem facts, the label log, the worker soft counts and each task's log-likelihood."""

    n_classes: int
    task_category: IntArray  # int (T,)
    gold: IntArray  # int (T,), known class or -1
    cost: FloatArray  # float (W,)
    log_task: list[int]
    log_worker: list[int]
    log_label: list[int]
    correct: FloatArray  # float (W, S): soft count of correct labels
    total: FloatArray  # float (W, S): labels
    class_prior: FloatArray  # float (C,)
    loglik: FloatArray  # float (T, C): sum of log P(label | class) over the task's labels
    n_labels: IntArray  # int (T,)
    next_refit: int
    # what one agreement label counts for its worker (the fit's calibration against gold,
    # worker_model's ``agree_weight``); 1 without gold
    agree_weight: FloatArray | None = None  # float (W,)
    anchored: bool = False  # the last fit could check agreement against gold records
    # models' predictions as sources (issue 42, _model_source): names, answer cell per
    # (model, task) (-1: none), bins per model, soft counts (M, S, A, C), gold behind them
    # (M, C), and their evidence per task (T, C), kept beside the humans' ``loglik``
    model_names: list[str] = field(default_factory=list)
    model_cell: IntArray | None = None  # int (M, T)
    model_bins: IntArray | None = None  # int (M,)
    model_counts: FloatArray | None = None  # float (M, S, A, C)
    model_gold: IntArray | None = None  # int (M, C)
    model_loglik: FloatArray | None = None  # float (T, C)
    # the positions in the label log of the labels given while the labeling page showed
    # the model's answer (``Observation.suggested``, issue 42; few or none: suggestions are
    # off by default). Such a label that agrees with the model is weighed by the rule of
    # worker_model's ``copied_labels`` (docs/models.md, "Independence")
    log_suggested: list[int] = field(default_factory=list)

    def sources(self) -> ms.ModelSources | None:
        """The models as :class:`~labelq.policies._model_source.ModelSources` over this
        state's arrays (a refit writes into them), or None without predictions."""
        if not self.model_names or self.model_cell is None or self.model_bins is None \
                or self.model_counts is None or self.model_gold is None:
            return None
        return ms.ModelSources(self.model_names, self.model_cell, self.model_bins,
                               self.model_counts, self.model_gold)


def _variance(acc: np.ndarray, evidence: np.ndarray, strength: float) -> np.ndarray:
    """Posterior variance of accuracies ``acc`` on ``evidence`` labels plus ``strength``
    pseudo-labels (the width the gate and the exploration use)."""
    return acc * (1.0 - acc) / (evidence + strength)


def _unit(name: str, value: Any, lo: float, hi: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name} must be a number, got {value!r}")
    if not (lo < float(value) < hi):
        raise ValueError(f"{name} must be in ({lo:g}, {hi:g}), got {value}")
    return float(value)


@register
class Auto(Policy):
    name = "auto"
    mode = "push"
    # 2: ``log_suggested`` (issue 42); a state of layout 1 lacks the marks and is folded
    # again from the labels (``Policy.state_version``)
    state_version = 2

    params: Params  # this policy's own (``Policy.params`` is typed Any)

    @dataclass(frozen=True)
    class Params:
        """``floor``: labels every task gets before uncertainty decides (fewest first);
        ``confidence``: top posterior at which a task is settled; ``prior_accuracy`` and
        ``prior_strength``: the population's accuracy before data and its weight in
        pseudo-labels; ``strength``: pseudo-labels that shrink a worker towards the
        population and a (worker, category) towards the worker; ``refit_growth`` and
        ``refit_min``: EM refit schedule; ``em_iters``: EM iterations per refit;
        ``thompson``: sample worker accuracies (Thompson sampling; false, the default: use
        their means); ``explore``: share of push decisions that ask another eligible worker;
        ``explore_by``: how that worker is drawn (``capacity``: in proportion to the open
        tasks it can take times the posterior variance of its accuracy, and a Thompson
        draw's departure from the mean scaled by its open tasks over the median;
        ``uniform``); ``population``: the population mean an unjudged
        worker starts from is the mean over *workers*, each weighted by its evidence
        (``workers``), or over *labels* (``labels``: prolific workers weigh more, which
        overrates a newcomer where the prolific workers are the good ones); ``gate``: push
        asks a worker below the population mean only when no task has a worker at or above it;
        ``cross_check``: an exploring ask goes to the most urgent task that has a label
        already; ``ties``: among workers of equal value, ``random`` or ``sticky`` (the one
        who has given the most labels first, then at random); ``explore_dense``: how much
        less a dense pool explores (:meth:`explore_rate`); ``anchor``: only once gold has
        checked agreement (false: also without gold, as before issue 34)."""

        floor: int = 1
        confidence: float = 0.95
        prior_accuracy: float = 0.7
        prior_strength: float = 10.0
        strength: float = 4.0
        refit_growth: float = 1.2
        refit_min: int = 10
        em_iters: int = 3
        thompson: bool = False
        explore: float = 0.3
        gate: bool = True
        population: str = "workers"
        explore_by: str = "capacity"
        cross_check: bool = True
        ties: str = "random"
        explore_dense: float = 0.5
        anchor: bool = True
        min_human_labels: int = 1

        def __post_init__(self) -> None:
            for name in ("floor", "refit_min", "em_iters", "min_human_labels"):
                v = getattr(self, name)
                lo = 0 if name in ("floor", "min_human_labels") else 1
                if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                    raise ValueError(f"{name} must be an integer >= {lo}, got {v!r}")
            if self.explore_by not in ("capacity", "uniform"):
                raise ValueError(f"explore_by must be capacity or uniform, got "
                                 f"{self.explore_by!r}")
            if self.ties not in ("random", "sticky"):
                raise ValueError(f"ties must be random or sticky, got {self.ties!r}")
            if self.population not in ("workers", "labels"):
                raise ValueError(f"population must be workers or labels, got "
                                 f"{self.population!r}")
            for name in ("thompson", "gate", "cross_check", "anchor"):
                if not isinstance(getattr(self, name), bool):
                    raise ValueError(f"{name} must be true or false, got "
                                     f"{getattr(self, name)!r}")
            object.__setattr__(self, "confidence", _unit("confidence", self.confidence, 0, 1))
            if self.explore != 0:
                object.__setattr__(self, "explore", _unit("explore", self.explore, 0, 1))
            if isinstance(self.explore_dense, bool) or not isinstance(
                    self.explore_dense, (int, float)) or not 0 <= self.explore_dense <= 1:
                raise ValueError(f"explore_dense must be a number in [0, 1], got "
                                 f"{self.explore_dense!r}")
            object.__setattr__(self, "prior_accuracy",
                               _unit("prior_accuracy", self.prior_accuracy, 0, 1))
            for name in ("prior_strength", "strength"):
                object.__setattr__(self, name, _unit(name, getattr(self, name), 0, math.inf))
            object.__setattr__(self, "refit_growth",
                               _unit("refit_growth", self.refit_growth, 1, math.inf))

    # --- state -----------------------------------------------------------------------
    def init_state(self, problem: Problem,
                   predictions: Mapping[str, FloatArray] | None = None) -> AutoState:
        """The state before any label. ``predictions`` (or ``problem.predictions``): source
        name -> n_tasks x n_classes probabilities of a model, a row of NaN where it gave
        none (issue 42): each becomes a source whose reliability the refits measure
        (``_model_source``); it starts with no weight."""
        W, S, C, T = problem.n_workers, problem.n_categories, problem.n_classes, problem.n_tasks
        gold = np.where(np.asarray(problem.is_gold, bool), np.asarray(problem.gold_answer), -1)
        preds = predictions if predictions is not None else problem.predictions
        src = ms.build_sources(preds, T, C, S) if preds else None
        model: dict[str, Any] = {} if src is None else {
            "model_names": src.names, "model_cell": src.cell, "model_bins": src.bins,
            "model_counts": src.counts, "model_gold": src.gold,
            "model_loglik": np.zeros((T, C))}
        return AutoState(
            n_classes=C, task_category=np.asarray(problem.task_category, np.int64).copy(),
            gold=np.asarray(gold, np.int64), cost=np.asarray(problem.worker_cost, float).copy(),
            log_task=[], log_worker=[], log_label=[], correct=np.zeros((W, S)),
            total=np.zeros((W, S)), class_prior=np.full(C, 1.0 / C), loglik=np.zeros((T, C)),
            n_labels=np.zeros(T, np.int64), next_refit=self.params.refit_min,
            agree_weight=np.ones(W), log_suggested=[], **model)

    def state_from_dict(self, data: dict[str, Any]) -> AutoState:
        if "log_suggested" not in data:  # (hotstate and saved check ``state_version``
            # first: this is the last guard) a state of before issue 42 has no marks, and
            # read as "none suggested" it would count copies of the model in full
            raise ValueError("auto state of layout 1 (no log_suggested): fold it again "
                             "from the labels")
        arr = {"task_category": np.int64, "gold": np.int64, "cost": float, "correct": float,
               "total": float, "class_prior": float, "loglik": float, "n_labels": np.int64,
               "agree_weight": float, "model_cell": np.int64, "model_bins": np.int64,
               "model_counts": float, "model_gold": np.int64, "model_loglik": float}
        kw: dict[str, Any] = {k: (np.asarray(v, dtype=arr[k]) if k in arr and v is not None
                                  else v) for k, v in data.items()}
        T, C = len(kw["task_category"]), int(kw["n_classes"])
        kw["loglik"] = kw["loglik"].reshape(T, C)
        if kw.get("model_names"):  # (a JSON round trip flattens nothing, but lists of
            # lists come back as nested lists: shapes from the problem's sizes)
            M, S = len(kw["model_names"]), np.asarray(kw["correct"]).reshape(
                len(kw["cost"]), -1).shape[1]
            kw["model_cell"] = kw["model_cell"].reshape(M, T)
            kw["model_counts"] = kw["model_counts"].reshape(M, S, -1, C)
            kw["model_gold"] = kw["model_gold"].reshape(M, C)
            kw["model_loglik"] = kw["model_loglik"].reshape(T, C)
        if kw.get("agree_weight") is None:  # a state saved before the calibration
            kw["agree_weight"] = np.ones(len(kw["cost"]))
        return AutoState(**kw)

    # --- the model -----------------------------------------------------------------------
    def accuracies(self, state: AutoState) -> tuple[np.ndarray, np.ndarray]:
        """(acc[W, S], acc[W]): shrunk accuracies per (worker, category) and per worker."""
        p = self.params
        acc, worker, _ = em.shrunk_accuracy(state.correct, state.total, state.n_classes,
                                            p.prior_accuracy, p.prior_strength, p.strength,
                                            p.population == "workers")
        return acc, worker

    def worker_agreement(self, state: AutoState) -> tuple[np.ndarray, np.ndarray]:
        """(checked[W], right[W]): the worker model's soft counts per worker — labels it
        could check (gold answers, and agreement labels weighted by the calibration against
        gold) and the share judged right: the agreement record of gold on suspicion
        (:mod:`labelq.live.suspicion`)."""
        return state.total.sum(axis=1), state.correct.sum(axis=1)

    def _posterior(self, state: AutoState, tasks: np.ndarray) -> np.ndarray:
        ll = state.loglik[tasks]
        if state.model_loglik is not None:  # the models' measured evidence (issue 42)
            ll = ll + state.model_loglik[tasks]
        post = em.posterior(ll, np.log(state.class_prior))
        gold = state.gold[tasks]
        if (gold >= 0).any():
            post[gold >= 0] = np.eye(state.n_classes)[gold[gold >= 0]]
        return post

    def _information(self, acc: np.ndarray, n_classes: int) -> np.ndarray:
        """log C - H(label | class) of a one-coin worker of accuracy ``acc`` (nats)."""
        acc = np.clip(acc, 1e-9, 1 - 1e-9)
        return math.log(n_classes) + acc * np.log(acc) + (1 - acc) * np.log(
            (1 - acc) / (n_classes - 1))

    def refit(self, state: AutoState) -> None:
        """Refit the worker model by EM over every label and recompute each task's
        log-likelihood; ``update`` calls it on the geometric schedule."""
        p = self.params
        task = np.asarray(state.log_task, np.int64)
        worker = np.asarray(state.log_worker, np.int64)
        label = np.asarray(state.log_label, np.int64)
        W, S = state.correct.shape
        T = state.n_labels.size
        # every fit starts from equal workers (the majority vote), never from the last fit:
        # a few EM steps from the vote refine it; starting from the last fit would let a
        # wrong fixed point (a group of workers agreeing on wrong answers) carry over
        start = None
        src = state.sources()
        # the marks (issue 42): labels copying a shown suggestion, by the rule fit_em and
        # ``update`` share (worker_model's ``copied_labels``)
        suggested = self.suggested(state) if state.log_suggested else None
        copied = (em.copied_labels(src, task, label, suggested)
                  if src is not None and suggested is not None else np.zeros(task.size, bool))
        # tasks with independent evidence (a label that is no copy, or gold): what
        # measures the models (a task whose labels all copy the model measures nothing)
        evidence = np.bincount(task[~copied], minlength=T) > 0
        evidence[state.gold >= 0] |= state.n_labels[state.gold >= 0] > 0
        fit = em.fit_em(task, worker, label, state.task_category[task], state.gold[task], T,
                        W, S, state.n_classes, mu0=p.prior_accuracy, m0=p.prior_strength,
                        m=p.strength, iters=p.em_iters, start=start,
                        per_worker=p.population == "workers", sources=src,
                        task_category=state.task_category,
                        judge_by_models=src is not None and ms.measured(src, evidence),
                        suggested=suggested)
        if src is not None:
            state.model_loglik = src.loglik(state.task_category)
        state.correct, state.total, state.class_prior = fit.correct, fit.total, fit.class_prior
        state.agree_weight, state.anchored = fit.agree_weight, fit.anchored
        acc, _ = self.accuracies(state)
        state.loglik = em.task_loglik(task, acc[worker, state.task_category[task]], label,
                                      state.n_labels.size, state.n_classes,
                                      em.label_weights(copied))
        n = len(task)
        state.next_refit = max(n + p.refit_min, int(math.ceil(n * p.refit_growth)))

    # --- decisions -------------------------------------------------------------------
    def priority(self, state: AutoState, tasks: np.ndarray) -> np.ndarray:
        tasks = np.asarray(tasks, np.int64)
        n = state.n_labels[tasks]
        unsure = 1.0 - self._posterior(state, tasks).max(axis=1)
        floor: int | np.ndarray = self.params.floor
        if state.model_cell is not None and state.model_cell.size:
            # a task a model predicted needs ``min_human_labels`` human labels first
            # (0: the model may settle it alone); the others keep ``floor``
            floor = np.where((state.model_cell[:, tasks] >= 0).any(axis=0),
                             self.params.min_human_labels, floor)
        settled = unsure <= 1.0 - self.params.confidence
        prio = np.where(n < floor, 2.0 + (floor - n), np.where(settled, unsure - 1.0, unsure))
        return np.where(state.gold[tasks] >= 0, -2.0, prio)

    def score(self, state: AutoState, tasks: np.ndarray, worker: int) -> np.ndarray:
        acc, overall = self.accuracies(state)
        tasks = np.asarray(tasks, np.int64)
        cat_acc = acc[worker, state.task_category[tasks]]
        out = self.priority(state, tasks) + (cat_acc - overall[worker])
        is_gold = state.gold[tasks] >= 0
        if is_gold.any():  # gold (still below every ordinary task): where it tells most
            out[is_gold] = -2.0 + self.gold_information(state, tasks[is_gold],
                                                        cat_acc[is_gold])
        return out

    def gold_information(self, state: AutoState, tasks: np.ndarray,
                         acc: np.ndarray) -> np.ndarray:
        """Fisher information P (1 − P) of one answer to each gold task of ``tasks`` about
        the answering worker's accuracy (``acc`` on each task's category), P being the
        chance it answers right under a Rasch adjustment of its one-coin accuracy by the
        gold question's record: logit P = logit acc + logit p_g − logit p̄, with p_g the
        share of right answers the question got so far shrunk towards p̄ (the share over
        all gold answers) by ``strength`` answers.

        The expected change of the worker's estimated accuracy after one gold answer is
        2 P (1 − P) / (its evidence + 1), so this asks the gold question that moves the
        trust most: for a worker trusted at 0.8, one that other workers (often the ones
        trusted like it) got wrong — a question where trust and votes part — before one
        everybody gets right, which only confirms what agreement already said."""
        m = self.params.strength
        t = np.asarray(state.log_task, np.int64)
        g = state.gold[t]
        on_gold = g >= 0
        T = state.n_labels.size
        right = np.bincount(t[on_gold], weights=(np.asarray(state.log_label, np.int64)[
            on_gold] == g[on_gold]).astype(float), minlength=T)
        asked = np.bincount(t[on_gold], minlength=T).astype(float)
        p_bar = (right.sum() + m * self.params.prior_accuracy) / (asked.sum() + m)
        p_g = (right[tasks] + m * p_bar) / (asked[tasks] + m)

        def logit(x: np.ndarray | float) -> np.ndarray:
            x = np.clip(x, 1e-6, 1 - 1e-6)
            return np.asarray(np.log(x / (1.0 - x)))

        p = 1.0 / (1.0 + np.exp(-(logit(acc) + logit(p_g) - logit(p_bar))))
        return np.asarray(p * (1.0 - p))

    def select_task(self, state: AutoState, worker: int, candidates: np.ndarray,
                    mask: np.ndarray, rng: np.random.Generator) -> int | None:
        if not np.any(mask):
            return None
        tasks = np.asarray(candidates)[np.asarray(mask, bool)]
        s = self.score(state, tasks, worker)
        best = np.flatnonzero(s == s.max())
        return int(tasks[best[rng.integers(best.size)]])

    def select_pair(self, state: AutoState, mask: np.ndarray,
                    rng: np.random.Generator) -> tuple[int, int] | None:
        mask = np.asarray(mask, dtype=bool)
        mask = self._short_first(state, mask)
        rows = None  # the open rows of ``mask``, when the gate found them
        if self.params.gate:  # as ``gated``, keeping the row test that decided it
            good = self._above_mean(state, mask)
            good_rows = good.any(axis=1)
            if good_rows.any():
                mask, rows = good, good_rows
        open_tasks = np.flatnonzero(mask.any(axis=1) if rows is None else rows)
        if open_tasks.size == 0:
            return None
        prio = self.priority(state, open_tasks)
        explore = rng.random() < self.explore_rate(
            mask, open_tasks.size, state.anchored or not self.params.anchor)
        if explore and self.params.cross_check:
            # a cross-check needs a label to check against: the most urgent task that has
            # one (a lone label on an empty task tells nothing about its worker)
            has = state.n_labels[open_tasks] > 0
            if has.any():
                open_tasks, prio = open_tasks[has], prio[has]
        best = open_tasks[prio == prio.max()]
        task = int(best[rng.integers(best.size)])
        workers = np.flatnonzero(mask[task])
        room = (mask[:, workers].sum(axis=0).astype(float)
                if self.params.explore_by == "capacity" else None)
        if explore:  # an unbiased cross-check for the EM
            if room is not None:
                w = room * self._variance(state, task, workers)
                return task, int(workers[rng.choice(workers.size, p=w / w.sum())])
            return task, int(workers[rng.integers(workers.size)])
        value = self.worker_values(state, task, workers, rng, room)
        best = workers[value == value.max()]  # equal values (e.g. unjudged workers): at random
        if self.params.ties == "sticky" and best.size > 1:  # the label log's counts: O(labels)
            given = np.bincount(np.asarray(state.log_worker, np.int64),
                                minlength=state.correct.shape[0])[best]
            best = best[given == given.max()]
        return task, int(best[rng.integers(best.size)])

    def _short_first(self, state: AutoState, mask: np.ndarray) -> np.ndarray:
        """With models' predictions: while any task that can be asked has fewer than
        ``min_human_labels`` human labels, only those tasks (gold aside) — a hard floor,
        before the gate and the exploration, so that no answer rests on a model with fewer
        human labels than the operator asked for while the budget lasts."""
        least = self.params.min_human_labels
        if state.model_cell is None or least == 0:
            return mask
        short = (state.n_labels < least) & (state.gold < 0)
        open_short = short & mask.any(axis=1)
        return mask & open_short[:, None] if open_short.any() else mask

    def explore_rate(self, mask: np.ndarray, n_open: int, anchored: bool = True) -> float:
        """``explore`` × (1 − ``explore_dense`` × density), where density is the share of
        the open tasks that a worker with any eligible task can take, averaged over those
        workers (1 when every worker may label every open task).

        In a dense pool the workers the greedy choice trusts can label nearly every task,
        so they label the same tasks and the EM gets its cross-checks from the greedy asks
        themselves; where each worker sees a small share of the tasks (most real data
        sets), the trusted workers run out of tasks and new ones must keep being learned.

        The discount holds only while ``anchored`` (with ``anchor``, the default): the
        trusted workers' checks of each other are worth something only once gold has
        checked the agreement they rest on (the last fit had gold records, worker_model's
        calibration). Without gold they only confirm the agreement that made them
        trusted — a bloc agreeing on wrong answers confirms itself — so the full share
        of asks stays exploratory (docs/auto.md, Round 7)."""
        rate = self.params.explore
        if self.params.explore_dense and n_open and anchored:
            # workers with an eligible open task (the others' columns are empty, so the
            # count over the mask is over these)
            busy = int(np.count_nonzero(mask.any(axis=0)))
            if busy:
                rate *= 1.0 - self.params.explore_dense * np.count_nonzero(mask) \
                    / (n_open * busy)
        return rate

    def gated(self, state: AutoState, mask: np.ndarray) -> np.ndarray:
        """The eligible pairs whose worker's accuracy on the task's category may reach the
        population mean of the worker model (its estimate plus one posterior standard
        deviation, with the label count plus ``strength`` as the weight), when there is any
        such pair; else ``mask``.

        A worker with no evidence sits at the population mean, so it passes (and gets
        tried); one the evidence puts clearly below it waits until no task has a better
        worker left. Tasks with no such worker eligible wait too (the most urgent task among
        the others is asked), so the budget goes first where an above-average label can be
        had. Without the standard deviation (the estimate alone against the mean) a good
        worker misjudged on a few labels of one category was locked out of it: 0.59 against
        ``uniform``'s 0.67 on the synthetic categories pool of ``tests/policies/test_auto.py``."""
        good = self._above_mean(state, mask)
        return good if good.any() else mask

    def _above_mean(self, state: AutoState, mask: np.ndarray) -> np.ndarray:
        """``mask`` restricted to the pairs ``gated`` keeps (possibly none)."""
        p = self.params
        acc, _, mu = em.shrunk_accuracy(state.correct, state.total, state.n_classes,
                                        p.prior_accuracy, p.prior_strength, p.strength,
                                        p.population == "workers")
        # one posterior standard deviation above the estimate: a worker waits only when
        # the evidence puts it below the mean, not when noise does
        upper = acc + np.sqrt(_variance(acc, state.total, p.strength))
        above = (upper >= mu).T  # (categories, workers)
        if above.shape[0] == 1:  # one category: a row broadcast over the tasks
            return mask & above[0]
        return mask & above[state.task_category]

    def _variance(self, state: AutoState, task: int, workers: np.ndarray) -> np.ndarray:
        """Posterior variance of each worker's accuracy on the task's category."""
        acc, _ = self.accuracies(state)
        s = state.task_category[task]
        return _variance(acc[workers, s], state.total[workers, s], self.params.strength)

    def worker_values(self, state: AutoState, task: int, workers: np.ndarray,
                      rng: np.random.Generator | None,
                      room: np.ndarray | None = None) -> np.ndarray:
        """Information per unit cost of one label from each of ``workers`` on ``task``,
        at accuracies drawn from their posteriors (at their means without ``rng`` or with
        ``thompson`` off). With ``room`` (the open tasks each worker can take), a draw's
        departure from the mean is scaled by the worker's room over the median room: a
        worker with little work left is not worth the optimism."""
        acc, _ = self.accuracies(state)
        s = state.task_category[task]
        mean = acc[workers, s]
        if self.params.thompson and rng is not None:
            n = state.total[workers, s] + self.params.strength
            draw = rng.beta(mean * n, (1.0 - mean) * n)
            if room is not None:
                scale = np.minimum(1.0, room / max(float(np.median(room)), 1.0))
                draw = mean + (draw - mean) * scale
            mean = draw
        return self._information(np.maximum(mean, 1.0 / state.n_classes),
                                 state.n_classes) / state.cost[workers]

    # --- learning ----------------------------------------------------------------------
    def update(self, state: AutoState, obs: Observation) -> np.ndarray:
        if obs.declined or obs.label < 0:
            return np.empty(0, dtype=np.int64)
        i, j, z, C = obs.task, obs.worker, obs.label, state.n_classes
        if obs.gold and obs.truth >= 0:
            state.gold[i] = obs.truth
        s = state.task_category[i]
        a = self.accuracies(state)[0][j, s]
        if state.gold[i] >= 0:
            right = float(z == state.gold[i])
        elif state.n_labels[i] > 0:  # agreement with the task's other labels (leave one out)
            pz = float(self._posterior(state, np.array([i]))[0, z])
            right = pz * a / (pz * a + (1.0 - pz) * (1.0 - a) / (C - 1))
        else:  # alone on its task: no evidence about the worker yet
            right = None
        # given with the model's answer shown and agreeing with it: not independent of the
        # model (worker_model's rule, as ``fit_em`` applies it at the next refit)
        copied = obs.suggested and self._copied(state, i, z)
        if right is not None and (not copied or state.gold[i] >= 0):
            # agreement counts as the last fit's calibration says; a copy is no agreement
            # evidence (a gold answer is, copied or not)
            w = 1.0 if state.gold[i] >= 0 or state.agree_weight is None else float(
                state.agree_weight[j])
            state.correct[j, s] += right * w
            state.total[j, s] += w
        hit, miss = em.label_loglik(np.asarray(a), C)
        if copied:  # it counts SUGGESTED_WEIGHT in its task's posterior
            hit, miss = hit * em.SUGGESTED_WEIGHT, miss * em.SUGGESTED_WEIGHT
        state.loglik[i] += miss
        state.loglik[i, z] += hit - miss
        state.n_labels[i] += 1
        if obs.suggested:
            state.log_suggested.append(len(state.log_task))
        state.log_task.append(int(i))
        state.log_worker.append(int(j))
        state.log_label.append(int(z))
        if len(state.log_task) >= state.next_refit:
            self.refit(state)  # the class prior moves every posterior; with a floor the
            # unlabelled tasks' priority depends on their label count only
            # (the models' evidence moves every predicted task's posterior too)
            return (np.flatnonzero(state.n_labels > 0) if self.params.floor > 0
                    and state.model_cell is None else np.arange(state.n_labels.size))
        return np.array([i], dtype=np.int64)

    def _copied(self, state: AutoState, task: int, label: int) -> bool:
        """Whether ``label`` on ``task``, given with a suggestion shown, copies it."""
        src = state.sources()
        return src is not None and bool(em.copied_labels(
            src, np.array([task]), np.array([label]), np.array([True]))[0])

    def suggested(self, state: AutoState) -> np.ndarray:
        """bool per label of the log: given with the model's answer shown."""
        out = np.zeros(len(state.log_task), bool)
        out[np.asarray(state.log_suggested, np.int64)] = True
        return out

    def predict_proba(self, state: AutoState) -> np.ndarray:
        return self._posterior(state, np.arange(state.n_labels.size))
