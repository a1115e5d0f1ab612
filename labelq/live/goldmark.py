"""``labelq gold mark``: ordinary tasks become gold questions while the pipeline runs.

SQL and the hot state move together, under the project's apply lock (no applier folds
labels meanwhile):

1. :func:`labelq.record.projects.mark_gold` rewrites the tasks and their labels in an open
   transaction, and, when some of the tasks are of kind ``audit`` (a random sample), the
   workers whose labels became gold answers are judged as the applier judges a gold answer
   (:func:`.applier.judge_gold_answers`: the quality rule, and their gold records); answers
   to chosen gold (``suggested``, ``reviewed``) score no one, so they judge no one;
2. reservations of the tasks still held in inboxes (not handed out yet) are released
   first; a task then assigned to an annotator is *queued* instead (a ``pending_gold_mark``
   row in the same transaction: a label submitted on it now would be recorded as an
   ordinary one), and ``GOLD_MARK`` moves the others from ``pending``/``parked`` to
   ``gold`` in one step (refused if one was leased meanwhile: the transaction rolls back
   and the mark is tried again with that task queued too);
3. the transaction commits (if it fails, the tasks go back to ``pending`` with their
   priorities; a process killed between 2 and 3 leaves them gold in Redis only, which
   ``labelq rebuild`` repairs);
4. the workers' gold-schedule counts (``g{w}``, ``g{w}:{c}``: the marked tasks they were
   given are gold questions given) and those gold records move as a rebuild would set them, and
   a new epoch makes every process fold its policy state again from SQL.

A project with no hot state yet (never served, or Redis flushed) needs only step 1: its
rebuild reads SQL.

A queued mark is applied when its task's assignment ends (label submitted, declined or
expired): :func:`apply_queued_marks`, run by the Celery worker after each applier run (when
``gold_queued`` says there is a queue) and by the beat's upkeep of every project (from SQL,
so a flushed Redis loses nothing), marks the queued tasks that have no live lease through
the same steps, deleting their rows in the marking transaction: each applied exactly once.
A queued row keeps the mark's ``source`` (the file, ``cli``, ``review NAME``), which becomes
the task's ``gold_source`` when it is applied, however much later.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import delete
from sqlalchemy.engine import Engine
from sqlalchemy.exc import OperationalError, ProgrammingError
from sqlmodel import col, select

from ..errors import Conflict, FileFormatError
from ..record.db import database_id, session_scope
from ..record.models import PendingGoldMark, Project, Task
from ..record.projects import GoldMark, MarkedGold, get_project, mark_gold
from .applier import judge_gold_answers
from .hotstate import bump_epoch
from .redis.keys import Keys, gold_category_field, gold_issued_field
from .redis.lock import RedisLock
from .redis.scripts import GoldMarked, GoldMarkLeased, Released, Scripts
from .redis.wire import text

__all__ = ["mark_gold_live", "apply_queued_marks"]

log = logging.getLogger(__name__)


def _project_name(session: Any, project_id: int) -> str:
    project = session.get(Project, project_id)
    if project is None:
        raise Conflict(f"no project with id {project_id}", project=project_id)
    return str(project.name)


def mark_gold_live(engine: Engine, redis: Any, name: str, marks: Sequence[GoldMark], *,
                   source: str | Path | None = None, wait_s: float = 60.0,
                   kind: str | None = None) -> dict[str, Any]:
    """Mark ``marks`` in project ``name`` (see the module docstring) as gold of ``kind``
    (None: each mark's own, else each task's default,
    :func:`labelq.record.projects.mark_gold`); ``redis`` None: SQL only (the caller must
    have the project rebuilt before annotators go on). A task assigned right now is queued
    (``pending_gold_mark``) and marked when its assignment ends. Returns ``marked``,
    ``skipped``, ``labels`` (now gold answers), ``kinds`` (how many marked of each kind),
    ``paused`` (handles the quality rule paused on them), ``queued`` (the ids of the tasks
    queued until their assignments end), ``replaced`` (answers queued earlier for tasks
    marked now with another answer, their assignment ended since: ``task``, ``answer``,
    ``queued_answer``, ``queued_source``) and ``live`` (whether a hot state was
    updated)."""
    if redis is None:
        return _mark(engine, None, name, marks, source, kind)
    with session_scope(engine) as session:
        k = Keys(int(get_project(session, name).id or 0), database_id(engine))
    lock = RedisLock(redis, k.apply_lock, ttl_ms=300_000)
    if not lock.acquire_within(wait_s):
        raise Conflict("the applier holds the project's lock; try again", project=name)
    try:
        return _mark(engine, redis, name, marks, source, kind)
    finally:
        lock.release()


class _Leased(Exception):
    """``GOLD_MARK`` found ``task`` (its id) leased after the lease check: try again with
    it queued."""

    def __init__(self, task: str) -> None:
        super().__init__(task)
        self.task = task


def _mark(engine: Engine, redis: Any, name: str, marks: Sequence[GoldMark],
          source: str | Path | None, kind: str | None) -> dict[str, Any]:
    """Mark what can be marked, queue the tasks assigned right now. A task leased between
    the lease check and ``GOLD_MARK`` (an annotator took it meanwhile) makes the script
    refuse: the transaction rolls back and the whole mark is tried again (its lease check
    then queues that task, or releases it if it is only held in an inbox)."""
    for _round in range(_ROUNDS):
        try:
            return _mark_once(engine, redis, name, marks, source, kind)
        except _Leased:
            continue  # (the next round's lease check sees the new lease)
    raise Conflict(f"tasks of {name!r} kept being handed out while being marked "
                   f"({_ROUNDS} tries); try again", project=name)


_ROUNDS = 10  # tries of a mark whose tasks are being handed out meanwhile


def _mark_once(engine: Engine, redis: Any, name: str, marks: Sequence[GoldMark],
               source: str | Path | None, kind: str | None) -> dict[str, Any]:
    moved: GoldMarked | None = None
    k: Keys | None = None
    try:
        with session_scope(engine) as session:
            project = get_project(session, name)
            k = Keys(int(project.id or 0), database_id(engine))
            built = redis is not None and bool(redis.hexists(k.meta, "built"))
            hold = _leased(session, redis, k, [m.task for m in marks]) if built else {}
            out = mark_gold(session, project, marks, source=source, kind=kind, defer=hold)
            queued = _queue(session, project, out.deferred, source)
            replaced = _replaced(session, marks, out.tasks, int(project.id or 0))
            _unqueue(session, out.tasks, int(project.id or 0))
            paused, record = judge_gold_answers(session, project, out.random_workers,
                                                out.category_names)
            if built and out.tasks:
                got = Scripts(redis).gold_mark(k, out.tasks)
                if isinstance(got, GoldMarkLeased):
                    raise _Leased(_external_id(session, k.project_id, got.task))
                moved = got
    except BaseException:
        if moved is not None and k is not None:
            _put_back(redis, k, out, moved)
        raise
    if moved is not None and k is not None:
        _counts_after(redis, k, out, record)
        bump_epoch(redis, k)
    if queued and redis is not None and k is not None:
        # no new assignment of a queued task: its own ends, and nothing keeps it from gold
        # (RELEASE puts back into pending only what is parked; a rebuild from SQL
        # keeps it out too: labelq.live.rebuild)
        pipe = redis.pipeline(transaction=True)
        seqs = [hold[e] for e in queued if e in hold]
        if seqs:
            pipe.zrem(k.pending, *seqs)
            pipe.zrem(k.parked, *seqs)
        pipe.set(k.gold_queued, 1)
        pipe.execute()
    return {"project": name, "marked": len(out.tasks), "skipped": out.skipped,
            "labels": out.labels, "kinds": out.kinds, "paused": paused,
            "queued": queued, "replaced": replaced, "live": moved is not None}


def _leased(session: Any, redis: Any, k: Keys, ids: list[str]) -> dict[str, int]:
    """Those of tasks ``ids`` assigned to an annotator now (an issued lease), after
    releasing their reservations still held in inboxes (not handed out: nothing to wait
    for): id -> seq."""
    seq_of = dict(session.exec(select(col(Task.external_id), col(Task.seq)).where(
        col(Task.project_id) == k.project_id,
        col(Task.external_id).in_(list(dict.fromkeys(ids))))).all()) if ids else {}
    if not seq_of:
        return {}
    issued = _release_held(redis, Scripts(redis), k, [int(v) for v in seq_of.values()])
    return {str(e): int(seq) for e, seq in seq_of.items() if int(seq) in issued}


def _queue(session: Any, project: Any, deferred: list[tuple[GoldMark, int]],
           source: str | Path | None) -> list[str]:
    """Queue the deferred marks (``pending_gold_mark``); a task queued already keeps its
    row if the answer is the same, and is refused (naming the file's line) if not."""
    if not deferred:
        return []
    have = {int(r.task_id): r for r in session.exec(select(PendingGoldMark).where(
        col(PendingGoldMark.task_id).in_([t for _m, t in deferred])))}
    for m, tid in deferred:
        row = have.get(tid)
        if row is None:
            src = m.source or (None if source is None else str(source))
            session.add(PendingGoldMark(project_id=int(project.id or 0), task_id=tid,
                                        answer=m.answer, kind=m.kind,
                                        source=None if src is None else src[:500]))
        elif row.answer != m.answer:
            message = (f"task {m.task!r} is queued already with answer {row.answer!r} (it is "
                       "assigned right now, and is marked when its assignment ends); once "
                       "it is, a wrong gold answer is changed with labelq gold correct")
            if source is not None and m.line is not None:
                raise FileFormatError(str(source), m.line, "answer", message)
            raise Conflict(message, task=m.task)
    session.flush()
    return [m.task for m, _t in deferred]


def _replaced(session: Any, marks: Sequence[GoldMark], seqs: list[int],
              project_id: int) -> list[dict[str, str | None]]:
    """The queued marks of the tasks marked now (``seqs``) whose answer this mark replaces:
    queued while the task was assigned, the assignment ended since, the queue not applied
    yet. Each: ``task``, ``answer`` (now), ``queued_answer`` and ``queued_source`` (the
    file it came from, if any)."""
    if not seqs:
        return []
    answer = {m.task: m.answer for m in marks}
    rows = session.exec(select(col(Task.external_id), col(PendingGoldMark.answer),
                               col(PendingGoldMark.source))
                        .join(PendingGoldMark, col(PendingGoldMark.task_id) == col(Task.id))
                        .where(col(Task.project_id) == project_id, col(Task.seq).in_(seqs))
                        .order_by(col(Task.seq))).all()
    return [{"task": str(t), "answer": answer.get(str(t)), "queued_answer": str(a),
             "queued_source": src} for t, a, src in rows if answer.get(str(t)) != a]


def _unqueue(session: Any, seqs: list[int], project_id: int) -> None:
    """Delete the queued marks of the tasks marked now (the queue's own, being applied, or
    superseded by this mark): in the marking transaction, so each is applied once."""
    if not seqs:
        return
    tids = select(col(Task.id)).where(col(Task.project_id) == project_id,
                                      col(Task.seq).in_(seqs))
    session.execute(delete(PendingGoldMark).where(col(PendingGoldMark.task_id).in_(tids)))


def apply_queued_marks(engine: Engine, redis: Any, project_id: int, *,
                       wait_s: float = 5.0) -> dict[str, Any]:
    """Apply the project's queued gold marks whose tasks are no longer assigned (the
    applier after a run, the reaper on the beat). Cheap when there is nothing to do: one
    SQL query (none in a database older than the queue), then one ``HMGET`` of the tasks'
    live leases; the marking itself takes the apply lock (``wait_s``; busy: the next run
    tries again). A queued task made gold meanwhile by another mark is dropped from the
    queue (logged when the answers differ). Returns ``applied`` (task ids) and
    ``waiting`` (how many stay queued)."""
    k = Keys(project_id, database_id(engine))
    try:
        with session_scope(engine) as session:
            queue = list(session.exec(select(PendingGoldMark)
                                      .where(col(PendingGoldMark.project_id) == project_id)
                                      .order_by(col(PendingGoldMark.id))))
            task = {int(t.id or 0): t for t in session.exec(select(Task).where(
                col(Task.id).in_([p.task_id for p in queue])))} if queue else {}
            rows: list[tuple[PendingGoldMark, Task]] = []
            for p in queue:
                t = task[p.task_id]
                if not t.is_gold:
                    rows.append((p, t))
                    continue
                if t.gold_answer != p.answer:
                    log.warning("queued gold mark of task %r (answer %r) dropped: it is gold "
                                "already with answer %r", t.external_id, p.answer,
                                t.gold_answer)
                session.delete(p)
            name = _project_name(session, project_id) if rows else ""
            session.flush()
            session.expunge_all()  # (read below, after the transaction)
    except (OperationalError, ProgrammingError):  # (no pending_gold_mark: run labelq init)
        return {"applied": [], "waiting": 0}
    if not rows:
        redis.delete(k.gold_queued)
        return {"applied": [], "waiting": 0}
    counts = redis.hmget(k.reserved, [int(t.seq) for _p, t in rows])
    free = [r for r, n in zip(rows, counts, strict=True) if int(n or 0) == 0]
    if not free:
        redis.set(k.gold_queued, 1)  # (lost with a flushed Redis: the beat looks in SQL)
        return {"applied": [], "waiting": len(rows)}
    # each keeps its queue row's source (the file, ``review NAME``): the task's gold_source
    marks = [GoldMark(t.external_id, p.answer, kind=p.kind, source=p.source) for p, t in free]
    try:
        out = mark_gold_live(engine, redis, name, marks, wait_s=wait_s)
    except Conflict:  # the lock is busy: the next run tries again
        return {"applied": [], "waiting": len(rows)}
    applied = [m.task for m in marks if m.task not in set(out["queued"])]
    waiting = len(rows) - len(applied)
    if not waiting:
        redis.delete(k.gold_queued)
    return {"applied": applied, "waiting": waiting, "paused": out["paused"]}


def _external_id(session: Any, project_id: int, seq: int) -> str:
    return str(session.exec(select(Task.external_id).where(Task.project_id == project_id,
                                                       Task.seq == seq)).one())


def _release_held(redis: Any, scripts: Scripts, k: Keys, tasks: list[int]) -> set[int]:
    """Release the inbox reservations of ``tasks`` that no annotator has taken yet; returns
    those of ``tasks`` with an issued lease (or a reservation taken meanwhile)."""
    ids = [text(a) for a in redis.zrange(k.leases, 0, -1)]
    if not ids:
        return set()
    pipe = redis.pipeline(transaction=False)
    for a in ids:
        pipe.hmget(k.lease(a), "task", "held")
    want, issued = set(tasks), set()
    for a, (task, held) in zip(ids, pipe.execute(), strict=True):
        if task is None or int(task) not in want:
            continue
        if not held or not isinstance(scripts.release(k, a, held_only=True), Released):
            issued.add(int(task))
    return issued


def _put_back(redis: Any, k: Keys, out: MarkedGold, moved: GoldMarked) -> None:
    """Undo ``GOLD_MARK`` after the SQL side failed: the tasks back where they were."""
    pipe = redis.pipeline(transaction=True)
    pipe.srem(k.gold, *out.tasks)
    back = {t: p for t, p in zip(out.tasks, moved.priorities, strict=True) if p is not None}
    if back:
        pipe.zadd(k.pending, back)
    pipe.execute()


def _counts_after(redis: Any, k: Keys, out: MarkedGold, record: dict[str, int]) -> None:
    """The marked tasks each worker was given now count as gold questions given (as a
    rebuild counts them), and the gold records of their labellers include the new gold
    answers (``record``: :func:`judge_gold_answers`'s fields)."""
    pipe = redis.pipeline(transaction=True)
    for (w, c), n in sorted(out.issued.items()):
        pipe.hincrby(k.nissued, gold_issued_field(w), n)
        pipe.hincrby(k.nissued, gold_category_field(w, c), n)
    if record:
        pipe.hset(k.nissued, mapping=record)
    pipe.execute()
