"""Decline: the worker hands an assignment back.

``RELEASE`` checks the owner, returns the task to the pool (unparks it) and frees the
reservation; the worker keeps it in ``seen``. An ``Assignment`` row with state ``declined``
is written, and ``task:worker`` pushed to ``declines`` for the applier, which feeds
``Observation(declined=True)`` to the policy (it is woken for that).

No decline is lost to a process that dies half-way, and none counts twice:

1. ``RELEASE`` notes the decline in ``declining`` (assignment id -> task, worker, task id,
   gold, time) in the same step as it releases the lease;
2. the ``declined`` row is written to SQL (a row already there — a retry's — is kept);
3. ``DECLINE_DONE`` removes the note and pushes the entry to ``declines``, in one step: only
   the caller that removed it pushes.

Killed after 1 or 2, the note stays: the annotator's retry of the decline (same assignment
id) finishes 2 and 3 and answers OK, and so does the beat's upkeep for a note older than
``STALE_MS`` (:func:`recover_declines`). A submit of the assignment meanwhile finds the note
and is refused (:mod:`.submit`'s lost-lease path does not take it again). A decline repeated
after it was recorded answers OK with ``"duplicate": true`` (like a repeated submit); one of
an assignment that ended otherwise (submitted, expired, never issued) is ``NotFound``. Only
Redis lost between 1 and 2 loses the note with the rest of the hot state (the task then
counts as never declined, as a live lease is lost).
"""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import col, select

from ..errors import Conflict, Forbidden, NotFound
from ..record.db import database_id, session_scope
from ..record.models import Assignment, Task, Worker, utc_from_ms
from .context import Live, now_ms
from .redis.keys import Keys, decline_entry
from .redis.scripts import Refusal, Released, Scripts
from .redis.wire import text

__all__ = ["decline", "recover_declines", "STALE_MS"]

STALE_MS = 10_000  # a note older than this has lost its decline's process: the beat finishes it


def decline(live: Live, worker: Worker, assignment_id: str) -> dict[str, Any]:
    handle = worker.handle
    k = live.keys(worker.project_id)
    res = live.scripts.release(k, assignment_id, worker=worker.seq, declined_ms=now_ms())
    if not isinstance(res, Released):
        if res is Refusal.FORBIDDEN:
            raise Forbidden(f"assignment {assignment_id!r} was not issued to {handle!r}",
                            assignment=assignment_id, worker=handle)
        if res is Refusal.SUBMITTING:
            raise Conflict(f"assignment {assignment_id!r} is being submitted",
                           assignment=assignment_id)
        return _again(live, worker, k, assignment_id)
    _record(live.engine, live.scripts, k, worker.project_id, assignment_id,
            _note(res.task, res.worker, res.task_id, res.gold, now_ms()), worker_id=worker.id)
    live.wake(worker.project_id)
    return {"assignment_id": assignment_id, "declined": True, "duplicate": False}


def _note(task: int, worker: int, task_id: int | None, gold: bool, ms: int) -> str:
    return f"{task}:{worker}:{'' if task_id is None else task_id}:{int(gold)}:{ms}"


def _record(engine: Engine, scripts: Scripts, k: Keys, project_id: int, assignment_id: str,
            note: str, *, worker_id: int | None = None) -> bool:
    """Steps 2 and 3 for the decline ``note`` (``declining``'s value); True if this call
    handed it to the applier."""
    task, wseq, tid, gold, ms = note.split(":")
    with session_scope(engine) as session:
        if worker_id is None:
            worker_id = session.exec(select(col(Worker.id)).where(
                Worker.project_id == project_id, Worker.seq == int(wseq))).one()
        if tid == "":
            tid = str(session.exec(select(col(Task.id)).where(
                Task.project_id == project_id, Task.seq == int(task))).one())
    try:
        with session_scope(engine) as session:
            if session.get(Assignment, assignment_id) is None:
                session.add(Assignment(id=assignment_id, project_id=project_id,
                                       task_id=int(tid), worker_id=worker_id,
                                       is_gold=gold == "1", state="declined",
                                       expires=utc_from_ms(int(ms))))
    except IntegrityError:  # a retry (or the beat) wrote it meanwhile
        pass
    return scripts.decline_done(k, assignment_id, decline_entry(int(task), int(wseq)))


def _again(live: Live, worker: Worker, k: Keys, assignment_id: str) -> dict[str, Any]:
    """A decline of an assignment with no lease: a retry. Finishes a decline whose process
    died (its note), answers a recorded one as a duplicate, else ``NotFound``."""
    note = live.redis.hget(k.declining, assignment_id)
    if note is not None:
        n = text(note)
        if int(n.split(":")[1]) != worker.seq:
            raise Forbidden(f"assignment {assignment_id!r} was not issued to "
                            f"{worker.handle!r}", assignment=assignment_id, worker=worker.handle)
        if _record(live.engine, live.scripts, k, worker.project_id, assignment_id, n,
                   worker_id=worker.id):
            live.wake(worker.project_id)
        return {"assignment_id": assignment_id, "declined": True, "duplicate": True}
    with session_scope(live.engine) as session:
        row = session.exec(select(col(Assignment.worker_id), col(Assignment.state))
                           .where(Assignment.id == assignment_id)).first()
    if row is not None and row[1] == "declined":
        if row[0] != worker.id:
            raise Forbidden(f"assignment {assignment_id!r} was not issued to "
                            f"{worker.handle!r}", assignment=assignment_id, worker=worker.handle)
        return {"assignment_id": assignment_id, "declined": True, "duplicate": True}
    raise NotFound(f"no live assignment {assignment_id!r}", assignment=assignment_id)


def recover_declines(engine: Engine, redis: Any, project_id: int, scripts: Scripts, *,
                     stale_ms: int = STALE_MS, now: int | None = None) -> int:
    """Finish the declines noted more than ``stale_ms`` ago and not finished (their process
    died between the release and the record); returns how many this handed to the
    applier (the beat's upkeep, :mod:`.upkeep`)."""
    k = Keys(project_id, database_id(engine))
    now = int(time.time() * 1000) if now is None else now
    n = 0
    for aid, note in redis.hgetall(k.declining).items():
        value = text(note)
        if now - int(value.rsplit(":", 1)[1]) >= stale_ms:
            n += _record(engine, scripts, k, project_id, text(aid), value)
    return n
