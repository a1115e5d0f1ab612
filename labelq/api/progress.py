"""An annotator's progress: labels given, assignments declined or let expire, gold answered
and right (random gold: loaded or audit), capacity left, and while paused the pause's
trail (``pause``).

The gold counts are those of the annotator's first ``as_of`` labels, ``as_of`` the number
of labels rounded down to a multiple of :data:`GOLD_SHOWN_EVERY` (issue 43): counted live,
they ticked right after a gold answer and told which item was gold. Now the answer to
``/me/progress`` after a gold item is the same as after any other (the labels count moves
by one either way); every :data:`GOLD_SHOWN_EVERY` labels the counts catch up, saying how
many of the last batch were gold, not which.

Counts come from SQL (the record); live leases from the hot state in Redis, so that
``remaining_capacity`` matches what the service will still issue.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import and_, case, func
from sqlmodel import Session, col, select

from ..live.redis.keys import Keys
from ..record.db import database_id
from ..record.models import (
    ENDED_UNLABELLED,
    Assignment,
    Label,
    Task,
    Worker,
    random_gold,
    unsuggested,
)
from ..record.pauses import last_pauses, pause_trail

__all__ = ["worker_progress", "GOLD_SHOWN_EVERY"]

GOLD_SHOWN_EVERY = 10  # labels: the gold counts an annotator sees move once per batch


def worker_progress(session: Session, redis: Any, worker: Worker) -> dict[str, Any]:
    # the gold score an annotator sees is the one that judges them: on random gold only
    # (loaded, audit), answered without a model's suggestion shown (issue 42), as labelq
    # workers list shows it
    scored = and_(col(Label.is_gold), random_gold(), unsuggested())
    labels = int(session.exec(select(func.count(col(Label.id)))
                              .where(col(Label.worker_id) == worker.id)).one())
    as_of = labels - labels % GOLD_SHOWN_EVERY
    gold = correct = 0
    if as_of:  # the gold among the first ``as_of`` labels (in the order they were given)
        last = session.exec(select(col(Label.id)).where(col(Label.worker_id) == worker.id)
                            .order_by(col(Label.id)).offset(as_of - 1).limit(1)).one()
        gold, correct = session.exec(
            select(func.coalesce(func.sum(case((scored, 1), else_=0)), 0),
                   func.coalesce(func.sum(case((and_(scored, col(Label.value)
                                                     == col(Task.gold_answer)), 1),
                                               else_=0)), 0))
            .join(Task, col(Task.id) == col(Label.task_id))
            .where(col(Label.worker_id) == worker.id, col(Label.id) <= last)).one()
    closed: dict[str, int] = {state: n for state, n in session.exec(
        select(col(Assignment.state), func.count()).where(
            col(Assignment.worker_id) == worker.id,
            col(Assignment.state).in_(ENDED_UNLABELLED))
        .group_by(col(Assignment.state))).all()}
    k = Keys(worker.project_id, database_id(session))
    used = redis.hget(k.wcount, worker.seq)  # labels + live leases, when the state is hot
    in_use = max(int(used), int(labels)) if used is not None else int(labels)
    remaining = None if worker.capacity is None else max(worker.capacity - in_use, 0)
    event = last_pauses(session, [worker.id]).get(worker.id) \
        if worker.id is not None and worker.status == "paused" else None
    return {
        "handle": worker.handle,
        "status": worker.status,
        "labels": int(labels),
        "declined": int(closed.get("declined", 0)),
        "expired": int(closed.get("expired", 0)),
        "open_assignments": max(in_use - int(labels), 0),
        "gold": {"answered": int(gold), "correct": int(correct),
                 "accuracy": round(int(correct) / int(gold), 4) if gold else None,
                 "as_of": as_of},
        "capacity": worker.capacity,
        "remaining_capacity": remaining,
        "pause": pause_trail(event) if event is not None else None,
    }
