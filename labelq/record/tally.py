"""A project's status counters, kept as labels are applied (issue 36).

``labelq status``, the API's status and the dashboard's status read tasks by state (per
category), labels and gold answers per annotator. Counted over every label on each request
that took seconds at a few thousand labels under load and grows with the labels; here
they come from counters:

* ``task_tally``: tasks per (category, number of labels) — every task but the gold
  questions loaded as gold; a task's state follows from its count and the project's cap
  when read, so a raised cap needs no recount;
* ``gold_tally``: the gold questions loaded as gold, per category (gold whatever their
  labels);
* ``worker_tally``: labels and gold answers (to gold questions loaded as gold) per
  annotator;
* ``status_tally``: how far they are folded — every label with ``applied_seq <=
  applied_seq`` (the applier's order: its batches commit in that order, under its lock, so
  nothing below the mark can appear later) and every task with ``seq < n_tasks`` — and
  the counters' layout (:data:`VERSION`; those of an earlier labelq are folded again).

:func:`fold` moves the mark forward over the labels applied since (the applier calls it
after each run, the beat's upkeep too), in one transaction that only commits if nobody
moved the mark meanwhile. :func:`counts` is the counters plus what they do not hold yet,
each read as an index range, as many rows as there are: tasks loaded since
(``uq_task_seq``), labels applied since the mark and labels not applied yet (two ranges of
``ix_label_project_applied``), and the tasks made gold after loading (``labelq gold mark``:
``ix_task_project_marked``, partial), whose state moved to gold and whose labels became
gold answers whatever the counters hold of them — never every label, nor every gold
question.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Table, and_, func, literal, select, union_all
from sqlalchemy.exc import OperationalError, ProgrammingError
from sqlmodel import Session, SQLModel, col

from .models import GoldTally, Label, StatusTally, Task, TaskTally, Worker, WorkerTally

__all__ = ["Counts", "counts", "fold", "forget", "worker_rows", "schema_current",
           "forget_schema", "VERSION"]

VERSION = 2  # 2: loaded gold questions in gold_tally, marked ones read when status is
_CHUNK = 500  # task ids per IN (...) list

# a task's place in the counters: loaded as gold (gold_tally), or by its label count
_LOADED_GOLD = and_(col(Task.is_gold).is_(True), col(Task.marked).is_(None))


def _table(model: type[SQLModel]) -> Table:
    table: Table = getattr(model, "__table__")
    return table


def _id(x: int | None) -> int:
    """A primary key read back (never NULL; its column is typed ``int | None``)."""
    assert x is not None
    return x


@dataclass
class Counts:
    """What :func:`counts` reads: tasks per (category, labels) without the gold questions,
    gold questions per category, labels and gold answers per worker id, the labels not
    applied yet and the oldest one's time."""

    hist: Counter[tuple[str, int]] = field(default_factory=Counter)  # (category, n) -> tasks
    gold: Counter[str] = field(default_factory=Counter)       # category -> gold questions
    labels: Counter[int] = field(default_factory=Counter)     # worker id -> labels
    gold_answers: Counter[int] = field(default_factory=Counter)  # worker id -> gold answers
    unapplied: int = 0
    oldest_unapplied: datetime | None = None


@dataclass
class _Mark:
    applied: int = 0
    n_tasks: int = 0
    exists: bool = False          # the counters' tables exist
    version: int | None = None    # the layout of the project's counters
    row: bool = False             # the project has a status_tally row

    @property
    def usable(self) -> bool:
        """Whether the counters hold anything of this layout."""
        return self.exists and self.version == VERSION and bool(self.applied or self.n_tasks)


# (engine, database identity) of the databases seen with every table and column of this
# module's layout: asked once per database and process, as the schema only grows
_CURRENT: set[tuple[int, str]] = set()


def schema_current(session: Session) -> bool:
    """Whether the database has the counters of this layout (``status_tally.version``,
    ``gold_tally``, ``ended_tally``) and the dashboard's ``dashboard_figures``: one
    savepoint the first time per database and process, then from memory. A database of an
    earlier labelq has not, until ``labelq init``: status is read from the labels then."""
    from .db import database_id
    from .models import DashboardFigures, EndedTally

    try:
        key: tuple[int, str] | None = (id(session.get_bind()), database_id(session))
    except Exception:  # noqa: BLE001 - no identity: asked every time
        key = None
    if key in _CURRENT:
        return True
    try:
        with session.begin_nested():  # (its savepoint: on the connection it procures)
            conn = session.connection()
            for c in (col(StatusTally.version), col(GoldTally.tasks), col(EndedTally.n),
                      col(DashboardFigures.took_s)):
                conn.execute(select(c).limit(1)).all()
    except (OperationalError, ProgrammingError):
        return False
    if key is not None:
        _CURRENT.add(key)
    return True


def forget_schema() -> None:
    """Ask :func:`schema_current` again (a test that drops tables of a database it read)."""
    _CURRENT.clear()


def _mark(session: Session, pid: int) -> _Mark:
    """How far project ``pid``'s counters are folded: nothing on a database whose schema
    predates them (``labelq init`` adds the tables and columns; until then everything is
    read as not folded)."""
    if not schema_current(session):
        return _Mark()
    row = session.connection().execute(
        select(col(StatusTally.applied_seq), col(StatusTally.n_tasks),
               col(StatusTally.version))
        .where(col(StatusTally.project_id) == pid)).first()
    if row is None:
        return _Mark(exists=True)
    return _Mark(int(row[0]), int(row[1]), True, None if row[2] is None else int(row[2]),
                 True)


def _chunks(ids: Sequence[int]) -> Iterable[list[int]]:
    ids = sorted(ids)
    for i in range(0, len(ids), _CHUNK):
        yield ids[i:i + _CHUNK]


@dataclass(frozen=True)
class _TaskCount:
    category: str
    labels: int        # labels with applied_seq <= the mark
    loaded_gold: bool  # a gold question loaded as gold (counted in gold_tally)


def _folded_counts(session: Session, pid: int, task_ids: Iterable[int], upto: int
                   ) -> dict[int, _TaskCount]:
    """task id -> its category, labels with ``applied_seq <= upto`` and whether it is a gold
    question loaded as gold, for ``task_ids`` (two index lookups per chunk: no join, which
    SQLite planned as a scan of the labels)."""
    out: dict[int, _TaskCount] = {}
    conn = session.connection()
    for chunk in _chunks(list(task_ids)):
        n: dict[int, int] = {int(t): int(c) for t, c in conn.execute(
            select(col(Label.task_id), func.count())
            .where(col(Label.project_id) == pid, col(Label.task_id).in_(chunk),
                   col(Label.applied_seq) <= upto)
            .group_by(col(Label.task_id))).all()}
        for tid, cat, loaded_gold in conn.execute(
                select(col(Task.id), col(Task.category), _LOADED_GOLD)
                .where(col(Task.id).in_(chunk))).all():
            out[_id(tid)] = _TaskCount(cat, n.get(_id(tid), 0), bool(loaded_gold))
    return out


def _new_tasks(session: Session, pid: int, since: int, upto: int | None = None
               ) -> tuple[Counter[str], Counter[str]]:
    """Tasks with ``since <= seq (< upto)`` by category: (the others, loaded gold)."""
    cond = [col(Task.project_id) == pid, col(Task.seq) >= since]
    if upto is not None:
        cond.append(col(Task.seq) < upto)
    plain: Counter[str] = Counter()
    gold: Counter[str] = Counter()
    for cat, loaded_gold, c in session.connection().execute(
            select(col(Task.category), _LOADED_GOLD.label("g"), func.count()).where(*cond)
            .group_by(col(Task.category), "g")).all():
        (gold if loaded_gold else plain)[cat] += int(c)
    return plain, gold


def _move(hist: Counter[tuple[str, int]], folded: Mapping[int, _TaskCount],
          delta: Mapping[int, int]) -> None:
    """Each task of ``delta`` (but the loaded gold questions: not in ``hist``) from its
    folded count to that plus its new labels."""
    for tid, tc in folded.items():
        if not tc.loaded_gold:
            hist[(tc.category, tc.labels)] -= 1
            hist[(tc.category, tc.labels + delta.get(tid, 0))] += 1


def _marked(session: Session, pid: int) -> set[int]:
    """The ids of the tasks made gold after loading (the partial index's range)."""
    return {_id(t) for t in session.connection().execute(
        select(col(Task.id)).where(col(Task.project_id) == pid,
                                   col(Task.marked).is_not(None))).scalars()}


def counts(session: Session, pid: int) -> Counts:
    """Project ``pid``'s status counts now (see the module docstring).

    They are read in several statements, and under PostgreSQL's READ COMMITTED each sees
    the commits made before it: a :func:`fold` committed between reading the mark and
    reading the counters would have its labels counted twice, in the counters and again as
    applied after the (old) mark. A fold always moves the mark (its applied sequence, its
    task count or, after a reset, its version), so the mark is read again at the end and
    the counts read again while it moved."""
    m = _mark(session, pid)
    for _ in range(4):
        out = _counts_at(session, pid, m)
        again = _mark(session, pid)
        if again == m:
            return out
        m = again
    return _counts_at(session, pid, m)  # (folds without end: as read against the last)


def _counts_at(session: Session, pid: int, m: _Mark) -> Counts:
    """:func:`counts` against the mark ``m`` read before."""
    applied, n_tasks = (m.applied, m.n_tasks) if m.usable else (0, 0)
    out = Counts()
    if m.usable:
        for cat, n, tasks in session.connection().execute(
                select(col(TaskTally.category), col(TaskTally.n_labels), col(TaskTally.tasks))
                .where(col(TaskTally.project_id) == pid)).all():
            out.hist[(cat, int(n))] += int(tasks)
        for cat, tasks in session.connection().execute(
                select(col(GoldTally.category), col(GoldTally.tasks))
                .where(col(GoldTally.project_id) == pid)).all():
            out.gold[cat] += int(tasks)
        for wid, n, g in session.connection().execute(
                select(col(WorkerTally.worker_id), col(WorkerTally.labels),
                       col(WorkerTally.gold))
                .where(col(WorkerTally.project_id) == pid)).all():
            out.labels[int(wid)] += int(n)
            out.gold_answers[int(wid)] += int(g)
    # the tasks made gold after loading: their labels are gold answers (counted below, in
    # full), never in the counters' gold answers
    marked = _marked(session, pid)
    # the labels the counters do not hold: applied after the mark, and not applied yet
    # (two ranges of ix_label_project_applied; an OR of both SQLite read as a scan)
    delta: Counter[int] = Counter()
    info: dict[int, tuple[str, bool]] = {}  # late task -> (category, loaded gold)
    last_id = 0
    conn = session.connection()
    late_tasks = []
    late_rows = []
    for unapplied, cond in ((False, col(Label.applied_seq) > applied),
                            (True, col(Label.applied_seq).is_(None))):
        late_tasks.append(select(col(Label.task_id)).where(col(Label.project_id) == pid, cond))
        late_rows.append(select(col(Label.id), col(Label.task_id), col(Label.worker_id),
                                col(Label.is_gold), col(Task.category), _LOADED_GOLD.label("g"),
                                literal(unapplied).label("u"))
                         .join(Task, col(Task.id) == col(Label.task_id))
                         .where(col(Label.project_id) == pid, cond))
    for lid, tid, wid, gold, cat, loaded, unapplied in conn.execute(
            union_all(*late_rows)).all():
        last_id = max(last_id, _id(lid))
        delta[int(tid)] += 1
        info[int(tid)] = (str(cat), bool(loaded))
        out.labels[int(wid)] += 1
        if gold and int(tid) not in marked:
            out.gold_answers[int(wid)] += 1
        out.unapplied += bool(unapplied)
    if out.unapplied:
        out.oldest_unapplied = conn.execute(
            select(func.min(col(Label.received)))
            .where(col(Label.project_id) == pid, col(Label.applied_seq).is_(None))).scalar()
    # tasks loaded since the mark (read after the labels: a task of theirs is among them)
    plain, loaded_gold = _new_tasks(session, pid, n_tasks)
    for cat, c in plain.items():
        out.hist[(cat, 0)] += c
    out.gold.update(loaded_gold)
    # each late task from its folded count to that plus its late labels: its folded labels
    # are its labels up to the last late one read less its late ones, counted in
    # ix_label_project_task alone, one statement (reading each label's applied_seq was
    # most of a status read; on SQLite, whose writers take turns, no label below that id
    # commits later)
    if delta:
        total = {int(t): int(c) for t, c in conn.execute(
            select(col(Label.task_id), func.count())
            .where(col(Label.project_id) == pid, col(Label.id) <= last_id,
                   col(Label.task_id).in_(union_all(*late_tasks)))
            .group_by(col(Label.task_id))).all()}
        for tid, n in delta.items():
            cat, loaded = info[tid]
            if not loaded:
                folded = total.get(tid, n) - n
                out.hist[(cat, folded)] -= 1
                out.hist[(cat, folded + n)] += 1
    # the tasks made gold after loading: counted by their labels in ``hist`` (as every
    # task but the loaded gold), they are gold questions now; their labels gold answers
    for tid, tc in _folded_counts(session, pid, marked, applied).items():
        out.hist[(tc.category, tc.labels + delta.get(tid, 0))] -= 1
        out.gold[tc.category] += 1
    for chunk in _chunks(list(marked)):
        for wid, c in session.connection().execute(
                select(col(Label.worker_id), func.count())
                .where(col(Label.project_id) == pid, col(Label.task_id).in_(chunk),
                       col(Label.is_gold).is_(True))
                .group_by(col(Label.worker_id))).all():
            out.gold_answers[int(wid)] += int(c)
    return out


def _reset(session: Session, pid: int, m: _Mark) -> bool:
    """Counters of another layout (an earlier labelq's): dropped and the mark put back to
    nothing folded, in the caller's transaction; False if someone else did it first."""
    st = _table(StatusTally)
    done = session.connection().execute(
        st.update().where(st.c.project_id == pid,
                          st.c.applied_seq == m.applied, st.c.n_tasks == m.n_tasks,
                          st.c.version.is_(None) if m.version is None
                          else st.c.version == m.version)
        .values(applied_seq=0, n_tasks=0, version=VERSION))
    if done.rowcount == 0:
        return False
    for model in (TaskTally, GoldTally, WorkerTally):
        t = _table(model)
        session.connection().execute(t.delete().where(t.c.project_id == pid))
    return True


def fold(session: Session, pid: int) -> int:
    """Move project ``pid``'s counters forward over the labels applied and the tasks loaded
    since the mark; returns the labels folded. Commits nothing itself: the caller's
    transaction; refused (0, nothing written) when the counters moved meanwhile."""
    m = _mark(session, pid)
    if not m.exists:
        return 0
    if not m.row:
        session.add(StatusTally(project_id=pid, applied_seq=0, n_tasks=0, version=VERSION))
        session.flush()  # (two first folds racing: the loser's flush fails, nothing kept)
        m = _Mark(0, 0, True, VERSION, True)
    elif m.version != VERSION:
        if not _reset(session, pid, m):
            return 0
        m = _Mark(0, 0, True, VERSION, True)
    applied, n_tasks = m.applied, m.n_tasks
    conn = session.connection()
    upto = int(conn.execute(select(func.max(col(Label.applied_seq)))
                            .where(col(Label.project_id) == pid)).scalar_one() or 0)
    last = conn.execute(select(func.max(col(Task.seq)))
                        .where(col(Task.project_id) == pid)).scalar_one()
    tasks_now = 0 if last is None else int(last) + 1
    if upto <= applied and tasks_now <= n_tasks:
        return 0
    hist: Counter[tuple[str, int]] = Counter()
    plain, new_gold = _new_tasks(session, pid, n_tasks, tasks_now)
    for cat, c in plain.items():
        hist[(cat, 0)] += c
    delta: Counter[int] = Counter()
    labels: Counter[int] = Counter()
    gold_given: Counter[tuple[int, int]] = Counter()  # (worker, task) of gold labels
    for tid, wid, g in session.connection().execute(
            select(col(Label.task_id), col(Label.worker_id), col(Label.is_gold))
            .where(col(Label.project_id) == pid, col(Label.applied_seq) > applied,
                   col(Label.applied_seq) <= upto)
            .execution_options(yield_per=50_000)):
        delta[int(tid)] += 1
        labels[int(wid)] += 1
        if g:
            gold_given[(int(wid), int(tid))] += 1
    folded = _folded_counts(session, pid, delta, applied)
    gold: Counter[int] = Counter()
    for (wid, tid), c in gold_given.items():  # answers to loaded gold (marked: when read)
        tc = folded.get(tid)
        if tc is not None and tc.loaded_gold:
            gold[wid] += c
    _move(hist, folded, delta)
    st = _table(StatusTally)
    moved = session.connection().execute(
        st.update()
        .where(st.c.project_id == pid, st.c.applied_seq == applied,
               st.c.n_tasks == n_tasks, st.c.version == VERSION)
        .values(applied_seq=upto, n_tasks=max(tasks_now, n_tasks)))
    if moved.rowcount == 0:
        return 0
    _add(session, TaskTally, pid, {k: (v,) for k, v in hist.items() if v},
         lambda k: {"category": k[0], "n_labels": k[1]}, ("tasks",))
    _add(session, GoldTally, pid, {k: (v,) for k, v in new_gold.items() if v},
         lambda k: {"category": k}, ("tasks",))
    _add(session, WorkerTally, pid, {w: (labels[w], gold[w]) for w in labels},
         lambda k: {"worker_id": k}, ("labels", "gold"))
    return sum(delta.values())


def _add(session: Session, model: type[SQLModel], pid: int,
         changes: Mapping[Any, tuple[int, ...]], key: Callable[[Any], dict[str, Any]],
         columns: tuple[str, ...]) -> None:
    """Add ``changes`` (values of ``columns``) to the counter rows of ``model``, made where
    missing."""
    table = _table(model)
    conn = session.connection()
    for k, v in changes.items():
        where = [table.c[c] == x for c, x in key(k).items()]
        if model is not WorkerTally:
            where.append(table.c.project_id == pid)
        inc = {c: table.c[c] + x for c, x in zip(columns, v, strict=True)}
        if conn.execute(table.update().where(*where).values(**inc)).rowcount == 0:
            conn.execute(table.insert().values(project_id=pid, **key(k),
                                               **dict(zip(columns, v, strict=True))))


def forget(session: Session, pid: int) -> None:
    """Drop project ``pid``'s counters (the project is deleted)."""
    for model in (TaskTally, GoldTally, WorkerTally, StatusTally):
        try:
            with session.begin_nested():  # (its savepoint: on the connection it procures)
                t = _table(model)
                session.connection().execute(t.delete().where(t.c.project_id == pid))
        except (OperationalError, ProgrammingError):
            pass  # a database without this counter's table


def worker_rows(session: Session, pid: int) -> list[tuple[int, str, str, float, int | None]]:
    """(id, handle, status, cost, capacity) of the project's workers, by seq."""
    return [(_id(i), h, st, float(c), cap) for i, h, st, c, cap in session.connection().execute(
        select(col(Worker.id), col(Worker.handle), col(Worker.status), col(Worker.cost),
               col(Worker.capacity))
        .where(col(Worker.project_id) == pid).order_by(col(Worker.seq))).all()]

