"""Run one policy against one environment up to a budget, recording checkpoints.

The loop (one label per step):

1. The runner keeps the eligibility mask ``mask[i, j]`` (task i, worker j). A pair is
   removed when it is unavailable (replay: j did not label i in the data), when j already
   labelled i, when task i reached the label cap (gold tasks are exempt), when worker j's
   capacity is used up, or when j's cost exceeds the budget left.
2. Push-mode policies choose a pair with ``select_pair(state, mask, rng)``. For pull-mode
   policies a worker *arrives*: uniformly at random among the workers with eligible work,
   and chooses with ``select_task(state, worker, all_tasks, mask[:, worker], rng)``. A worker
   for whom the policy returns ``None`` is skipped until the next label is given.
   In ``task`` mode (the Opt-KG paper's RTE protocol, Section 7.2: "once we decide to label
   an instance, we randomly choose a worker (who provides the label in the full dataset)")
   the policy chooses the task only: the runner asks ``select_pair(state, mask, rng)``, keeps
   its task and discards its worker, then draws the worker uniformly at random among the
   workers still eligible for that task (in a replay: those who labelled it in the data and
   whose label is unused). One implementation for every policy; for identical-worker
   policies (``optkg``, ``uniform``) the task is exactly their pull/push task choice.
3. A choice outside the mask raises :class:`~labelq.errors.PolicyError`, so no policy can
   exceed the budget, a capacity or the cap, or ask an unavailable or repeated pair.
4. The environment answers, the policy's ``update`` sees the observation (marked
   ``suggested`` when the environment shows the model's answer, ``show_suggestions``, but
   on the quarter of (worker, task) pairs that show none, as live:
   :mod:`labelq.record.withheld`, on the indices), the budget is charged the worker's cost.

Gold served by a schedule (``gold=GoldRules(...)``, ``labelq simulate --gold``; see
:mod:`labelq.simulate.gold`): the gold tasks leave the mask the policy chooses from and get a
mask of their own. Before a worker is given its task (push: the worker of the chosen pair;
pull: the arriving worker, before the policy chooses, as live) the schedule is asked with
that worker's history; when gold is
due the policy's ``select_task`` picks among the gold questions the worker has not seen
(and can answer: in a replay, recorded), and that question replaces the task — unless there
is none, or the policy picks none. A gold answer costs the worker's cost, counts against its
capacity and reaches ``update`` with ``gold=True``; the quality rule, if any, judges the
worker's gold record after each gold answer and a paused worker's column leaves both masks.
As live, the gold record (the rule's and the schedule's) holds only the gold answered
without a suggestion shown (withheld, or a task no model predicted).
Aggregators then get the gold answers too (``gold=``, class index or -1 per task), as the
live export gives them.

Checkpoints: for each budget b (ascending, in cost units) the runner records the state
*before the first label that would take the spend past b* (with unit costs: after exactly
b labels), or at the end when the run stops early (nothing eligible). A run to the largest
budget therefore yields every smaller budget too, exactly so for unit costs and for policies
that do not look at ``problem.budget`` (``Policy.budget_aware`` False); with unequal costs
the smaller checkpoints are the prefix of the run whose spend fits. Each checkpoint holds:

* ``accuracy`` — argmax of ``policy.predict_proba`` against the truth, over tasks with a
  known truth that are not gold; a tie among k classes counts 1/k when the truth is among
  them (the expectation of a random tie break, as in the data sets' ``stats.json``);
* ``accuracy_aggregate`` — the same for a named aggregator over the labels collected so far
  (when one was asked for), else ``None``;
* ``spent``, ``labels`` and ``tasks_completed`` — the tasks the policy declares done when
  its state has a boolean ``done`` array (B-KUBE's moving-on rule), else the tasks with at
  least one label.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Protocol

import numpy as np

from ..aggregation.agreement import expected_accuracy
from ..errors import PolicyError
from ..gold.schedules import WorkerHistory
from ..gold.scoring import GoldScores
from ..policies.base import FloatArray, IntArray, Observation, Policy
from ..record.withheld import withheld
from .environment import Environment
from .gold import GoldRules

__all__ = ["Checkpoint", "MODES", "run_policy", "expected_accuracy", "record_choices"]

MODES = ("push", "pull", "task")

_EPS = 1e-9


class Aggregator(Protocol):
    """``(task, worker, label, n_tasks, n_classes)`` -> (n_tasks,) class indices or
    (n_tasks, C) probabilities; with served gold (``gold=`` of :func:`run_policy`) also
    called with ``gold=`` (n_tasks,) answers or -1."""

    def __call__(self, task: IntArray, worker: IntArray, label: IntArray, n_tasks: int,
                 n_classes: int, /, gold: IntArray | None = None
                 ) -> FloatArray | IntArray: ...



@dataclass
class Checkpoint:
    budget: float
    spent: float
    labels: int
    tasks_completed: int
    accuracy: float
    accuracy_aggregate: float | None = None
    gold_labels: int = 0  # gold answers among ``labels`` (served or chosen by the policy)
    paused: int = 0  # workers the quality rule paused so far

    def to_dict(self) -> dict[str, float | int | None]:
        return asdict(self)


def record_choices(policy: Policy) -> list[tuple[int, int]]:
    """Wrap ``policy.select_pair`` in place so every push decision is logged; returns the
    list it fills with the (task, worker) chosen, (-1, -1) where it chose nothing."""
    choices: list[tuple[int, int]] = []
    select = policy.select_pair

    def recording(state, mask, rng):  # type: ignore[no-untyped-def]
        pair = select(state, mask, rng)
        choices.append((-1, -1) if pair is None else (int(pair[0]), int(pair[1])))
        return pair

    policy.select_pair = recording  # type: ignore[method-assign]
    return choices


def completed(state: object, per_task: IntArray) -> int:
    """Tasks completed: the policy's own ``state.done`` if it keeps one, else labelled tasks."""
    done = getattr(state, "done", None)
    if isinstance(done, np.ndarray) and done.dtype == bool and done.shape == per_task.shape:
        return int(np.count_nonzero(done))
    return int(np.count_nonzero(per_task))


def run_policy(policy: Policy, env: Environment, budgets: Sequence[float],
               rng: np.random.Generator, *, max_labels_per_task: int | None = None,
               aggregate: Aggregator | None = None, mode: str | None = None,
               gold: GoldRules | None = None) -> list[Checkpoint]:
    """Run ``policy`` on ``env`` until the largest of ``budgets`` (cost units) is spent or
    nothing is eligible; return one :class:`Checkpoint` per budget, in ascending order.
    ``mode`` ("push", "pull" or "task") overrides the policy's own ``mode`` (every policy
    implements both decisions; "task" uses the task of ``select_pair`` and a random worker).
    ``gold``: serve ``env``'s gold tasks by its schedule and judge them by its quality rule
    (module docstring); without it gold tasks are in the mask like any other."""
    budgets = sorted(float(b) for b in budgets)
    if not budgets or budgets[0] < 0:
        raise ValueError("budgets must be a non-empty list of non-negative numbers")
    total = budgets[-1]
    T, W = env.n_tasks, env.n_workers
    assert env.is_gold is not None and env.worker_cost is not None
    assert env.worker_capacity is not None
    cost = env.worker_cost.astype(float)
    capacity = env.worker_capacity
    rules = gold
    gold_task = env.is_gold
    eval_truth = np.where(gold_task, -1, env.truth)
    state = policy.init_state(env.problem(budget=total, max_labels_per_task=max_labels_per_task))
    mode = mode or policy.mode
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    push = mode in ("push", "task")
    all_tasks = np.arange(T)

    mask = env.available.copy()
    mask[:, cost > total + _EPS] = False
    mask[:, capacity == 0] = False
    served = rules is not None
    schedule = rules.schedule if rules is not None else None
    quality = rules.quality if rules is not None else None
    gold_answers = np.where(gold_task, env.truth, -1)
    gold_mask = mask & gold_task[:, None] if served else np.zeros((0, W), dtype=bool)
    if served:
        mask[gold_task] = False  # live, gold tasks are never in the policy's own choice
    eligible_per_worker = mask.sum(axis=0)
    n_cat = max(env.n_categories, 1)
    gold_done = np.zeros((W, n_cat), dtype=np.int64)  # gold answers per worker, category
    # the gold record: answered, and right, without a suggestion shown (issue 42)
    gold_scored = np.zeros(W, dtype=np.int64)
    gold_right = np.zeros(W, dtype=np.int64)
    # tasks a model predicted: the ones a page showing suggestions shows one on
    predicted = np.zeros(T, dtype=bool)
    if env.show_suggestions:
        for p in (env.predictions or {}).values():
            predicted |= ~np.isnan(np.asarray(p, float)).any(axis=1)
    scores = GoldScores.zeros(W, n_cat)
    paused = np.zeros(W, dtype=bool)
    per_task = np.zeros(T, dtype=np.int64)
    per_worker = np.zeros(W, dtype=np.int64)
    log_t: list[int] = []
    log_w: list[int] = []
    log_l: list[int] = []
    spent = 0.0
    n_gold_labels = 0
    checkpoints: list[Checkpoint] = []

    def record(budget: float) -> None:
        proba = policy.predict_proba(state)
        acc_agg = None
        if aggregate is not None:
            args = (np.asarray(log_t, dtype=np.int64), np.asarray(log_w, dtype=np.int64),
                    np.asarray(log_l, dtype=np.int64), T, env.n_classes)
            pred = aggregate(*args, gold=gold_answers) if served else aggregate(*args)
            acc_agg = expected_accuracy(pred, eval_truth)
        checkpoints.append(Checkpoint(budget=budget, spent=spent, labels=len(log_t),
                                      tasks_completed=completed(state, per_task),
                                      accuracy=expected_accuracy(proba, eval_truth),
                                      accuracy_aggregate=acc_agg,
                                      gold_labels=n_gold_labels,
                                      paused=int(paused.sum())))

    def drop_task(i: int) -> None:
        eligible_per_worker[:] -= mask[i]
        mask[i] = False

    def drop_worker(j: int) -> None:
        mask[:, j] = False
        eligible_per_worker[j] = 0
        if served:
            gold_mask[:, j] = False

    def gold_for(j: int) -> int | None:
        """The gold question worker ``j`` gets instead of its task, if the schedule says one
        is due and the policy picks one it has not seen (as live.decide does)."""
        if schedule is None:
            return None
        n_gold = int(gold_done[j].sum())
        history = WorkerHistory(int(per_worker[j]), n_gold,
                                tuple(int(g) for g in gold_done[j]),
                                gold_answered=int(gold_scored[j]),
                                gold_correct=int(gold_right[j]))
        if not schedule.should_inject(history, rng):
            return None
        cand = gold_mask[:, j].copy()
        allowed = schedule.gold_categories(history)
        if allowed is not None:
            cand &= allowed[env.task_category]
        if not cand.any():
            return None
        task = policy.select_task(state, j, all_tasks, cand.copy(), rng)
        if task is None:
            return None
        if not (0 <= int(task) < T and cand[int(task)]):
            raise PolicyError(f"policy {policy.name!r} chose gold task {task} for worker "
                              f"{j}, which is not one of its unseen gold questions",
                              policy=policy.name)
        return int(task)

    refused = np.zeros(W, dtype=bool)  # pull mode: workers the policy gave nothing to
    while len(checkpoints) < len(budgets):
        g: int | None = None  # the gold question served instead of a task, if any
        if push:
            choice = policy.select_pair(state, mask, rng) if eligible_per_worker.any() else None
            if choice is None:
                break
            i, j = int(choice[0]), int(choice[1])
            if mode == "task" and 0 <= i < T and 0 <= j < W and mask[i, j]:
                workers = np.flatnonzero(mask[i])  # the policy's worker is discarded
                j = int(workers[rng.integers(workers.size)])
        else:
            arrivals = np.flatnonzero((eligible_per_worker > 0) & ~refused)
            if arrivals.size == 0:
                break
            j = int(arrivals[rng.integers(arrivals.size)])
            # live, the schedule is asked first and the policy's task only if no gold is due
            g = gold_for(j) if served else None
            task = g if g is not None else policy.select_task(state, j, all_tasks,
                                                              mask[:, j].copy(), rng)
            if task is None:
                refused[j] = True
                continue
            i = int(task)
        if g is None and not (0 <= i < T and 0 <= j < W and mask[i, j]):
            raise PolicyError(f"policy {policy.name!r} chose (task {i}, worker {j}), which "
                              f"is not eligible", policy=policy.name)
        if push and served:  # the worker of the pair chosen gets gold instead, if due
            g = gold_for(j)
            if g is not None:
                i = g
        c = cost[j]
        while len(checkpoints) < len(budgets) and spent + c > budgets[len(checkpoints)] + _EPS:
            record(budgets[len(checkpoints)])
        label = env.answer(i, j, rng)
        is_gold = bool(gold_task[i])
        marked = env.show_suggestions and not withheld(j, i)
        policy.update(state, Observation(task=i, worker=j, label=label, gold=is_gold,
                                         truth=int(env.truth[i]) if is_gold else -1,
                                         suggested=marked))
        spent += c
        n_gold_labels += is_gold
        log_t.append(i)
        log_w.append(j)
        log_l.append(label)
        per_task[i] += 1
        per_worker[j] += 1
        refused[:] = False
        if served and is_gold:
            gold_mask[i, j] = False
            right = label == int(env.truth[i])
            gold_done[j, env.task_category[i]] += 1
            scored = not (marked and predicted[i])  # (with a suggestion shown: no one)
            gold_scored[j] += scored
            gold_right[j] += scored and right
            if quality is not None and scored:
                scores.record(j, env.task_category[i], right)
                one = GoldScores(scores.correct[j:j + 1], scores.total[j:j + 1])
                if quality.pause_mask(one)[0]:
                    paused[j] = True
                    drop_worker(j)
        else:
            mask[i, j] = False
            eligible_per_worker[j] -= 1
        if max_labels_per_task is not None and not is_gold and per_task[i] >= max_labels_per_task:
            drop_task(i)
        if capacity[j] >= 0 and per_worker[j] >= capacity[j]:
            drop_worker(j)
        for jj in np.flatnonzero((cost > total - spent + _EPS) & (eligible_per_worker > 0)):
            drop_worker(int(jj))
    while len(checkpoints) < len(budgets):
        record(budgets[len(checkpoints)])
    return checkpoints
