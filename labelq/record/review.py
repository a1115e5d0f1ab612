"""What the review page offers (``/review``): the tasks ``labelq gold suggest`` listed and
``labelq gold audit`` drew (:class:`~labelq.record.models.GoldDraw`) that are neither gold
yet nor queued for a mark (``pending_gold_mark``). Audit tasks come first (an audit is a
random sample only if every drawn task is answered), then the suggested ones, each in the
order drawn (a suggestion list best first); a task drawn both ways is offered once, as
audit (as :func:`labelq.record.golddraw.mark_kind` would mark it)."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from sqlalchemy import exists
from sqlmodel import Session, col, select

from .models import GoldDraw, Label, PendingGoldMark, Project, Task, Worker

__all__ = ["review_queue", "REVIEW_KINDS", "task_answers"]

REVIEW_KINDS = ("audit", "suggested")


def review_queue(session: Session, project: Project, *, kind: str | None = None,
                 limit: int = 50, skip: Collection[str] = ()) -> dict[str, Any]:
    """Up to ``limit`` tasks to review (``kind``: only audit or suggested ones; ``skip``:
    ids the reviewer passed over), each ``id``, ``kind``, ``category``, ``payload``; and
    ``left``: how many of each kind wait (skipped ones included)."""
    queued = exists().where(col(PendingGoldMark.task_id) == col(Task.id))
    rows = session.exec(select(col(GoldDraw.kind), Task)
                        .join(Task, col(Task.id) == col(GoldDraw.task_id))
                        .where(col(GoldDraw.project_id) == project.id,
                               col(GoldDraw.kind).in_(REVIEW_KINDS),
                               col(Task.is_gold).is_(False), ~queued)
                        .order_by(col(GoldDraw.kind) != "audit", col(GoldDraw.id))).all()
    seen: set[int] = set()
    left = dict.fromkeys(REVIEW_KINDS, 0)
    tasks: list[dict[str, Any]] = []
    for k, t in rows:
        if t.id in seen:
            continue
        seen.add(int(t.id or 0))
        left[k] += 1
        if (kind is None or k == kind) and t.external_id not in skip and len(tasks) < limit:
            tasks.append({"id": t.external_id, "kind": k, "category": t.category,
                          "payload": dict(t.payload)})
    return {"tasks": tasks, "left": left}


def task_answers(session: Session, task: Task) -> list[dict[str, str]]:
    """The annotators' labels of ``task``, oldest first (the page shows them on request)."""
    rows = session.exec(select(col(Worker.handle), col(Label.value))
                        .join(Worker, col(Worker.id) == col(Label.worker_id))
                        .where(col(Label.task_id) == task.id).order_by(col(Label.id))).all()
    return [{"worker": h, "label": v} for h, v in rows]
