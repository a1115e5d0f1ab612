"""Decline: the worker hands an assignment back.

``RELEASE`` checks the owner, returns the task to the pool (unparks it) and frees the
reservation; the worker keeps it in ``seen``. An ``Assignment`` row with state ``declined``
is written, and ``task:worker`` pushed to ``declines`` for the applier, which feeds
``Observation(declined=True)`` to the policy (it is woken for that).
"""

from __future__ import annotations

from typing import Any

from sqlmodel import select

from ..errors import Conflict, Forbidden, NotFound
from ..record.db import session_scope
from ..record.models import Assignment, Task, Worker, utc_from_ms
from .context import Live, now_ms
from .redis.keys import decline_entry
from .redis.scripts import Refusal, Released

__all__ = ["decline"]


def decline(live: Live, worker: Worker, assignment_id: str) -> dict[str, Any]:
    handle = worker.handle
    k = live.keys(worker.project_id)
    res = live.scripts.release(k, assignment_id, worker=worker.seq)
    if not isinstance(res, Released):
        if res is Refusal.FORBIDDEN:
            raise Forbidden(f"assignment {assignment_id!r} was not issued to {handle!r}",
                            assignment=assignment_id, worker=handle)
        if res is Refusal.SUBMITTING:
            raise Conflict(f"assignment {assignment_id!r} is being submitted",
                           assignment=assignment_id)
        raise NotFound(f"no live assignment {assignment_id!r}", assignment=assignment_id)
    with session_scope(live.engine) as session:
        row = session.exec(select(Task.id, Task.is_gold).where(
            Task.project_id == worker.project_id, Task.seq == res.task)).one()
        session.add(Assignment(id=assignment_id, project_id=worker.project_id,
                               task_id=row[0], worker_id=worker.id, is_gold=row[1],
                               state="declined", expires=utc_from_ms(now_ms())))
    live.redis.rpush(k.declines, decline_entry(res.task, res.worker))
    live.wake(worker.project_id)
    return {"assignment_id": assignment_id, "declined": True}
