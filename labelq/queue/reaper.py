"""Periodic upkeep (the Celery beat calls it): expire leases, take in new tasks.

Leases are expired one ``grace_ms`` after their expiry, through the ``RELEASE`` script, which
returns the task to the pool exactly once. A lease marked ``submitting`` is left alone for
``SUBMIT_GRACE_MS``: its label is being written to SQL. Older than that, the submitter
crashed (or stalled) between ``SUBMIT_BEGIN`` and ``SUBMIT_FINISH``; SQL decides: a label for
the assignment exists → ``SUBMIT_FINISH`` counts it; none → ``RELEASE``. (A submitter
stalled longer than the grace *and* then committing is the one case where a counter can be
off by one; ``labelq rebuild`` recomputes every counter from SQL.)
"""

from __future__ import annotations

import time

from sqlmodel import select

from ..db import session_scope
from ..models import Label, Project
from .keys import Keys
from .scripts import Scripts

__all__ = ["SUBMIT_GRACE_MS", "lease_key_ttl_ms", "expire_leases"]

SUBMIT_GRACE_MS = 60_000


def lease_key_ttl_ms(lease_ms: int) -> int:
    """TTL of a lease hash: the lease, plus room for a submit in progress and the reaper."""
    return lease_ms + 2 * SUBMIT_GRACE_MS


def expire_leases(engine, redis, project_id: int, *, now_ms: int | None = None,
                  grace_ms: int = 2_000, scripts: Scripts | None = None) -> dict[str, int]:
    scripts = scripts or Scripts(redis)
    k = Keys(project_id)
    now = int(time.time() * 1000) if now_ms is None else now_ms
    cutoff = now - grace_ms
    out = {"expired": 0, "finished": 0, "stale": 0}
    cap = None
    for raw in redis.zrangebyscore(k.leases, "-inf", cutoff):
        aid = raw.decode()
        res = scripts.release(k, aid, expired_before_ms=cutoff)
        if res[0]:
            out["expired"] += 1
            continue
        if res[1] == "missing":
            redis.zrem(k.leases, aid)
            out["stale"] += 1
        elif res[1] == "submitting":
            started = int(redis.hget(k.lease(aid), "submitting") or now)
            if started > now - SUBMIT_GRACE_MS:
                continue
            with session_scope(engine) as session:
                has_label = session.exec(select(Label.id)
                                         .where(Label.assignment_id == aid)).first()
                if cap is None:
                    cap = session.get(Project, project_id).max_labels or -1
            if has_label is not None:
                scripts.submit_finish(k, aid, None if cap < 0 else cap)
                out["finished"] += 1
            elif scripts.release(k, aid, allow_submitting=True)[0]:
                out["expired"] += 1
    return out
