"""Project status and raw-label export, computed from the durable record."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import case, func
from sqlalchemy import select as sa_select
from sqlmodel import Session, col

from .record.models import (
    ENDED_UNLABELLED,
    Assignment,
    Label,
    Prediction,
    Project,
    Task,
    Worker,
    as_utc,
)
from .record.projects import get_task
from .record.stalls import stall

__all__ = ["project_status", "status_report", "gold_unscheduled", "iter_raw_labels",
           "task_detail", "RAW_COLUMNS", "prediction_coverage", "suggestion_leak",
           "suggestion_warnings"]

TASK_STATES = ("unlabeled", "in_progress", "complete", "gold")
RAW_COLUMNS = ["task", "worker", "label", "received", "is_gold", "category", "assignment"]


def project_status(session: Session, project: Project) -> dict[str, Any]:
    """Tasks by state (in all and per category), labels, budget spent and left, per-worker
    counts (labels, gold answered, assignments declined and let expire), ``finished``:
    why no label will be asked for again (:func:`_finished`), or None while it runs,
    ``stalled``: open tasks no active annotator can serve (:func:`labelq.record.stalls.
    stall`: the state ``stalled`` when that is all of them), ``state`` (``running``,
    ``stalled``, ``finished``) and ``spendable`` (:func:`_spendable`).
    From the status counters (:mod:`labelq.tally`): no query reads every label."""
    return _project_status(session, project)[0]


def _project_status(session: Session, project: Project
                    ) -> tuple[dict[str, Any], _Seen]:
    """:func:`project_status` and what it read of the workers (the gold warnings use it)."""
    from .record.tally import counts, worker_rows

    cap = project.max_labels
    pid = _project_id(project)
    c = counts(session, pid)
    by_state: dict[str, int] = {k: 0 for k in TASK_STATES}
    by_category: dict[str, dict[str, int]] = {}
    for (category, n), tasks in c.hist.items():
        if not tasks:
            continue
        st = "unlabeled" if n == 0 else "complete" if cap and n >= cap else "in_progress"
        by_state[st] += tasks
        by_category.setdefault(category, {k: 0 for k in TASK_STATES})[st] += tasks
    for category, tasks in c.gold.items():
        if not tasks:
            continue
        by_state["gold"] += tasks
        by_category.setdefault(category, {k: 0 for k in TASK_STATES})["gold"] += tasks
    rows = worker_rows(session, pid)
    workers = [(h, st, cost, cap_, c.labels[wid], c.gold_answers[wid])
               for wid, h, st, cost, cap_ in rows]
    # assignments ended without a label, per worker: their tally (the join from the worker
    # side counted every one of them, and SQLite could plan it as a scan)
    closed = _ended(session, [wid for wid, *_ in rows])
    spent = float(sum(cost * n for _, _, cost, _, n, _ in workers))
    labels = int(sum(n for *_, n, _g in workers))
    oldest = c.oldest_unapplied
    if oldest is not None:
        oldest = as_utc(oldest)
    left = None if project.budget is None else project.budget - spent
    finished = _finished(project, by_state, left,
                         [c for _, st_, c, *_ in workers if st_ != "removed"])
    stalled = None
    if finished is None:
        stalled = stall(session, project, {
            c: s_["unlabeled"] + s_["in_progress"] for c, s_ in by_category.items()},
            [(wid, h, st_, cost, cap_, n,
              n + closed.get((wid, "declined"), 0) + closed.get((wid, "expired"), 0)
              + closed.get((wid, "issued"), 0))
             for (wid, *_), (h, st_, cost, cap_, n, _g) in zip(rows, workers, strict=True)],
            left)
    return {
        "project": project.name,
        "policy": project.policy,
        "finished": finished,
        # open tasks no active annotator can serve (labelq/record/stalls.py): ``all`` when
        # that is every open task (the project is stalled), else the categories nobody
        # active works on
        "stalled": stalled,
        "state": ("finished" if finished else "stalled" if stalled and stalled["all"]
                  else "running"),
        # at most what the open tasks' missing labels can still cost (None: no cap, or
        # nothing can be served): the dashboard's budget projection counts this, not more
        "spendable": _spendable(project, c.hist, left, finished, stalled, workers),
        # gold questions never served: the project has no gold schedule
        "gold_unscheduled": 0 if project.gold_schedule else int(by_state["gold"]),
        "tasks": by_state,
        "categories": [{"category": c, **by_category[c]} for c in sorted(by_category)],
        "labels": labels,
        # durable but not yet folded into the policy state by the applier (Celery); old
        # ones mean no `labelq run-worker` is running for this project
        "unapplied": int(c.unapplied),
        "oldest_unapplied_s": None if oldest is None else
        round(max(0.0, (datetime.now(timezone.utc) - oldest).total_seconds()), 1),
        "budget": project.budget,
        "spent": spent,
        "left": left,
        "workers": [{"handle": h, "status": st, "cost": c, "capacity": cap_,
                     "labels": n, "gold_answered": int(g),
                     "declined": closed.get((wid, "declined"), 0),
                     "expired": closed.get((wid, "expired"), 0)}
                    for (wid, *_), (h, st, c, cap_, n, g) in zip(rows, workers, strict=True)],
    }, _Seen(rows, closed)


def status_report(session: Session, project: Project) -> dict[str, Any]:
    """``labelq status -o json`` and the API's status (the dashboard's too):
    :func:`project_status` plus the gold warnings (annotators close to having seen every
    gold question). Imports no aggregation, policy or scipy module: ``labelq status``
    starts at once."""
    st, seen = _project_status(session, project)
    # (one read over the project's tasks: only where it can say something)
    st["suggestion_coverage"] = prediction_coverage(session, project) \
        if project.show_suggestions and st["tasks"].get("gold") else None
    st["suggestion_warnings"] = suggestion_leak(st)
    st["gold_warnings"] = []
    if project.gold_schedule:  # (none without a gold schedule: no numpy to import then)
        st["gold_warnings"] = _gold_warnings(session, project, st, seen)
    return st


@dataclass
class _Seen:
    """What :func:`_project_status` read of the workers: their rows (id, handle, status,
    cost, capacity) and assignments per (id, state) ended without a label or issued."""

    workers: list[tuple[int, str, str, float, int | None]]
    ended: dict[tuple[int, str], int]


def _project_id(project: Project) -> int:
    assert project.id is not None, "a project read from the database has its id"
    return project.id


def _ended(session: Session, worker_ids: list[int]) -> dict[tuple[int, str], int]:
    """(worker id, state) -> assignments of those workers ended without a label (declined,
    expired: ``ended_tally``, kept by triggers on ``assignment``) or still issued (few: a
    range of ``ix_assignment_worker_state``). On a database whose schema predates the
    tally (until ``labelq init``): counted in that index, every such assignment."""
    from .record.models import EndedTally
    from .record.tally import schema_current

    if not worker_ids:
        return {}
    w, st = col(Assignment.worker_id), col(Assignment.state)
    conn = session.connection()

    def count(states: tuple[str, ...]) -> dict[tuple[int, str], int]:
        return {(int(wid), str(s)): int(n) for wid, s, n in conn.execute(
            sa_select(w, st, func.count()).where(w.in_(worker_ids), st.in_(states))
            .group_by(w, st)).all()}

    out = count(("issued",))
    if not schema_current(session):
        return {**out, **count(ENDED_UNLABELLED)}
    rows = conn.execute(sa_select(col(EndedTally.worker_id), col(EndedTally.state),
                                  col(EndedTally.n))
                        .where(col(EndedTally.worker_id).in_(worker_ids))).all()
    out.update(((int(wid), str(s)), int(n)) for wid, s, n in rows if n)
    return out


def _gold_warnings(session: Session, project: Project, st: dict[str, Any],
                   seen_: _Seen) -> list[dict[str, Any]]:
    """:func:`labelq.record.goldstats.gold_exhaustion`'s warnings, the same list, without
    reading the project's assignments: the gold pool from the counters, and an annotator
    can have seen at most as many gold questions as their gold answers plus their
    assignments ended without a label (or issued); only those this bound leaves near the
    pool's end are counted, by the partial index ``ix_assignment_gold``."""
    import numpy as np

    from .gold.pool import ExhaustionRule

    rule = ExhaustionRule()
    pool = int(st["tasks"]["gold"])
    ended = seen_.ended
    active = sorted((wid, h) for wid, h, status, *_ in seen_.workers if status == "active")
    if not active:
        return []
    by_handle = {w["handle"]: w for w in st["workers"]}
    bound = np.array([by_handle[h]["gold_answered"] + by_handle[h]["declined"]
                      + by_handle[h]["expired"] + ended.get((wid, "issued"), 0)
                      for wid, h in active])
    maybe = np.atleast_1d(rule.near_exhaustion(np.full(len(active), pool), bound))
    ask = [wid for (wid, _), m in zip(active, maybe, strict=True) if m]
    seen: dict[int, int] = {}
    w = col(Assignment.worker_id)
    for i in range(0, len(ask), 500):
        seen.update((int(wid), int(n)) for wid, n in session.connection().execute(
            sa_select(w, func.count(func.distinct(col(Assignment.task_id))))
            .where(col(Assignment.project_id) == project.id,
                   col(Assignment.is_gold) == True,  # noqa: E712 - the partial index's own term
                   w.in_(ask[i:i + 500]))
            .group_by(w)).all())
    n_seen = np.array([seen.get(wid, 0) for wid, _ in active])
    near = np.atleast_1d(rule.near_exhaustion(np.full(len(active), pool), n_seen))
    return [{"worker": h, "gold_seen": int(n), "gold_pool": pool}
            for (_, h), n, flag in zip(active, n_seen, near, strict=True) if flag]


def _finished(project: Project, tasks: dict[str, int], left: float | None,
              costs: list[float]) -> str | None:
    """Why the project is finished — no label will be asked for again — or None while it
    runs: ``"budget spent"`` (what is left pays for no annotator's next label), ``"every
    task at its cap"``. Tasks ``in_progress`` of a finished project stay below their cap for
    good: a dashboard that called them in progress read as a project still running."""
    if left is not None and (left <= 1e-9 or (costs and left + 1e-9 < min(costs))):
        return "budget spent"
    if project.max_labels and tasks["complete"] and not (tasks["unlabeled"]
                                                          or tasks["in_progress"]):
        return "every task at its cap"
    return None


def gold_unscheduled(st: Mapping[str, Any]) -> list[str]:
    """The warning of a status whose gold questions are never served (no gold schedule),
    as ``labelq status``, ``labelq check`` and the dashboard say it (empty: none)."""
    n = int(st.get("gold_unscheduled") or 0)
    if not n:
        return []
    return [f"{n} gold question{'s are' if n != 1 else ' is'} loaded but project "
            f"{st['project']!r} has no gold schedule: {'they are' if n != 1 else 'it is'} "
            f"never served; set one: labelq project update {st['project']} "
            "--gold-schedule fixed:rate=0.1 (docs/gold.md)"]


def prediction_coverage(session: Session, project: Project) -> dict[str, int]:
    """How many gold questions and how many tasks (the rest) a model predicted: those
    without a prediction show no suggestion (issue 42). One grouped count."""
    predicted = sa_select(col(Prediction.task_id)).where(
        col(Prediction.task_id) == col(Task.id)).exists()
    out = {"gold": 0, "gold_predicted": 0, "tasks": 0, "tasks_predicted": 0}
    rows: list[Any] = list(session.execute(
        sa_select(col(Task.is_gold), func.count(), func.sum(case((predicted, 1), else_=0)))
        .where(col(Task.project_id) == project.id).group_by(col(Task.is_gold))).all())
    for is_gold, n, has in rows:
        kind = "gold" if is_gold else "tasks"
        out[kind] += int(n)
        out[kind + "_predicted"] += int(has or 0)
    return out


def suggestion_leak(st: Mapping[str, Any]) -> list[str]:
    """The warning of a project showing suggestions whose gold questions lack a model's
    prediction more often than its tasks (``suggestion_coverage``): the missing suggestion
    tells those gold questions apart (docs/models.md, "Gold with suggestions shown");
    ``labelq status``, ``labelq check``, ``project update --show-suggestions`` and the
    dashboard say it (empty: none)."""
    c = st.get("suggestion_coverage")
    if not c or not c["gold"] or c["gold_predicted"] == c["gold"]:
        return []
    gold_without = c["gold"] - c["gold_predicted"]
    if c["tasks"] and (c["tasks"] - c["tasks_predicted"]) / c["tasks"] \
            >= gold_without / c["gold"]:
        return []  # (gold lacks a prediction no more often than a task does)
    return [f"{gold_without} of {c['gold']} gold questions have no model prediction, so "
            f"show no suggestion, while {c['tasks_predicted']} of {c['tasks']} tasks have "
            f"one: a missing suggestion points at gold; load predictions for the gold "
            f"questions too (labelq predictions load) or turn suggestions off: labelq "
            f"project update {st['project']} --no-show-suggestions (docs/models.md)"]


def suggestion_warnings(session: Session, project: Project) -> list[str]:
    """:func:`suggestion_leak`'s warning for ``project`` read now (none when it shows no
    suggestions), for those that have no status at hand (``labelq check``, ``project
    create/update``)."""
    if not project.show_suggestions:
        return []
    return suggestion_leak({"project": project.name,
                            "suggestion_coverage": prediction_coverage(session, project)})


def _spendable(project: Project, hist: Mapping[tuple[str, int], int], left: float | None,
               finished: str | None, stalled: dict[str, Any] | None,
               workers: list[tuple[str, str, float, int | None, int, int]]) -> float | None:
    """What can still be spent: 0 when finished or stalled; with a cap, the labels the open
    tasks miss at the dearest active annotator's cost, at most the budget left; else (no
    cap: a task can always take one more label) the budget left."""
    if finished or (stalled and stalled["all"]):
        return 0.0
    costs = [cost for _h, st_, cost, *_ in workers if st_ == "active"]
    if project.max_labels is None or not costs:
        return left
    missing = sum(max(project.max_labels - n, 0) * tasks for (_c, n), tasks in hist.items())
    most = float(missing * max(costs))
    return most if left is None else min(left, most)


def iter_raw_labels(session: Session, project: Project, batch: int = 5000
                    ) -> Iterator[dict[str, Any]]:
    """Every label in arrival order, with the assignment it answered (the id annotators
    see and quote)."""
    q = (sa_select(col(Task.external_id), col(Worker.handle), col(Label.value),
                   col(Label.received), col(Label.is_gold), col(Task.category),
                   col(Label.assignment_id))
         .join(Task, col(Task.id) == col(Label.task_id))
         .join(Worker, col(Worker.id) == col(Label.worker_id))
         .where(col(Label.project_id) == project.id).order_by(col(Label.id))
         .execution_options(yield_per=batch))
    for ext, handle, value, received, gold, cat, aid in session.connection().execute(q):
        yield {"task": ext, "worker": handle, "label": value,
               "received": received.isoformat(), "is_gold": bool(gold), "category": cat,
               "assignment": aid}


def task_detail(session: Session, project: Project, external_id: str) -> dict[str, Any]:
    """One task as the operator audits it: category, payload, gold answer (its kind, and
    ``gold_source``: where it came from, None if unknown), and every label with its
    worker, time and assignment."""
    task = get_task(session, project, external_id)
    rows = session.connection().execute(
        sa_select(col(Worker.handle), col(Label.value), col(Label.received),
                  col(Label.assignment_id))
        .join(Worker, col(Worker.id) == col(Label.worker_id))
        .where(col(Label.task_id) == task.id).order_by(col(Label.id))).all()
    marked = as_utc(task.marked).isoformat() if task.marked is not None else None
    return {"task": task.external_id, "category": task.category, "gold": task.is_gold,
            "gold_answer": task.gold_answer, "marked": marked,
            "gold_kind": _kind(task),
            "gold_source": task.gold_source if task.is_gold else None,
            "payload": task.payload,
            "labels": [{"worker": h, "label": v, "received": t.isoformat(), "assignment": a}
                       for h, v, t, a in rows]}


def _kind(task: Task) -> str | None:
    """A gold task's kind (``Task.gold_kind``; one an older process wrote without it reads
    as :func:`labelq.record.models.random_gold` does); None for an ordinary task."""
    if not task.is_gold:
        return None
    return task.gold_kind or ("loaded" if task.marked is None else "reviewed")
