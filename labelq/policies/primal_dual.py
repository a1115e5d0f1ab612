r"""``primal-dual``: online primal-dual assignment with gold tasks (Ho, Jabbari & Vaughan,
"Adaptive Task Assignment for Crowdsourced Classification", ICML 2013, Algorithm 2).

Model. Worker j answers task i (binary) correctly with probability p_ij, equal within a task
category ("type"). With q_ij = (2p_ij − 1)^2 and C_ε = 2 ln(1/ε), the weighted vote
sign(Σ_j w_ij ℓ_ij), w_ij = 2p_ij − 1, errs with probability ≤ ε once Σ_{j∈J_i} q_ij ≥ C_ε
(Lemma 1). The cheapest such assignment is the LP

.. math:: \min \sum_{ij} y_{ij}\ \text{s.t.}\ \sum_i y_{ij} \le M_j,\
          \sum_j q_{ij} y_{ij} \ge C_\epsilon,\ 0 \le y \le 1,

whose dual gives task weights x_i. The *primal approximation* (Algorithm 1) gives worker j
the tasks with task value v_ij = q_ij x_i − 1 ≥ 0, highest first, at most M_j of them.

Online algorithm, one worker decision at a time (pull mode):

1. *Gold phase.* Every arriving worker first answers ``s`` gold tasks (``Problem.is_gold``)
   of each category; p̂ is the fraction correct per category (paper §5.2), q̂ = (2p̂ − 1)^2.
2. *Sample phase.* The first ``n_sample = round(W γ/(1+γ))`` workers to finish their gold are
   the paper's γm extra workers (W = (1+γ)m workers in all). They only answer gold. When the
   last of them finishes, the sampled LP (their q̂, right-hand side γ'C_ε with
   γ' = n_sample/(W − n_sample)) is solved with HiGHS (:mod:`labelq.policies._lp`) for x̂,
   grouping the interchangeable tasks of a category (an exact reformulation).
3. *Main phase.* Every later worker, after her gold, gets the primal approximation with x̂
   and her own q̂: the eligible non-gold task with the largest v ≥ 0 at each request, until
   she has M_j non-gold labels or no task with v ≥ 0 is eligible (then ``None``: move on).
   q̂_ij is perturbed by additive noise U(0, ``noise``), fixed per (task, worker) by a seed
   kept in the state, as the paper's perturbation assumption asks (§4.3).
4. ``predict_proba``: weighted vote with w = 2p̂ − 1 (the weight at the time of the label),
   reported as softmax(2 · vote) — for p near 1/2, 2(2p−1) ≈ log(p/(1−p)), so this is roughly
   the one-coin posterior; the argmax is the paper's weighted vote. Gold tasks: their answer.

Choices the paper leaves open (ours, not the paper's):

* M_j = ``worker_capacity[j]`` minus the worker's gold labels (−1 = unlimited: every task);
  the paper's M_j excludes gold, so give capacity M_j + s·T to reproduce it.
* C_ε is used as is: the paper's ε' = ε^{1−4t/q̄*_min} correction needs a bound q̄*_min the
  requester supplies; with ε as the knob that sets the label budget this is a reparametrisation.
* An infeasible sampled LP gets elastic slack (see :mod:`labelq.policies._lp`), which is the
  paper's "lower the desired error on tasks that cannot be covered".
* A category with fewer than ``s`` gold tasks asks for all of them; with none, p̂ = ``p0``.
  If a worker's gold cannot be served (no eligible gold among the candidates) she skips on;
  if x̂ does not exist yet she gets the non-gold task with the least weighted evidence.
* Multi-class problems use the same weights, voting for the answered class.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ._lp import solve_sampled_lp
from .base import Observation, Policy, Problem
from .registry import register

__all__ = ["PrimalDual", "PrimalDualState"]

EXPLORING, SAMPLE, MAIN = 0, 1, 2
GOLD_PRIORITY = 1e12  # gold tasks must stay at the top of the live priority index


@dataclass
class PrimalDualState:
    """Explicit state. Per worker j and category c: ``gold_correct[j, c]`` / ``gold_total``;
    ``role[j]`` (0 exploring, 1 sample, 2 main); ``served[j]`` non-gold labels. Per task:
    ``x`` (task weight x̂, 0 until solved), ``votes[i, k]`` weighted votes for class k."""

    task_category: np.ndarray
    is_gold: np.ndarray
    gold_answer: np.ndarray
    capacity: np.ndarray
    gold_needed: np.ndarray  # (S,) gold answers required per category
    gold_correct: np.ndarray
    gold_total: np.ndarray
    role: np.ndarray
    served: np.ndarray
    votes: np.ndarray
    x: np.ndarray
    n_sample: int
    solved: bool = False
    perturb_seed: int = 0


_ARRAYS = {"task_category": np.int64, "is_gold": bool, "gold_answer": np.int64,
           "capacity": np.int64, "gold_needed": np.int64, "gold_correct": np.int64,
           "gold_total": np.int64, "role": np.int64, "served": np.int64, "votes": float,
           "x": float}


@register
class PrimalDual(Policy):
    name = "primal-dual"
    mode = "pull"

    params: Params  # this policy's own (``Policy.params`` is typed Any)

    @dataclass(frozen=True)
    class Params:
        eps: float = 0.1  # target error ε; C_ε = 2 ln(1/ε)
        gamma: float = 0.3  # sampled workers per main worker
        s: int = 20  # gold tasks per category per worker
        noise: float = 1e-6  # perturbation of q̂
        p0: float = 0.75  # p̂ of a category without any gold answer
        penalty: float = 1e4  # price of an uncovered unit in the sampled LP (x̂ cap)

        def __post_init__(self) -> None:
            if not 0.0 < self.eps < 1.0:
                raise ValueError(f"eps must be in (0, 1), got {self.eps}")
            if not 0.0 < self.gamma <= 1.0:
                raise ValueError(f"gamma must be in (0, 1], got {self.gamma}")
            if isinstance(self.s, bool) or not isinstance(self.s, int) or self.s < 1:
                raise ValueError(f"s must be an integer >= 1, got {self.s!r}")
            if not 0.0 <= self.noise < 1e-2:
                raise ValueError(f"noise must be in [0, 0.01), got {self.noise}")
            if not 0.0 <= self.p0 <= 1.0:
                raise ValueError(f"p0 must be in [0, 1], got {self.p0}")
            if not self.penalty > 0:
                raise ValueError(f"penalty must be > 0, got {self.penalty}")

        @property
        def c_eps(self) -> float:
            return 2.0 * float(np.log(1.0 / self.eps))

    # --- state -----------------------------------------------------------------------
    def init_state(self, problem: Problem) -> PrimalDualState:
        n, w, s_cat = problem.n_tasks, problem.n_workers, problem.n_categories
        cat = np.asarray(problem.task_category, dtype=np.int64)
        gold = np.asarray(problem.is_gold, dtype=bool)
        gold_per_cat = np.bincount(cat[gold], minlength=s_cat)[:s_cat]
        g = self.params.gamma
        n_sample = int(min(max(1, round(w * g / (1.0 + g))), max(w - 1, 1)))
        return PrimalDualState(
            task_category=cat.copy(), is_gold=gold.copy(),
            gold_answer=np.asarray(problem.gold_answer, dtype=np.int64).copy(),
            capacity=np.asarray(problem.worker_capacity, dtype=np.int64).copy(),
            gold_needed=np.minimum(gold_per_cat, self.params.s).astype(np.int64),
            gold_correct=np.zeros((w, s_cat), dtype=np.int64),
            gold_total=np.zeros((w, s_cat), dtype=np.int64),
            role=np.zeros(w, dtype=np.int64), served=np.zeros(w, dtype=np.int64),
            votes=np.zeros((n, problem.n_classes)), x=np.zeros(n), n_sample=n_sample)

    def state_to_dict(self, state: PrimalDualState) -> dict[str, Any]:
        out = {k: np.asarray(getattr(state, k)).tolist() for k in _ARRAYS}
        out.update(n_sample=int(state.n_sample), solved=bool(state.solved),
                   perturb_seed=int(state.perturb_seed))
        return out

    def state_from_dict(self, data: dict[str, Any]) -> PrimalDualState:
        arrays = {k: np.asarray(data[k], dtype=t) for k, t in _ARRAYS.items()}
        if arrays["votes"].ndim == 1:  # an empty task list loses its class axis in JSON
            arrays["votes"] = arrays["votes"].reshape(0, 2)
        for k in ("gold_correct", "gold_total"):
            if arrays[k].ndim == 1:
                arrays[k] = arrays[k].reshape(-1, arrays["gold_needed"].size)
        return PrimalDualState(**arrays, n_sample=int(data["n_sample"]),
                               solved=bool(data["solved"]),
                               perturb_seed=int(data["perturb_seed"]))

    # --- skills ------------------------------------------------------------------------
    def p_hat(self, state: PrimalDualState, worker: int) -> np.ndarray:
        """(S,) fraction of gold answered correctly per category (``p0`` without gold)."""
        tot = state.gold_total[worker]
        return np.where(tot > 0, state.gold_correct[worker] / np.maximum(tot, 1),
                        self.params.p0)

    def q_hat(self, state: PrimalDualState, worker: int, tasks: np.ndarray) -> np.ndarray:
        """Perturbed q̂_ij = (2p̂ − 1)^2 + U(0, noise), fixed per (task, worker)."""
        q = (2.0 * self.p_hat(state, worker) - 1.0) ** 2
        noise = np.random.default_rng([state.perturb_seed, worker]).random(state.x.size)
        return q[state.task_category[tasks]] + self.params.noise * noise[tasks]

    def task_values(self, state: PrimalDualState, worker: int,
                    tasks: np.ndarray) -> np.ndarray:
        """v_ij = q̂_ij x̂_i − 1 (paper §4.3)."""
        return self.q_hat(state, worker, tasks) * state.x[tasks] - 1.0

    def plan(self, state: PrimalDualState, worker: int) -> np.ndarray:
        """Algorithm 1 for one worker over every non-gold task: tasks with v ≥ 0, best first,
        at most M_j. With every task eligible, ``select_task`` serves exactly this list."""
        tasks = np.flatnonzero(~state.is_gold)
        v = self.task_values(state, worker, tasks)
        keep = v >= 0
        tasks, v = tasks[keep], v[keep]
        order = np.argsort(-v, kind="stable")
        return tasks[order][: self._remaining(state, worker)]

    def _remaining(self, state: PrimalDualState, worker: int) -> int:
        cap = int(state.capacity[worker])
        if cap < 0:
            return state.x.size
        return max(cap - int(state.gold_total[worker].sum()) - int(state.served[worker]), 0)

    # --- decisions ---------------------------------------------------------------------
    def priority(self, state: PrimalDualState, tasks: np.ndarray) -> np.ndarray:
        """Gold first (every worker starts there), then by task weight x̂."""
        tasks = np.asarray(tasks, dtype=np.int64)
        return np.where(state.is_gold[tasks], GOLD_PRIORITY, state.x[tasks])

    def score(self, state: PrimalDualState, tasks: np.ndarray, worker: int) -> np.ndarray:
        tasks = np.asarray(tasks, dtype=np.int64)
        if not state.solved:
            return np.where(state.is_gold[tasks], GOLD_PRIORITY,
                            -np.abs(state.votes[tasks]).sum(axis=1))
        return np.where(state.is_gold[tasks], GOLD_PRIORITY,
                        self.task_values(state, worker, tasks))

    def select_task(self, state: PrimalDualState, worker: int, candidates: np.ndarray,
                    mask: np.ndarray, rng: np.random.Generator) -> int | None:
        if not mask.any():
            return None
        tasks = np.asarray(candidates, dtype=np.int64)[np.asarray(mask, dtype=bool)]
        gold = state.is_gold[tasks]
        deficit = state.gold_total[worker] < state.gold_needed
        if deficit.any():
            wanted = tasks[gold & deficit[state.task_category[tasks]]]
            if wanted.size:
                return int(wanted[rng.integers(wanted.size)])
        if state.role[worker] == SAMPLE or self._remaining(state, worker) <= 0:
            return None
        tasks = tasks[~gold]
        if tasks.size == 0:
            return None
        if not state.solved:  # no x̂ yet: least weighted evidence first
            return int(tasks[np.argmin(np.abs(state.votes[tasks]).sum(axis=1))])
        v = self.task_values(state, worker, tasks)
        best = int(np.argmax(v))
        return int(tasks[best]) if v[best] >= 0 else None

    # --- learning ----------------------------------------------------------------------
    def update(self, state: PrimalDualState, obs: Observation) -> np.ndarray:
        if obs.declined or obs.label < 0:
            return np.empty(0, dtype=np.int64)
        i, j = int(obs.task), int(obs.worker)
        if state.is_gold[i] or obs.gold:
            truth = obs.truth if obs.truth >= 0 else int(state.gold_answer[i])
            c = int(state.task_category[i])
            state.gold_total[j, c] += 1
            state.gold_correct[j, c] += int(obs.label == truth)
            if state.role[j] == EXPLORING and np.all(state.gold_total[j] >= state.gold_needed):
                return self._finish_gold(state, j, i)
            return np.array([i])
        state.served[j] += 1
        weight = 2.0 * self.p_hat(state, j)[state.task_category[i]] - 1.0
        state.votes[i, obs.label] += weight
        return np.array([i])

    def _finish_gold(self, state: PrimalDualState, worker: int, task: int) -> np.ndarray:
        if state.solved:
            state.role[worker] = MAIN
            return np.array([task])
        state.role[worker] = SAMPLE
        if int((state.role == SAMPLE).sum()) < state.n_sample:
            return np.array([task])
        self.solve(state)
        return np.arange(state.x.size)  # every priority changed

    def solve(self, state: PrimalDualState) -> None:
        """Solve the sampled LP over the sample workers' q̂ and store x̂ (paper §5.1).

        Solved over categories (tasks of a category are interchangeable before any non-gold
        label; see :mod:`labelq.policies._lp`), without the perturbation, which only breaks
        ties in the primal approximation (the paper's footnote 3: its effect is negligible).
        """
        sample = np.flatnonzero(state.role == SAMPLE)
        tasks = np.flatnonzero(~state.is_gold)
        cats = state.task_category[tasks]
        sizes = np.bincount(cats, minlength=state.gold_needed.size)
        present = np.flatnonzero(sizes > 0)
        q = np.zeros((present.size, sample.size))
        for col, j in enumerate(sample):
            q[:, col] = (2.0 * self.p_hat(state, int(j))[present] - 1.0) ** 2
        cap = np.array([self._remaining(state, int(j)) for j in sample], dtype=float)
        n_main = max(state.role.size - state.n_sample, 1)
        cover = state.n_sample / n_main * self.params.c_eps
        x, _ = solve_sampled_lp(q, cap, cover, self.params.penalty, sizes=sizes[present])
        weight = np.zeros(sizes.size)
        weight[present] = x
        state.x = np.zeros(state.x.size)
        state.x[tasks] = weight[cats]
        state.solved = True

    def predict_proba(self, state: PrimalDualState) -> np.ndarray:
        z = 2.0 * state.votes
        z = z - z.max(axis=1, keepdims=True)  # stable softmax
        p = np.exp(z)
        p /= p.sum(axis=1, keepdims=True)
        gold = np.flatnonzero(state.is_gold & (state.gold_answer >= 0))
        p[gold] = 0.0
        p[gold, state.gold_answer[gold]] = 1.0
        return p
