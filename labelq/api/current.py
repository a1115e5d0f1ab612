"""The assignments an annotator holds now (``GET /api/v1/assignments/current``, ``labelq
annotate current``): read from the hot state without issuing anything — which leases are
open is ``OPEN_LIST``'s answer, the rule ``RESERVE`` and ``POP_INBOX`` apply — and the
payloads from SQL, in one query. On a project that shows suggestions each carries the
``suggestion`` ``next`` showed with it (a page reload shows the same; issue 42)."""

from __future__ import annotations

import time
from typing import Any

from sqlmodel import Session, col, select

from ..live.redis.keys import Keys
from ..live.redis.scripts import Scripts
from ..record.db import database_id
from ..record.models import Project, Task, Worker, utc_from_ms
from ..record.predictions import suggestions

__all__ = ["open_assignments"]


def open_assignments(session: Session, scripts: Scripts, worker: Worker,
                     project: Project) -> list[dict[str, Any]]:
    """Worker ``worker``'s open assignments (issued to them, live, not being submitted),
    oldest first, as the API's assignment (no task id: it would tell a gold question from a
    task); with ``suggestion`` (null where none) when the project shows suggestions, as
    ``assignments/next`` gives it (:func:`labelq.api.annotator.next_answer`)."""
    held = scripts.open_list(Keys(worker.project_id, database_id(session)), worker.seq, int(time.time() * 1000))
    if not held:
        return []
    tasks = {t.seq: t for t in session.exec(select(Task).where(
        Task.project_id == worker.project_id, col(Task.seq).in_([h.task for h in held])))}
    held = [h for h in held if h.task in tasks]
    out = [{"assignment_id": h.assignment_id, "category": tasks[h.task].category,
            "payload": tasks[h.task].payload, "labels": list(project.labels),
            "expires_ms": h.expires_ms, "expires_at": utc_from_ms(h.expires_ms).isoformat()}
           for h in held]
    if project.show_suggestions and out:  # (the key on every assignment then, gold or not)
        assert worker.id is not None, "a worker read from the database has its id"
        shown = suggestions(session, project, [h.task for h in held], worker.id)
        for a, h in zip(out, held, strict=True):
            a["suggestion"] = shown[h.task]
    return out
