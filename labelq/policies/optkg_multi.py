"""``optkg-multi``: one Opt-KG (with worker reliability) per category, budget shared in
proportion to the categories' task counts — the "OptKG (Multi.)" baseline of Zhang, Ma &
Sugiyama (2015), Section 5.1.

Each category s runs its own instance of Chen, Lin & Zhou's Opt-KG with one-coin workers
(``optkg-workers``; the moment-matching math is ``labelq.policies._beta``): task posteriors
Beta(a_i, b_i) (prior Beta(1, 1)), and *per category* worker posteriors Beta(c_sj, d_sj)
(prior Beta(4, 1), as in both papers), so a worker's reliability is learnt separately on
each category. Class index 1 is the paper's +1. More than two classes: each category's
instance is the Dirichlet version of ``optkg-workers`` (``_dirichlet_workers``: tasks
Dir(alpha_i), the same per-category worker Betas, R+ interpolated on a reliability grid);
the budget split and the choice within a category are unchanged.

Budget split: the paper gives category s the sub-budget T * N_s / N. We do not know T in
advance (any prefix of a run is a budget), so each step goes to the category, among those
with an eligible pair, that has spent the least relative to its share (spent_s / N_s,
lowest index on ties); after any number of steps T every category has spent about
T * N_s / N. Within the category the pair is argmax R+(a_i, b_i, c_sj, d_sj) over eligible
pairs (lowest task, then lowest worker, on ties). R+ is cached per pair; a label on (i, j)
refreshes row i and the category's column j, which are the only entries that change.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import numpy as np
from numpy.typing import ArrayLike

from ..errors import PolicyError
from . import _beta
from ._dirichlet_workers import DirichletWorkerState
from .base import FloatArray, IntArray, Observation, Policy, Problem
from .optkg_workers import masked_argmax
from .registry import register

__all__ = ["OptKGMulti", "MultiKGState"]


def _rewards(a: ArrayLike, b: ArrayLike, c: ArrayLike, d: ArrayLike) -> FloatArray:
    """R+ = max over the two labels of the moment-matched reward (``_beta.worker_rewards``)."""
    r_pos, r_neg = _beta.worker_rewards(a, b, c, d)
    return np.maximum(r_pos, r_neg)


def _min_tail(a: ArrayLike, b: ArrayLike) -> FloatArray:
    """min(I, 1 - I) of Beta(a, b) (``_beta.min_tail``, bit-identical to ``_beta._min_tail``):
    the task's cached term of R+."""
    return _beta.min_tail(a, b)


def _rewards_fast(a: FloatArray | float, b: FloatArray | float, c: FloatArray | float,
                  d: FloatArray | float, lo: FloatArray) -> FloatArray:
    """``_rewards`` with the task term ``lo = _min_tail(a, b)`` given (cached per task) and
    without broadcasting overhead (``_beta.reward_plus``: bit-identical values, checked in
    tests/policies/test_bbta.py)."""
    return _beta.reward_plus(a, b, c, d, lo)


def _argmax_eligible(values: FloatArray, mask: np.ndarray) -> int:
    """``np.argmax(np.where(mask, values, -np.inf))``, reading only the pairs of a sparse
    mask (``optkg_workers.masked_argmax``)."""
    sparse = 8 * np.count_nonzero(mask) < mask.size and mask.shape == values.shape
    return masked_argmax(values, mask, np.flatnonzero(mask) if sparse else None)


@dataclass
class MultiKGState:
    """Tasks Beta(a, b); workers Beta(c[s], d[s]) per category; ``spent[s]`` labels;
    ``reward[i, j]`` cached R+ of pair (i, j) under task i's category; ``lo[i]`` cached
    min(I, 1 - I) of task i (a pure function of a[i], b[i]; rebuilt when absent)."""

    a: FloatArray
    b: FloatArray
    c: FloatArray
    d: FloatArray
    category: IntArray
    spent: FloatArray
    reward: FloatArray
    lo: FloatArray | None = None

    def __post_init__(self) -> None:
        if self.lo is None:
            self.lo = _min_tail(self.a, self.b)


@dataclass
class MultiDirichletState(DirichletWorkerState):
    """C > 2: tasks Dir(alpha), workers Beta(c[s], d[s]) per category, ``spent[s]`` labels."""

    # keyword-only: required, after the parent's defaulted ``pair_cache``
    category: IntArray = field(kw_only=True)
    spent: FloatArray = field(kw_only=True)
    # per category s: (its tasks, their reward grids, r[s], values) of the last
    # ``category_values(s)``; derivable, never serialised
    category_cache: dict[int, tuple[IntArray, FloatArray, FloatArray, FloatArray]] = field(
        default_factory=dict, repr=False, compare=False, kw_only=True)

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "category": self.category.tolist(),
                "spent": self.spent.tolist()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MultiDirichletState:
        base = DirichletWorkerState.from_dict(data)
        return cls(base.alpha, base.c.reshape(len(data["c"]), -1),
                   base.d.reshape(len(data["d"]), -1), base.reward,
                   category=np.asarray(data["category"], dtype=np.int64),
                   spent=np.asarray(data["spent"], dtype=float))

    def reliability(self) -> FloatArray:
        """r[s, j] = c / (c + d), the mean reliabilities the rewards are read at."""
        return self.c / (self.c + self.d)

    def category_values(self, s: int) -> tuple[IntArray, FloatArray]:
        """(tasks of category s, ``values(tasks, reliability()[s])``), recomputing only the
        rows whose reward grid and the columns whose r changed since the last call for s
        (interpolation is elementwise, so the result equals the full one bit for bit)."""
        tasks = np.flatnonzero(self.category == s)
        r = self.c[s] / (self.c[s] + self.d[s])
        reward = self.reward[tasks]
        cache = self.category_cache.get(s)
        if (cache is None or not np.array_equal(cache[0], tasks)
                or cache[3].shape != (tasks.size, r.size)):
            out = self.values(tasks, r)
        else:
            out = cache[3]
            rows = np.flatnonzero((reward != cache[1]).any(axis=1))
            cols = np.flatnonzero(r != cache[2])
            if rows.size:
                out[rows] = self.values(tasks[rows], r)
            if cols.size:
                out[:, cols] = self.values(tasks, r[cols])
        self.category_cache[s] = (tasks, reward, r.copy(), out)
        return tasks, out


MultiState: TypeAlias = "MultiKGState | MultiDirichletState"


@register
class OptKGMulti(Policy):
    name = "optkg-multi"
    mode = "push"

    params: Params  # this policy's own (``Policy.params`` is typed Any)

    @dataclass(frozen=True)
    class Params:
        """``c0``, ``d0``: worker prior Beta(c0, d0); ``max_strength``: cap on c + d."""

        c0: float = 4.0
        d0: float = 1.0
        max_strength: float = 1e6

        def __post_init__(self) -> None:
            for name in ("c0", "d0", "max_strength"):
                v = getattr(self, name)
                if isinstance(v, bool) or not isinstance(v, (int, float)) \
                        or not (math.isfinite(v) and v > 0):
                    raise ValueError(f"{name} must be a number > 0, got {v!r}")
            if not self.max_strength > self.c0 + self.d0:
                raise ValueError(f"max_strength must be > c0 + d0 = {self.c0 + self.d0}, "
                                 f"got {self.max_strength}")

    def init_state(self, problem: Problem) -> MultiState:
        if problem.n_classes < 2:
            raise PolicyError(f"optkg-multi needs at least 2 classes, got {problem.n_classes}",
                              policy=self.name)
        n, k, s = problem.n_tasks, problem.n_workers, max(problem.n_categories, 1)
        p = self.params
        if problem.n_classes > 2:
            base = DirichletWorkerState.fresh(n, problem.n_classes, 1.0, np.full((s, k), p.c0),
                                              np.full((s, k), p.d0))
            return MultiDirichletState(
                base.alpha, base.c, base.d, base.reward,
                category=np.asarray(problem.task_category, dtype=np.int64).copy(),
                spent=np.zeros(s))
        r0 = float(_rewards(1.0, 1.0, p.c0, p.d0)) if n and k else 0.0
        return MultiKGState(np.ones(n), np.ones(n), np.full((s, k), p.c0), np.full((s, k), p.d0),
                            np.asarray(problem.task_category, dtype=np.int64).copy(),
                            np.zeros(s), np.full((n, k), r0))

    def state_to_dict(self, state: MultiState) -> dict[str, Any]:
        if isinstance(state, MultiDirichletState):
            return state.to_dict()
        return super().state_to_dict(state)

    def state_from_dict(self, data: dict[str, Any]) -> MultiState:
        if "alpha" in data:
            return MultiDirichletState.from_dict(data)
        n = len(data["a"])
        return MultiKGState(
            np.asarray(data["a"], dtype=float), np.asarray(data["b"], dtype=float),
            np.asarray(data["c"], dtype=float), np.asarray(data["d"], dtype=float),
            np.asarray(data["category"], dtype=np.int64),
            np.asarray(data["spent"], dtype=float),
            np.asarray(data["reward"], dtype=float).reshape(n, -1),
            np.asarray(data["lo"], dtype=float) if "lo" in data else None)

    # --- decisions -------------------------------------------------------------------
    def priority(self, state: MultiState, tasks: np.ndarray) -> np.ndarray:
        """Best R+ of the task over all workers."""
        tasks = np.asarray(tasks, dtype=np.int64)
        if isinstance(state, MultiDirichletState):
            out = np.zeros(len(tasks))
            r = state.reliability()
            if r.shape[1]:
                for s in np.unique(state.category[tasks]):
                    sel = state.category[tasks] == s
                    out[sel] = state.values(tasks[sel], r[s]).max(axis=1)
            return out
        return state.reward[tasks].max(axis=1) if state.reward.shape[1] else np.zeros(len(tasks))

    def score(self, state: MultiState, tasks: np.ndarray, worker: int) -> np.ndarray:
        if isinstance(state, MultiDirichletState):
            tasks = np.asarray(tasks, dtype=np.int64)
            return state.values_per_task(tasks,
                                         state.reliability()[state.category[tasks], worker])
        return state.reward[np.asarray(tasks, dtype=np.int64), worker]

    def select_pair(self, state: MultiState, mask: np.ndarray,
                    rng: np.random.Generator) -> tuple[int, int] | None:
        open_rows = mask.any(axis=1)
        if not open_rows.any():
            return None
        n_s = np.bincount(state.category, minlength=state.spent.size).astype(float)
        has = np.bincount(state.category[open_rows], minlength=state.spent.size) > 0
        ratio = np.where(has, state.spent / np.maximum(n_s, 1.0), np.inf)
        s = int(np.argmin(ratio))
        # argmax over the eligible pairs of category s. Rows of other categories and closed
        # rows hold -inf only, so the row-major argmax over all rows (no copies of the
        # category's rows) is the one over the category's open rows: lowest task, then
        # lowest worker on ties
        if isinstance(state, MultiDirichletState):
            tasks, reward = state.category_values(s)
            sub = mask if tasks.size == mask.shape[0] else mask[tasks]
            flat = _argmax_eligible(reward, sub)
            return int(tasks[flat // reward.shape[1]]), int(flat % reward.shape[1])
        in_s = state.category == s
        return divmod(_argmax_eligible(state.reward, mask if in_s.all() else mask & in_s[:, None]),
                      state.reward.shape[1])

    # --- learning --------------------------------------------------------------------
    def update(self, state: MultiState, obs: Observation) -> np.ndarray:
        if obs.declined or obs.label < 0:
            return np.empty(0, dtype=np.int64)
        if isinstance(state, MultiDirichletState):
            return self._update_dirichlet(state, obs)
        if obs.label > 1:
            raise PolicyError(f"label {obs.label} out of range for 2 classes", policy=self.name)
        i, j = obs.task, obs.worker
        s = int(state.category[i])
        z = 1.0 if obs.label == 1 else -1.0
        a, b, c, d = (float(v) for v in _beta.worker_update(
            state.a[i], state.b[i], state.c[s, j], state.d[s, j], z))
        if not all(math.isfinite(v) and v > 0 for v in (a, b, c, d)):
            raise PolicyError(f"moment matching failed for task {i}, worker {j}",
                              policy=self.name)
        total = c + d
        if total > self.params.max_strength:  # keep the mean, cap the concentration
            c, d = c * self.params.max_strength / total, d * self.params.max_strength / total
        state.a[i], state.b[i], state.c[s, j], state.d[s, j] = a, b, c, d
        assert state.lo is not None  # filled in by __post_init__
        state.lo[i] = _min_tail(a, b)
        state.spent[s] += 1
        tasks = np.flatnonzero(state.category == s)
        state.reward[tasks, j] = _rewards_fast(state.a[tasks], state.b[tasks], c, d,
                                               state.lo[tasks])
        state.reward[i] = _rewards_fast(a, b, state.c[s], state.d[s], state.lo[i])
        return tasks

    def _update_dirichlet(self, state: MultiDirichletState, obs: Observation) -> np.ndarray:
        """C > 2: the moment-matched update of task i and worker (s, j), as binary."""
        i, j, C = obs.task, obs.worker, state.alpha.shape[1]
        if obs.label >= C:
            raise PolicyError(f"label {obs.label} out of range for {C} classes", policy=self.name)
        s = int(state.category[i])
        try:
            state.learn(i, (s, j), obs.label, self.params.max_strength)
        except ValueError as exc:
            raise PolicyError(f"{exc}, worker {j}", policy=self.name) from None
        state.spent[s] += 1
        return np.flatnonzero(state.category == s)

    def predict_proba(self, state: MultiState) -> FloatArray:
        """[P(theta < 0.5), P(theta >= 0.5)] per task, each from its own betainc;
        C > 2: I_k(alpha)."""
        if isinstance(state, MultiDirichletState):
            return state.proba()
        pos, neg = _beta.prob_positive(state.a, state.b)
        return np.stack([neg, pos], axis=1)
