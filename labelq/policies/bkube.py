"""``bkube``: bounded KUBE — choose the worker by a UCB bounded knapsack under a budget.

Rangi & Franceschetti (2018), *Multi-Armed Bandit Algorithms for Crowdsourcing Systems with
Online Estimation of Workers' Ability* (AAMAS), Algorithms 1-2, after Tran-Thanh et al.
(2014). Workers k have cost ``c_k``, capacity ``M_k`` and ``m_k`` labels left; ``B_n`` is the
budget left before iteration ``n`` (1-based: ``n`` = labels received + 1).

* Iterations ``n <= K``: every worker once (lowest index first among the eligible ones).
* Afterwards solve the bounded knapsack on the upper confidence values

      w_k = v_k + sqrt(2 ln n / (M_k - m_k))

  with the density-ordered greedy (:mod:`._knapsack`): in decreasing ``w_k / c_k`` take
  ``m*_k = min(m_k, floor((B_n - used) / c_k))`` labels, and pick worker ``j`` with
  probability ``m*_j / sum_k m*_k``.

Value contribution (paper §5, Theorem 5.1 with majority vote): ``v_k = p_k - (1-p_k)/(L-1)``,
i.e. ``2 p_k - 1`` for two classes, with ``p_k`` the share of worker k's labels judged correct.
Which estimate of the truth a label is judged against is the parameter ``agreement``:

* ``agreement=at-label`` (default) — the paper's definition (§5, the update of ``p̂_k``): the
  m-th label of task i is scored **once**, against the majority ``l̂_i`` *right after it*
  (the m labels so far, this one included), and never re-scored. The first label of a task
  therefore always agrees; a label that ties the vote gets ``1/#tied``.
* ``agreement=current`` — every label is scored against the task's *current* majority and
  re-scored whenever that estimate changes (a label tied for the top gets ``1/#tied``). This is
  the reading of issue #5's "v̂ = 2p̂ − 1 from agreement with the current estimate"; it uses
  later evidence, but it is not the paper's estimator, so it is an option.

Tasks are worked one at a time (:class:`SequentialBudgetPolicy`): the current task keeps
receiving labels until it is *completed* by the moving-on rule, then the next open task (lowest
index) is taken. The rule is Abraham et al. (2013)'s single-item stopping rule as we read it:
with ``t`` labels and ``Δ_t`` the vote difference between the two leading classes, stop once
the empirical gap ``Δ_t / t >= c_stop / sqrt(t)`` (i.e. ``Δ_t >= c_stop sqrt(t)``), or at
``max_labels`` labels (also ``problem.max_labels_per_task``). With the default ``c_stop=1.5``
three unanimous labels complete a task, 2-1 never does, 5-1 does at t=6.

``predict_proba`` is the majority vote share (the paper's inference rule), uniform when a task
has no label or is tied. ``state.done`` marks completed tasks (``completed_tasks``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ._knapsack import density_greedy
from .base import Observation, Policy, Problem
from .registry import register

__all__ = ["BKube", "SequentialBudgetPolicy", "SeqState", "completed_tasks", "AGREEMENT_RULES",
           "agreement_credit"]


@dataclass
class SeqState:
    """State shared by the budgeted sequential policies (B-KUBE and its baselines).

    ``counts[i, l]`` votes for class l on task i; ``done[i]`` task completed by the
    moving-on rule; ``current`` the task being worked (-1 none); ``pulls[k]`` labels received
    from worker k (``M_k - m_k``); ``agree[k]`` their agreement credit (see ``agreement``); ``spent`` sum of the costs of received labels; ``task_labels[i]`` the
    ``[worker, label]`` pairs of task i (to recompute agreement under ``agreement=current``). ``cost``/``capacity``
    (-1 unlimited)/``budget`` (None = unlimited) copy the problem. ``plan`` and ``phase``
    belong to the explore-then-exploit baselines (``plan`` None until computed).
    """

    counts: np.ndarray
    done: np.ndarray
    current: int
    pulls: np.ndarray
    agree: np.ndarray
    spent: float
    task_labels: list[list[list[int]]]
    cost: np.ndarray
    capacity: np.ndarray
    budget: float | None
    cap_labels: int
    plan: np.ndarray | None = None


def completed_tasks(state: SeqState) -> int:
    """How many tasks the moving-on rule has completed."""
    return int(np.count_nonzero(state.done))


def agreement_credit(labels: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Agreement credit of each label with the majority of ``counts``: 1 for the unique
    leader, ``1/#tied`` when tied for the top, 0 otherwise."""
    top = counts == counts.max()
    return np.where(top[labels], 1.0 / top.sum(), 0.0)


AGREEMENT_RULES = ("at-label", "current")


@dataclass(frozen=True)
class SeqParams(Policy.Params):
    """``c_stop``: stop a task once the vote gap reaches ``c_stop * sqrt(labels)``;
    ``max_labels``: a task is completed at this many labels at the latest;
    ``agreement``: ``at-label`` (paper §5: each label scored once against the majority right
    after it) or ``current`` (re-scored against the current majority)."""

    c_stop: float = 1.5
    max_labels: int = 15
    agreement: str = "at-label"

    def __post_init__(self) -> None:
        if not (isinstance(self.c_stop, (int, float)) and math.isfinite(self.c_stop)
                and self.c_stop > 0):
            raise ValueError(f"c_stop must be a finite number > 0, got {self.c_stop!r}")
        if isinstance(self.max_labels, bool) or not isinstance(self.max_labels, int) \
                or self.max_labels < 1:
            raise ValueError(f"max_labels must be an integer >= 1, got {self.max_labels!r}")
        if self.agreement not in AGREEMENT_RULES:
            raise ValueError(f"agreement must be one of {', '.join(AGREEMENT_RULES)}, "
                             f"got {self.agreement!r}")


class SequentialBudgetPolicy(Policy):
    """Push policies that work tasks one at a time under a budget and worker capacities.

    Subclasses implement ``_allowed(state)`` (bool per worker: may be picked now) and
    ``_pick_worker(state, eligible, rng)`` (one index among the True entries), and may hook
    ``_after_update``. The task is the current one while it is open and some allowed,
    eligible worker can label it; otherwise the lowest-index open task that can be continued.
    """

    mode = "push"
    budget_aware: ClassVar[bool] = True
    Params = SeqParams
    params: SeqParams

    # --- state ---------------------------------------------------------------------------
    def init_state(self, problem: Problem) -> SeqState:
        cap = int(self.params.max_labels)
        if problem.max_labels_per_task is not None:
            cap = min(cap, int(problem.max_labels_per_task))
        budget = None if not math.isfinite(problem.budget) else float(problem.budget)
        state = SeqState(
            counts=np.zeros((problem.n_tasks, problem.n_classes)),
            done=np.zeros(problem.n_tasks, dtype=bool), current=-1,
            pulls=np.zeros(problem.n_workers, dtype=np.int64),
            agree=np.zeros(problem.n_workers), spent=0.0,
            task_labels=[[] for _ in range(problem.n_tasks)],
            cost=np.asarray(problem.worker_cost, dtype=float).copy(),
            capacity=np.asarray(problem.worker_capacity, dtype=np.int64).copy(),
            budget=budget, cap_labels=max(cap, 1))
        self._after_init(state)
        return state

    def _after_init(self, state: SeqState) -> None:
        pass

    def state_to_dict(self, state: SeqState) -> dict[str, Any]:
        data = super().state_to_dict(state)
        data["task_labels"] = [list(map(list, rows)) for rows in state.task_labels]
        return data

    def state_from_dict(self, data: dict[str, Any]) -> SeqState:
        plan = data.get("plan")
        return SeqState(
            counts=np.asarray(data["counts"], dtype=float).reshape(len(data["done"]), -1),
            done=np.asarray(data["done"], dtype=bool), current=int(data["current"]),
            pulls=np.asarray(data["pulls"], dtype=np.int64),
            agree=np.asarray(data["agree"], dtype=float), spent=float(data["spent"]),
            task_labels=[[list(map(int, r)) for r in rows] for rows in data["task_labels"]],
            cost=np.asarray(data["cost"], dtype=float),
            capacity=np.asarray(data["capacity"], dtype=np.int64),
            budget=None if data["budget"] is None else float(data["budget"]),
            cap_labels=int(data["cap_labels"]),
            plan=None if plan is None else np.asarray(plan, dtype=float))

    # --- budget helpers ----------------------------------------------------------------
    @staticmethod
    def budget_left(state: SeqState) -> float:
        return math.inf if state.budget is None else state.budget - state.spent

    @staticmethod
    def units_left(state: SeqState) -> np.ndarray:
        """``m_k``: labels each worker may still give (``inf`` when unlimited)."""
        left = (state.capacity - state.pulls).astype(float)
        return np.where(state.capacity < 0, np.inf, np.maximum(left, 0.0))

    def feasible(self, state: SeqState) -> np.ndarray:
        """Workers with capacity left whose cost fits the remaining budget."""
        return (self.units_left(state) > 0) & (state.cost <= self.budget_left(state) + 1e-9)

    def value_estimates(self, state: SeqState) -> np.ndarray:
        """``v_k = p_k - (1 - p_k)/(L - 1)`` with ``p_k`` the agreement share (0.5 unseen
        for two classes, i.e. ``v_k = 0``; ``1/L`` in general)."""
        n_classes = state.counts.shape[1]
        p = np.where(state.pulls > 0, state.agree / np.maximum(state.pulls, 1),
                     1.0 / n_classes)
        return p - (1.0 - p) / max(n_classes - 1, 1)

    # --- decisions ---------------------------------------------------------------------
    def _allowed(self, state: SeqState) -> np.ndarray:
        raise NotImplementedError

    def _pick_worker(self, state: SeqState, eligible: np.ndarray,
                     rng: np.random.Generator) -> int:
        raise NotImplementedError

    def _choose_task(self, state: SeqState, mask: np.ndarray, allowed: np.ndarray) -> int | None:
        cur = state.current
        if 0 <= cur < mask.shape[0] and not state.done[cur] and (mask[cur] & allowed).any():
            return cur
        ok = ~state.done & (mask & allowed).any(axis=1)
        return int(np.argmax(ok)) if ok.any() else None

    def select_pair(self, state: SeqState, mask: np.ndarray,
                    rng: np.random.Generator) -> tuple[int, int] | None:
        mask = np.asarray(mask, dtype=bool)
        allowed = self._allowed(state)
        task = self._choose_task(state, mask, allowed)
        if task is None:
            return None
        worker = self._pick_worker(state, mask[task] & allowed, rng)
        return task, int(worker)

    def priority(self, state: SeqState, tasks: np.ndarray) -> np.ndarray:
        """Current open task first, then open tasks by index, completed tasks last."""
        tasks = np.asarray(tasks, dtype=np.int64)
        n = state.done.size
        pri = -tasks.astype(float)
        pri = np.where(tasks == state.current, 1.0, pri)
        return np.where(state.done[tasks], -2.0 * n - tasks, pri)

    # --- learning ----------------------------------------------------------------------
    def update(self, state: SeqState, obs: Observation) -> np.ndarray:
        if obs.declined or obs.label < 0:
            return np.empty(0, dtype=np.int64)
        i, w, lab = int(obs.task), int(obs.worker), int(obs.label)
        rows = state.task_labels[i]
        if self.params.agreement == "current":
            if rows:  # withdraw the agreement credit given under the old estimate
                old = np.asarray(rows, dtype=np.int64)
                np.subtract.at(state.agree, old[:, 0],
                               agreement_credit(old[:, 1], state.counts[i]))
            rows.append([w, lab])
            state.counts[i, lab] += 1
            new = np.asarray(rows, dtype=np.int64)
            np.add.at(state.agree, new[:, 0], agreement_credit(new[:, 1], state.counts[i]))
        else:  # at-label: scored once, against the majority right after this label
            rows.append([w, lab])
            state.counts[i, lab] += 1
            state.agree[w] += float(agreement_credit(np.array([lab]), state.counts[i])[0])
        state.pulls[w] += 1
        state.spent += float(state.cost[w])
        state.current = i
        if not state.done[i] and self.is_confident(state, i):
            state.done[i] = True
        self._after_update(state, obs)
        return np.array([i], dtype=np.int64)

    def _after_update(self, state: SeqState, obs: Observation) -> None:
        pass

    def is_confident(self, state: SeqState, task: int) -> bool:
        """Moving-on rule: vote gap ``>= c_stop * sqrt(t)`` or ``t >= cap_labels``."""
        c = np.sort(state.counts[task])[::-1]
        t = c.sum()
        gap = c[0] - (c[1] if c.size > 1 else 0.0)
        return bool(t >= state.cap_labels or gap >= self.params.c_stop * math.sqrt(t) - 1e-9)

    def predict_proba(self, state: SeqState) -> np.ndarray:
        """Majority-vote shares over the classes; uniform for a task with no label."""
        c = state.counts + 1e-12
        return c / c.sum(axis=1, keepdims=True)


@dataclass(frozen=True)
class BKubeParams(SeqParams):
    """``bonus``: scale of the confidence radius ``sqrt(2 ln n / pulls)``; 1 is the paper's
    (other values only to study how much the exploration term costs)."""

    bonus: float = 1.0

    def __post_init__(self) -> None:
        super().__post_init__()
        if isinstance(self.bonus, bool) or not isinstance(self.bonus, (int, float)) \
                or not math.isfinite(self.bonus) or self.bonus < 0:
            raise ValueError(f"bonus must be a finite number >= 0, got {self.bonus!r}")


@register
class BKube(SequentialBudgetPolicy):
    """B-KUBE (see the module docstring)."""

    name = "bkube"
    Params = BKubeParams
    params: BKubeParams

    def _allowed(self, state: SeqState) -> np.ndarray:
        return self.feasible(state)

    def knapsack(self, state: SeqState, eligible: np.ndarray) -> np.ndarray:
        """``m*`` of Algorithm 2 over the eligible workers (0 elsewhere)."""
        n = int(state.pulls.sum()) + 1
        pulls = np.maximum(state.pulls, 1)
        radius = np.sqrt(2.0 * math.log(n) / pulls)
        w_hat = self.value_estimates(state) + self.params.bonus * radius
        units = np.where(eligible, self.units_left(state), 0.0)
        return density_greedy(w_hat, state.cost, units, self.budget_left(state))

    def _pick_worker(self, state: SeqState, eligible: np.ndarray,
                     rng: np.random.Generator) -> int:
        fresh = eligible & (state.pulls == 0)
        if fresh.any():  # initialisation: each worker once
            return int(np.argmax(fresh))
        m_star = self.knapsack(state, eligible)
        if np.isinf(m_star).any():
            return int(np.argmax(np.isinf(m_star)))
        total = m_star.sum()
        if total <= 0:  # cannot happen for a feasible worker; keep a safe answer
            return int(np.argmax(eligible))
        return int(rng.choice(m_star.size, p=m_star / total))
