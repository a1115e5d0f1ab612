"""What the engine's request-side operations of one process share (assign, submit,
decline): the SQL engine, the Redis client and its scripts, the settings and the tuning,
and the hook that wakes the applier. Made once, at the edge (:class:`labelq.service.
Service`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy.engine import Engine

from ..record.settings import Settings
from .applier import wake_applier
from .redis.keys import Keys
from .redis.scripts import Scripts
from .tuning import Tuning

__all__ = ["Live", "now_ms"]


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True)
class Live:
    engine: Engine
    redis: Any  # redis.Redis
    scripts: Scripts
    settings: Settings
    tuning: Tuning
    notify: Callable[[int], None] | None  # enqueue an applier run (Celery), or None
    database: str  # the SQL database's identity (``labelq.record.db.database_id``), read once

    def keys(self, project_id: int) -> Keys:
        """The project's Redis keys, in this database's namespace (no SQL: the identity
        was read when the service was made)."""
        return Keys(project_id, self.database)

    @property
    def lease_ms(self) -> int:
        return self.settings.lease_seconds * 1000

    @property
    def key_ttl_ms(self) -> int:
        return self.tuning.lease_key_ttl_ms(self.lease_ms)

    def wake(self, project_id: int) -> None:
        """Wake the project's applier (the wake-up protocol: :func:`.applier.wake_applier`)."""
        wake_applier(self.redis, self.keys(project_id), self.notify, self.tuning)
