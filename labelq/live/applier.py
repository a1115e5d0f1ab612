"""The applier: folds newly recorded labels into the hot posterior, one applier a project.

``apply_pending(engine, redis, project_id)`` is what the Celery task ``apply_labels`` calls.

Race-freedom. Only the holder of ``apply_lock`` (a token lock, :mod:`.lock`) assigns
``applied_seq``; everyone else returns at once. Lost wake-ups are impossible: a submitter
commits its label *then* sets ``apply_wanted`` (NX) and enqueues only if it set it; the
holder leaves the flag set while its batches keep finding labels (no Celery task per
batch), deletes it after an empty batch and stops only when the SELECT that *follows* the
delete finds nothing and the flag is still clear; after releasing the lock it looks at
``apply_wanted`` again and re-acquires if it is set. (The flag expires after
``WANTED_TTL_MS``, far longer than one batch, so a crash cannot leave it set for good; a
run that finds the lock busy while the flag is set retries, which covers a dead holder.) So every committed label is either
seen by a running SELECT or leaves the flag set for a later one. A holder that stalls past
the lock TTL loses the lock: ``extend`` fails before its commit and it rolls back; and the
UPDATE only touches ``applied_seq IS NULL`` rows, so two appliers can never both apply one
label.

Idempotence. The fold is stored in SQL (``applied_seq``) in the same transaction that marks
the labels; the in-memory state is updated only after the commit succeeds (else the cache is
dropped and rebuilt from SQL). A redelivered message finds nothing unapplied. A crash after
the commit but before the Redis writes leaves a snapshot behind SQL; the next holder
replays the missing labels from SQL (:mod:`.hotstate`).
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field

import numpy as np
from sqlalchemy import bindparam, update

from ..db import session_scope
from ..models import Label
from ..policies.base import Observation
from .hotstate import Hot, StateCache, write_snapshot
from .decide import decision_rng, refill_inboxes
from .redis.keys import Keys, parse_decline
from .redis.lock import RedisLock
from ..problem import label_rows, to_observation
from ..goldstats import apply_quality_rule

__all__ = ["apply_pending", "refill_project", "ApplyReport", "CACHE", "push_priorities",
           "WANTED_TTL_MS", "applied_counts"]

log = logging.getLogger(__name__)
CACHE = StateCache(track_dirty=True)  # the applier's per-process cache
# ``apply_wanted`` expires so a crashed submitter cannot silence wake-ups for long; it must
# outlive one batch (the holder re-checks it after every batch).
WANTED_TTL_MS = 30_000
_last_snapshot: dict[int, float] = {}
# while labels keep arriving: refill the inboxes this often, and wait this long before a
# batch when the last one was smaller than LINGER_BELOW labels
REFILL_EVERY_S = 0.05
LINGER_BELOW, LINGER_S = 64, 0.01
_rng = decision_rng(1)
_rng_lock = threading.Lock()


def _scripts_for(redis):
    from .redis.scripts import Scripts
    return Scripts(redis)  # cheap: the scripts are loaded once per client (load_script)


class LockLost(Exception):
    pass


@dataclass
class ApplyReport:
    applied: int = 0
    declines: int = 0
    paused: list[str] = field(default_factory=list)
    busy: bool = False  # another applier held the lock
    refilled: int = 0  # inbox reservations made after the batch


def push_priorities(redis, hot: Hot, tasks, pipeline=None) -> None:
    """ZADD XX the current priorities of ``tasks`` (non-gold) to ``pending``/``parked``:
    XX only updates members, so a closed task never comes back."""
    tasks = np.asarray(sorted({int(t) for t in tasks}), dtype=np.int64)
    if tasks.size == 0:
        return
    tasks = tasks[~hot.view.is_gold[tasks]]
    if tasks.size == 0:
        return
    pri = hot.policy.priority(hot.state, tasks)
    mapping = {int(t): float(p) for t, p in zip(tasks, pri)}
    k = Keys(hot.project.id)
    pipe = pipeline or redis.pipeline(transaction=False)
    pipe.zadd(k.pending, mapping, xx=True)
    pipe.zadd(k.parked, mapping, xx=True)
    if pipeline is None:
        pipe.execute()


def applied_counts(engine, project_id: int) -> dict[int, int]:
    """task seq -> labels applied, from SQL (one GROUP BY; only after a replay)."""
    from sqlalchemy import func, select

    from ..models import Task
    stmt = (select(Task.seq, func.count(Label.id)).join(Task, Task.id == Label.task_id)
            .where(Label.project_id == project_id, Label.applied_seq.is_not(None))
            .group_by(Task.seq))
    with engine.connect() as conn:
        return {int(t): int(n) for t, n in conn.execute(stmt)}


class _Reshaped(Exception):
    """A label refers to a task or worker the cached view does not have yet."""


def _apply_batch(engine, redis, project_id: int, lock: RedisLock, cache: StateCache,
                 batch: int, report: ApplyReport, hot: Hot | None = None) -> tuple[int, Hot]:
    """One batch. ``hot``: the state this holder of the lock caught up with SQL when it
    took the lock (nobody else applies while it holds it), else caught up now."""
    if hot is None:
        hot = cache.get(engine, redis, project_id)
    k = Keys(project_id)
    with hot.lock:
        try:
            with session_scope(engine) as session:
                rows = label_rows(session, project_id, unapplied=True, limit=batch)
                if rows and (max(r[2] for r in rows) >= hot.view.n_tasks or
                             max(r[3] for r in rows) >= hot.view.n_workers):
                    raise _Reshaped()
                if not rows and not redis.llen(k.declines) and not hot.dirty:
                    return 0, hot
                idx = {v: i for i, v in enumerate(hot.project.labels)}
                touched: set[int] = set(hot.dirty or ())
                applied_per_task: dict[int, int] = {}
                gold_workers: set[int] = set()
                seq = hot.seq
                marks = []
                for row in rows:
                    seq += 1
                    obs = to_observation(row, idx)
                    touched.update(int(t) for t in hot.policy.update(hot.state, obs))
                    marks.append({"lid": row[0], "seq": seq})
                    applied_per_task[obs.task] = applied_per_task.get(obs.task, 0) + 1
                    if obs.gold:
                        gold_workers.add(obs.worker)
                if marks:
                    t = Label.__table__
                    res = session.connection().execute(
                        update(t).where(t.c.id == bindparam("lid"), t.c.applied_seq.is_(None))
                        .values(applied_seq=bindparam("seq")), marks)
                    if res.rowcount not in (-1, len(marks)):
                        raise LockLost(f"{len(marks) - res.rowcount} labels applied elsewhere")
                report.paused += apply_quality_rule(session, hot.project, sorted(gold_workers),
                                                     hot.view.categories)
                if not lock.extend():
                    raise LockLost("apply lock expired during the batch")
            hot.seq = seq
        except BaseException:
            cache.drop(project_id)  # the state may hold updates SQL did not keep
            raise
        # declines: applied to the hot state only (see the module docstring of hotstate)
        raw = redis.lpop(k.declines, 1000) or []
        for item in raw:
            task, worker = parse_decline(item)
            touched.update(int(t) for t in hot.policy.update(
                hot.state, Observation(task=task, worker=worker, label=-1, declined=True)))
        report.declines += len(raw)
        pipe = redis.pipeline(transaction=False)
        push_priorities(redis, hot, touched, pipeline=pipe)
        # tasks of labels replayed from SQL (applied by a holder that died before its Redis
        # writes, or that did them): their ``applied`` counts are set from SQL, where the
        # increments may be missing; the others are incremented by this batch's labels
        replayed = set(hot.dirty or ())
        if replayed:
            counts = applied_counts(engine, project_id)
            for task in sorted(replayed):
                pipe.hset(k.applied, task, counts.get(task, 0))
        for task, n in applied_per_task.items():
            if task not in replayed:
                pipe.hincrby(k.applied, task, n)
        pipe.execute()
        if hot.dirty:
            hot.dirty.clear()
    return len(rows) + len(raw), hot


def apply_pending(engine, redis, project_id: int, *, cache: StateCache | None = None,
                  batch: int = 2000, lock_ttl_ms: int = 10_000,
                  snapshot_every_s: float = 2.0, refill: bool = True) -> ApplyReport:
    """Apply every unapplied label of the project (see the module docstring), then
    refill the inboxes of the active workers with the updated posterior."""
    cache = cache or CACHE
    k = Keys(project_id)
    report = ApplyReport()
    while True:
        lock = RedisLock(redis, k.apply_lock, lock_ttl_ms)
        if not lock.acquire():
            report.busy = True
            return report
        try:
            hot, last_refill = None, time.monotonic()
            # The wake-up flag is cleared only once a batch comes back empty: while labels
            # keep coming it stays set, so their submitters enqueue no more Celery tasks.
            # The holder stops only after a SELECT that followed the clearing found
            # nothing and nobody set the flag since (see the module docstring).
            clear = True
            while True:
                if clear:
                    redis.delete(k.apply_wanted)
                try:
                    n, hot = _apply_batch(engine, redis, project_id, lock, cache, batch,
                                          report, hot)
                except _Reshaped:  # tasks loaded or workers enrolled: reload the view
                    hot = None
                    continue
                report.applied += n
                if n == 0 and clear and not redis.exists(k.apply_wanted):
                    break
                clear = n == 0
                if n == 0:
                    continue
                # labels keep coming: keep the inboxes topped up meanwhile (else the
                # annotators fall back to deciding at once), snapshot now and then, and
                # let a few more arrive before the next batch rather than pay a batch's
                # fixed cost per label
                if refill and time.monotonic() - last_refill >= REFILL_EVERY_S:
                    report.refilled += refill_project(engine, redis, project_id, cache)
                    last_refill = time.monotonic()
                _maybe_snapshot(redis, cache, project_id, snapshot_every_s)
                if n < LINGER_BELOW:
                    time.sleep(LINGER_S)
            if report.applied:
                _maybe_snapshot(redis, cache, project_id, snapshot_every_s)
        except LockLost as exc:
            log.warning("applier for project %s stopped: %s", project_id, exc)
            return report
        finally:
            lock.release()
        if refill:
            report.refilled += refill_project(engine, redis, project_id, cache)
        if not redis.exists(k.apply_wanted):
            return report


# a snapshot costs O(tasks) (1M tasks: most of a second): the applier spends at most about
# 1/SNAPSHOT_SHARE of its time writing them — the interval grows to this many times the
# last snapshot's duration when that is longer than ``snapshot_every_s``
SNAPSHOT_SHARE = 20
_snapshot_took: dict[int, float] = {}


def _maybe_snapshot(redis, cache: StateCache, project_id: int, every_s: float) -> None:
    hot = cache.peek(project_id)
    now = time.monotonic()
    every_s = max(every_s, SNAPSHOT_SHARE * _snapshot_took.get(project_id, 0.0))
    if hot is not None and now - _last_snapshot.get(project_id, 0.0) >= every_s:
        with hot.lock:
            write_snapshot(redis, hot)
        _last_snapshot[project_id] = done = time.monotonic()
        _snapshot_took[project_id] = done - now


def refill_project(engine, redis, project_id: int, cache: StateCache | None = None) -> int:
    """Top up the active workers' inboxes (:func:`.decide.refill_inboxes`) with the
    cached state of this process (caught up with SQL first if older than 1 s)."""
    from ..settings import load_settings
    from .reaper import lease_key_ttl_ms
    settings = load_settings()
    cache = cache or CACHE
    hot = cache.get(engine, redis, project_id, max_age=1.0)
    lease_ms = settings.lease_seconds * 1000
    return refill_inboxes(engine, redis, _scripts_for(redis), hot,
                          inbox_size=settings.inbox_size, inbox_max=settings.inbox_max,
                          lease_ms=lease_ms,
                          key_ttl_ms=lease_key_ttl_ms(lease_ms), rng=_rng,
                          rng_lock=_rng_lock)
