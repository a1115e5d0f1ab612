"""Knowledge-gradient policies with identical workers: ``optkg``, ``kg``, ``kg-random``, ``cvar``.

Chen, Lin & Zhou, "Optimistic Knowledge Gradient Policy for Optimal Budget Allocation in
Crowdsourcing", ICML 2013. Each task i has a posterior over its class probabilities:

* binary (``problem.n_classes == 2``): Beta(a_i, b_i), prior Beta(1, 1); **class index 1 is
  the paper's +1** (a counts class-1 labels), class index 0 is -1 (b counts them);
* multi-class (``n_classes > 2``): Dirichlet(alpha_i), prior all ones (Section 5).

Both are stored as ``alpha`` (n_tasks, n_classes) pseudo-counts, so for C = 2
``alpha[:, 1] = a`` and ``alpha[:, 0] = b``; Beta math is used for C = 2 and Dirichlet
quadrature for C > 2 (the two agree for C = 2). R[i, k] is the change of the expected
accuracy h(I) if the next label of task i is class k (eqs. 9-10), p[i, k] = alpha_ik / sum.

* ``optkg``: argmax_i max_k R[i, k] (Algorithm 1; optimistic outcome, consistent, Thm 3.2);
* ``kg``: argmax_i sum_k p[i, k] R[i, k] (eq. 12), lowest index on ties (deterministic KG,
  inconsistent by Proposition 3.1); ``kg-random``: the same with a random tie break;
* ``cvar:alpha=A``: CVaR_A of the reward, max sum_k q_k R_k over 0 <= q_k <= p_k / A,
  sum q = 1 (A = 1 is KG, A -> 0 is Opt-KG).

All workers are treated as perfectly reliable, so a decision is worker-independent:
``score == priority``. Gold observations and declines leave the state unchanged (a gold
answer says nothing about an identical-worker posterior of another task). Output: the Bayes
rule of Proposition 2.1/Corollary 2.2, positive set {a >= b}; ``predict_proba`` gives
[1 - I, I] (both from their own betainc) and I_k(alpha) for C > 2.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from ..errors import PolicyError
from . import _beta, _dirichlet
from .base import FloatArray, Observation, Policy, Problem, argmax_tiebreak
from .registry import register

__all__ = ["KGState", "OptKG", "KG", "KGRandom", "CVaR", "reward_matrix", "positive_number"]


def positive_number(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name} must be a number, got {value!r}")
    value = float(value)
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be > 0, got {value}")
    return value


@dataclass
class KGState:
    """``alpha[i, k]``: pseudo-count of class k on task i (binary: [b, a])."""

    alpha: FloatArray  # float (n_tasks, n_classes)


def reward_matrix(alpha: np.ndarray) -> np.ndarray:
    """R (n, C) for rows of pseudo-counts; each distinct state is computed once."""
    alpha = np.asarray(alpha, dtype=float)
    n, C = alpha.shape
    if n == 0:
        return np.empty((0, C))
    if n > 8:  # integer states repeat a lot: compute every distinct row once
        uniq, inverse = np.unique(alpha, axis=0, return_inverse=True)
        if len(uniq) < n:
            return reward_matrix(uniq)[inverse.reshape(-1)]
    if C == 2:
        r1, r2 = _beta.label_rewards(alpha[:, 1], alpha[:, 0])
        return np.stack([r2, r1], axis=1)
    return _dirichlet_rewards_cached(alpha)


_DIRICHLET_CACHE: dict[bytes, np.ndarray] = {}
_DIRICHLET_CACHE_SIZE = 200_000


def _dirichlet_rewards_cached(alpha: np.ndarray) -> np.ndarray:
    """Dirichlet rewards memoised by state (a pure function; quadrature costs ~1 ms a row)."""
    keys = [row.tobytes() for row in alpha]
    known = {key: _DIRICHLET_CACHE[key] for key in keys if key in _DIRICHLET_CACHE}
    missing = [k for k, key in enumerate(keys) if key not in known]
    if missing:
        if len(_DIRICHLET_CACHE) + len(missing) > _DIRICHLET_CACHE_SIZE:
            _DIRICHLET_CACHE.clear()
        for k, row in zip(missing, _dirichlet.label_rewards(alpha[missing]), strict=True):
            known[keys[k]] = _DIRICHLET_CACHE[keys[k]] = row
    return np.stack([known[key] for key in keys])


class _PriorParams(Protocol):
    """What ``_KnowledgeGradient`` reads of its subclasses' Params."""

    @property
    def prior(self) -> float: ...


class _KnowledgeGradient(Policy):
    """Shared machinery; subclasses define ``_combine(alpha, R) -> scores``."""

    mode = "pull"

    # this class's Params or a subclass's own (``CVaR.Params``): each has ``prior``
    params: _PriorParams

    @dataclass(frozen=True)
    class Params:
        """``prior``: the symmetric prior pseudo-count per class (1 = uniform prior)."""

        prior: float = 1.0

        def __post_init__(self) -> None:
            object.__setattr__(self, "prior", positive_number("prior", self.prior))

    # --- state ---------------------------------------------------------------------
    def init_state(self, problem: Problem) -> KGState:
        if problem.n_classes < 2:
            raise PolicyError(f"{self.name} needs at least 2 classes, got {problem.n_classes}",
                              policy=self.name)
        return KGState(np.full((problem.n_tasks, problem.n_classes), self.params.prior))

    def state_to_dict(self, state: KGState) -> dict[str, Any]:
        return {"n_classes": int(state.alpha.shape[1]), "alpha": state.alpha.tolist()}

    def state_from_dict(self, data: dict[str, Any]) -> KGState:
        alpha = np.asarray(data["alpha"], dtype=float).reshape(-1, int(data["n_classes"]))
        return KGState(alpha)

    # --- decisions -------------------------------------------------------------------
    def _combine(self, alpha: np.ndarray, rewards: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _scores(self, alpha: np.ndarray) -> np.ndarray:
        return self._combine(alpha, reward_matrix(alpha))

    def priority(self, state: KGState, tasks: np.ndarray) -> np.ndarray:
        return self._scores(state.alpha[np.asarray(tasks, dtype=np.int64)])

    def select_pair(self, state: KGState, mask: np.ndarray,
                    rng: np.random.Generator) -> tuple[int, int] | None:
        """Best task by ``priority`` among tasks some worker may take; then the lowest-index
        eligible worker (a random one when ties are random): workers are identical here."""
        tasks = np.flatnonzero(mask.any(axis=1))
        if len(tasks) == 0:
            return None
        ties = rng if self.random_ties else None
        task = int(tasks[argmax_tiebreak(self.priority(state, tasks), ties)])
        workers = np.flatnonzero(mask[task])
        worker = workers[rng.integers(len(workers))] if ties is not None else workers[0]
        return task, int(worker)

    # --- learning --------------------------------------------------------------------
    def update(self, state: KGState, obs: Observation) -> np.ndarray:
        if obs.declined or obs.label < 0 or obs.gold:
            return np.empty(0, dtype=np.int64)
        if obs.label >= state.alpha.shape[1]:
            raise PolicyError(f"label {obs.label} out of range for "
                              f"{state.alpha.shape[1]} classes", policy=self.name)
        state.alpha[obs.task, obs.label] += 1.0
        return np.array([obs.task], dtype=np.int64)

    def predict_proba(self, state: KGState) -> np.ndarray:
        """Binary: [P(theta < 0.5), P(theta >= 0.5)]; C > 2: I_k = P(theta_k is largest)."""
        alpha = state.alpha
        if alpha.shape[1] == 2:
            i, j = _beta.prob_positive(alpha[:, 1], alpha[:, 0])
            return np.stack([j, i], axis=1)
        if len(alpha) == 0:
            return np.empty((0, alpha.shape[1]))
        uniq, inverse = np.unique(alpha, axis=0, return_inverse=True)
        proba = _dirichlet.prob_largest(uniq)[inverse.reshape(-1)]
        return proba / proba.sum(axis=1, keepdims=True)

    def predict(self, state: KGState) -> np.ndarray:
        """The paper's output: class 1 iff a >= b (ties to +1); C > 2: argmax I_k."""
        alpha = state.alpha
        if alpha.shape[1] == 2:
            return (alpha[:, 1] >= alpha[:, 0]).astype(np.int64)
        return np.argmax(self.predict_proba(state), axis=1)


@register
class OptKG(_KnowledgeGradient):
    """Optimistic KG: R+ = max_k R_k (Algorithm 1). Lowest task index on ties."""

    name = "optkg"

    def _combine(self, alpha: np.ndarray, rewards: np.ndarray) -> np.ndarray:
        return rewards.max(axis=1) if len(rewards) else np.empty(0)


@register
class KG(_KnowledgeGradient):
    """Deterministic KG: expected reward sum_k p_k R_k (eq. 12), lowest index on ties.

    Binary rewards use the closed form (exactly 0 when |a - b| >= 1), so the ties that make
    deterministic KG inconsistent (Proposition 3.1) are exact ties, as in the paper.
    """

    name = "kg"

    def _scores(self, alpha: np.ndarray) -> np.ndarray:
        if alpha.shape[1] == 2:
            return _beta.kg_reward(alpha[:, 1], alpha[:, 0]) if len(alpha) else np.empty(0)
        return super()._scores(alpha)

    def _combine(self, alpha: np.ndarray, rewards: np.ndarray) -> np.ndarray:
        p = alpha / alpha.sum(axis=1, keepdims=True)
        return (p * rewards).sum(axis=1)


@register
class KGRandom(KG):
    """Randomized KG: KG with a uniform random tie break (the paper's "KG(Random)")."""

    name = "kg-random"
    random_ties = True


@register
class CVaR(_KnowledgeGradient):
    """CVaR_alpha of the one-step reward (Section 3.2, Rockafellar & Uryasev 2002).

    max_q sum_k q_k R_k s.t. 0 <= q_k <= p_k / alpha, sum_k q_k = 1: filled greedily, best
    reward first, up to its cap. alpha = 1 is exactly ``kg``; alpha -> 0 tends to ``optkg``.
    """

    name = "cvar"

    params: Params  # this policy's own (``Policy.params`` is typed Any)

    @dataclass(frozen=True)
    class Params:
        """``alpha`` in (0, 1]: the risk level; ``prior`` as for ``optkg``."""

        alpha: float = 0.5
        prior: float = 1.0

        def __post_init__(self) -> None:
            alpha = self.alpha
            if isinstance(alpha, bool) or not isinstance(alpha, (int, float)):
                raise ValueError(f"alpha must be a number in (0, 1], got {alpha!r}")
            if not (0.0 < float(alpha) <= 1.0):
                raise ValueError(f"alpha must be in (0, 1], got {alpha}")
            object.__setattr__(self, "alpha", float(alpha))
            object.__setattr__(self, "prior", positive_number("prior", self.prior))

    def _scores(self, alpha: np.ndarray) -> np.ndarray:
        if self.params.alpha == 1.0 and alpha.shape[1] == 2:
            return _beta.kg_reward(alpha[:, 1], alpha[:, 0]) if len(alpha) else np.empty(0)
        return super()._scores(alpha)

    def _combine(self, alpha: np.ndarray, rewards: np.ndarray) -> np.ndarray:
        if len(rewards) == 0:
            return np.empty(0)
        p = alpha / alpha.sum(axis=1, keepdims=True)
        order = np.argsort(-rewards, axis=1, kind="stable")
        r = np.take_along_axis(rewards, order, axis=1)
        caps = np.take_along_axis(p, order, axis=1) / self.params.alpha
        before = np.cumsum(caps, axis=1) - caps
        q = np.clip(np.minimum(caps, 1.0 - before), 0.0, None)
        return (q * r).sum(axis=1)
