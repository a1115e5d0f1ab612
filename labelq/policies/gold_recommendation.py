"""``gr``, ``ur`` and ``eps-first-gold``: Kang & Tay's gold-based task recommendation.

Kang, Q. and Tay, W. P., *Task Recommendation in Crowdsourcing Based on Learning Preferences
and Reliabilities* (arXiv:1807.10444). Each worker may decline a recommended task; the policy
learns, per worker and category, the acceptance q_k and the reliability p_k from gold tasks
only, and recommends the category maximising the estimate Ȳ_k of q_k p_k, interleaving gold
tasks by the paper's schedules (τ(r) = ⌈α r^γ⌉):

* ``gr:alpha=0.1,c=0.05,d=0.1`` — greedy: one gold per epoch, its category ε_r-greedy,
  ε_r = min(1, cK/(d² r)); the rest of the epoch exploits that category. ``clock=step``
  counts r in time steps instead of epochs (not the paper's text; see the reproduction).
* ``ur:gamma=2,alpha=0.1`` — uniform pulling: one gold per category per epoch, then
  argmax Ȳ_k. ``gamma`` other than 2 is the paper's UR(γ) baseline.
* ``eps-first-gold:horizon=1000`` — ⌊√n⌋ gold per category first, then argmax Ȳ_k forever.

The decision logic is :mod:`labelq.policies._recommend` with one row per worker, the same code the
vectorised reproduction (:mod:`labelq.reproductions.gold_recommendation`) runs with one row per
trial. Pull mode: ``select_task`` asks the core for a (category, gold) pair and picks among the
eligible candidates, in this order: exact match; same kind (gold or not) in the category with
the highest Ȳ; the wanted category of the other kind; anything, by Ȳ. Within a tier the task
with the fewest labels wins, then a uniform tie. ``priority`` is −(labels on the task), so the
live index offers the least-labelled tasks first; the live path should offer candidates from
every category. A declined task (``Observation.declined``) counts as a recommendation with
Y = 0, as in the paper. ``predict_proba`` is the plain vote share (this policy chooses tasks;
it does not aggregate).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ._recommend import (
    RecommenderParams,
    RecommenderState,
    init_state,
    observe,
    recommend,
    y_bar,
)
from .base import BoolArray, FloatArray, IntArray, Observation, Policy, Problem
from .registry import register

__all__ = ["GoldRecState", "GreedyRecommendation", "UniformRecommendation", "EpsFirstGold"]


@dataclass
class GoldRecState:
    rec: RecommenderState  # one row per worker
    task_category: IntArray  # int (n_tasks,)
    is_gold: BoolArray  # bool (n_tasks,)
    gold_answer: IntArray  # int (n_tasks,), -1 where not gold
    counts: FloatArray  # float (n_tasks, n_classes): labels received


class _KangTay(Policy):
    mode = "pull"

    def core(self) -> RecommenderParams:
        raise NotImplementedError

    # --- state -----------------------------------------------------------------------
    def init_state(self, problem: Problem) -> GoldRecState:
        return GoldRecState(
            rec=init_state(self.core(), problem.n_workers, max(problem.n_categories, 1)),
            task_category=np.asarray(problem.task_category, dtype=np.int64).copy(),
            is_gold=np.asarray(problem.is_gold, dtype=bool).copy(),
            gold_answer=np.asarray(problem.gold_answer, dtype=np.int64).copy(),
            counts=np.zeros((problem.n_tasks, problem.n_classes)),
        )

    def state_to_dict(self, state: GoldRecState) -> dict[str, Any]:
        return {"rec": state.rec.to_dict(), "task_category": state.task_category.tolist(),
                "is_gold": state.is_gold.tolist(), "gold_answer": state.gold_answer.tolist(),
                "counts": state.counts.tolist()}

    def state_from_dict(self, data: dict[str, Any]) -> GoldRecState:
        return GoldRecState(
            rec=RecommenderState.from_dict(data["rec"]),
            task_category=np.asarray(data["task_category"], dtype=np.int64),
            is_gold=np.asarray(data["is_gold"], dtype=bool),
            gold_answer=np.asarray(data["gold_answer"], dtype=np.int64),
            counts=np.asarray(data["counts"], dtype=float).reshape(
                len(data["task_category"]), -1),
        )

    # --- decisions ---------------------------------------------------------------------
    def priority(self, state: GoldRecState, tasks: np.ndarray) -> np.ndarray:
        return -state.counts[tasks].sum(axis=1)

    def score(self, state: GoldRecState, tasks: np.ndarray, worker: int) -> np.ndarray:
        """Ȳ of the worker for each task's category (estimated q_k p_k)."""
        return y_bar(state.rec.rows(slice(worker, worker + 1)))[0][state.task_category[tasks]]

    def select_task(self, state: GoldRecState, worker: int, candidates: np.ndarray,
                    mask: np.ndarray, rng: np.random.Generator) -> int | None:
        if not mask.any():
            return None
        tasks = np.asarray(candidates)[np.asarray(mask, dtype=bool)]
        row = state.rec.rows(slice(worker, worker + 1))
        category, gold = recommend(self.core(), row, rng)
        cat, want_gold = int(category[0]), bool(gold[0])
        tcat, tgold = state.task_category[tasks], state.is_gold[tasks]
        same_kind, same_cat = tgold == want_gold, tcat == cat
        tier = np.where(same_kind & same_cat, 3, np.where(same_kind, 2, np.where(same_cat, 1, 0)))
        tasks, tcat = tasks[tier == tier.max()], tcat[tier == tier.max()]
        y = y_bar(row)[0][tcat]
        tasks = tasks[y == y.max()]
        fewest = -state.counts[tasks].sum(axis=1)
        tasks = tasks[fewest == fewest.max()]
        return int(tasks[rng.integers(len(tasks))])

    # --- learning ----------------------------------------------------------------------
    def update(self, state: GoldRecState, obs: Observation) -> np.ndarray:
        task = int(obs.task)
        gold = bool(state.is_gold[task] or obs.gold)
        accepted = not obs.declined and obs.label >= 0
        truth = obs.truth if obs.truth >= 0 else int(state.gold_answer[task])
        correct = gold and accepted and truth >= 0 and obs.label == truth
        row = state.rec.rows(slice(obs.worker, obs.worker + 1))
        observe(self.core(), row, np.array([state.task_category[task]]), np.array([gold]),
                np.array([accepted]), np.array([correct]))
        if not accepted:
            return np.empty(0, dtype=np.int64)
        state.counts[task, obs.label] += 1
        return np.array([task])

    def predict_proba(self, state: GoldRecState) -> np.ndarray:
        c = state.counts + 1e-12
        return c / c.sum(axis=1, keepdims=True)


@register
class GreedyRecommendation(_KangTay):
    """GR (Algorithm 1). Defaults are the paper's simulation values."""

    name = "gr"

    params: Params  # this policy's own (``Policy.params`` is typed Any)

    @dataclass(frozen=True)
    class Params:
        alpha: float = 0.1
        c: float = 0.05
        d: float = 0.1
        gamma: float = 2.0
        clock: str = "epoch"

        def __post_init__(self) -> None:
            self.core()

        def core(self) -> RecommenderParams:
            return RecommenderParams("gr", alpha=self.alpha, gamma=self.gamma, c=self.c,
                                     d=self.d, clock=self.clock)

    def core(self) -> RecommenderParams:
        return self.params.core()


@register
class UniformRecommendation(_KangTay):
    """UR(γ) (Algorithm 2); γ = 2 is the paper's UR."""

    name = "ur"

    params: Params  # this policy's own (``Policy.params`` is typed Any)

    @dataclass(frozen=True)
    class Params:
        gamma: float = 2.0
        alpha: float = 0.1

        def __post_init__(self) -> None:
            RecommenderParams("ur", alpha=self.alpha, gamma=self.gamma)

    def core(self) -> RecommenderParams:
        return RecommenderParams("ur", alpha=self.params.alpha, gamma=self.params.gamma)


@register
class EpsFirstGold(_KangTay):
    """ε-first (Algorithm 3) for a planned number ``horizon`` of tasks per worker."""

    name = "eps-first-gold"

    params: Params  # this policy's own (``Policy.params`` is typed Any)

    @dataclass(frozen=True)
    class Params:
        horizon: int = 1000

        def __post_init__(self) -> None:
            RecommenderParams("eps-first", horizon=self.horizon)

    def core(self) -> RecommenderParams:
        return RecommenderParams("eps-first", horizon=self.params.horizon)
