"""The beat's upkeep of one project (the Celery task ``labelq.maintain`` runs it for every
project with hot state, then wakes the project's applier): expire lapsed leases and
unpopped inbox reservations (:mod:`.reaper`), take in newly loaded tasks, and put back into
``pending`` the tasks below a raised label cap (:mod:`.rebuild`), finish the declines
whose process died before recording them (:mod:`.decline`), finish streaming
``pending`` in after a lazy rebuild whose process stopped doing it (:mod:`.backfill`),
and apply the queued gold marks whose assignments ended (:func:`apply_queued`, also
run after each applier run)."""

from __future__ import annotations

import logging
from typing import Any

from .applier import Applier
from .backfill import resume_stalled
from .decline import recover_declines
from .goldmark import apply_queued_marks
from .home import claim_home
from .reaper import expire_leases
from .rebuild import add_new_tasks, reopen_below_cap
from .redis.keys import Keys

__all__ = ["maintain_project", "apply_queued"]

log = logging.getLogger(__name__)


def maintain_project(applier: Applier, project_id: int) -> dict[str, int]:
    """One project's upkeep with the applier process's engine, client and state cache;
    returns what the reaper did."""
    engine, redis = applier.engine, applier.redis
    with applier.busy():
        out = expire_leases(engine, redis, project_id,
                            lease_ms=applier.settings.lease_seconds * 1000,
                            scripts=applier.scripts, tuning=applier.tuning)
        recover_declines(engine, redis, project_id, applier.scripts)
        add_new_tasks(engine, redis, project_id, applier.cache)
        reopen_below_cap(engine, redis, project_id, applier.cache)
        resume_stalled(engine, redis, project_id, Keys(project_id, claim_home(engine, redis)),
                       applier.cache)
        applier.fold_tally(project_id)  # status counters: tasks loaded, labels applied
        out["gold_marked"] = len(apply_queued(applier, project_id, always=True)
                                 .get("applied", []))
    return out


def apply_queued(applier: Applier, project_id: int, *, always: bool = False
                 ) -> dict[str, Any]:
    """Apply the project's queued gold marks whose tasks' assignments ended
    (:func:`labelq.live.goldmark.apply_queued_marks`): after an applier run only while
    ``gold_queued`` is set (one Redis ``EXISTS``, no SQL); on the beat (``always``) from SQL.
    A failure is logged: the marks stay queued for the next run."""
    if not always and not applier.redis.exists(applier.keys(project_id).gold_queued):
        return {}
    try:
        return apply_queued_marks(applier.engine, applier.redis, project_id)
    except Exception:  # noqa: BLE001 - the queue stays; the next run tries again
        log.exception("queued gold marks of project %s not applied", project_id)
        return {}
