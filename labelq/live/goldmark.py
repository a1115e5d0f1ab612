"""``labelq gold mark``: ordinary tasks become gold questions while the pipeline runs.

SQL and the hot state move together, under the project's apply lock (no applier folds
labels meanwhile):

1. :func:`labelq.record.projects.mark_gold` rewrites the tasks and their labels in an open
   transaction, and, when some of the tasks are of kind ``audit`` (a random sample), the
   workers whose labels became gold answers are judged as the applier judges a gold answer
   (:func:`.applier.judge_gold_answers`: the quality rule, and their gold records); answers
   to chosen gold (``suggested``, ``reviewed``) score no one, so they judge no one;
2. reservations of the tasks still held in inboxes (not handed out yet) are released, and
   ``GOLD_MARK`` moves the tasks from ``pending``/``parked`` to ``gold`` in one step,
   refused while one of them is assigned to an annotator (a label submitted on it would be
   recorded as an ordinary one) -- then the transaction rolls back;
3. the transaction commits (if it fails, the tasks go back to ``pending`` with their
   priorities; a process killed between 2 and 3 leaves them gold in Redis only, which
   ``labelq rebuild`` repairs);
4. the workers' gold-schedule counts (``g{w}``, ``g{w}:{c}``: the marked tasks they were
   given are gold questions given) and those gold records move as a rebuild would set them, and
   a new epoch makes every process fold its policy state again from SQL.

A project with no hot state yet (never served, or Redis flushed) needs only step 1: its
rebuild reads SQL.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Engine
from sqlmodel import select

from ..errors import Conflict
from ..record.db import database_id, session_scope
from ..record.models import Task
from ..record.projects import GoldMark, MarkedGold, get_project, mark_gold
from .applier import judge_gold_answers
from .hotstate import bump_epoch
from .redis.keys import Keys, gold_category_field, gold_issued_field
from .redis.lock import RedisLock
from .redis.scripts import GoldMarked, GoldMarkLeased, Released, Scripts
from .redis.wire import text

__all__ = ["mark_gold_live"]


def mark_gold_live(engine: Engine, redis: Any, name: str, marks: Sequence[GoldMark], *,
                   source: str | Path | None = None, wait_s: float = 60.0,
                   kind: str | None = None) -> dict[str, Any]:
    """Mark ``marks`` in project ``name`` (see the module docstring) as gold of ``kind``
    (None: each task's default, :func:`labelq.record.projects.mark_gold`); ``redis``
    None: SQL only (the caller must have the project rebuilt before annotators go on).
    Returns ``marked``, ``skipped``, ``labels`` (now gold answers), ``kinds`` (how many
    marked of each kind), ``paused`` (handles the quality rule paused on them) and
    ``live`` (whether a hot state was updated)."""
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


def _mark(engine: Engine, redis: Any, name: str, marks: Sequence[GoldMark],
          source: str | Path | None, kind: str | None) -> dict[str, Any]:
    moved: GoldMarked | None = None
    k: Keys | None = None
    try:
        with session_scope(engine) as session:
            project = get_project(session, name)
            k = Keys(int(project.id or 0), database_id(engine))
            built = redis is not None and bool(redis.hexists(k.meta, "built"))
            out = mark_gold(session, project, marks, source=source, kind=kind)
            paused, record = judge_gold_answers(session, project, out.random_workers,
                                                out.category_names)
            if built and out.tasks:
                scripts = Scripts(redis)
                _release_held(redis, scripts, k, out.tasks)
                got = scripts.gold_mark(k, out.tasks)
                if isinstance(got, GoldMarkLeased):
                    ext = _external_id(session, k.project_id, got.task)
                    raise Conflict(
                        f"task {ext!r} is assigned right now ({got.leases} live "
                        f"assignment{'' if got.leases == 1 else 's'}); nothing was marked. "
                        "Try again when its assignments are submitted or expire.",
                        project=name, task=ext)
                moved = got
    except BaseException:
        if moved is not None and k is not None:
            _put_back(redis, k, out, moved)
        raise
    if moved is not None and k is not None:
        _counts_after(redis, k, out, record)
        bump_epoch(redis, k)
    return {"project": name, "marked": len(out.tasks), "skipped": out.skipped,
            "labels": out.labels, "kinds": out.kinds, "paused": paused,
            "live": moved is not None}


def _external_id(session: Any, project_id: int, seq: int) -> str:
    return str(session.exec(select(Task.external_id).where(Task.project_id == project_id,
                                                       Task.seq == seq)).one())


def _release_held(redis: Any, scripts: Scripts, k: Keys, tasks: list[int]) -> int:
    """Release the inbox reservations of ``tasks`` that no annotator has taken yet (the
    applier, which makes them, waits for the lock held meanwhile); how many."""
    ids = [text(a) for a in redis.zrange(k.leases, 0, -1)]
    if not ids:
        return 0
    pipe = redis.pipeline(transaction=False)
    for a in ids:
        pipe.hmget(k.lease(a), "task", "held")
    want, n = set(tasks), 0
    for a, (task, held) in zip(ids, pipe.execute(), strict=True):
        if task is not None and held and int(task) in want:
            n += isinstance(scripts.release(k, a, held_only=True), Released)
    return n


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
