"""What a simulated labelling run asks questions of: an :class:`Environment`.

An environment fixes the tasks (truth, category, and optionally a per-task class
distribution ``theta``), the workers (cost, capacity) and which (task, worker) pairs can be
asked at all (``available``). It answers one question at a time with :meth:`answer`.

Two kinds exist:

* synthetic (:mod:`labelq.simulate.synthetic`): answers are drawn from a
  :class:`~labelq.simulate.workers.WorkerPool`. With ``theta`` set (the Opt-KG setting) a
  label is drawn in two steps: a latent class ``y' ~ Categorical(theta_i)`` (for two classes,
  +1 with probability θ_i), then the worker's answer through its confusion matrix for ``y'``.
  For a one-coin worker of accuracy ρ this gives P(+1) = θρ + (1−θ)(1−ρ), the paper's model.
  Without ``theta`` the worker answers about the true class directly.
* replay (:mod:`labelq.simulate.replay`): answers are the recorded labels of a real data
  set; only recorded pairs are available and each is used once (the runner never asks a
  pair twice).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..policies.base import BoolArray, FloatArray, IntArray, Problem
from .workers import WorkerPool

__all__ = ["Environment"]


@dataclass
class Environment:
    # (the Optional fields cost, capacity and gold are filled in by __post_init__)
    truth: IntArray  # (n_tasks,), -1 where unknown
    n_workers: int
    n_classes: int
    task_category: IntArray  # (n_tasks,)
    n_categories: int = 1
    worker_cost: FloatArray | None = None  # (n_workers,)
    worker_capacity: IntArray | None = None  # (n_workers,), -1 = unlimited
    is_gold: BoolArray | None = None  # (n_tasks,): truth revealed to the policy
    pool: WorkerPool | None = None  # synthetic answers
    theta: FloatArray | None = None  # (n_tasks, n_classes), optional latent labels
    recorded: IntArray | None = None  # (n_tasks, n_workers), -1 = not recorded
    name: str = ""
    # a model's predictions available from the start (issue 42): source name -> float
    # (n_tasks, n_classes), NaN rows where it gave none; free, not labels of the budget
    predictions: dict[str, FloatArray] | None = None
    # the labeling page shows the model's answer (a project's ``show_suggestions``): every
    # label reaches the policy marked ``suggested``, as live (docs/models.md, "Independence")
    show_suggestions: bool = False

    def __post_init__(self) -> None:
        self.truth = np.asarray(self.truth, dtype=np.int64)
        n = self.truth.size
        self.task_category = np.asarray(self.task_category, dtype=np.int64)
        if self.worker_cost is None:
            self.worker_cost = np.ones(self.n_workers)
        if self.worker_capacity is None:
            self.worker_capacity = np.full(self.n_workers, -1, dtype=np.int64)
        if self.is_gold is None:
            self.is_gold = np.zeros(n, dtype=bool)
        if (self.pool is None) == (self.recorded is None):
            raise ValueError("an environment needs exactly one of pool (synthetic) or "
                             "recorded (replay)")
        if self.recorded is not None and self.recorded.shape != (n, self.n_workers):
            raise ValueError(f"recorded must be (tasks, workers) = {(n, self.n_workers)}, "
                             f"got {self.recorded.shape}")

    @property
    def n_tasks(self) -> int:
        return int(self.truth.size)

    @property
    def available(self) -> BoolArray:
        """bool (n_tasks, n_workers): pairs that may be asked at all."""
        out: BoolArray
        if self.recorded is not None:
            out = self.recorded >= 0
            return out
        return np.ones((self.n_tasks, self.n_workers), dtype=bool)

    def problem(self, budget: float = float("inf"),
                max_labels_per_task: int | None = None) -> Problem:
        """The :class:`Problem` a policy sees (no truth, except for gold tasks)."""
        assert self.worker_cost is not None and self.worker_capacity is not None
        assert self.is_gold is not None
        gold_answer = np.where(self.is_gold, self.truth, -1)
        return Problem(
            n_tasks=self.n_tasks, n_workers=self.n_workers, n_classes=self.n_classes,
            task_category=self.task_category.copy(), n_categories=self.n_categories,
            worker_cost=self.worker_cost.copy(), worker_capacity=self.worker_capacity.copy(),
            budget=budget, max_labels_per_task=max_labels_per_task,
            is_gold=self.is_gold.copy(), gold_answer=gold_answer,
            predictions=None if self.predictions is None else dict(self.predictions))

    def shuffled(self, rng: np.random.Generator) -> Environment:
        """The same environment with tasks and workers in a random order.

        A replay keeps the file's order, and the shared data sets list their prolific
        workers first: a policy that breaks ties by the lowest index then asks those workers
        first because of where they sit in the file, which a live project would not give it
        (annotators enrol in any order). Benchmarks that compare policies replay each run in
        a new order, the same for every policy of that run. Only recorded (replay)
        environments are reordered; a synthetic pool's workers are drawn at random already.
        """
        if self.recorded is None:
            return self
        t = rng.permutation(self.n_tasks)
        w = rng.permutation(self.n_workers)
        assert self.worker_cost is not None and self.worker_capacity is not None
        assert self.is_gold is not None
        return Environment(
            truth=self.truth[t], n_workers=self.n_workers, n_classes=self.n_classes,
            task_category=self.task_category[t], n_categories=self.n_categories,
            worker_cost=self.worker_cost[w], worker_capacity=self.worker_capacity[w],
            is_gold=self.is_gold[t], theta=None if self.theta is None else self.theta[t],
            recorded=self.recorded[np.ix_(t, w)], name=self.name,
            predictions=None if self.predictions is None else {
                k: v[t] for k, v in self.predictions.items()},
            show_suggestions=self.show_suggestions)

    def with_predictions(self, predictions: dict[str, FloatArray] | None) -> Environment:
        """The same environment with ``predictions`` (None: without any)."""
        from dataclasses import replace
        return replace(self, predictions=predictions)

    def answer(self, task: int, worker: int, rng: np.random.Generator) -> int:
        """The class index worker ``worker`` answers on task ``task``."""
        if self.recorded is not None:
            label = int(self.recorded[task, worker])
            if label < 0:
                raise ValueError(f"pair (task {task}, worker {worker}) has no recorded label")
            return label
        assert self.pool is not None
        if self.theta is not None:
            latent = min(int(np.searchsorted(np.cumsum(self.theta[task]), rng.random(),
                                             side="right")), self.n_classes - 1)
        else:
            latent = int(self.truth[task])
        return int(self.pool.answer(worker, self.task_category[task], latent, rng, tasks=task))
