"""After a Sentinel failover: the promoted replica's hot state is rebuilt from SQL.

Redis replicates asynchronously, so a replica promoted when its master died may lack the
master's last writes: a lease, a counter's increment (``nlabels``, ``spent``, ``wcount``),
a task's return to ``pending``. SQL has every label; the hot state is only what was derived
from it, so the safe answer is the one a flush gets: every project's hot state is dropped
and rebuilt from SQL (:func:`labelq.live.rebuild.ensure_hot`, lazily: the highest
priorities of ``pending`` and every other task's counters first, the rest streamed in
behind, :mod:`.backfill`; live leases are then recovered by the submits that carry them:
docs/architecture.md, "A lease lost with Redis").

How a failover is told from a restart: a Redis server has a replication id
(``INFO replication``: ``master_replid``), new at every start and at a promotion; a
promoted replica keeps its old master's id as ``master_replid2``. The beat
(:func:`check_failover`, from ``labelq.maintain``) keeps the id it last saw under
:func:`~labelq.live.redis.keys.replication_key` (per database: every database's beat looks
after its own projects). An id that differs from the stored one while ``master_replid2``
equals it is a promotion (the stored key came over with the replicated data); a restart
(its ``master_replid2`` is zeros, persistence kept the data) only updates the key. The
compare-and-set is one Lua call, so of several beats seeing the change one rebuilds.

Between the promotion and the next beat (``LABELQ_BEAT_SECONDS``), requests run on the
replica's state as it is: a lost increment there is at most the last writes' worth. A
failover before any beat looked at the master (the key unset) goes unseen; so does one on a
Redis that refuses ``INFO``. ``labelq rebuild NAME`` recomputes a project's hot state then.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.engine import Engine

from .hotstate import StateCache
from .rebuild import delete_hot, ensure_hot
from .redis.keys import Keys, projects_key, replication_key

__all__ = ["check_failover", "replication_ids"]

# KEYS[1] the database's replication key; ARGV[1] the id expected there, ARGV[2] the new
# one: set it only if it still holds the expected id (1), else another beat did (0)
_SWAP = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2])
  return 1
end
return 0
"""


def replication_ids(redis: Any) -> tuple[str, str, str]:
    """(role, master_replid, master_replid2) of the server ``redis`` is connected to."""
    info = redis.info("replication")
    return (str(info.get("role", "")), str(info.get("master_replid", "")),
            str(info.get("master_replid2", "")))


def check_failover(engine: Engine, redis: Any, database: str) -> list[int]:
    """If the server is a replica promoted since the last check, drop and rebuild every
    hot project of ``database``; returns their ids (empty: no failover seen)."""
    from redis.exceptions import ResponseError
    try:
        role, replid, previous = replication_ids(redis)
    except ResponseError:  # INFO refused (an ACL, a managed Redis): no failover is seen
        return []
    if role != "master" or not replid:
        return []
    key = replication_key(database)
    raw = redis.get(key)
    if raw is None:  # first look: remember this server's id
        redis.set(key, replid, nx=True)
        return []
    seen = raw.decode() if isinstance(raw, bytes) else str(raw)
    if seen == replid:
        return []
    if not redis.eval(_SWAP, 1, key, seen, replid):
        return []  # another beat saw it first (and rebuilds)
    if previous != seen:
        return []  # a restart (or a master of another history): nothing was lost by it
    rebuilt = []
    for raw_pid in sorted(redis.smembers(projects_key(database))):
        pid = int(raw_pid)
        delete_hot(redis, Keys(pid, database))
        # the lazy rebuild, as after a flush: the highest priorities first, the rest of
        # pending streamed in behind by a thread of this process (the beat resumes it)
        ensure_hot(engine, redis, pid, cache=StateCache())
        rebuilt.append(pid)
    return rebuilt
