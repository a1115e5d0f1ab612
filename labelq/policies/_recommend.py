"""Gold-based task recommendation (Kang & Tay), as pure functions over arrays.

Kang, Q. and Tay, W. P., *Task Recommendation in Crowdsourcing Based on Learning Preferences
and Reliabilities*, IEEE Trans. Services Computing (arXiv:1807.10444).

Model. One worker, K task categories. A task of category k recommended to the worker is
accepted with probability q_k (``A ~ Bern(q_k)``) and, if accepted, answered correctly with
probability p_k (``X ~ Bern(p_k)``). Only gold tasks reveal correctness, so ``Y = A X`` is
observed only on gold. The platform estimates q_k p_k by

    Ȳ_k = (1 / T_k) Σ_{gold tasks recommended in k} A X            (eq. 12)

where T_k counts gold tasks *recommended* (a declined gold counts, with Y = 0), and g_k counts
gold tasks *completed*. A completed non-gold task of category k earns (p_k − β σ²_k / g_k)+,
σ²_k = p_k (1 − p_k) (eq. 3); gold tasks earn nothing. Regret R(n) = n q* p* − r(n) (eq. 5).

Strategies (all start with one gold per category, the paper's calibration, except ε-first):

* ``gr`` (Algorithm 1): epochs r = K+1, K+2, ...; epoch r is one gold task then
  τ(r) − τ(r−1) non-gold tasks, all of one category c_r chosen ε_r-greedily at the gold:
  argmax_k Ȳ_k with probability 1 − ε_r, uniform otherwise, ε_r = min(1, cK / (d² r)).
* ``ur`` (Algorithm 2, "UR(γ)"): epoch r ≥ 2 is one gold per category, then τ(r) − τ(r−1)
  non-gold tasks of argmax_k Ȳ_k.
* ``eps-first`` (Algorithm 3): H = ⌊√n⌋ gold tasks per category for a known horizon n, then
  only non-gold tasks of argmax_k Ȳ_k.

τ(r) = ⌈α r^γ⌉ (γ = 2 in the paper's GR and UR).

Shape. Every array has a leading *row* axis: rows are independent workers (the registered
policies, one row per worker) or independent trials (the vectorised experiment), so both use
this one implementation. :func:`recommend` says what to give next; :func:`observe` applies
what happened, in place. The schedule position lives in the state and advances only on
observations, so a recommendation that is never answered changes nothing; which category an
epoch exploits is fixed by the first task answered in it (the gold for GR, the first non-gold
for UR and ε-first).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np

__all__ = ["STRATEGIES", "CLOCKS", "exploration", "RecommenderParams", "RecommenderState", "epoch_end", "init_state",
           "y_bar", "acceptance", "reliability", "reward", "recommend", "observe"]

STRATEGIES = ("gr", "ur", "eps-first")
CLOCKS = ("epoch", "step")
_FOREVER = 2 ** 62  # ε-first exploits without end once exploration is over


@dataclass(frozen=True)
class RecommenderParams:
    """Settings of one strategy; defaults are the paper's simulation values."""

    strategy: str = "gr"
    alpha: float = 0.1  # τ(r) = ⌈α r^γ⌉
    gamma: float = 2.0
    c: float = 0.05  # GR exploration: ε_r = min(1, cK / (d² r))
    d: float = 0.1
    clock: str = "epoch"  # GR: r in ε_r counts epochs (the paper's text) or time steps
    horizon: int = 1000  # ε-first only: n, the number of recommendations planned

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGIES:
            raise ValueError(f"strategy must be one of {', '.join(STRATEGIES)}, "
                             f"got {self.strategy!r}")
        if self.clock not in CLOCKS:
            raise ValueError(f"clock must be one of {', '.join(CLOCKS)}, got {self.clock!r}")
        for name in ("alpha", "c", "d"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and np.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
        if not (isinstance(self.gamma, (int, float)) and 1 <= self.gamma <= 20):
            raise ValueError(f"gamma must be in [1, 20], got {self.gamma!r}")
        if isinstance(self.horizon, bool) or not isinstance(self.horizon, int) \
                or self.horizon < 1:
            raise ValueError(f"horizon must be an integer >= 1, got {self.horizon!r}")


@dataclass
class RecommenderState:
    """Per-row learning and schedule state (R rows, K categories)."""

    gold_shown: np.ndarray  # int (R, K): T_k, gold tasks recommended and answered or declined
    gold_done: np.ndarray  # int (R, K): g_k, gold tasks completed
    gold_correct: np.ndarray  # int (R, K): completed gold tasks answered correctly (Σ A X)
    epoch: np.ndarray  # int (R,): current epoch r
    gold_owed: np.ndarray  # int (R, K): gold tasks still due per category in this epoch
    free_gold: np.ndarray  # bool (R,): GR: the epoch's gold (category chosen ε-greedily) is due
    task_left: np.ndarray  # int (R,): non-gold tasks left in this epoch
    arm: np.ndarray  # int (R,): category exploited in this epoch, -1 = not fixed yet

    def rows(self, index: slice) -> RecommenderState:
        """A view on some rows; :func:`observe` on it writes through to this state."""
        return RecommenderState(**{f.name: getattr(self, f.name)[index] for f in fields(self)})

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name).tolist() for f in fields(self)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RecommenderState:
        return cls(**{f.name: np.asarray(data[f.name], dtype=bool if f.name == "free_gold"
                                         else np.int64) for f in fields(cls)})


def epoch_end(r: np.ndarray | int, alpha: float, gamma: float) -> np.ndarray:
    """τ(r) = ⌈α r^γ⌉ with τ(0) = 0, as int64 (capped at 2^62).

    The 1e-9 guard keeps exact products exact: 0.1 * 10**2 is 10.000000000000002 in floating
    point, whose ceiling would wrongly be 11.
    """
    value = alpha * np.power(np.asarray(r, dtype=float), gamma)
    return np.ceil(np.minimum(value, float(_FOREVER)) - 1e-9).astype(np.int64).clip(0)


def init_state(params: RecommenderParams, n_rows: int, n_categories: int) -> RecommenderState:
    """Fresh state: the calibration golds (or ε-first's exploration golds) are due."""
    zeros = np.zeros((n_rows, n_categories), dtype=np.int64)
    if params.strategy == "eps-first":
        owed, epoch = int(np.floor(np.sqrt(params.horizon))), 0
    else:  # one calibration gold per category; GR numbers those epochs 1..K
        owed, epoch = 1, (n_categories if params.strategy == "gr" else 1)
    return RecommenderState(
        gold_shown=zeros.copy(), gold_done=zeros.copy(), gold_correct=zeros.copy(),
        epoch=np.full(n_rows, epoch, dtype=np.int64),
        gold_owed=np.full((n_rows, n_categories), max(owed, 1), dtype=np.int64),
        free_gold=np.zeros(n_rows, dtype=bool),
        task_left=np.zeros(n_rows, dtype=np.int64),
        arm=np.full(n_rows, -1, dtype=np.int64),
    )


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    return np.divide(num, den, out=np.zeros(num.shape, dtype=float), where=den > 0)


def y_bar(state: RecommenderState) -> np.ndarray:
    """Ȳ_k, the estimate of q_k p_k (0 where no gold was recommended yet)."""
    return _ratio(state.gold_correct, state.gold_shown)


def acceptance(state: RecommenderState) -> np.ndarray:
    """q̂_k: share of recommended gold tasks the worker accepted."""
    return _ratio(state.gold_done, state.gold_shown)


def reliability(state: RecommenderState) -> np.ndarray:
    """p̂_k: share of completed gold tasks answered correctly."""
    return _ratio(state.gold_correct, state.gold_done)


def reward(p: np.ndarray, q: np.ndarray, g: np.ndarray, beta: float) -> np.ndarray:
    """Expected reward of recommending a non-gold task: q (p − β p(1−p) / g)+ (eq. 4).

    With g = 0 completed gold tasks the estimator has infinite variance: the reward is 0.
    """
    p, q, g = np.asarray(p, float), np.asarray(q, float), np.asarray(g, float)
    penalty = np.divide(beta * p * (1 - p), g, out=np.full(np.broadcast(p, g).shape, np.inf),
                        where=g > 0)
    return q * np.maximum(p - penalty, 0.0)


def _argmax_random_ties(values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Row-wise argmax, ties broken uniformly (a fixed lowest-index rule would favour
    category 0, the best one in every setting of the paper)."""
    top = values == values.max(axis=1, keepdims=True)
    return np.argmax(np.where(top, rng.random(values.shape), -1.0), axis=1)


def exploration(params: RecommenderParams, epoch: np.ndarray, k: int) -> np.ndarray:
    """GR's ε_r = min(1, cK / (d² r)) at the gold task of epoch ``epoch``.

    ``clock="epoch"`` (default, Algorithm 1 as printed): r is the epoch index, so with the
    paper's c = 0.05, d = 0.1 ε_r stays 1 until epoch 5K. ``clock="step"``: r is the time step
    of that gold task, r − 1 + τ(r − 1) − τ(K) + 1 (K calibration golds, then each epoch's gold
    and its τ(j) − τ(j−1) tasks), an alternative reading under which the paper's
    GR-below-UR ordering appears (docs/reproductions/gold-recommendation.md); it is not what
    the text says.
    """
    r = np.maximum(np.asarray(epoch, dtype=np.int64), 1)
    if params.clock == "step":
        r = r + epoch_end(r - 1, params.alpha, params.gamma) - epoch_end(k, params.alpha,
                                                                         params.gamma)
        r = np.maximum(r, 1)
    return np.minimum(1.0, params.c * k / (params.d ** 2 * r))


def recommend(params: RecommenderParams, state: RecommenderState,
              rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """What each row should be given next: (category int (R,), gold bool (R,)).

    Owed golds come first (lowest category first); then GR's epoch gold, whose category is
    argmax Ȳ with probability 1 − ε_r and uniform otherwise; then non-gold tasks of the
    epoch's category (argmax Ȳ until the first one is answered).
    """
    n_rows, k = state.gold_owed.shape
    owed = state.gold_owed > 0
    has_owed = owed.any(axis=1)
    best = _argmax_random_ties(y_bar(state), rng)
    eps = exploration(params, state.epoch, k)
    explore = rng.random(n_rows) < eps
    gold_category = np.where(explore, rng.integers(k, size=n_rows), best)
    task_category = np.where(state.arm >= 0, state.arm, best)
    category = np.where(has_owed, np.argmax(owed, axis=1),
                        np.where(state.free_gold, gold_category, task_category))
    return category.astype(np.int64), has_owed | state.free_gold


def observe(params: RecommenderParams, state: RecommenderState, category: np.ndarray,
            gold: np.ndarray, accepted: np.ndarray, correct: np.ndarray) -> None:
    """Apply one answered-or-declined task per row, in place.

    ``correct`` matters only for accepted gold tasks. A task that does not fit the schedule
    (e.g. the live pool had no gold of the wanted category) still updates the estimates but
    does not advance the schedule.
    """
    category = np.asarray(category, dtype=np.int64)
    gold, accepted = np.asarray(gold, dtype=bool), np.asarray(accepted, dtype=bool)
    correct = np.asarray(correct, dtype=bool) & accepted & gold
    rows = np.arange(category.size)
    state.gold_shown[rows[gold], category[gold]] += 1
    state.gold_done[rows[gold & accepted], category[gold & accepted]] += 1
    state.gold_correct[rows[correct], category[correct]] += 1

    owed_hit = gold & (state.gold_owed[rows, category] > 0)
    state.gold_owed[rows[owed_hit], category[owed_hit]] -= 1
    free_hit = gold & ~owed_hit & state.free_gold
    state.free_gold[free_hit] = False
    state.arm[free_hit] = category[free_hit]
    task_hit = ~gold & (state.task_left > 0)
    state.task_left[task_hit] -= 1
    first = task_hit & (state.arm < 0)
    state.arm[first] = category[first]
    # an epoch may have zero non-gold steps (τ(r) = τ(r−1)); loop until every row has work
    done = (state.gold_owed.sum(axis=1) == 0) & ~state.free_gold & (state.task_left == 0)
    while done.any():
        _start_epoch(params, state, done)
        done = (state.gold_owed.sum(axis=1) == 0) & ~state.free_gold & (state.task_left == 0)


def _start_epoch(params: RecommenderParams, state: RecommenderState, rows: np.ndarray) -> None:
    state.epoch[rows] += 1
    r = state.epoch[rows]
    state.arm[rows] = -1
    if params.strategy == "eps-first":
        state.task_left[rows] = _FOREVER
        return
    state.task_left[rows] = (epoch_end(r, params.alpha, params.gamma)
                             - epoch_end(r - 1, params.alpha, params.gamma))
    if params.strategy == "gr":
        state.free_gold[rows] = True
    else:
        state.gold_owed[rows] = 1
