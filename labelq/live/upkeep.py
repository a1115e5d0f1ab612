"""The beat's upkeep of one project (the Celery task ``labelq.maintain`` runs it for every
project with hot state, then wakes the project's applier): expire lapsed leases and
unpopped inbox reservations (:mod:`.reaper`), take in newly loaded tasks, and put back into
``pending`` the tasks below a raised label cap (:mod:`.rebuild`), finish the declines
whose process died before recording them (:mod:`.decline`), and finish streaming
``pending`` in after a lazy rebuild whose process stopped doing it (:mod:`.backfill`)."""

from __future__ import annotations

from .applier import Applier
from .backfill import resume_stalled
from .decline import recover_declines
from .home import claim_home
from .reaper import expire_leases
from .rebuild import add_new_tasks, reopen_below_cap
from .redis.keys import Keys

__all__ = ["maintain_project"]


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
    return out
