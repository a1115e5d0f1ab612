"""When a worker's next assignment should be a gold question: the project's gold schedule
(:mod:`labelq.gold.schedules`) asked with the worker's history from the hot counters.

History: ``n_done`` = assignments issued to the worker (``nissued``), ``n_gold_done`` = gold
ones among them (``ngold``); the gold record (answers applied, right among them) is the
applier's, from SQL, and so is the agreement record (labels the policy's worker model
checked against other labels, right among them: soft counts; issue 41). Issued rather than answered, so a live lease counts at once and
two quick requests do not both get the "next gold"; declines count too (a documented
approximation of the schedules' "answered" history). A due gold question the worker cannot
get (all seen) falls back to a normal task.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from ..gold.schedules import Schedule, WorkerHistory, schedule_from_spec

__all__ = ["schedule_for", "gold_plan"]


@lru_cache(maxsize=256)
def schedule_for(spec: str | None) -> Schedule | None:
    if spec is None or not spec.strip() or spec.strip() == "none":
        return None
    return schedule_from_spec(spec)


def gold_plan(spec: str | None, n_issued: int, n_gold: int, gold_by_category: list[int],
              rng: np.random.Generator,
              gold_record: tuple[int, int] = (0, 0),
              agreement: tuple[float, float] = (0.0, 0.0)) -> np.ndarray | None:
    """``None`` when the next assignment is not gold; else a bool mask over the project's
    categories from which the gold question may come (all True when any will do).
    ``gold_by_category`` are the gold questions issued per category (schedules that need
    them, like ``per-category:s=3``, get them); ``gold_record`` the worker's gold answers
    applied and right among them, ``agreement`` its agreement record (gold on suspicion)."""
    schedule = schedule_for(spec)
    if schedule is None:
        return None
    n_gold = min(n_gold, n_issued)
    by_cat = tuple(min(g, n_gold) for g in gold_by_category)
    if sum(by_cat) > n_gold:  # counters read at different instants; stay consistent
        by_cat = tuple(0 for _ in by_cat)
    answered, right = max(gold_record[0], 0), max(gold_record[1], 0)
    checked = max(float(agreement[0]), 0.0)
    history = WorkerHistory(n_issued, n_gold, by_cat, gold_answered=answered,
                            gold_correct=min(right, answered), agree_answered=checked,
                            agree_correct=min(max(float(agreement[1]), 0.0), checked))
    if not schedule.should_inject(history, rng):
        return None
    allowed = schedule.gold_categories(history)
    return np.ones(len(gold_by_category), dtype=bool) if allowed is None else allowed
