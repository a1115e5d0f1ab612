"""The one-task-at-a-time stream with worker sets that IEThresh and CrowdSense share: its
state, the agreement of a finished task's labels with their vote, and the update."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .base import Observation, Problem
from .votes import expected_zero_one_loss, vote_scores

__all__ = ["StreamState", "finished_agreement", "stream_state", "stream_from_dict",
           "new_task", "stream_update", "best"]


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


def stream_state(problem: Problem, prior_n: float, prior_s1: float,
                  prior_s2: float) -> StreamState:
    n, k = problem.n_tasks, problem.n_workers
    return StreamState(np.full((n, k), -1, dtype=np.int64), int(problem.n_classes), -1,
                       np.zeros(n, dtype=bool), np.zeros(n, dtype=bool),
                       np.full(k, prior_n), np.full(k, prior_s1), np.full(k, prior_s2))


def stream_from_dict(data: dict[str, Any]) -> StreamState:
    lab = np.asarray(data["labels"], dtype=np.int64).reshape(len(data["labels"]), -1)
    return StreamState(lab, int(data["n_classes"]), int(data["current"]),
                       np.asarray(data["started"], dtype=bool),
                       np.asarray(data["finished"], dtype=bool),
                       *(np.asarray(data[k], dtype=float) for k in ("n", "s1", "s2")))


def new_task(state: StreamState, mask: np.ndarray, preferred: np.ndarray,
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


def best(values: np.ndarray, allowed: np.ndarray) -> int:
    """Index of the largest value where allowed (lowest index on ties)."""
    return int(np.argmax(np.where(allowed, values, -np.inf)))
