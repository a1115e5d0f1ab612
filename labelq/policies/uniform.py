"""``uniform``: spread labels evenly — always ask about the task with the fewest labels.

The Opt-KG paper's baseline ("uniform sampling"): with a budget of T = kK it gives every task
k labels, the estimate is the majority vote. Ties go to the lowest task index, so labels go
round-robin. Priority is ``-labels``, which the live index keeps ordered.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .base import FloatArray, Observation, Policy, Problem
from .registry import register

__all__ = ["Uniform", "CountState"]


@dataclass
class CountState:
    """Per-task label counts by class: ``counts[i, k]`` labels of class k on task i."""

    counts: FloatArray  # float (n_tasks, n_classes)


@register
class Uniform(Policy):
    name = "uniform"
    mode = "pull"

    def init_state(self, problem: Problem) -> CountState:
        return CountState(np.zeros((problem.n_tasks, problem.n_classes)))

    def state_from_dict(self, data: dict[str, Any]) -> CountState:
        return CountState(np.asarray(data["counts"], dtype=float))

    def priority(self, state: CountState, tasks: np.ndarray) -> np.ndarray:
        return -state.counts[tasks].sum(axis=1)

    def select_pair(self, state: CountState, mask: np.ndarray,
                    rng: np.random.Generator) -> tuple[int, int] | None:
        """The decision of ``Policy.select_pair`` (the lowest-index worker that has an
        eligible task with the fewest labels, then its lowest-index such task), vectorised:
        one pass over the mask instead of one ``select_task`` per worker."""
        mask = np.asarray(mask, dtype=bool)
        if not mask.any():
            return None
        values = np.where(mask, self.priority(state, np.arange(mask.shape[0]))[:, None],
                          -np.inf)
        best = values == values.max()
        worker = int(np.argmax(best.any(axis=0)))
        return int(np.argmax(best[:, worker])), worker

    def update(self, state: CountState, obs: Observation) -> np.ndarray:
        if obs.declined or obs.label < 0:
            return np.empty(0, dtype=np.int64)
        state.counts[obs.task, obs.label] += 1
        return np.array([obs.task])

    def predict_proba(self, state: CountState) -> np.ndarray:
        """Majority-vote shares; a task with no label is uniform over the classes."""
        c = state.counts + 1e-12
        return c / c.sum(axis=1, keepdims=True)
