"""Whether a message is for this worker's database: every task that names a database (a
label wake-up, the dashboard figures, an export job) asks here, so the check and its
warning are said once (issue 43, duplicates: ``workers/jobs.py`` repeated
``workers/tasks.py``'s)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from labelq.record.db import database_id

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

__all__ = ["ours"]

log = logging.getLogger("workers.tasks")


def ours(engine: Engine, database: str | None, what: str) -> bool:
    """Whether a message naming ``database`` (``None``: one of an earlier labelq, naming
    none) is for the database of ``engine``; if not, a warning naming ``what`` (the task
    and its object) and both databases. Several databases may share this Redis and this
    queue (one set by LABELQ_CELERY_QUEUE): another's wake-up or job is not this worker's
    to act on. Unset, each database has its own queue; ``labelq check`` flags this."""
    if database is None or database == database_id(engine):
        return True
    log.warning("%s of database %s, but this worker serves database %s: ignored (unset "
                "LABELQ_CELERY_QUEUE: each database then has its own queue)", what, database, database_id(engine))
    return False
