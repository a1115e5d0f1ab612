"""A project's status counters, kept as labels are applied (issue 36).

``labelq status``, the API's status and the dashboard's status read tasks by state (per
category), labels and gold answers per annotator. Counted over every label on each request
that took seconds at a few thousand labels under load and grows with the labels; here
they come from counters:

* ``task_tally``: tasks per (category, number of labels) — gold tasks included; a task's
  state follows from its count and the project's cap when read, so a raised cap needs no
  recount;
* ``worker_tally``: labels and gold answers per annotator;
* ``status_tally``: how far they are folded — every label with ``applied_seq <=
  applied_seq`` (the applier's order: its batches commit in that order, under its lock, so
  nothing below the mark can appear later) and every task with ``seq < n_tasks``.

:func:`fold` moves the mark forward over the labels applied since (the applier calls it
after each run, the beat's upkeep too), in one transaction that only commits if nobody
moved the mark meanwhile. :func:`counts` is the counters plus what they do not hold yet:
tasks loaded since, labels applied since the mark and labels not applied yet (both read by
``ix_label_project_applied``: as many as there are), the gold questions' own counts (a task
made gold later changes state, not count: read per gold question) — never every label.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import func, or_, select
from sqlalchemy.exc import OperationalError, ProgrammingError
from sqlmodel import Session

from .models import Label, StatusTally, Task, TaskTally, Worker, WorkerTally

__all__ = ["Counts", "counts", "fold", "forget"]

_CHUNK = 500  # task ids per IN (...) list


@dataclass
class Counts:
    """What :func:`counts` reads: tasks per (category, labels) without the gold questions,
    gold questions per category, labels and gold answers per worker id, the labels not
    applied yet and the oldest one's time."""

    hist: Counter = field(default_factory=Counter)            # (category, n) -> tasks
    gold: Counter = field(default_factory=Counter)            # category -> gold questions
    labels: Counter = field(default_factory=Counter)          # worker id -> labels
    gold_answers: Counter = field(default_factory=Counter)    # worker id -> gold answers
    unapplied: int = 0
    oldest_unapplied: datetime | None = None


def _mark(session: Session, pid: int) -> tuple[int, int, bool]:
    """(applied_seq, n_tasks, whether the counters exist) of project ``pid``: (0, 0) when
    none were folded, or on a database whose schema predates them (``labelq init`` adds
    the tables; until then everything is read as not folded)."""
    try:
        with session.begin_nested():
            row = session.exec(select(StatusTally.applied_seq, StatusTally.n_tasks)  # type: ignore[call-overload]
                               .where(StatusTally.project_id == pid)).first()
    except (OperationalError, ProgrammingError):
        return 0, 0, False
    return (int(row[0]), int(row[1]), True) if row is not None else (0, 0, True)


def _chunks(ids: list[int]) -> Iterable[list[int]]:
    for i in range(0, len(ids), _CHUNK):
        yield ids[i:i + _CHUNK]


def _folded_counts(session: Session, pid: int, task_ids: list[int], upto: int
                   ) -> dict[int, tuple[str, int]]:
    """task id -> (category, labels with ``applied_seq <= upto``) for ``task_ids`` (two
    index lookups per chunk: no join, which SQLite planned as a scan of the labels)."""
    out: dict[int, tuple[str, int]] = {}
    for chunk in _chunks(sorted(task_ids)):
        n = dict(session.exec(select(Label.task_id, func.count())  # type: ignore[call-overload]
                              .where(Label.project_id == pid,
                                     Label.task_id.in_(chunk),  # type: ignore[attr-defined]
                                     Label.applied_seq <= upto)  # type: ignore[operator]
                              .group_by(Label.task_id)).all())
        for tid, cat in session.exec(select(Task.id, Task.category)  # type: ignore[call-overload]
                                     .where(Task.id.in_(chunk))).all():  # type: ignore[union-attr]
            out[int(tid)] = (cat, int(n.get(tid, 0)))
    return out


def _new_tasks(session: Session, pid: int, since: int, upto: int | None = None) -> Counter:
    """Tasks with ``since <= seq (< upto)`` by category."""
    cond = [Task.project_id == pid, Task.seq >= since]
    if upto is not None:
        cond.append(Task.seq < upto)
    return Counter({cat: int(c) for cat, c in session.exec(  # type: ignore[call-overload]
        select(Task.category, func.count()).where(*cond).group_by(Task.category)).all()})


def _move(hist: Counter, folded: dict[int, tuple[str, int]], delta: Counter) -> None:
    """Each task of ``delta`` from its folded count to that plus its new labels."""
    for tid, (cat, before) in folded.items():
        hist[(cat, before)] -= 1
        hist[(cat, before + delta[tid])] += 1


def counts(session: Session, pid: int) -> Counts:
    """Project ``pid``'s status counts now (see the module docstring)."""
    applied, n_tasks, _ = _mark(session, pid)
    out = Counts()
    for cat, n, tasks in session.exec(select(TaskTally.category, TaskTally.n_labels,  # type: ignore[call-overload]
                                             TaskTally.tasks)
                                      .where(TaskTally.project_id == pid)).all() \
            if (applied or n_tasks) else []:
        out.hist[(cat, int(n))] += int(tasks)
    if applied or n_tasks:
        for wid, n, g in session.exec(select(WorkerTally.worker_id, WorkerTally.labels,  # type: ignore[call-overload]
                                             WorkerTally.gold)
                                      .where(WorkerTally.project_id == pid)).all():
            out.labels[int(wid)] += int(n)
            out.gold_answers[int(wid)] += int(g)
    # the labels the counters do not hold: applied after the mark, and not applied yet
    delta: Counter = Counter()
    late = or_(Label.applied_seq > applied, Label.applied_seq.is_(None))  # type: ignore[operator, union-attr]
    for tid, wid, gold, seq, received in session.exec(  # type: ignore[call-overload]
            select(Label.task_id, Label.worker_id, Label.is_gold, Label.applied_seq,
                   Label.received).where(Label.project_id == pid, late)).all():
        delta[int(tid)] += 1
        out.labels[int(wid)] += 1
        if gold:
            out.gold_answers[int(wid)] += 1
        if seq is None:
            out.unapplied += 1
            if out.oldest_unapplied is None or received < out.oldest_unapplied:
                out.oldest_unapplied = received
    # tasks loaded since the mark (read after the labels: a task of theirs is among them)
    for cat, c in _new_tasks(session, pid, n_tasks).items():
        out.hist[(cat, 0)] += c
    _move(out.hist, _folded_counts(session, pid, list(delta), applied), delta)
    # gold questions: their state is "gold" whatever their count
    gold_ids = [int(t[0]) for t in session.exec(select(Task.id)  # type: ignore[call-overload]
                                             .where(Task.project_id == pid,
                                                    Task.is_gold.is_(True))).all()]  # type: ignore[attr-defined]
    for tid, (cat, n) in _folded_counts(session, pid, gold_ids, applied).items():
        out.hist[(cat, n + delta[tid])] -= 1
        out.gold[cat] += 1
    return out


def fold(session: Session, pid: int) -> int:
    """Move project ``pid``'s counters forward over the labels applied and the tasks loaded
    since the mark; returns the labels folded. Commits nothing itself: the caller's
    transaction; refused (0, nothing written) when the counters moved meanwhile."""
    applied, n_tasks, exists = _mark(session, pid)
    if not exists:
        return 0
    upto = int(session.exec(select(func.coalesce(func.max(Label.applied_seq), 0))  # type: ignore[call-overload]
                            .where(Label.project_id == pid)).one()[0])
    tasks_now = int(session.exec(select(func.coalesce(func.max(Task.seq) + 1, 0))  # type: ignore[call-overload]
                                 .where(Task.project_id == pid)).one()[0])
    if upto <= applied and tasks_now <= n_tasks:
        return 0
    hist: Counter = Counter()
    for cat, c in _new_tasks(session, pid, n_tasks, tasks_now).items():
        hist[(cat, 0)] += c
    delta: Counter = Counter()
    labels: Counter = Counter()
    gold: Counter = Counter()
    for tid, wid, g in session.exec(select(Label.task_id, Label.worker_id, Label.is_gold)  # type: ignore[call-overload]
                                    .where(Label.project_id == pid,
                                           Label.applied_seq > applied,  # type: ignore[operator]
                                           Label.applied_seq <= upto)).all():  # type: ignore[operator]
        delta[int(tid)] += 1
        labels[int(wid)] += 1
        if g:
            gold[int(wid)] += 1
    _move(hist, _folded_counts(session, pid, list(delta), applied), delta)
    conn = session.connection()
    if not exists or (applied, n_tasks) == (0, 0):
        found = session.exec(select(StatusTally.project_id)  # type: ignore[call-overload]
                             .where(StatusTally.project_id == pid)).first()
        if found is None:
            session.add(StatusTally(project_id=pid, applied_seq=0, n_tasks=0))
            session.flush()
    moved = conn.execute(
        StatusTally.__table__.update()  # type: ignore[attr-defined]
        .where(StatusTally.project_id == pid, StatusTally.applied_seq == applied,
               StatusTally.n_tasks == n_tasks)
        .values(applied_seq=upto, n_tasks=max(tasks_now, n_tasks)))
    if moved.rowcount == 0:
        return 0
    _add(session, TaskTally, pid, {k: v for k, v in hist.items() if v},
         lambda k: {"category": k[0], "n_labels": k[1]}, lambda v: {"tasks": v})
    _add(session, WorkerTally, pid, {w: (labels[w], gold[w]) for w in labels},
         lambda k: {"worker_id": k}, lambda v: {"labels": v[0], "gold": v[1]})
    return sum(delta.values())


def _add(session: Session, model: Any, pid: int, changes: dict, key, value) -> None:
    """Add ``changes`` to the counter rows of ``model`` (made where missing)."""
    table = model.__table__
    conn = session.connection()
    for k, v in changes.items():
        where = [getattr(table.c, c) == x for c, x in key(k).items()]
        if model is TaskTally:
            where.append(table.c.project_id == pid)
        inc = {c: getattr(table.c, c) + x for c, x in value(v).items()}
        if conn.execute(table.update().where(*where).values(**inc)).rowcount == 0:
            conn.execute(table.insert().values(project_id=pid, **key(k), **value(v)))


def forget(session: Session, pid: int) -> None:
    """Drop project ``pid``'s counters (the project is deleted)."""
    conn = session.connection()
    try:
        with session.begin_nested():
            for model in (TaskTally, WorkerTally, StatusTally):
                conn.execute(model.__table__.delete()  # type: ignore[attr-defined]
                             .where(model.__table__.c.project_id == pid))  # type: ignore[attr-defined]
    except (OperationalError, ProgrammingError):
        pass  # a database without the counters' tables


def worker_rows(session: Session, pid: int) -> list[tuple[int, str, str, float, Any]]:
    """(id, handle, status, cost, capacity) of the project's workers, by seq."""
    return [tuple(r) for r in session.exec(  # type: ignore[call-overload, misc]
        select(Worker.id, Worker.handle, Worker.status, Worker.cost, Worker.capacity)
        .where(Worker.project_id == pid).order_by(Worker.seq)).all()]
