"""``overlap:n=3``: fixed overlap with majority vote, the baseline most annotation tools ship.

Label Studio ("overlap": how many annotators label each task) and SageMaker Ground Truth
("number of workers per dataset object", aggregated by majority vote for text and image
classification) do not assign adaptively: every task is shown to exactly ``n`` annotators and
the answer is the majority. That is what an operator would configure without labelq, so it
is the baseline an adaptive policy has to beat at equal spend.

Pull mode: the asking worker gets, among its eligible tasks with fewer than ``n`` labels, the
one with the fewest labels (lowest index on ties) — round robin, so at any budget the labels
are spread as evenly as ``uniform`` spreads them. A task with ``n`` labels is done
(``state.done``) and never chosen again: the policy returns ``None`` when only done tasks are
eligible, so a run stops at ``n`` labels per task whatever budget is left. Push mode: the
same choice for the lowest-index worker that has such a task (``uniform``'s vectorised
decision restricted to open tasks). Every observation counts, gold ones too (a gold
question also gets ``n`` answers); declines change nothing. ``predict_proba`` is the
majority-vote shares (uniform for a task without labels).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .base import Problem
from .registry import register
from .uniform import CountState, Uniform

__all__ = ["Overlap", "OverlapState"]


@dataclass
class OverlapState(CountState):
    """``counts[i, k]`` labels of class k on task i; ``n`` the overlap."""

    n: int = 3

    @property
    def done(self) -> np.ndarray:
        """bool (n_tasks,): tasks that have their ``n`` labels (derived, not serialised)."""
        return self.counts.sum(axis=1) >= self.n


@register
class Overlap(Uniform):
    name = "overlap"
    mode = "pull"

    params: Params  # this policy's own (``Policy.params`` is typed Any)

    @dataclass(frozen=True)
    class Params:
        """``n``: labels per task (the overlap), an integer >= 1."""

        n: int = 3

        def __post_init__(self) -> None:
            if isinstance(self.n, bool) or not isinstance(self.n, int) or self.n < 1:
                raise ValueError(f"n must be an integer >= 1, got {self.n!r}")

    def init_state(self, problem: Problem) -> OverlapState:
        return OverlapState(np.zeros((problem.n_tasks, problem.n_classes)), self.params.n)

    def state_to_dict(self, state: OverlapState) -> dict[str, Any]:
        return {"counts": state.counts.tolist(), "n": state.n}

    def state_from_dict(self, data: dict[str, Any]) -> OverlapState:
        return OverlapState(np.asarray(data["counts"], dtype=float), int(data["n"]))

    # Overlap narrows Uniform's CountState to its own OverlapState: a policy is only ever
    # given the state its own init_state / state_from_dict made
    def priority(  # type: ignore[override]
            self, state: OverlapState, tasks: np.ndarray) -> np.ndarray:
        """-labels for open tasks, -inf for done ones (never asked again)."""
        tasks = np.asarray(tasks, dtype=np.int64)
        n_labels = state.counts[tasks].sum(axis=1)
        return np.where(n_labels >= state.n, -np.inf, -n_labels)

    def select_task(self, state: OverlapState, worker: int, candidates: np.ndarray,
                    mask: np.ndarray, rng: np.random.Generator) -> int | None:
        candidates = np.asarray(candidates, dtype=np.int64)
        open_ = np.asarray(mask, dtype=bool) & ~state.done[candidates]
        return super().select_task(state, worker, candidates, open_, rng)

    def select_pair(  # type: ignore[override]  # OverlapState, as in priority
            self, state: OverlapState, mask: np.ndarray,
            rng: np.random.Generator) -> tuple[int, int] | None:
        mask = np.asarray(mask, dtype=bool) & ~state.done[:, None]
        return super().select_pair(state, mask, rng)
