"""The policy contract: pure functions over explicit, serialisable state.

A policy never does I/O. The simulator and the live pipeline each build the same inputs:

* :class:`Problem` — what is fixed for a project (tasks, categories, classes, workers' costs
  and capacities, budget, label cap, gold answers). Arrays are indexed by *dense* task and
  worker indices ``0..n-1``; the edges map external ids to indices.
* a state object returned by ``init_state(problem)``; the policy owns its shape, and
  ``state_to_dict`` / ``state_from_dict`` turn it into JSON-able data (numpy arrays become
  lists) so the live pipeline can keep it in Redis and rebuild it from SQL.
* :class:`Observation` — one label (or a decline) arriving.
* eligibility, given per call: a boolean mask over candidate tasks (pull mode) or a boolean
  (tasks x workers) mask (push mode). The caller has already removed ineligible choices
  (label cap reached — gold exempt —, worker already labelled the task, budget or capacity
  exhausted, data not available in a replay). A policy must pick only where the mask is True
  and return ``None`` when nothing is.

Two decisions:

* ``select_task(state, worker, candidates, mask, rng) -> task | None`` (pull: a worker asks).
  ``candidates`` is an int array of task indices, ``mask`` a bool array over it. The simulator
  passes all tasks; the live path passes the top of its priority index, which is why a policy
  also exposes ``priority``.
* ``select_pair(state, mask, rng) -> (task, worker) | None`` (push: the policy chooses both).

``priority(state, tasks) -> float array`` is a worker-independent index (higher = ask
sooner). The live pipeline keeps tasks ordered by it (a Redis sorted set) and refreshes only
the tasks ``update`` reports as touched, so no decision scans all tasks.

``update(state, obs) -> touched task indices`` applies one observation in place.
``predict_proba(state) -> (n_tasks, n_classes)`` is the policy's own posterior over labels.

Randomness always comes from the ``rng`` (``numpy.random.Generator``) passed in.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

__all__ = ["Problem", "Observation", "Policy", "argmax_tiebreak", "FloatArray", "IntArray",
           "BoolArray"]

# the array types the policies pass around
FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


@dataclass
class Problem:
    """Fixed facts about a labeling problem, with dense indices."""

    n_tasks: int
    n_workers: int
    n_classes: int = 2
    task_category: np.ndarray | None = None  # int (n_tasks,), 0..n_categories-1
    n_categories: int = 1
    worker_cost: np.ndarray | None = None  # float (n_workers,)
    worker_capacity: np.ndarray | None = None  # int (n_workers,); -1 = unlimited
    budget: float = float("inf")
    max_labels_per_task: int | None = None
    is_gold: np.ndarray | None = None  # bool (n_tasks,)
    gold_answer: np.ndarray | None = None  # int (n_tasks,), -1 where not gold
    # models' predictions (issue 42): source name -> float (n_tasks, n_classes), a row of
    # NaN where that model gave none; a policy that uses them (``auto``) reads them here
    predictions: Mapping[str, np.ndarray] | None = None

    def __post_init__(self) -> None:
        if self.task_category is None:
            self.task_category = np.zeros(self.n_tasks, dtype=np.int64)
        if self.worker_cost is None:
            self.worker_cost = np.ones(self.n_workers, dtype=float)
        if self.worker_capacity is None:
            self.worker_capacity = np.full(self.n_workers, -1, dtype=np.int64)
        if self.is_gold is None:
            self.is_gold = np.zeros(self.n_tasks, dtype=bool)
        if self.gold_answer is None:
            self.gold_answer = np.full(self.n_tasks, -1, dtype=np.int64)


@dataclass(frozen=True)
class Observation:
    """One event: worker ``worker`` answered ``label`` (class index) on task ``task``.

    ``declined`` marks a declined assignment (``label`` is then -1). ``gold`` is True when
    the task is a gold question; ``truth`` carries its known answer (class index) then.
    ``suggested``: the label was given while the labeling page showed the model's answer
    (``label.suggested``, issue 42); a policy that weighs models' predictions (``auto``)
    treats such a label that agrees with the model as not independent of it
    (docs/models.md, "Independence"); the others ignore it.
    """

    task: int
    worker: int
    label: int
    gold: bool = False
    truth: int = -1
    declined: bool = False
    suggested: bool = False


def argmax_tiebreak(scores: np.ndarray, rng: np.random.Generator | None = None) -> int:
    """Index of the largest score; lowest index on ties, or a uniform tie among the best
    when ``rng`` is given. ``scores`` must be non-empty; -inf marks excluded entries."""
    if rng is None:
        return int(np.argmax(scores))
    best = np.flatnonzero(scores == scores.max())
    return int(best[rng.integers(len(best))]) if len(best) > 1 else int(best[0])


class Policy:
    """Base class. Subclasses set ``name``, ``Params`` and ``mode``; see the module docstring.

    ``mode`` is "pull" when the policy is naturally a per-worker task choice (any worker asks),
    "push" when it chooses the worker too (B-KUBE, BBTA). Every policy implements both
    decisions: the defaults below derive one from the other.
    """

    name: ClassVar[str] = ""
    mode: ClassVar[str] = "pull"
    # True when decisions depend on ``problem.budget`` (the total budget): the simulator then
    # runs the policy once per budget instead of once to the largest budget.
    budget_aware: ClassVar[bool] = False
    # the layout of the policy's state: a policy raises it when it adds or changes a field
    # of its state, so that a snapshot or a saved state (labelq.live.hotstate, .saved)
    # written under another layout is refused and the state folded again from the labels,
    # never read as if it were this one
    state_version: ClassVar[int] = 1

    @dataclass(frozen=True)
    class Params:
        pass

    def __init__(self, params: Any = None) -> None:
        # a subclass's own Params (each policy declares its fields). Typed Any here, since
        # the subclasses' Params are unrelated dataclasses; each policy that has parameters
        # narrows it with a class-level ``params: Params`` so its reads are checked
        self.params: Any = params if params is not None else self.Params()

    # --- state -----------------------------------------------------------------------
    def init_state(self, problem: Problem) -> Any:
        raise NotImplementedError

    def state_to_dict(self, state: Any) -> dict[str, Any]:
        return {k: (v.tolist() if isinstance(v, np.ndarray) else v)
                for k, v in vars(state).items()}

    def state_from_dict(self, data: dict[str, Any]) -> Any:
        raise NotImplementedError

    # --- decisions ---------------------------------------------------------------------
    def priority(self, state: Any, tasks: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def score(self, state: Any, tasks: np.ndarray, worker: int) -> np.ndarray:
        """Worker-specific score of candidate tasks; defaults to ``priority``."""
        return self.priority(state, tasks)

    def select_task(self, state: Any, worker: int, candidates: np.ndarray, mask: np.ndarray,
                    rng: np.random.Generator) -> int | None:
        if not mask.any():
            return None
        tasks = candidates[mask]
        scores = self.score(state, tasks, worker)
        return int(tasks[argmax_tiebreak(scores, rng if self.random_ties else None)])

    def select_pair(self, state: Any, mask: np.ndarray,
                    rng: np.random.Generator) -> tuple[int, int] | None:
        """Default push decision: best (task, worker) by ``score`` over the mask."""
        if not mask.any():
            return None
        best: tuple[float, int, int] | None = None
        all_tasks = np.arange(mask.shape[0])
        for worker in np.flatnonzero(mask.any(axis=0)):
            task = self.select_task(state, int(worker), all_tasks, mask[:, worker], rng)
            if task is None:
                continue
            value = float(self.score(state, np.array([task]), int(worker))[0])
            if best is None or value > best[0]:
                best = (value, task, int(worker))
        return None if best is None else (best[1], best[2])

    # break score ties at random with the rng passed in (a class default; a policy may set
    # it per instance from its Params)
    random_ties: bool = False

    # --- learning ----------------------------------------------------------------------
    def update(self, state: Any, obs: Observation) -> np.ndarray:
        raise NotImplementedError

    def predict_proba(self, state: Any) -> np.ndarray:
        raise NotImplementedError
