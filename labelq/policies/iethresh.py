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
from typing import Any, Callable

import numpy as np
from scipy.stats import t as student_t

from .base import Observation, Policy, Problem
from .bbta import expected_zero_one_loss, vote_scores
from .random_pair import RandomPair
from .registry import register

__all__ = ["IEThresh", "StreamState", "finished_agreement", "stream_update"]


@dataclass
class StreamState:
    """A task stream with worker sets: labels (N, K) or -1; ``current`` task or -1;
    ``finished[i]`` once task i's statistics were counted; per-worker ``n``, ``s1``, ``s2``
    (count, sum, sum of squares of rewards — IEThresh) or ``n`` and ``s1`` only (agreements,
    CrowdSense)."""

    labels: np.ndarray
    n_classes: int
    current: int
    started: np.ndarray
    finished: np.ndarray
    n: np.ndarray
    s1: np.ndarray
    s2: np.ndarray


def finished_agreement(row: np.ndarray, weights: np.ndarray | float,
                       n_classes: int) -> tuple[np.ndarray, np.ndarray]:
    """(workers who labelled, their expected agreement with the row's weighted vote)."""
    who = np.flatnonzero(row >= 0)
    scores = vote_scores(row[None, :], weights, n_classes)
    agree = 1.0 - expected_zero_one_loss(np.repeat(scores, who.size, axis=0), row[who])
    return who, agree


def _stream_state(problem: Problem, prior_n: float, prior_s1: float,
                  prior_s2: float) -> StreamState:
    n, k = problem.n_tasks, problem.n_workers
    return StreamState(np.full((n, k), -1, dtype=np.int64), int(problem.n_classes), -1,
                       np.zeros(n, dtype=bool), np.zeros(n, dtype=bool),
                       np.full(k, prior_n), np.full(k, prior_s1), np.full(k, prior_s2))


def _stream_from_dict(data: dict[str, Any]) -> StreamState:
    lab = np.asarray(data["labels"], dtype=np.int64).reshape(len(data["labels"]), -1)
    return StreamState(lab, int(data["n_classes"]), int(data["current"]),
                       np.asarray(data["started"], dtype=bool),
                       np.asarray(data["finished"], dtype=bool),
                       *(np.asarray(data[k], dtype=float) for k in ("n", "s1", "s2")))


def _new_task(state: StreamState, mask: np.ndarray, preferred: np.ndarray,
              rng: np.random.Generator) -> int | None:
    """A random not-started task with an eligible ``preferred`` worker, else with any."""
    fresh = ~state.started
    for ok in (mask[:, preferred].any(axis=1) if preferred.size else None, mask.any(axis=1)):
        if ok is None:
            continue
        pool = np.flatnonzero(fresh & ok)
        if pool.size:
            return int(pool[rng.integers(pool.size)])
    return None


def stream_update(state: StreamState, obs: Observation,
                  finish_current: Callable[[StreamState], None]) -> np.ndarray:
    """The one-task-at-a-time update IEThresh and CrowdSense share: record the label, and
    when a label arrives for a new task, first let ``finish_current`` fold the previous
    task's agreement into the worker statistics. Returns the touched tasks."""
    if obs.declined or obs.label < 0 or state.labels[obs.task, obs.worker] >= 0:
        return np.empty(0, dtype=np.int64)
    touched = [obs.task]
    if obs.task != state.current:
        c = state.current
        if c >= 0 and not state.finished[c]:
            finish_current(state)
            state.finished[c] = True
            touched.append(c)
        state.current = int(obs.task)
        state.started[obs.task] = True
    state.labels[obs.task, obs.worker] = obs.label
    return np.array(touched, dtype=np.int64)


@functools.lru_cache(maxsize=65536)
def _t_quantile(q: float, df: float) -> float:
    return float(student_t.ppf(q, df))


def t_quantiles(q: float, df: np.ndarray) -> np.ndarray:
    """``student_t.ppf(q, df)`` elementwise, each distinct df computed once and memoised
    (the degrees of freedom are counts, so a run sees few distinct values)."""
    uniq, inverse = np.unique(df, return_inverse=True)
    vals = np.array([_t_quantile(float(q), float(u)) for u in uniq])
    return vals[inverse.reshape(-1)].reshape(np.shape(df))


def _best(values: np.ndarray, allowed: np.ndarray) -> int:
    """Index of the largest value where allowed (lowest index on ties)."""
    return int(np.argmax(np.where(allowed, values, -np.inf)))


@register
class IEThresh(Policy):
    name = "iethresh"
    mode = "push"

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
        return _stream_state(problem, 2.0, 1.0, 1.0)  # pseudo-rewards {0, 1}

    def state_from_dict(self, data: dict[str, Any]) -> StreamState:
        return _stream_from_dict(data)

    # --- the model -------------------------------------------------------------------
    def _stats_after_current(self, state: StreamState):
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
                return c, _best(ui, ok)
        ui = self.upper_interval(*self._stats_after_current(state))
        chosen = np.flatnonzero(self.worker_set(ui))
        i = _new_task(state, mask, chosen, rng)
        if i is None:
            return None
        ok = self.worker_set(ui) & mask[i]
        return i, _best(ui, ok if ok.any() else mask[i])

    # --- learning --------------------------------------------------------------------
    def update(self, state: StreamState, obs: Observation) -> np.ndarray:
        return stream_update(state, obs, self._finish_current)

    def _finish_current(self, state: StreamState) -> None:
        state.n, state.s1, state.s2 = self._stats_after_current(state)

    def predict_proba(self, state: StreamState) -> np.ndarray:
        """Majority-vote shares; a task without labels is uniform."""
        return RandomPair.predict_proba(self, state)  # type: ignore[arg-type]
