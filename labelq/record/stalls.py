"""Stalls: open tasks that no active annotator can serve (issue 41).

A task is *open* while it is not a gold question and is below the project's cap (every
non-gold task without a cap). An annotator can serve it when they are active, have
capacity left (labels below ``capacity``), cost no more than the budget left, work on its
category (no categories: any) and have not seen it (labelled, declined or let expire: the
engine never gives a task twice to one annotator). A project is **stalled** when it has
open tasks and no annotator can serve any of them: no label will be asked for until the
operator acts, though the project is not finished.

:func:`stall` decides it without reading every task on each status:

1. from what status already read (the counters: open tasks per category; per annotator
   their status, capacity, cost, labels and assignments ended without a label) and one
   read of the active annotators' categories: an eligible annotator whose categories hold
   more open tasks than they have assignments (labels + declined + expired) has an open
   task they have not seen — the project runs. That settles every project that is not
   near its end in O(annotators + categories);
2. otherwise (near the end, or stalled) each eligible annotator's seen open tasks are
   counted exactly — their assignments (``ix_assignment_worker_state``), each task's
   labels counted in ``ix_label_project_task`` — fewest assignments first, stopping at the
   first annotator with an unseen open task. At most :data:`READ_MAX` assignments are
   read per call: an annotator who would take the reads past it is not read, and the
   answer is then ``None`` (not known, not claimed). The answer is kept
   per process and project while nothing it depends on changes (labels, assignments,
   annotators, cap, budget), so a stalled project's repeated status reads pay step 1 only;
   a project that step 2 found running is taken as running for :data:`RECHECK_S` seconds
   while only its progress changes (labels arriving), so a project near its end pays
   step 2 at most once per that long per process — a stall is announced at most that
   late. A change of who can label what (a pause, a resume, an enrolment, a cap) is
   asked again at once.

Open tasks in categories that no eligible annotator works on are stalled whatever the
others do (step 1 counts them): reported as a partial stall while the rest run.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func
from sqlalchemy import select as sa_select
from sqlmodel import Session, col

from .models import Assignment, Label, Project, Task, Worker

__all__ = ["stall", "stall_text", "READ_MAX", "WorkerRow"]

READ_MAX = 100_000  # assignments read by one exact check at most (step 2)
RECHECK_S = 5.0  # a project found running by step 2 is taken as running this long while
                 # only its progress changes (labels arriving: it runs)

# (id, handle, status, cost, capacity, labels, assignments: labels + declined + expired)
WorkerRow = tuple[int, str, str, float, int | None, int, int]

_KEPT: dict[int, tuple[tuple[Any, ...], tuple[Any, ...], float, dict[str, Any] | None]] = {}
_LOCK = threading.Lock()


@dataclass(frozen=True)
class _Eligible:
    wid: int
    handle: str
    categories: frozenset[str] | None  # None: any
    open: int      # open tasks in their categories
    assigned: int  # their assignments: at least the distinct tasks they have seen


def stall(session: Session, project: Project, open_by_category: Mapping[str, int],
          workers: Sequence[WorkerRow], left: float | None) -> dict[str, Any] | None:
    """The project's stall, or None (no open task stuck, or too costly to know: step 2's
    limit). ``open_by_category``: open tasks per category (status's unlabeled +
    in_progress); ``left``: the budget left (None: no budget). The answer: ``tasks`` (open
    tasks no active annotator can serve), ``all`` (True: every open task, the project is
    stalled), ``categories`` (those stuck tasks' categories), ``reasons`` (why, one line
    each) and ``ways_out`` (what the operator can do, as commands)."""
    open_total = sum(open_by_category.values())
    if not open_total:
        return None
    assert project.id is not None
    cats = _categories(session, [w[0] for w in workers if w[2] == "active"])
    eligible: list[_Eligible] = []
    blocked: dict[str, list[str]] = {"paused": [], "removed": [], "capacity": [],
                                     "budget": [], "categories": [], "seen": []}
    for wid, handle, status, cost, capacity, labels, assigned in workers:
        if status != "active":
            blocked.setdefault(status, []).append(handle)
            continue
        if capacity is not None and labels >= capacity:
            blocked["capacity"].append(handle)
            continue
        if left is not None and cost > left + 1e-9:
            blocked["budget"].append(handle)
            continue
        wc = cats.get(wid)
        n_open = sum(n for c, n in open_by_category.items() if wc is None or c in wc)
        if not n_open:
            blocked["categories"].append(handle)
            continue
        eligible.append(_Eligible(wid, handle, wc, n_open, assigned))
    covered: set[str] = set()
    for e in eligible:
        covered |= set(open_by_category) if e.categories is None else set(e.categories)
    uncovered = sorted(c for c, n in open_by_category.items() if n and c not in covered)
    n_uncovered = sum(open_by_category[c] for c in uncovered)
    partial = _answer(project, uncovered, n_uncovered, False, blocked)
    if any(e.open > e.assigned for e in eligible):  # step 1: someone has an unseen task
        return partial if n_uncovered else None
    # what the answer depends on: who can label what (changed: asked again at once), and
    # the progress (labels, assignments, open tasks, the budget left)
    who = (project.name, project.max_labels,
           tuple((w[0], w[1], w[2], w[3], w[4]) for w in workers),
           tuple(sorted((k, tuple(sorted(v))) for k, v in cats.items() if v is not None)))
    progress = (left, tuple(sorted(open_by_category.items())), tuple(workers))
    now = time.monotonic()
    with _LOCK:
        kept = _KEPT.get(project.id)
    if kept is not None and kept[0] == who:
        if kept[1] == progress:
            return kept[3]
        if (kept[3] is None or not kept[3]["all"]) and now - kept[2] < RECHECK_S:
            return partial if n_uncovered else None  # found running a moment ago
    out: dict[str, Any] | None = partial if n_uncovered else None
    read, stuck = 0, True
    for e in sorted(eligible, key=lambda e: e.assigned):  # the fewest reads first
        read += e.assigned
        if read > READ_MAX:
            return out  # not known (beyond the bound): not kept, asked again
        if e.open > _seen_open(session, project, e):
            stuck = False
            break
        blocked["seen"].append(e.handle)
    if stuck:
        out = _answer(project, sorted(c for c, n in open_by_category.items() if n),
                      open_total, True, blocked)
    with _LOCK:
        if len(_KEPT) > 1000:
            _KEPT.clear()
        _KEPT[project.id] = (who, progress, now, out)
    return out


def stall_text(st: Mapping[str, Any]) -> str:
    """``stalled: 90 tasks need a label no active annotator can give`` (the state
    ``labelq status`` prints and the dashboard shows; a partial stall says in which
    categories)."""
    n = int(st["tasks"])
    what = (f"{n} task{'s' if n != 1 else ''} need{'s' if n == 1 else ''} a label no "
            f"active annotator can give")
    if not st["all"]:
        what += " (categor{} {})".format("y" if len(st["categories"]) == 1 else "ies",
                                         ", ".join(c or "-" for c in st["categories"]))
    return f"stalled: {what}"


def _categories(session: Session, worker_ids: list[int]) -> dict[int, frozenset[str] | None]:
    """Worker id -> the categories they work on (None: any), for ``worker_ids``."""
    out: dict[int, frozenset[str] | None] = {}
    for i in range(0, len(worker_ids), 500):
        for wid, cats in session.connection().execute(
                sa_select(col(Worker.id), col(Worker.categories))
                .where(col(Worker.id).in_(worker_ids[i:i + 500]))).all():
            assert wid is not None  # a primary key read back
            out[int(wid)] = frozenset(cats) if cats else None
    return out


def _seen_open(session: Session, project: Project, e: _Eligible) -> int:
    """The open tasks of ``e``'s categories that ``e`` has seen (step 2): their
    assignments' distinct tasks (``ix_assignment_worker_state``), not gold, below the cap,
    each task's labels counted in ``ix_label_project_task``. On PostgreSQL one grouped
    join of both; on SQLite a correlated count per task. (In back-to-back runs of
    bench/stall_check.py, 45,000 open tasks, a loaded machine: on PostgreSQL the grouped
    join took 983 ms where the correlated count took 1772; on SQLite 489 ms where it took
    193.)"""
    t = col(Assignment.task_id)
    q = (sa_select(t)
         .join(Task, col(Task.id) == t)
         .where(col(Assignment.worker_id) == e.wid, col(Task.is_gold).is_(False)))
    if e.categories is not None:
        q = q.where(col(Task.category).in_(sorted(e.categories)))
    cap = project.max_labels
    if cap is None:
        q = q.distinct()
    elif session.get_bind().dialect.name == "postgresql":
        q = (q.outerjoin(Label, (col(Label.project_id) == project.id)
                         & (col(Label.task_id) == t))
             .group_by(t).having(func.count(func.distinct(col(Label.id))) < cap))
    else:
        n = (sa_select(func.count()).select_from(Label)
             .where(col(Label.project_id) == project.id, col(Label.task_id) == t)
             .scalar_subquery())
        q = q.where(n < cap).with_only_columns(func.count(func.distinct(t)))
        return int(session.connection().execute(q).scalar() or 0)
    return int(session.connection().execute(
        sa_select(func.count()).select_from(q.subquery())).scalar() or 0)


def _answer(project: Project, categories: list[str], n: int, whole: bool,
            blocked: Mapping[str, list[str]]) -> dict[str, Any]:
    """The stall as status reports it: count, categories, reasons and ways out."""
    name = project.name
    reasons = []
    words = {"paused": "paused", "removed": "removed",
             "capacity": "at their capacity",
             "budget": "costing more than the budget left",
             "categories": "working on other categories",
             "seen": "having labelled or seen every open task they could take"}
    for k, who in blocked.items():
        if who:
            reasons.append(f"{len(who)} annotator{'s' if len(who) != 1 else ''} "
                           f"{words.get(k, k)}: {', '.join(sorted(who)[:5])}"
                           f"{', ...' if len(who) > 5 else ''}")
    if not any(blocked.values()):
        reasons.append("no annotator enrolled")
    elif not whole:
        reasons.insert(0, "no active annotator works on "
                       + ", ".join(c or "-" for c in categories))
    ways = [f"enrol an annotator: labelq workers enroll {name} HANDLE"
            + (f" --categories {','.join(categories)}" if any(categories) else "")]
    if blocked.get("paused"):
        ways.append("resume a paused one: labelq workers resume "
                    + sorted(blocked["paused"])[0])
    if project.max_labels is not None and whole:
        ways.append(f"lower --max-labels: labelq project update {name} --max-labels N "
                    "(a task with N labels or more is complete then)")
    ways.append(f"finish as is: labelq export {name}")
    return {"tasks": n, "all": whole, "categories": categories, "reasons": reasons,
            "ways_out": ways}

