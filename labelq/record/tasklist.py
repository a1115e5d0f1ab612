"""A project's tasks one row at a time (``labelq tasks list``), read in batches so that a
project of millions of tasks lists in constant memory.

Each row: the task's ``id`` (as loaded), ``category``, ``state`` as ``labelq status``
counts it (``unlabeled``, ``in_progress``, ``complete`` at the project's ``max_labels``,
``gold``), its number of ``labels``, the ``gold_answer``, ``gold_kind`` and
``gold_source`` (where the answer came from: docs/gold.md) of a gold question, and its
``payload``. The filters (:data:`STATE_FILTERS`): ``pending`` (still
asked for: unlabeled or in progress), ``labelled`` (at least one label), ``gold``, or one
of the states by name.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, cast

from sqlalchemy import ColumnElement, and_, false, func, not_, true
from sqlalchemy import select as sa_select
from sqlmodel import Session, col

from ..errors import InputError
from .models import Label, Project, Task

__all__ = ["iter_tasks", "STATE_FILTERS", "TASK_COLUMNS"]

STATE_FILTERS = ("pending", "labelled", "gold", "unlabeled", "in_progress", "complete")
TASK_COLUMNS = ["id", "category", "state", "labels", "gold_answer", "gold_kind",
                "gold_source", "payload"]


def _state_filter(state: str, n: ColumnElement[int], cap: int | None) -> ColumnElement[bool]:
    """The SQL condition of ``state`` on a task row and its label count ``n``."""
    gold = col(Task.is_gold) == true()
    at_cap = (n >= cap) if cap else None
    below = not_(at_cap) if at_cap is not None else true()
    conditions: dict[str, ColumnElement[bool]] = {
        "gold": gold,
        "pending": and_(not_(gold), below),
        "labelled": and_(not_(gold), n > 0),
        "unlabeled": and_(not_(gold), n == 0),
        "in_progress": and_(not_(gold), n > 0, below),
        # (no max_labels: no task is ever complete, as labelq status counts them)
        "complete": and_(not_(gold), at_cap) if at_cap is not None else false(),
    }
    return conditions[state]


def iter_tasks(session: Session, project: Project, *, state: str | None = None,
               category: str | None = None, limit: int | None = None,
               batch: int = 5000) -> Iterator[dict[str, Any]]:
    """Project ``project``'s tasks (gold questions too) in load order, filtered by
    ``state`` (:data:`STATE_FILTERS`) and ``category``, at most ``limit``; read
    ``batch`` rows at a time."""
    if state is not None and state not in STATE_FILTERS:
        raise InputError(f"--state {state!r}: use one of {', '.join(STATE_FILTERS)}",
                         field="state")
    if limit is not None and limit < 0:
        raise InputError(f"--limit must be 0 or more, got {limit}", field="limit")
    cap = project.max_labels
    n = (sa_select(func.count(col(Label.id)))
         .where(col(Label.project_id) == project.id, col(Label.task_id) == col(Task.id))
         .correlate(Task).scalar_subquery())
    q = (sa_select(col(Task.external_id), col(Task.category), col(Task.is_gold),
                   col(Task.gold_answer), col(Task.gold_kind), col(Task.gold_source),
                   col(Task.marked), col(Task.payload), n.label("n"))
         .where(col(Task.project_id) == project.id))
    if category is not None:
        q = q.where(col(Task.category) == category)
    if state is not None:
        q = q.where(_state_filter(state, n, cap))
    q = q.order_by(col(Task.seq)).execution_options(yield_per=batch)
    if limit is not None:
        q = q.limit(limit)
    for ext, cat, is_gold, answer, kind, source, marked, payload, n_labels in \
            session.connection().execute(q):
        count = int(cast(int, n_labels))
        if is_gold:
            st = "gold"
        else:
            st = "unlabeled" if count == 0 else "complete" if cap and count >= cap \
                else "in_progress"
        yield {"id": ext, "category": cat, "state": st, "labels": count,
               "gold_answer": answer if is_gold else None,
               "gold_kind": (kind or ("loaded" if marked is None else "reviewed"))
               if is_gold else None,
               "gold_source": source if is_gold else None,
               "payload": payload}
