"""``crowdsense:eps=E``: CrowdSense (Ertekin, Rudin & Hirsh, 2014), as reviewed by
Zhang, Ma & Sugiyama (2015), Section 4.2 — a category-blind, budget-free baseline.

Worker quality Q_j = (a_j + K) / (c_j + 2K) with smoothing K (``smoothing``, default 100,
the paper's choice): c_j labels counted so far, a_j of them agreeing with the task's
Q-weighted vote. For a new task i the worker set S_i starts with the two best workers and
one random worker; then the best remaining worker l is added while

    (|Score(S_i)| - Q_l) / (|S_i| + 1) < eps,   Score(S_i) = sum_{j in S_i} y_ij Q_j

(y in {-1, +1}; with more than two classes |Score| is the margin between the two best
Q-weighted classes). The estimate is the Q-weighted vote. Qualities are updated when the
task is finished (an exact tie counts as the expected agreement of a uniform tie break).

One-pair-at-a-time contract: the state keeps the ``current`` task; ``select_pair`` builds
S_i one worker per call (best, second best, a random one, then the criterion above) and
opens a random not-started task when the criterion stops or no set member is eligible.
After one pass over the tasks it returns None: CrowdSense has no budget (eps sets it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from .base import Observation, Policy, Problem
from .registry import register
from .stream import (
    StreamState,
    best,
    finished_agreement,
    new_task,
    stream_from_dict,
    stream_state,
    stream_update,
)
from .votes import margin, shares, vote_scores

__all__ = ["CrowdSense"]


@register
class CrowdSense(Policy):
    name = "crowdsense"
    mode = "push"

    params: Params  # this policy's own (``Policy.params`` is typed Any)

    @dataclass(frozen=True)
    class Params:
        eps: float = 0.01  # add a worker while (|Score| - Q_l) / (|S| + 1) < eps
        smoothing: float = 100.0  # the K of Q_j = (a_j + K) / (c_j + 2K)

        def __post_init__(self) -> None:
            for name in ("eps", "smoothing"):
                v = getattr(self, name)
                if isinstance(v, bool) or not isinstance(v, (int, float)) \
                        or not math.isfinite(v):
                    raise ValueError(f"{name} must be a number, got {v!r}")
            if self.smoothing <= 0:
                raise ValueError(f"smoothing must be > 0, got {self.smoothing}")

    def init_state(self, problem: Problem) -> StreamState:
        return stream_state(problem, 0.0, 0.0, 0.0)  # n = c_j, s1 = a_j (s2 unused)

    def state_from_dict(self, data: dict[str, Any]) -> StreamState:
        return stream_from_dict(data)

    # --- the model -------------------------------------------------------------------
    def quality(self, c: np.ndarray, a: np.ndarray) -> np.ndarray:
        k = self.params.smoothing
        return (a + k) / (c + 2.0 * k)

    def _stats_after_current(self, state: StreamState) -> tuple[np.ndarray, np.ndarray]:
        """(c, a) counts with the current, unfinished task's agreement folded in (copies)."""
        n, s1 = state.n.copy(), state.s1.copy()
        c = state.current
        if c >= 0 and not state.finished[c]:
            q = self.quality(state.n, state.s1)
            who, agree = finished_agreement(state.labels[c], q, state.n_classes)
            n[who] += 1
            s1[who] += agree
        return n, s1

    def _quality_after_current(self, state: StreamState) -> np.ndarray:
        return self.quality(*self._stats_after_current(state))

    # --- decisions -------------------------------------------------------------------
    def priority(self, state: StreamState, tasks: np.ndarray) -> np.ndarray:
        """The current task first, then tasks not started; finished tasks last."""
        tasks = np.asarray(tasks, dtype=np.int64)
        return np.where(tasks == state.current, 2.0, np.where(state.started[tasks], 0.0, 1.0))

    def _next_worker(self, state: StreamState, i: int, eligible: np.ndarray, q: np.ndarray,
                     rng: np.random.Generator) -> int | None:
        row = state.labels[i]
        size = int((row >= 0).sum())
        if not eligible.any():
            return None
        if size < 2:
            return best(q, eligible)
        if size == 2:
            pool = np.flatnonzero(eligible)
            return int(pool[rng.integers(pool.size)])
        l = best(q, eligible)
        scores = vote_scores(row[None, :], q, state.n_classes)
        score = float(margin(scores, 1.0)[0])
        return l if (score - q[l]) / (size + 1) < self.params.eps else None

    def select_pair(self, state: StreamState, mask: np.ndarray,
                    rng: np.random.Generator) -> tuple[int, int] | None:
        if not mask.any():
            return None
        c = state.current
        if c >= 0 and not state.finished[c]:
            j = self._next_worker(state, c, mask[c], self.quality(state.n, state.s1), rng)
            if j is not None:
                return c, j
        q = self._quality_after_current(state)
        i = new_task(state, mask, np.empty(0, dtype=np.int64), rng)
        if i is None:
            return None
        return i, best(q, mask[i])

    # --- learning --------------------------------------------------------------------
    def update(self, state: StreamState, obs: Observation) -> np.ndarray:
        return stream_update(state, obs, self._finish_current)

    def _finish_current(self, state: StreamState) -> None:
        state.n, state.s1 = self._stats_after_current(state)

    def predict_proba(self, state: StreamState) -> np.ndarray:
        """Q-weighted vote shares; a task without labels is uniform."""
        q = self.quality(state.n, state.s1)
        return shares(vote_scores(state.labels, q, state.n_classes))
