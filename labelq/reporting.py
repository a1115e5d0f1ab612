"""Project status and raw-label export, computed from the durable record."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import func
from sqlmodel import Session, select

from .record.models import ENDED_UNLABELLED, Assignment, Label, Project, Task, Worker, as_utc
from .record.projects import get_task

__all__ = ["project_status", "status_report", "iter_raw_labels", "task_detail", "RAW_COLUMNS"]

TASK_STATES = ("unlabeled", "in_progress", "complete", "gold")
RAW_COLUMNS = ["task", "worker", "label", "received", "is_gold", "category", "assignment"]


def project_status(session: Session, project: Project) -> dict[str, Any]:
    """Tasks by state (in all and per category), labels, budget spent and left, per-worker
    counts (labels, gold answered, assignments declined and let expire), and ``finished``:
    why no label will be asked for again (:func:`_finished`), or None while it runs.
    From the status counters (:mod:`labelq.tally`): no query reads every label."""
    from .record.tally import counts, worker_rows

    cap = project.max_labels
    c = counts(session, project.id)
    by_state: dict[str, int] = {k: 0 for k in TASK_STATES}
    by_category: dict[str, dict[str, int]] = {}
    for (category, n), tasks in c.hist.items():
        if not tasks:
            continue
        st = "unlabeled" if n == 0 else "complete" if cap and n >= cap else "in_progress"
        by_state[st] += tasks
        by_category.setdefault(category, {k: 0 for k in TASK_STATES})[st] += tasks
    for category, tasks in c.gold.items():
        by_state["gold"] += tasks
        by_category.setdefault(category, {k: 0 for k in TASK_STATES})["gold"] += tasks
    workers = [(h, st, cost, cap_, c.labels[wid], c.gold_answers[wid])
               for wid, h, st, cost, cap_ in worker_rows(session, project.id)]
    closed: dict[tuple[str, str], int] = {
        (h, st): int(n) for h, st, n in session.exec(
            select(Worker.handle, Assignment.state, func.count())
            .join(Assignment, Assignment.worker_id == Worker.id)
            .where(Worker.project_id == project.id,
                   Assignment.state.in_(ENDED_UNLABELLED))
            .group_by(Worker.handle, Assignment.state)).all()}
    spent = float(sum(cost * n for _, _, cost, _, n, _ in workers))
    labels = int(sum(n for *_, n, _g in workers))
    oldest = c.oldest_unapplied
    if oldest is not None:
        oldest = as_utc(oldest)
    left = None if project.budget is None else project.budget - spent
    return {
        "project": project.name,
        "policy": project.policy,
        "finished": _finished(project, by_state, left,
                              [c for _, st_, c, *_ in workers if st_ != "removed"]),
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
                     "declined": closed.get((h, "declined"), 0),
                     "expired": closed.get((h, "expired"), 0)}
                    for h, st, c, cap_, n, g in workers],
    }


def status_report(session: Session, project: Project) -> dict[str, Any]:
    """``labelq status -o json`` and the API's status (the dashboard's too):
    :func:`project_status` plus the gold warnings (annotators close to having seen every
    gold question). Imports no aggregation, policy or scipy module: ``labelq status``
    starts at once."""
    st = project_status(session, project)
    st["gold_warnings"] = []
    if project.gold_schedule:  # (none without a gold schedule: no numpy to import then)
        from .record.goldstats import gold_exhaustion
        st["gold_warnings"] = gold_exhaustion(session, project)
    return st


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


def iter_raw_labels(session: Session, project: Project, batch: int = 5000
                    ) -> Iterator[dict[str, Any]]:
    """Every label in arrival order, with the assignment it answered (the id annotators
    see and quote)."""
    q = (select(Task.external_id, Worker.handle, Label.value, Label.received, Label.is_gold,
                Task.category, Label.assignment_id)
         .join(Task, Task.id == Label.task_id).join(Worker, Worker.id == Label.worker_id)
         .where(Label.project_id == project.id).order_by(Label.id)
         .execution_options(yield_per=batch))
    for ext, handle, value, received, gold, cat, aid in session.exec(q):
        yield {"task": ext, "worker": handle, "label": value,
               "received": received.isoformat(), "is_gold": bool(gold), "category": cat,
               "assignment": aid}


def task_detail(session: Session, project: Project, external_id: str) -> dict[str, Any]:
    """One task as the operator audits it: category, payload, gold answer, and every label
    with its worker, time and assignment."""
    task = get_task(session, project, external_id)
    rows = session.exec(select(Worker.handle, Label.value, Label.received, Label.assignment_id)
                        .join(Worker, Worker.id == Label.worker_id)
                        .where(Label.task_id == task.id).order_by(Label.id)).all()
    marked = as_utc(task.marked).isoformat() if task.marked is not None else None
    return {"task": task.external_id, "category": task.category, "gold": task.is_gold,
            "gold_answer": task.gold_answer, "marked": marked, "payload": task.payload,
            "labels": [{"worker": h, "label": v, "received": t.isoformat(), "assignment": a}
                       for h, v, t, a in rows]}
