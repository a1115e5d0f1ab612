"""``dynamic-overlap:min=…,max=…,confidence=…``: Toloka's dynamic overlap (incremental
relabeling), the adaptive baseline a crowdsourcing platform offers out of the box.

What Toloka documents (https://toloka.ai/docs/guide/concepts/dynamic-overlap, "How does it
work?"): a task is first issued with the minimal overlap; as responses arrive they get a
confidence, and while it is below "confidence in aggregated response" the overlap is raised,
up to the maximum overlap. A Toloker's accuracy is the smoothed share of control (gold)
tasks answered correctly, q_j = (K + correct_j) / (2K + total_j) with K = 0.5; the aggregated
answer is the option with the largest sum of q over the Tolokers who chose it, and its
confidence is its Bayes posterior under a uniform prior over the Y options, where a Toloker
who chose the option contributes q_j and one who chose another contributes (1 - q_j)/(Y - 1):

    P(c) ∝ prod_{j chose c} q_j * prod_{j chose another} (1 - q_j) / (Y - 1).

labelq implements exactly that rule, with these choices where the documentation leaves
room (said here because they are ours):

* **Skill.** ``agreement=true`` (default) also counts, as Toloka's "majority vote" quality
  control rule does, agreement with the majority of a task: once a task has ``max(min, 2)``
  labels, each label is compared with the plain majority of the task's *other* labels
  (counted only when that majority is a single class), and so is every later label when it
  arrives. Gold answers count against the known truth. Without gold, a binary project would
  otherwise keep q = 0.5 for everyone, and a posterior that never moves.
* **When confidence is computed.** When a label of the task arrives, with the skills of that
  moment (Toloka evaluates the task when a response is accepted); it is the posterior of the
  answer with the largest sum of q (ties: the lowest class), as Toloka defines it, not the
  largest posterior — the two differ when one skilled worker outvotes several weak ones. A task is *done* when it
  has ``max`` labels, or at least ``min`` labels and a confidence >= ``confidence``; a done
  task is never asked again (``state.done``; the policy returns ``None`` when only done tasks
  are eligible, so a run may stop before its budget is spent).
* **Which open task.** Toloka does not choose workers; here too the asking worker (pull)
  gets the eligible open task with the fewest labels, then the lowest confidence, then the
  lowest index: priority = -(labels + confidence), -inf when done. Push mode is the default
  one-``select_task``-per-worker decision.

``predict_proba`` is the posterior above with the current skills (uniform for a task without
labels); its argmax is the Bayes answer, which can differ from the sum-of-q answer in the
case just named. Declines change nothing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from .base import Observation, Policy, Problem
from .registry import register

__all__ = ["DynamicOverlap", "DynamicOverlapState", "skill_posterior"]


def skill_posterior(labels: np.ndarray, q: np.ndarray, n_classes: int) -> np.ndarray:
    """Toloka's posterior P(c) per row of ``labels`` (m, W; -1 = no label) given accuracies
    ``q`` (W,), uniform prior; rows without labels are uniform. Summed in log space."""
    labels = np.atleast_2d(labels)
    q = np.asarray(q, dtype=float)
    log_q = np.log(q)
    log_other = np.log1p(-q) - math.log(max(n_classes - 1, 1))
    has = labels >= 0
    base = np.where(has, log_other, 0.0).sum(axis=1)  # as if every label said "another"
    logp = np.stack([base + np.where(labels == c, log_q - log_other, 0.0).sum(axis=1)
                     for c in range(n_classes)], axis=1)
    logp -= logp.max(axis=1, keepdims=True)
    p = np.exp(logp)
    return p / p.sum(axis=1, keepdims=True)


@dataclass
class DynamicOverlapState:
    """``labels[i, j]`` class index or -1; skill counts ``correct[j]`` / ``total[j]``;
    ``confidence[i]`` the posterior of task i's top answer when its last label arrived;
    ``done[i]`` the task is closed; ``truth[i]`` the gold answer or -1."""

    labels: np.ndarray
    correct: np.ndarray
    total: np.ndarray
    confidence: np.ndarray
    done: np.ndarray
    truth: np.ndarray
    n_classes: int


@register
class DynamicOverlap(Policy):
    name = "dynamic-overlap"
    mode = "pull"

    params: Params  # this policy's own (``Policy.params`` is typed Any)

    @dataclass(frozen=True)
    class Params:
        """``min``: overlap every task gets first; ``max``: the most labels a task gets;
        ``confidence``: stop below ``max`` once the top answer's posterior reaches it, in
        (0, 1); ``smoothing``: K of the skill q = (K + correct) / (2K + total), > 0;
        ``agreement``: count agreement with the majority as skill evidence (true/false)."""

        min: int = 1
        max: int = 5
        confidence: float = 0.9
        smoothing: float = 0.5
        agreement: bool = True

        def __post_init__(self) -> None:
            for name in ("min", "max"):
                v = getattr(self, name)
                if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                    raise ValueError(f"{name} must be an integer >= 1, got {v!r}")
            if self.max < self.min:
                raise ValueError(f"max must be >= min = {self.min}, got {self.max}")
            c = self.confidence
            if isinstance(c, bool) or not isinstance(c, (int, float)) or not 0 < c < 1:
                raise ValueError(f"confidence must be a number in (0, 1), got {c!r}")
            object.__setattr__(self, "confidence", float(c))
            k = self.smoothing
            if isinstance(k, bool) or not isinstance(k, (int, float)) \
                    or not (math.isfinite(k) and k > 0):
                raise ValueError(f"smoothing must be a number > 0, got {k!r}")
            object.__setattr__(self, "smoothing", float(k))
            if not isinstance(self.agreement, bool):
                raise ValueError(f"agreement must be true or false, got {self.agreement!r}")

    # --- state -----------------------------------------------------------------------
    def init_state(self, problem: Problem) -> DynamicOverlapState:
        n, w = problem.n_tasks, problem.n_workers
        truth = np.where(np.asarray(problem.is_gold, dtype=bool),
                         np.asarray(problem.gold_answer, dtype=np.int64), -1)
        return DynamicOverlapState(
            labels=np.full((n, w), -1, dtype=np.int64), correct=np.zeros(w), total=np.zeros(w),
            confidence=np.zeros(n), done=np.zeros(n, dtype=bool), truth=truth,
            n_classes=int(problem.n_classes))

    def state_from_dict(self, data: dict[str, Any]) -> DynamicOverlapState:
        n = len(data["labels"])
        return DynamicOverlapState(
            labels=np.asarray(data["labels"], dtype=np.int64).reshape(n, -1),
            correct=np.asarray(data["correct"], dtype=float),
            total=np.asarray(data["total"], dtype=float),
            confidence=np.asarray(data["confidence"], dtype=float),
            done=np.asarray(data["done"], dtype=bool),
            truth=np.asarray(data["truth"], dtype=np.int64),
            n_classes=int(data["n_classes"]))

    def skill(self, state: DynamicOverlapState) -> np.ndarray:
        """q_j = (K + correct_j) / (2K + total_j), Toloka's smoothed accuracy."""
        k = self.params.smoothing
        return (k + state.correct) / (2.0 * k + state.total)

    # --- decisions -------------------------------------------------------------------
    def priority(self, state: DynamicOverlapState, tasks: np.ndarray) -> np.ndarray:
        """-(labels + confidence) for open tasks (fewest labels, then least confident
        first), -inf for done ones."""
        tasks = np.asarray(tasks, dtype=np.int64)
        n_labels = (state.labels[tasks] >= 0).sum(axis=1)
        return np.where(state.done[tasks], -np.inf, -(n_labels + state.confidence[tasks]))

    def select_task(self, state: DynamicOverlapState, worker: int, candidates: np.ndarray,
                    mask: np.ndarray, rng: np.random.Generator) -> int | None:
        candidates = np.asarray(candidates, dtype=np.int64)
        open_ = np.asarray(mask, dtype=bool) & ~state.done[candidates]
        return super().select_task(state, worker, candidates, open_, rng)

    # --- learning --------------------------------------------------------------------
    @staticmethod
    def _majority_without(row: np.ndarray, j: int, n_classes: int) -> int:
        """The single most frequent class among the row's labels other than worker j's,
        -1 when there is none or a tie."""
        others = row[(row >= 0) & (np.arange(row.size) != j)]
        if others.size == 0:
            return -1
        counts = np.bincount(others, minlength=n_classes)
        top = np.flatnonzero(counts == counts.max())
        return int(top[0]) if top.size == 1 else -1

    def _agree(self, state: DynamicOverlapState, i: int, workers: np.ndarray) -> None:
        row = state.labels[i]
        for j in workers:
            major = self._majority_without(row, int(j), state.n_classes)
            if major >= 0:
                state.total[j] += 1.0
                state.correct[j] += float(row[j] == major)

    def update(self, state: DynamicOverlapState, obs: Observation) -> np.ndarray:
        if obs.declined or obs.label < 0 or state.labels[obs.task, obs.worker] >= 0:
            return np.empty(0, dtype=np.int64)
        i, j, p = obs.task, obs.worker, self.params
        state.labels[i, j] = obs.label
        truth = obs.truth if obs.gold and obs.truth >= 0 else int(state.truth[i])
        if truth >= 0:  # a control task: skill against the known answer
            state.total[j] += 1.0
            state.correct[j] += float(obs.label == truth)
        elif p.agreement:
            n_labels = int((state.labels[i] >= 0).sum())
            first = max(p.min, 2)
            if n_labels == first:
                self._agree(state, i, np.flatnonzero(state.labels[i] >= 0))
            elif n_labels > first:
                self._agree(state, i, np.array([j]))
        row, q = state.labels[i], self.skill(state)
        who = row >= 0
        n_labels = int(who.sum())
        answer = int(np.argmax(np.bincount(row[who], weights=q[who], minlength=state.n_classes)))
        post = skill_posterior(row[None, :], q, state.n_classes)[0]
        state.confidence[i] = float(post[answer])
        state.done[i] = n_labels >= p.max or (n_labels >= p.min
                                              and state.confidence[i] >= p.confidence)
        return np.array([i], dtype=np.int64)

    def predict_proba(self, state: DynamicOverlapState) -> np.ndarray:
        """Toloka's skill-weighted posterior with the current skills."""
        return skill_posterior(state.labels, self.skill(state), state.n_classes)
