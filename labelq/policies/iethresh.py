"""``iethresh:eps=E``: IEThresh (Donmez, Carbonell & Schneider, KDD 2009), as reviewed by
Zhang, Ma & Sugiyama (2015), Section 4.1 — a category-blind, budget-free baseline.

Interval estimation over workers: worker j's rewards r (1 if its label agreed with the
task's majority vote, else 0) give the upper interval

    UI(j) = mean(r) + t_{alpha/2, n-1} * sd(r) / sqrt(n),   alpha = 0.05,

and each new task is labelled by every worker with UI(j) >= eps * max UI. Rewards are
computed when a task is finished (the majority vote then includes every label it got); an
exact tie counts as the expected reward of a uniform tie break. Each worker starts with the
two pseudo-rewards {0, 1} (ours: the paper leaves the start open; this makes UI defined and
optimistic, so every worker is tried early).

One-pair-at-a-time contract: the state keeps the ``current`` task; ``select_pair`` asks the
next eligible member of its worker set (best UI first), and when none is left opens a new
task drawn at random among those not started (the paper's stream of arriving tasks). A new
task whose set has no eligible member gets the best-UI eligible worker. After one pass over
the tasks ``select_pair`` returns None: IEThresh has no budget (its eps sets the spend).
The estimate is the majority vote.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.stats import t as student_t

from .base import Observation, Policy, Problem
from .random_pair import RandomPair
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

__all__ = ["IEThresh", "StreamState", "finished_agreement", "stream_update"]


@functools.lru_cache(maxsize=65536)
def _t_quantile(q: float, df: float) -> float:
    return float(student_t.ppf(q, df))


def t_quantiles(q: float, df: np.ndarray) -> np.ndarray:
    """``student_t.ppf(q, df)`` elementwise, each distinct df computed once and memoised
    (the degrees of freedom are counts, so a run sees few distinct values)."""
    uniq, inverse = np.unique(df, return_inverse=True)
    vals = np.array([_t_quantile(float(q), float(u)) for u in uniq])
    return vals[inverse.reshape(-1)].reshape(np.shape(df))


@register
class IEThresh(Policy):
    name = "iethresh"
    mode = "push"

    params: Params  # this policy's own (``Policy.params`` is typed Any)

    @dataclass(frozen=True)
    class Params:
        eps: float = 0.8  # ask workers with UI >= eps * max UI
        alpha: float = 0.05  # significance level of the t interval

        def __post_init__(self) -> None:
            for name in ("eps", "alpha"):
                v = getattr(self, name)
                if isinstance(v, bool) or not isinstance(v, (int, float)) \
                        or not math.isfinite(v):
                    raise ValueError(f"{name} must be a number, got {v!r}")
            if not 0.0 <= self.eps <= 1.0:
                raise ValueError(f"eps must be in [0, 1], got {self.eps}")
            if not 0.0 < self.alpha < 1.0:
                raise ValueError(f"alpha must be in (0, 1), got {self.alpha}")

    def init_state(self, problem: Problem) -> StreamState:
        return stream_state(problem, 2.0, 1.0, 1.0)  # pseudo-rewards {0, 1}

    def state_from_dict(self, data: dict[str, Any]) -> StreamState:
        return stream_from_dict(data)

    # --- the model -------------------------------------------------------------------
    def _stats_after_current(
            self, state: StreamState) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        n, s1, s2 = state.n.copy(), state.s1.copy(), state.s2.copy()
        c = state.current
        if c >= 0 and not state.finished[c]:
            who, r = finished_agreement(state.labels[c], 1.0, state.n_classes)
            n[who] += 1
            s1[who] += r
            s2[who] += r * r
        return n, s1, s2

    def upper_interval(self, n: np.ndarray, s1: np.ndarray, s2: np.ndarray) -> np.ndarray:
        """UI(j) = mean + t_{alpha/2, n-1} sd / sqrt(n) (sample sd, n >= 2)."""
        mean = s1 / n
        var = np.maximum(s2 - n * mean * mean, 0.0) / np.maximum(n - 1.0, 1.0)
        crit = t_quantiles(1.0 - self.params.alpha / 2.0, np.maximum(n - 1.0, 1.0))
        return mean + crit * np.sqrt(var / n)

    def worker_set(self, ui: np.ndarray) -> np.ndarray:
        return ui >= self.params.eps * ui.max()

    # --- decisions -------------------------------------------------------------------
    def priority(self, state: StreamState, tasks: np.ndarray) -> np.ndarray:
        """The current task first, then tasks not started; finished tasks last."""
        tasks = np.asarray(tasks, dtype=np.int64)
        return np.where(tasks == state.current, 2.0, np.where(state.started[tasks], 0.0, 1.0))

    def select_pair(self, state: StreamState, mask: np.ndarray,
                    rng: np.random.Generator) -> tuple[int, int] | None:
        if not mask.any():
            return None
        c = state.current
        if c >= 0 and not state.finished[c]:
            ui = self.upper_interval(state.n, state.s1, state.s2)
            ok = self.worker_set(ui) & mask[c]
            if ok.any():
                return c, best(ui, ok)
        ui = self.upper_interval(*self._stats_after_current(state))
        chosen = np.flatnonzero(self.worker_set(ui))
        i = new_task(state, mask, chosen, rng)
        if i is None:
            return None
        ok = self.worker_set(ui) & mask[i]
        return i, best(ui, ok if ok.any() else mask[i])

    # --- learning --------------------------------------------------------------------
    def update(self, state: StreamState, obs: Observation) -> np.ndarray:
        return stream_update(state, obs, self._finish_current)

    def _finish_current(self, state: StreamState) -> None:
        state.n, state.s1, state.s2 = self._stats_after_current(state)

    def predict_proba(self, state: StreamState) -> np.ndarray:
        """Majority-vote shares; a task without labels is uniform."""
        return RandomPair.predict_proba(self, state)  # type: ignore[arg-type]
