"""The assignments an annotator holds now (``GET /api/v1/assignments/current``, ``labelq
annotate current``): read from the hot state — the worker's ``open:{w}`` set and each
lease — without issuing anything; the payloads from SQL."""

from __future__ import annotations

import time
from typing import Any

from sqlmodel import Session, select

from ..models import Project, Task, Worker, utc_from_ms
from ..live.redis.keys import Keys

__all__ = ["open_assignments"]


def open_assignments(session: Session, redis: Any, worker: Worker,
                     project: Project) -> list[dict[str, Any]]:
    """Worker ``worker``'s live leases, oldest first, as the API's assignment (no task id:
    it would tell a gold question from a task). A lease being submitted is answered."""
    k = Keys(worker.project_id)
    now = int(time.time() * 1000)
    held = redis.zrangebyscore(k.open_leases(worker.seq), now, "+inf", withscores=True)
    out = []
    for raw_id, _score in held:
        aid = raw_id.decode() if isinstance(raw_id, bytes) else str(raw_id)
        lease = {(a.decode() if isinstance(a, bytes) else a): (b.decode() if isinstance(b, bytes)
                                                               else b)
                 for a, b in redis.hgetall(k.lease(aid)).items()}
        if not lease or lease.get("submitting") == "1" or "task" not in lease \
                or str(lease.get("worker")) != str(worker.seq):
            continue
        expires = int(float(lease.get("expires") or _score))
        if expires <= now:
            continue
        task = session.exec(select(Task).where(Task.project_id == worker.project_id,
                                               Task.seq == int(lease["task"]))).first()
        if task is None:
            continue
        out.append({"assignment_id": aid, "category": task.category,
                    "payload": task.payload, "labels": list(project.labels),
                    "expires_ms": expires, "expires_at": utc_from_ms(expires).isoformat()})
    return out
