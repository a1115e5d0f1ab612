"""``bbta``: bandit-based task assignment for heterogeneous crowdsourcing (push mode).

Zhang, Ma & Sugiyama, *Bandit-Based Task Assignment for Heterogeneous Crowdsourcing*,
Neural Computation 27(11), 2015 (Algorithm 1). Each task has a context s (its category);
worker j has a per-context cumulative loss L_s[j] and weight

    w_j^s = exp(-eta_s * L_s[j]),   eta_s = sqrt(ln K / (t_s K)),

where K is the number of workers and t_s the number of adaptive steps taken in context s
(counted from 1). The estimate is the weighted vote (Eqn. 1)

    ybar_i = sum_j w_j^s y_ij / sum_{j'} w_{j'}^s,   yhat_i = sign(ybar_i),

and |ybar_i| is task i's confidence. One step: pick the eligible task of lowest confidence
(first index on ties), draw its worker with p_j = w_j / sum w among the workers who have not
labelled it yet, observe y, then charge the importance-weighted loss
``L_s[j] += 1[yhat != y] / p_j`` with yhat computed *after* adding y. When the loss is
positive the weights of context s change, so every task of s is re-scored and returned as
touched.

Pure exploration (``explore`` = N' > 0): first, N' random tasks per context are labelled by
every (eligible) worker; L_s starts at each worker's number of disagreements with the plain
majority vote on those tasks (no importance weight). This costs S*K*N' labels.

Where the paper is vague this module follows the authors' reference code as described in
ALGORITHMS.md section 2: the worker is drawn only among workers who have not labelled the
task; weights are recomputed from the losses at every step; tasks of a context are re-scored
only when a loss is charged. Two choices of ours, because ``update`` has no random generator:
an exact tie in the vote charges the *expected* loss of a uniform tie break (1 - 1/m when the
label is among m tied classes, 1 otherwise); and in ``update`` p_j is computed over the
workers who have not labelled the task, which equals the sampling distribution except in a
replay, where the caller's mask may exclude more workers (p_j is floored at 1e-12 there, so
the loss stays finite). With more than two classes the
vote is the paper's categorical extension (argmax of weighted counts) and the confidence is
the margin between the two best classes (|ybar| for two classes).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .base import Observation, Policy, Problem
from .registry import register
from .votes import expected_zero_one_loss, margin, shares, vote_scores

__all__ = ["BBTA", "BBTAState", "bbta_weighted_vote", "vote_scores", "expected_zero_one_loss"]


def bbta_weighted_vote(task: np.ndarray, worker: np.ndarray, label: np.ndarray,
                       category: np.ndarray, weights: np.ndarray, *,
                       n_classes: int | None = None) -> np.ndarray:
    """Aggregate long-format labels with BBTA's per-category worker weights (Eqn. 1).

    ``task``, ``worker``, ``label`` are equally long int arrays (dense indices, class index
    labels); ``category[i]`` is task i's category (so ``len(category)`` is the number of
    tasks); ``weights[s, j]`` is worker j's weight on category s (e.g. ``BBTA.weights(state)``
    of a finished project). Returns (n_tasks, n_classes) vote shares
    ``sum_{j said c} w_j^s / sum_{j labelled i} w_j^s``; a task without labels is uniform.
    The predicted class is the row argmax (break exact ties at random, as the paper does).
    """
    task = np.asarray(task, dtype=np.int64)
    worker = np.asarray(worker, dtype=np.int64)
    label = np.asarray(label, dtype=np.int64)
    category = np.asarray(category, dtype=np.int64)
    weights = np.asarray(weights, dtype=float)
    if not (task.shape == worker.shape == label.shape):
        raise ValueError("task, worker and label must have the same length, got "
                         f"{task.shape}, {worker.shape}, {label.shape}")
    if weights.ndim != 2:
        raise ValueError(f"weights must be (categories, workers), got shape {weights.shape}")
    n_classes = int(label.max()) + 1 if n_classes is None else n_classes
    scores = np.zeros((category.size, max(n_classes, 1)))
    np.add.at(scores, (task, label), weights[category[task], worker])
    return shares(scores)


@dataclass
class BBTAState:
    """BBTA's state, all dense arrays.

    ``labels[i, j]`` class index or -1; ``category[i]``; ``loss[s, j]`` the adaptive phase's
    importance-weighted cumulative loss; ``explore_loss[s, j]`` the disagreements with the
    majority vote on the exploration tasks of s (L_s = explore_loss + loss); ``steps[s]`` = t_s; ``weights[s, j]`` the current weights
    scaled so that the best worker has weight 1; ``confidence[i]`` the cached |ybar_i|;
    ``explore[i]`` marks pure-exploration tasks.
    """

    labels: np.ndarray
    category: np.ndarray
    loss: np.ndarray
    explore_loss: np.ndarray
    steps: np.ndarray
    weights: np.ndarray
    confidence: np.ndarray
    explore: np.ndarray
    n_classes: int


@register
class BBTA(Policy):
    name = "bbta"
    mode = "push"

    params: Params  # this policy's own (``Policy.params`` is typed Any)

    @dataclass(frozen=True)
    class Params:
        explore: int = 1  # N': pure-exploration tasks per context

        def __post_init__(self) -> None:
            if isinstance(self.explore, bool) or not isinstance(self.explore, int) \
                    or self.explore < 0:
                raise ValueError(f"explore must be a non-negative integer, got {self.explore!r}")

    # --- state -----------------------------------------------------------------------
    def init_state(self, problem: Problem) -> BBTAState:
        n, k, s = problem.n_tasks, problem.n_workers, max(problem.n_categories, 1)
        return BBTAState(
            labels=np.full((n, k), -1, dtype=np.int64),
            category=np.asarray(problem.task_category, dtype=np.int64).copy(),
            loss=np.zeros((s, k)), explore_loss=np.zeros((s, k)),
            steps=np.zeros(s, dtype=np.int64),
            weights=np.ones((s, k)), confidence=np.zeros(n),
            explore=np.zeros(n, dtype=bool), n_classes=int(problem.n_classes))

    def state_from_dict(self, data: dict[str, Any]) -> BBTAState:
        return BBTAState(
            labels=np.asarray(data["labels"], dtype=np.int64).reshape(
                len(data["labels"]), -1),
            category=np.asarray(data["category"], dtype=np.int64),
            loss=np.asarray(data["loss"], dtype=float),
            explore_loss=np.asarray(data["explore_loss"], dtype=float),
            steps=np.asarray(data["steps"], dtype=np.int64),
            weights=np.asarray(data["weights"], dtype=float),
            confidence=np.asarray(data["confidence"], dtype=float),
            explore=np.asarray(data["explore"], dtype=bool),
            n_classes=int(data["n_classes"]))

    # --- the model -------------------------------------------------------------------
    def cumulative_loss(self, state: BBTAState, s: int) -> np.ndarray:
        """L_s: disagreements with the majority vote on exploration tasks + adaptive loss."""
        return state.explore_loss[s] + state.loss[s]

    @staticmethod
    def _explore_loss(state: BBTAState, s: int) -> np.ndarray:
        """Each worker's disagreements with the plain majority vote on s's exploration tasks
        (expected loss under a uniform tie break)."""
        tasks = np.flatnonzero(state.explore & (state.category == s))
        total = np.zeros(state.labels.shape[1])
        if tasks.size:
            lab = state.labels[tasks]
            scores = vote_scores(lab, 1.0, state.n_classes)
            for r, i in enumerate(tasks):
                who = np.flatnonzero(lab[r] >= 0)
                total[who] += expected_zero_one_loss(
                    np.repeat(scores[r:r + 1], who.size, axis=0), lab[r, who])
        return total

    @staticmethod
    def _eta(steps: int, n_workers: int) -> float:
        t = max(int(steps), 1)
        return float(np.sqrt(np.log(n_workers) / (t * n_workers))) if n_workers > 1 else 0.0

    @staticmethod
    def _exp_weights(eta: float, loss: np.ndarray) -> np.ndarray:
        # subtract the smallest loss: only ratios matter, and exp(-eta*L) underflows to 0
        # for every worker once the importance-weighted losses grow large
        return np.exp(-eta * (loss - loss.min())) if loss.size else loss

    def _rescore(self, state: BBTAState, tasks: np.ndarray) -> None:
        if tasks.size == 0:
            return
        w = state.weights[state.category[tasks]]
        scores = vote_scores(state.labels[tasks], w, state.n_classes)
        state.confidence[tasks] = margin(scores, w.sum(axis=1))

    def weights(self, state: BBTAState) -> np.ndarray:
        """Current per-category worker weights, normalised to sum to one per category."""
        return state.weights / state.weights.sum(axis=1, keepdims=True)

    def _exploring(self, state: BBTAState) -> np.ndarray:
        """bool (S,): context s may still take new exploration tasks (fewer than N' so far
        and none of its adaptive steps ran)."""
        n_explore = np.bincount(state.category[state.explore], minlength=state.steps.size)
        return (n_explore < self.params.explore) & (state.steps == 0)

    # --- decisions -------------------------------------------------------------------
    def priority(self, state: BBTAState, tasks: np.ndarray) -> np.ndarray:
        """Lowest confidence first: priority = -|ybar_i|."""
        return -state.confidence[np.asarray(tasks, dtype=np.int64)]

    def select_pair(self, state: BBTAState, mask: np.ndarray,
                    rng: np.random.Generator) -> tuple[int, int] | None:
        open_rows = mask.any(axis=1)
        if not open_rows.any():
            return None
        # 1. pure exploration: finish the exploration tasks in progress, in index order
        busy = np.flatnonzero(state.explore & open_rows)
        if busy.size:
            i = int(busy[0])
            return i, int(np.flatnonzero(mask[i])[0])
        # 2. pure exploration: a random fresh task of a context that needs one
        need = self._exploring(state) if self.params.explore > 0 and \
            (state.steps == 0).any() else np.zeros(0, bool)
        if need.any():
            fresh = open_rows & ~state.explore & ~(state.labels >= 0).any(axis=1)
            for cat in np.flatnonzero(need):
                pool = np.flatnonzero(fresh & (state.category == cat))
                if pool.size:
                    i = int(pool[rng.integers(pool.size)])
                    return i, int(np.flatnonzero(mask[i])[0])
        # 3. adaptive assignment: lowest confidence, worker ~ exp-weights
        rows = np.flatnonzero(open_rows)
        i = int(rows[np.argmin(state.confidence[rows])])
        s = int(state.category[i])
        workers = np.flatnonzero(mask[i])
        eta = self._eta(state.steps[s] + 1, state.labels.shape[1])
        w = self._exp_weights(eta, self.cumulative_loss(state, s)[workers])
        return i, int(workers[rng.choice(workers.size, p=w / w.sum())])

    # --- learning --------------------------------------------------------------------
    def _draw_probability(self, state: BBTAState, i: int, j: int, eta: float,
                          loss_s: np.ndarray, open_: np.ndarray) -> float:
        """p_j of the importance weight: j's share of the weights of the workers who have not
        labelled task i (floored at 1e-12: in a replay the caller's mask can force a worker
        whose weight underflows)."""
        w_open = self._exp_weights(eta, loss_s[open_])
        return max(float(w_open[np.flatnonzero(open_) == j][0] / w_open.sum()), 1e-12)

    @staticmethod
    def _vote_loss(scores: np.ndarray, label: int) -> float:
        """1[yhat != label] for the weighted vote ``scores`` (one row), an exact tie costing
        the expected loss of a uniform tie break (``expected_zero_one_loss``)."""
        top = scores == scores.max()
        return float(1.0 - top[label] / top.sum())

    def update(self, state: BBTAState, obs: Observation) -> np.ndarray:
        if obs.declined or obs.label < 0:
            return np.empty(0, dtype=np.int64)
        i, j, s = obs.task, obs.worker, int(state.category[obs.task])
        row = state.labels[i]
        n_workers = row.size
        context = np.flatnonzero(state.category == s)
        if state.explore[i] or (self.params.explore > 0 and state.steps[s] == 0
                                and self._exploring(state)[s] and not (row >= 0).any()):
            # pure exploration: plain majority vote, losses recomputed from the labels
            state.explore[i] = True
            row[j] = obs.label
            state.explore_loss[s] = self._explore_loss(state, s)
            eta = self._eta(state.steps[s], n_workers)
            state.weights[s] = self._exp_weights(eta, self.cumulative_loss(state, s))
            self._rescore(state, context)
            return context
        open_ = row < 0
        if not open_[j]:  # a repeated label: keep the first, learn nothing
            return np.empty(0, dtype=np.int64)
        state.steps[s] += 1
        eta = self._eta(state.steps[s], n_workers)
        loss_s = self.cumulative_loss(state, s)
        w = self._exp_weights(eta, loss_s)
        p_j = self._draw_probability(state, i, j, eta, loss_s, open_)
        row[j] = obs.label
        scores = vote_scores(row[None, :], w, state.n_classes)[0]
        loss = self._vote_loss(scores, obs.label)
        state.loss[s, j] += loss / p_j
        loss_s[j] += loss / p_j
        state.weights[s] = self._exp_weights(eta, loss_s)
        touched = context if loss > 0 else np.array([i])
        self._rescore(state, touched)
        return touched

    def predict_proba(self, state: BBTAState) -> np.ndarray:
        """Weighted-vote shares with the current per-category weights (uniform if unlabelled)."""
        w = state.weights[state.category]
        return shares(vote_scores(state.labels, w, state.n_classes))
