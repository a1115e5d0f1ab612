"""From the durable record to the policy contract: ``Problem`` and ``Observation``s.

A :class:`ProjectView` holds the fixed facts of one project in dense-index arrays (task
category and gold answer by task seq, worker cost and capacity by worker seq). Labels become
observations through one SQL join, so the hot path never keeps id maps.
"""

from __future__ import annotations

import gc
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal, cast, overload

import numpy as np
from sqlalchemy import bindparam, func
from sqlalchemy import select as sa_select
from sqlmodel import Session, col, select

from ..policies.base import Observation, Problem
from .models import Label, ModelVersion, Project, Task, Worker
from .predictions import read_predictions, source_name

__all__ = ["ProjectView", "load_view", "label_rows", "to_observation", "count_workers",
           "gc_paused", "project_predictions", "model_sources"]


@contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic garbage collector off for the block (back on after it, if it was on).
    For the O(tasks) steps of a state load or snapshot, which make a million tuples,
    floats or small lists at once: each few hundred of them set off a collection, which
    then walks the younger ones, and every few of those the whole heap — at 1M tasks about
    two thirds of those steps' time. They make no garbage cycles."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


@dataclass
class ProjectView:
    project: Project
    categories: list[str]
    task_category: np.ndarray  # int (n_tasks,)
    is_gold: np.ndarray  # bool (n_tasks,)
    gold_answer: np.ndarray  # int (n_tasks,), -1 where not gold
    worker_cost: np.ndarray
    worker_capacity: np.ndarray  # -1 = unlimited
    task_id: np.ndarray | None = None  # int (n_tasks,): the SQL ``Task.id`` of each seq
    # the latest version of each model's predictions (issue 42): source ``MODEL@vN`` ->
    # float (n_tasks, n_classes), a row of NaN where it gave none; None without any
    predictions: dict[str, np.ndarray] | None = None

    @property
    def n_tasks(self) -> int:
        return int(self.task_category.size)

    @property
    def n_workers(self) -> int:
        return int(self.worker_cost.size)

    @property
    def dims(self) -> tuple[int, int]:
        return (self.n_tasks, self.n_workers)

    def category_of(self, seq: int) -> str:
        """Task ``seq``'s category name ('' when it has none, or none are loaded)."""
        return self.categories[self.task_category[seq]] if self.categories else ""

    def problem(self) -> Problem:
        p = self.project
        return Problem(
            n_tasks=self.n_tasks, n_workers=self.n_workers, n_classes=len(p.labels),
            task_category=self.task_category.copy(), n_categories=max(len(self.categories), 1),
            worker_cost=self.worker_cost.copy(), worker_capacity=self.worker_capacity.copy(),
            budget=float("inf") if p.budget is None else float(p.budget),
            max_labels_per_task=p.max_labels, is_gold=self.is_gold.copy(),
            gold_answer=self.gold_answer.copy(), predictions=self.predictions)


def count_workers(session: Session, project_id: int) -> int:
    return int(session.connection().execute(_COUNT_WORKERS, {"p": project_id}).scalar_one())


_COUNT_WORKERS = (select(func.count()).select_from(Worker)
                  .where(Worker.project_id == bindparam("p")))


_TASK_TABLE = getattr(Task, "__table__").name


def load_view(session: Session, project: Project) -> ProjectView:
    with gc_paused():
        return _load_view(session, project)


def _load_view(session: Session, project: Project) -> ProjectView:
    # the task rows straight from the driver, a column at a time: at 1,000,000 tasks the
    # ORM's rows and a generator per array took 9 s of a cold start, this about 1 s
    conn = session.connection()
    mark = "?" if conn.dialect.paramstyle == "qmark" else "%s"
    cursor = conn.connection.cursor()  # the DBAPI's: plain tuples, no Row per task
    try:
        cursor.execute(f"SELECT category, is_gold, gold_answer, id FROM {_TASK_TABLE} "
                       f"WHERE project_id = {mark} ORDER BY seq", (project.id,))
        rows = cursor.fetchall()
    finally:
        cursor.close()
    n = len(rows)
    category, gold, answer, ids = zip(*rows, strict=True) if rows else ((), (), (), ())
    cats = sorted(set(category))
    if len(cats) == 1:
        task_category = np.zeros(n, dtype=np.int64)
    else:
        cat_index = {c: i for i, c in enumerate(cats)}
        task_category = np.fromiter(map(cat_index.__getitem__, category), dtype=np.int64,
                                    count=n)
    is_gold = np.fromiter(map(bool, gold), dtype=bool, count=n)
    gold_answer = np.full(n, -1, dtype=np.int64)
    label_index = {v: i for i, v in enumerate(project.labels)}
    for i in np.flatnonzero(is_gold).tolist():
        gold_answer[i] = label_index.get(answer[i], -1)
    task_id = np.fromiter(ids, dtype=np.int64, count=n)
    workers = session.exec(select(Worker.cost, Worker.capacity)
                           .where(Worker.project_id == project.id).order_by(Worker.seq)).all()
    cost = np.array([w[0] for w in workers], dtype=float)
    capacity = np.array([-1 if w[1] is None else w[1] for w in workers], dtype=np.int64)
    return ProjectView(project, cats, task_category, is_gold, gold_answer, cost, capacity,
                       task_id, project_predictions(session, project, task_id))


def project_predictions(session: Session, project: Project, task_id: np.ndarray
                        ) -> dict[str, np.ndarray] | None:
    """The latest version of each of the project's models, by task seq (``task_id``: the
    view's SQL task ids), for the policy state (``Problem.predictions``); None without
    any. Read with the view, so that every fold of the state from SQL -- a rebuild, a
    process's load, a load after a new epoch -- routes with the predictions stored now."""
    got = read_predictions(session, project, task_index=task_id)
    return got or None


def model_sources(session: Session, project: Project) -> list[str]:
    """The sources (``MODEL@vN``, sorted) a fold of the state now reads: the latest
    version of each model. A snapshot records them; one made under others is not used."""
    rows = session.exec(select(ModelVersion.name, func.max(ModelVersion.version))
                        .where(ModelVersion.project_id == project.id)
                        .group_by(col(ModelVersion.name))).all()
    return sorted(source_name(name, int(v)) for name, v in rows)


# (label id, applied_seq, task seq, worker seq, value, is_gold, gold_answer): a label read
# back has its id; an unapplied one no applied_seq, one applied after a mark has one
LabelRow = tuple[int, int | None, int, int, str, bool, str | None, bool | None]
AppliedRow = tuple[int, int, int, int, str, bool, str | None, bool | None]


@overload
def label_rows(session: Session, project_id: int, *, applied_after: int | None = None,
               unapplied: Literal[False] = False, limit: int | None = None
               ) -> list[AppliedRow]: ...
@overload
def label_rows(session: Session, project_id: int, *, applied_after: int | None = None,
               unapplied: bool, limit: int | None = None) -> list[LabelRow]: ...
def label_rows(session: Session, project_id: int, *, applied_after: int | None = None,
               unapplied: bool = False, limit: int | None = None
               ) -> list[AppliedRow] | list[LabelRow]:
    """(label id, applied_seq, task seq, worker seq, value, is_gold, gold_answer,
    suggested) rows: applied labels after ``applied_after`` in applied order, or unapplied
    ones by id. ``suggested`` (issue 42): given with the model's answer shown (NULL: a
    label of before the column, or of a project that never showed one)."""
    params: dict[str, int] = {"p": project_id, "n": limit or 1 << 62}
    if unapplied:
        stmt = _UNAPPLIED
    else:
        stmt, params["after"] = _APPLIED_AFTER, applied_after or 0
    rows = session.connection().execute(stmt, params).all()
    # the columns are typed as the models' fields (ids ``int | None``, None before an
    # insert); read back, a label has its id, and one applied after a mark its applied_seq
    if unapplied:
        return cast(list[LabelRow], list(rows))
    return cast(list[AppliedRow], list(rows))


# built once: the statements are compiled once (SQLAlchemy's cache) and only bound per call
# (SQLAlchemy's select: sqlmodel's is typed for up to 4 columns)
_LABEL_ROWS = (sa_select(col(Label.id), col(Label.applied_seq), col(Task.seq), col(Worker.seq),
                         col(Label.value), col(Label.is_gold), col(Task.gold_answer),
                         col(Label.suggested))
               .join(Task, col(Task.id) == col(Label.task_id))
               .join(Worker, col(Worker.id) == col(Label.worker_id))
               .where(col(Label.project_id) == bindparam("p")))
_UNAPPLIED = (_LABEL_ROWS.where(col(Label.applied_seq).is_(None)).order_by(col(Label.id))
              .limit(bindparam("n")))
_APPLIED_AFTER = (_LABEL_ROWS.where(col(Label.applied_seq) > bindparam("after"))
                  .order_by(col(Label.applied_seq)).limit(bindparam("n")))


def to_observation(row: LabelRow, label_index: dict[str, int]) -> Observation:
    _id, _seq, task, worker, value, is_gold, answer, suggested = row
    return Observation(task=int(task), worker=int(worker), label=label_index[value],
                       gold=bool(is_gold),
                       truth=label_index.get(answer, -1)
                       if is_gold and answer is not None else -1,
                       suggested=bool(suggested))


def max_applied(session: Session, project_id: int) -> int:
    return int(session.exec(select(func.coalesce(func.max(Label.applied_seq), 0))
                            .where(Label.project_id == project_id)).one())


def iter_observations(rows: Iterable[LabelRow], labels: list[str]) -> Iterator[Observation]:
    idx = {v: i for i, v in enumerate(labels)}
    for row in rows:
        yield to_observation(row, idx)
