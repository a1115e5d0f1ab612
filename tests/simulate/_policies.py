"""Unregistered test policies (kept out of the registry so contract tests ignore them)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from labelq.policies.base import Observation, Policy, Problem


@dataclass
class LogState:
    counts: np.ndarray
    seen: list  # (task, worker, label)
    budget: float


class RandomPull(Policy):
    """Uniformly random eligible task; records every observation it sees."""

    name = "test-random"
    mode = "pull"

    def init_state(self, problem: Problem) -> LogState:
        return LogState(np.zeros((problem.n_tasks, problem.n_classes)), [], problem.budget)

    def select_task(self, state, worker, candidates, mask, rng):
        if not mask.any():
            return None
        return int(rng.choice(candidates[mask]))

    def update(self, state, obs: Observation):
        state.counts[obs.task, obs.label] += 1
        state.seen.append((obs.task, obs.worker, obs.label))
        return np.array([obs.task])

    def predict_proba(self, state):
        c = state.counts + 1e-12
        return c / c.sum(axis=1, keepdims=True)


class RandomPush(RandomPull):
    mode = "push"

    def select_pair(self, state, mask, rng):
        pairs = np.argwhere(mask)
        if len(pairs) == 0:
            return None
        i, j = pairs[rng.integers(len(pairs))]
        return int(i), int(j)


class Cheater(RandomPush):
    """Asks (0, 0) forever, eligible or not."""

    def select_pair(self, state, mask, rng):
        return 0, 0


class FirstPair(RandomPull):
    """Push: the first eligible (task, worker) pair in row-major order (lowest task, then
    lowest worker)."""

    mode = "push"

    def select_pair(self, state, mask, rng):
        pairs = np.argwhere(mask)
        return None if len(pairs) == 0 else (int(pairs[0][0]), int(pairs[0][1]))
