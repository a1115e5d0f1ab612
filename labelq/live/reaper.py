"""Periodic upkeep (the Celery beat calls it): expire leases, take in new tasks.

Leases are expired one ``grace_ms`` after their expiry, through the ``RELEASE`` script, which
returns the task to the pool exactly once. A lease marked ``submitting`` is left alone for
``tuning.submit_grace_ms``: its label is being written to SQL. Older than that, the submitter
crashed (or stalled) between ``SUBMIT_BEGIN`` and ``SUBMIT_FINISH``; SQL decides: a label for
the assignment exists → ``SUBMIT_FINISH`` counts it; none → ``RELEASE`` and an ``expired``
row, on which a submitter that stalled longer than the grace and then commits fails (it gets
``LeaseExpired``). (A stall that ends between the SQL check and that row is the one case
where a counter can be off by one; ``labelq rebuild`` recomputes every counter from SQL.)

An expired lease is written to SQL as an ``Assignment`` in state ``expired``
(:func:`record_expired`), after ``RELEASE`` returned its task: the record shows who let
what lapse, and ``labelq rebuild`` counts it where the hot state did (the task stays in the
annotator's seen set; it was issued). A reservation still held in an inbox was never issued
and leaves no row. A crash between the release and the row loses only that row.
"""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import col, select

from ..record.db import database_id, session_scope
from ..record.models import Assignment, Label, Project, Task, Worker, utc_from_ms
from .redis.keys import Keys
from .redis.scripts import Refusal, Released, Scripts
from .tuning import TUNING, Tuning

__all__ = ["expire_leases", "record_expired"]


def expire_leases(engine: Engine, redis: Any, project_id: int, *, lease_ms: int,
                  now_ms: int | None = None, scripts: Scripts | None = None,
                  tuning: Tuning = TUNING) -> dict[str, int]:
    """Expire the project's leases lapsed more than ``tuning.reap_grace_ms`` ago;
    ``lease_ms`` (the settings' lease) dates the expired assignments' ``issued``."""
    scripts = scripts or Scripts(redis)
    released: list[tuple[str, Released]] = []
    k = Keys(project_id, database_id(engine))
    now = int(time.time() * 1000) if now_ms is None else now_ms
    cutoff = now - tuning.reap_grace_ms
    out = {"expired": 0, "finished": 0, "stale": 0}
    cap = None
    for raw in redis.zrangebyscore(k.leases, "-inf", cutoff):
        aid = raw.decode()
        res = scripts.release(k, aid, expired_before_ms=cutoff)
        if isinstance(res, Released):
            out["expired"] += 1
            released.append((aid, res))
            continue
        if res is Refusal.MISSING:
            redis.zrem(k.leases, aid)
            out["stale"] += 1
        elif res is Refusal.SUBMITTING:
            started = int(redis.hget(k.lease(aid), "submitting") or now)
            if started > now - tuning.submit_grace_ms:
                continue
            with session_scope(engine) as session:
                has_label = session.exec(select(Label.id)
                                         .where(Label.assignment_id == aid)).first()
                if cap is None:
                    project = session.get(Project, project_id)
                    cap = (project.max_labels if project is not None else None) or -1
            if has_label is not None:
                scripts.submit_finish(k, aid, None if cap < 0 else cap)
                out["finished"] += 1
            else:
                res = scripts.release(k, aid, allow_submitting=True)
                if isinstance(res, Released):
                    out["expired"] += 1
                    released.append((aid, res))
    record_expired(engine, project_id, released, lease_ms=lease_ms)
    return out


def record_expired(engine: Engine, project_id: int, released: list[tuple[str, Released]], *,
                   lease_ms: int) -> int:
    """Write the issued ones of ``(assignment id, Released)`` as ``Assignment`` rows in state
    ``expired``, in one transaction; returns how many. An id that already has a row (a
    stalled submit that committed after all) is left as it is; a stalled submit that
    commits after this row gets ``LeaseExpired``."""
    issued = [(aid, r) for aid, r in released if not r.held]
    if not issued:
        return 0
    with session_scope(engine) as session:
        wids: dict[int, int] = {int(s): int(i) for s, i in session.exec(
            select(col(Worker.seq), col(Worker.id)).where(
                Worker.project_id == project_id,
                col(Worker.seq).in_({r.worker for _a, r in issued}))).all()}
        missing = {r.task for _a, r in issued if r.task_id is None}
        tids: dict[int, int] = {int(s): int(i) for s, i in session.exec(
            select(col(Task.seq), col(Task.id)).where(
                Task.project_id == project_id, col(Task.seq).in_(missing))).all()} \
            if missing else {}
        have: set[str] = set(session.exec(select(col(Assignment.id)).where(
            col(Assignment.id).in_([aid for aid, _r in issued]))).all())
    rows = [dict(id=aid, project_id=project_id,
                 task_id=r.task_id if r.task_id is not None else tids[r.task],
                 worker_id=wids[r.worker], is_gold=r.gold, state="expired",
                 issued=utc_from_ms(r.expires_ms - lease_ms),
                 expires=utc_from_ms(r.expires_ms))
            for aid, r in issued if aid not in have]
    try:
        with session_scope(engine) as session:
            session.add_all([Assignment(**row) for row in rows])
        return len(rows)
    except IntegrityError:  # a row appeared meanwhile (a stalled submit): one at a time
        n = 0
        for row in rows:
            try:
                with session_scope(engine) as session:
                    session.add(Assignment(**row))
                n += 1
            except IntegrityError:
                pass
        return n
