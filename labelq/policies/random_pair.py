"""``random``: the naive baseline of Zhang, Ma & Sugiyama (2015), Section 5.1.

"We randomly select a task-worker pair at each step, and use majority voting mechanism for
label aggregation." Push mode: a uniform draw over the eligible (task, worker) pairs; pull
mode: a uniform draw over the eligible tasks. The estimate is the plain majority vote.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .base import Observation, Policy, Problem
from .registry import register

__all__ = ["RandomPair", "LabelState"]


@dataclass
class LabelState:
    """``labels[i, j]``: the class index worker j gave task i, -1 when missing."""

    labels: np.ndarray
    n_classes: int


@register
class RandomPair(Policy):
    name = "random"
    mode = "push"
    random_ties = True

    def init_state(self, problem: Problem) -> LabelState:
        return LabelState(np.full((problem.n_tasks, problem.n_workers), -1, dtype=np.int64),
                          int(problem.n_classes))

    def state_from_dict(self, data: dict[str, Any]) -> LabelState:
        lab = np.asarray(data["labels"], dtype=np.int64).reshape(len(data["labels"]), -1)
        return LabelState(lab, int(data["n_classes"]))

    def priority(self, state: LabelState, tasks: np.ndarray) -> np.ndarray:
        """All tasks are equal; ``select_task`` breaks the tie uniformly at random."""
        return np.zeros(len(tasks))

    def select_pair(self, state: LabelState, mask: np.ndarray,
                    rng: np.random.Generator) -> tuple[int, int] | None:
        flat = np.flatnonzero(mask)
        if flat.size == 0:
            return None
        i, j = divmod(int(flat[rng.integers(flat.size)]), mask.shape[1])
        return i, j

    def update(self, state: LabelState, obs: Observation) -> np.ndarray:
        if obs.declined or obs.label < 0 or state.labels[obs.task, obs.worker] >= 0:
            return np.empty(0, dtype=np.int64)
        state.labels[obs.task, obs.worker] = obs.label
        return np.array([obs.task])

    def predict_proba(self, state: LabelState) -> np.ndarray:
        """Majority-vote shares; a task without labels is uniform."""
        counts = np.stack([(state.labels == c).sum(axis=1) for c in range(state.n_classes)],
                          axis=1).astype(float)
        tot = counts.sum(axis=1, keepdims=True)
        out = np.full_like(counts, 1.0 / state.n_classes)
        np.divide(counts, tot, out=out, where=tot > 0)
        return out
