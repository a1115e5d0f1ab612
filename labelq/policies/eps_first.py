"""Explore-then-exploit baselines of B-KUBE: ``bounded-eps-first``, ``trailsourcing``,
``eps-first``.

Tran-Thanh, Stein, Rogers & Jennings (2014), *Efficient crowdsourcing of unknown experts
using bounded multi-armed bandits* (AI 214), as used by Rangi & Franceschetti (2018) §6:

* ``bounded-eps-first:eps=ε`` — spend ``εB`` exploring: workers round-robin (in index order,
  skipping those without capacity, whose cost no longer fits the exploration budget, or who
  are not eligible for the task), then solve the bounded knapsack **once** with the estimated
  values ``v_k`` (no confidence bonus; density-ordered greedy of :mod:`._knapsack`) over the
  remaining budget and capacities, and spend it following that plan.
* ``trailsourcing`` — the same with an exploration of exactly one label per worker.
* ``eps-first:eps=ε`` — the exploration of bounded ε-first, then every remaining label goes to
  the single worker with the largest estimated efficiency ``v_k / c_k`` (ties: lower index),
  up to its capacity or the budget; then the policy stops (this is why it performs fewer
  tasks, paper §6).

The plan is "single step": computed once when exploration ends (no later re-estimation).
Exploitation draws a planned worker with probability proportional to its remaining planned
labels, as B-KUBE draws from its knapsack — the two differ only in how the plan is made.
Value estimates and ``predict_proba`` are B-KUBE's
(:class:`~labelq.policies.bkube.SequentialBudgetPolicy`).

How labels are spread over the tasks is the parameter ``allocation``:

* ``allocation=sequential`` (default) — B-KUBE's one-task-at-a-time order and moving-on rule,
  so a task is *completed* by the same confidence rule for all four policies and the
  comparison isolates worker selection.
* ``allocation=single-step`` — the literal reading of paper §6 ("Assignment of the labeling
  tasks to the workers is a single step process in all the three benchmark algorithms …
  Unlike the benchmark algorithms, B-KUBE evaluates one task at a time and moves to a
  different task whenever the algorithm is confident"): no moving-on rule; every label (of
  exploration and of the plan) goes to the task with the fewest labels so far (lowest index
  on ties), so the labels bought are spread evenly over all T tasks and a worker's labels fall
  on different tasks; a task counts as *performed* (``done``) once it has a label. With an infinite budget, ``εB`` is taken over
``min(B, sum_k c_k M_k)``; when that is infinite too, exploration is one round (trailsourcing).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ._knapsack import density_greedy, density_order
from .base import Observation
from .bkube import SeqParams, SeqState, SequentialBudgetPolicy
from .registry import register

__all__ = ["BoundedEpsFirst", "Trailsourcing", "EpsFirst", "ALLOCATIONS"]


ALLOCATIONS = ("sequential", "single-step")


@dataclass(frozen=True)
class PlanParams(SeqParams):
    """``allocation``: ``sequential`` (one task at a time, B-KUBE's moving-on rule) or
    ``single-step`` (labels spread evenly over all tasks, no moving-on rule)."""

    allocation: str = "sequential"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.allocation not in ALLOCATIONS:
            raise ValueError(f"allocation must be one of {', '.join(ALLOCATIONS)}, "
                             f"got {self.allocation!r}")


@dataclass(frozen=True)
class EpsParams(PlanParams):
    """``eps``: share of the budget spent exploring, in (0, 1)."""

    eps: float = 0.1

    def __post_init__(self) -> None:
        super().__post_init__()
        if isinstance(self.eps, bool) or not isinstance(self.eps, (int, float)) \
                or not 0.0 < self.eps < 1.0:
            raise ValueError(f"eps must be in (0, 1), got {self.eps!r}")


class _ExploreThenPlan(SequentialBudgetPolicy):
    """Exploration (``_explore_allowed``) until it is exhausted, then a fixed plan."""

    Params = PlanParams
    params: PlanParams

    def _single_step(self) -> bool:
        return self.params.allocation == "single-step"

    def _choose_task(self, state: SeqState, mask: np.ndarray, allowed: np.ndarray) -> int | None:
        if not self._single_step():
            return super()._choose_task(state, mask, allowed)
        ok = (mask & allowed).any(axis=1)
        if not ok.any():
            return None
        labels = np.where(ok, state.counts.sum(axis=1), np.inf)
        return int(np.argmin(labels))  # fewest labels, lowest index on ties

    def priority(self, state: SeqState, tasks: np.ndarray) -> np.ndarray:
        if not self._single_step():
            return super().priority(state, tasks)
        tasks = np.asarray(tasks, dtype=np.int64)  # fewest labels first, then lowest index
        return -(state.counts[tasks].sum(axis=1) * state.done.size + tasks).astype(float)

    def is_confident(self, state: SeqState, task: int) -> bool:
        if self._single_step():  # performed once labelled; no moving-on rule
            return bool(state.counts[task].sum() >= 1)
        return super().is_confident(state, task)

    def _explore_allowed(self, state: SeqState) -> np.ndarray:
        raise NotImplementedError

    def _make_plan(self, state: SeqState) -> np.ndarray:
        return density_greedy(self.value_estimates(state), state.cost,
                              self.units_left(state), self.budget_left(state))

    def _after_init(self, state: SeqState) -> None:
        self._maybe_plan(state)

    def _after_update(self, state: SeqState, obs: Observation) -> None:
        if state.plan is not None:
            w = int(obs.worker)
            state.plan[w] = max(state.plan[w] - 1.0, 0.0)
        else:
            self._maybe_plan(state)

    def _maybe_plan(self, state: SeqState) -> None:
        if not self._explore_allowed(state).any():
            state.plan = self._make_plan(state)

    def _exploit_allowed(self, state: SeqState, plan: np.ndarray) -> np.ndarray:
        return (plan > 0) & self.feasible(state)

    def _allowed(self, state: SeqState) -> np.ndarray:
        if state.plan is None:
            return self._explore_allowed(state)
        return self._exploit_allowed(state, state.plan)

    def select_pair(self, state: SeqState, mask: np.ndarray,
                    rng: np.random.Generator) -> tuple[int, int] | None:
        pair = super().select_pair(state, mask, rng)
        if pair is None and state.plan is None:
            # exploration cannot go on under this mask: exploit a plan made from what is
            # known now (not stored; the stored plan is made when exploration ends)
            plan = self._make_plan(state)
            mask = np.asarray(mask, dtype=bool)
            allowed = self._exploit_allowed(state, plan)
            task = self._choose_task(state, mask, allowed)
            if task is None:
                return None
            return task, self._draw(plan, mask[task] & allowed, rng)
        return pair

    @staticmethod
    def _draw(plan: np.ndarray, eligible: np.ndarray, rng: np.random.Generator) -> int:
        weights = np.where(eligible, plan, 0.0)
        if np.isinf(weights).any():
            return int(np.argmax(np.isinf(weights)))
        return int(rng.choice(weights.size, p=weights / weights.sum()))

    def _pick_worker(self, state: SeqState, eligible: np.ndarray,
                     rng: np.random.Generator) -> int:
        if state.plan is None:  # round-robin: fewest labels so far, lowest index on ties
            return int(np.argmin(np.where(eligible, state.pulls, np.iinfo(np.int64).max)))
        return self._draw(state.plan, eligible, rng)


class _EpsExploration(_ExploreThenPlan):
    Params = EpsParams
    params: EpsParams

    def explore_budget(self, state: SeqState) -> float:
        total = state.budget if state.budget is not None else math.inf
        if not math.isfinite(total):
            caps = np.where(state.capacity < 0, np.inf, state.capacity.astype(float))
            total = float(np.sum(state.cost * caps))
        return self.params.eps * total

    def _explore_allowed(self, state: SeqState) -> np.ndarray:
        eb = self.explore_budget(state)
        if not math.isfinite(eb):  # unlimited everything: one round, as trailsourcing
            return self.feasible(state) & (state.pulls == 0)
        return self.feasible(state) & (state.spent + state.cost <= eb + 1e-9)


@register
class BoundedEpsFirst(_EpsExploration):
    name = "bounded-eps-first"


@register
class EpsFirst(_EpsExploration):
    name = "eps-first"

    def _make_plan(self, state: SeqState) -> np.ndarray:
        plan = np.zeros(state.cost.size)
        feasible = self.feasible(state)
        if not feasible.any():
            return plan
        order = density_order(self.value_estimates(state), state.cost)
        best = int(order[np.argmax(feasible[order])])
        units = self.units_left(state)[best]
        cost = state.cost[best]
        plan[best] = min(units, np.floor(self.budget_left(state) / cost)) if cost > 0 else units
        return plan


@register
class Trailsourcing(_ExploreThenPlan):
    name = "trailsourcing"

    def _explore_allowed(self, state: SeqState) -> np.ndarray:
        return self.feasible(state) & (state.pulls == 0)
