"""When a worker's next assignment should be a gold question: the project's gold schedule
(:mod:`labelq.gold.schedules`) asked with the worker's history from the hot counters.

History: ``n_done`` = assignments issued to the worker (``nissued``), ``n_gold_done`` = gold
ones among them (``ngold``). Issued rather than answered, so a live lease counts at once and
two quick requests do not both get the "next gold"; declines count too (a documented
approximation of the schedules' "answered" history). A due gold question the worker cannot
get (all seen) falls back to a normal task.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from ..gold.schedules import Schedule, WorkerHistory, schedule_from_spec

__all__ = ["schedule_for", "gold_due"]


@lru_cache(maxsize=256)
def schedule_for(spec: str | None) -> Schedule | None:
    if spec is None or not spec.strip() or spec.strip() == "none":
        return None
    return schedule_from_spec(spec)


def gold_due(spec: str | None, n_issued: int, n_gold: int, rng: np.random.Generator) -> bool:
    schedule = schedule_for(spec)
    if schedule is None:
        return False
    n_gold = min(n_gold, n_issued)
    return bool(schedule.should_inject(WorkerHistory(n_issued, n_gold), rng))
