"""The applier: folds newly recorded labels into the hot posterior, one applier a project.

An :class:`Applier` is made once per process (the Celery worker's, at the edge, with the
settings and the tuning) and owns what one applier process keeps: its state cache, its
decision generator, the workers' pace and the snapshot clocks. ``Applier.apply_pending(
project_id)`` is what the Celery task ``apply_labels`` calls; it owns the wake-up protocol
(``apply_wanted``, ``apply_lock``, ``apply_retry``), of which :func:`wake_applier` is the
submitters' side.

Race-freedom. Only the holder of ``apply_lock`` (a token lock, :mod:`.redis.lock`) assigns
``applied_seq``; everyone else returns at once. Lost wake-ups are impossible: a submitter
commits its label *then* sets ``apply_wanted`` (NX) and enqueues only if it set it; the
holder leaves the flag set while its batches keep finding labels (no Celery task per
batch), deletes it after an empty batch and stops only when the SELECT that *follows* the
delete finds nothing and the flag is still clear; after releasing the lock it looks at
``apply_wanted`` again and re-acquires if it is set. (The flag expires after
``tuning.wanted_ttl_ms``, far longer than one batch, so a crash cannot leave it set for good; a
run that finds the lock busy while the flag is set retries, which covers a dead holder —
one retrier at a time, :meth:`Applier.claim_retry`.) So every committed label is either
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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sqlalchemy import bindparam, func, select, update
from sqlalchemy.engine import Engine
from sqlmodel import col

from ..policies.base import Observation
from ..record.db import database_id, session_scope
from ..record.goldstats import apply_quality_rule, gold_scores
from ..record.models import Label, Task
from ..record.problem import label_rows, to_observation
from ..record.settings import Settings, load_settings
from ..record.tally import fold
from .backfill import set_applied
from .decide import decision_rng
from .home import claim_home
from .hotstate import Hot, StateCache, write_snapshot
from .modelsettled import sync_settled
from .redis.keys import Keys, agreement_records, gold_records, parse_decline, projects_key
from .redis.lock import RedisLock
from .redis.scripts import Scripts
from .refill import PaceMeter, refill_inboxes
from .saved import gold_digest, save_state
from .suspicion import agreement_counts, release_held, suspect_schedule, suspects
from .tuning import TUNING, Tuning

__all__ = ["Applier", "ApplyReport", "LockLost", "push_priorities", "applied_counts",
           "wake_applier"]

log = logging.getLogger(__name__)


class LockLost(Exception):
    pass


@dataclass
class ApplyReport:
    applied: int = 0
    declines: int = 0
    paused: list[str] = field(default_factory=list)
    busy: bool = False  # another applier held the lock
    refilled: int = 0  # inbox reservations made after the batch


def wake_applier(redis: Any, k: Keys, notify: Callable[[int], None] | None,
                 tuning: Tuning = TUNING) -> bool:
    """The submitters' side of the wake-up protocol, for a change made outside
    ``SUBMIT_FINISH`` (which sets the flag itself): set ``apply_wanted`` (NX) of the project
    ``k`` names and, only if this call set it, ``notify`` (enqueue an applier run). True if
    it set the flag."""
    if redis.set(k.apply_wanted, 1, nx=True, px=tuning.wanted_ttl_ms):
        if notify is not None:
            notify(k.project_id)
        return True
    return False


def push_priorities(redis: Any, hot: Hot, tasks: Any, pipeline: Any = None) -> None:
    """ZADD XX the current priorities of ``tasks`` (non-gold) to ``pending``/``parked``:
    XX only updates members, so a closed task never comes back."""
    seqs = np.asarray(sorted({int(t) for t in tasks}), dtype=np.int64)
    if seqs.size == 0:
        return
    seqs = seqs[~hot.view.is_gold[seqs]]
    if seqs.size == 0:
        return
    pri = hot.policy.priority(hot.state, seqs)
    mapping = {int(t): float(p) for t, p in zip(seqs, pri, strict=True)}
    k = hot.keys
    pipe = pipeline or redis.pipeline(transaction=False)
    pipe.zadd(k.pending, mapping, xx=True)
    pipe.zadd(k.parked, mapping, xx=True)
    if pipeline is None:
        pipe.execute()


def judge_gold_answers(session: Any, project: Any, workers: list[int],
                       categories: list[str]) -> tuple[list[str], dict[str, int]]:
    """After gold answers of ``workers`` were applied (or their labels became gold
    answers: ``labelq gold mark``): the project's quality rule pauses those it flags, and
    with a gold schedule their gold records come back as ``nissued`` fields (the schedule's
    input on suspicion). One read of their gold scores serves both. Returns the handles
    paused and the fields ({} without a gold schedule)."""
    scores = gold_scores(session, project.id, workers, categories or [""]) \
        if workers and (project.quality or project.gold_schedule) else None
    paused = apply_quality_rule(session, project, workers, categories, scores)
    if scores is None or not project.gold_schedule:
        return paused, {}
    return paused, gold_records(workers, scores.total.sum(axis=1), scores.correct.sum(axis=1))


def applied_counts(engine: Engine, project_id: int) -> dict[int, int]:
    """task seq -> labels applied, from SQL (one GROUP BY; only after a replay)."""
    stmt = (select(col(Task.seq), func.count(col(Label.id)))
            .join(Task, col(Task.id) == col(Label.task_id))
            .where(col(Label.project_id) == project_id, col(Label.applied_seq).is_not(None))
            .group_by(col(Task.seq)))
    with engine.connect() as conn:
        return {int(t): int(n) for t, n in conn.execute(stmt)}


def _prune_pushed(redis: Any, k: Keys, dirty: dict[int, int]) -> None:
    """Drop from ``dirty`` the tasks whose replayed labels were all pushed by the applier
    that applied them (``pushed_seq``): only those of an applier that died between its
    commit and its Redis writes need pushing again. Without this, a process taking over
    the applier from another pushed every task the other's labels touched since its last
    run, and read every applied label of the project (``applied_counts``) to do it."""
    pushed = int(redis.get(k.pushed_seq) or 0)
    for task in [t for t, s in dirty.items() if s <= pushed]:
        del dirty[task]


class _Reshaped(Exception):
    """A label refers to a task or worker the cached view does not have yet."""


class Applier:
    """One applier process's engine: folds labels, refills inboxes, writes snapshots.

    Holds the process's :class:`StateCache` (tracking the tasks a replay touched), the
    decision generator of its refills (``Settings.decision_seed``, stream 1), the workers'
    :class:`PaceMeter`, and per project the time and cost of the last snapshot."""

    def __init__(self, engine: Engine, redis: Any, *, settings: Settings | None = None,
                 tuning: Tuning = TUNING, cache: StateCache | None = None) -> None:
        self.engine, self.redis = engine, redis
        claim_home(engine, redis)  # (a copy of a database is refused here: labelq.live.home)
        self.settings = settings or load_settings()
        self.tuning = tuning
        self.cache = cache or StateCache(track_dirty=True)
        self.scripts = Scripts(redis)
        self.rng = decision_rng(self.settings.decision_seed, 1)
        self.rng_lock = threading.Lock()
        self.pace = PaceMeter(tuning.pace_weight)
        self.last_snapshot: dict[int, float] = {}  # project -> monotonic time written
        self.snapshot_took: dict[int, float] = {}  # project -> seconds it took
        self.suspect: dict[int, set[int]] = {}  # project -> workers suspect at the last look
        self.last_saved: dict[int, float] = {}  # project -> monotonic time kept in SQL
        self.saved_took: dict[int, float] = {}  # project -> seconds that took
        self._running = 0  # runs and upkeeps in progress in this process (``busy``)
        self._running_lock = threading.Lock()

    @contextmanager
    def busy(self) -> Iterator[None]:
        """Marks a run (or the beat's upkeep) in progress: the background warmer
        (:mod:`.warm`) leaves the process's cache alone meanwhile."""
        with self._running_lock:
            self._running += 1
        try:
            yield
        finally:
            with self._running_lock:
                self._running -= 1

    @property
    def running(self) -> bool:
        return self._running > 0

    def keys(self, project_id: int) -> Keys:
        """The project's Redis keys, in the namespace of this applier's database (its
        identity read from SQL once per process, then from memory)."""
        return Keys(project_id, database_id(self.engine))

    @property
    def projects_key(self) -> str:
        """The set of this database's projects with hot state (the beat's, the warmer's)."""
        return projects_key(database_id(self.engine))

    # --- the run -------------------------------------------------------------------------
    def apply_pending(self, project_id: int, *, refill: bool = True,
                      snapshot_every_s: float | None = None) -> ApplyReport:
        """Apply every unapplied label of the project (see the module docstring), then
        refill the inboxes of the active workers with the updated posterior."""
        with self.busy():
            return self._apply_pending(project_id, refill, snapshot_every_s)

    def _apply_pending(self, project_id: int, refill: bool,
                       snapshot_every_s: float | None) -> ApplyReport:
        redis, t = self.redis, self.tuning
        every_s = t.snapshot_every_s if snapshot_every_s is None else snapshot_every_s
        k = self.keys(project_id)
        report = ApplyReport()
        while True:
            lock = RedisLock(redis, k.apply_lock, t.lock_ttl_ms)
            if not lock.acquire():
                report.busy = True
                return report
            try:
                hot: Hot | None = None
                last_refill = time.monotonic()
                # The wake-up flag is cleared only once a batch comes back empty: while
                # labels keep coming it stays set, so their submitters enqueue no more
                # Celery tasks. The holder stops only after a SELECT that followed the
                # clearing found nothing and nobody set the flag since (module docstring).
                clear = True
                while True:
                    if clear:
                        redis.delete(k.apply_wanted)
                    try:
                        n, hot = self._batch(project_id, lock, report, hot)
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
                    # let a few more arrive before the next batch rather than pay a
                    # batch's fixed cost per label
                    if refill and time.monotonic() - last_refill >= t.refill_every_s:
                        report.refilled += self.refill_project(project_id)
                        last_refill = time.monotonic()
                    self.maybe_snapshot(project_id, every_s)
                    if n < t.linger_below:
                        time.sleep(t.linger_s)
                if report.applied:
                    self.maybe_snapshot(project_id, every_s)
            except LockLost as exc:
                log.warning("applier for project %s stopped: %s", project_id, exc)
                return report
            finally:
                lock.release()
            if refill:
                report.refilled += self.refill_project(project_id)
            if report.applied:
                self.fold_tally(project_id)
            if not redis.exists(k.apply_wanted):
                return report

    def fold_tally(self, project_id: int) -> int:
        """Move the project's status counters over the labels applied since (labelq/
        tally.py: ``labelq status`` and the dashboard read them); a failure is logged,
        the counters stay where they were (status reads the rest from the labels)."""
        try:
            with session_scope(self.engine) as session:
                return fold(session, project_id)
        except Exception:  # noqa: BLE001 - the counters only speed up reading status
            log.exception("status counters of project %s not folded", project_id)
            return 0

    def claim_retry(self, project_id: int, run_id: str) -> bool:
        """After a run found the lock busy: whether this run (``run_id``, its Celery task
        id) should retry later. Only while labels still wait (``apply_wanted``), and only
        one retrier at a time (``apply_retry``, renewed by its owner on every retry): a
        holder that keeps running leaves the flag set, and the beat's wake-ups would
        otherwise pile up, each retrying every second."""
        r, k, ttl = self.redis, self.keys(project_id), self.tuning.retry_ttl_ms
        if not r.exists(k.apply_wanted):
            return False
        if r.set(k.apply_retry, run_id, nx=True, px=ttl) or \
                (r.get(k.apply_retry) or b"").decode() == run_id:
            r.pexpire(k.apply_retry, ttl)
            return True
        return False

    def _batch(self, project_id: int, lock: RedisLock, report: ApplyReport,
               hot: Hot | None) -> tuple[int, Hot]:
        """One batch. ``hot``: the state this holder of the lock caught up with SQL when
        it took the lock (nobody else applies while it holds it), else caught up now."""
        engine, redis, cache = self.engine, self.redis, self.cache
        if hot is None:
            hot = cache.get(engine, redis, project_id)
        k = hot.keys
        with hot.lock:
            try:
                with session_scope(engine) as session:
                    rows = label_rows(session, project_id, unapplied=True,
                                      limit=self.tuning.apply_batch)
                    if rows and (max(r[2] for r in rows) >= hot.view.n_tasks or
                                 max(r[3] for r in rows) >= hot.view.n_workers):
                        raise _Reshaped()
                    if hot.dirty:
                        _prune_pushed(redis, k, hot.dirty)
                    if not rows and not redis.llen(k.declines) and not hot.dirty:
                        if not hot.settled_synced:  # a state folded again (a new model
                            # version): the tasks the model settled alone, synced now
                            sync_settled(redis, k, hot.policy, hot.state, hot.view.is_gold,
                                         hot.project.max_labels)
                            hot.settled_synced = True
                        return 0, hot
                    idx = {v: i for i, v in enumerate(hot.project.labels)}
                    touched: set[int] = set(hot.dirty or ())
                    applied_per_task: dict[int, int] = {}
                    gold_workers: set[int] = set()
                    label_workers: set[int] = set()
                    seq = hot.seq
                    marks = []
                    for row in rows:
                        seq += 1
                        obs = to_observation(row, idx)
                        touched.update(int(t) for t in hot.policy.update(hot.state, obs))
                        marks.append({"lid": row[0], "seq": seq})
                        applied_per_task[obs.task] = applied_per_task.get(obs.task, 0) + 1
                        label_workers.add(obs.worker)
                        if obs.gold:
                            gold_workers.add(obs.worker)
                    if marks:
                        t = getattr(Label, "__table__")
                        res = session.connection().execute(
                            update(t).where(t.c.id == bindparam("lid"),
                                            t.c.applied_seq.is_(None))
                            .values(applied_seq=bindparam("seq")), marks)
                        if res.rowcount not in (-1, len(marks)):
                            raise LockLost(f"{len(marks) - res.rowcount} labels applied "
                                           "elsewhere")
                    paused, record = judge_gold_answers(session, hot.project,
                                                        sorted(gold_workers),
                                                        hot.view.categories)
                    report.paused += paused
                    suspicion = suspect_schedule(hot.project.gold_schedule)
                    agreement: dict[str, str] = {}
                    if suspicion is not None and label_workers:
                        checked, right = agreement_counts(session, hot, sorted(label_workers))
                        agreement = agreement_records(sorted(label_workers), checked, right)
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
                    hot.state, Observation(task=task, worker=worker, label=-1,
                                           declined=True)))
            report.declines += len(raw)
            pipe = redis.pipeline(transaction=False)
            if record:  # absolute counts from SQL: a replayed batch writes them again
                pipe.hset(k.nissued, mapping=record)
            if agreement:  # the worker model's counts now (issue 41)
                pipe.hset(k.nissued, mapping=agreement)
            push_priorities(redis, hot, touched, pipeline=pipe)
            # after the priorities: a task the model settled alone leaves ``pending``
            sync_settled(redis, k, hot.policy, hot.state, hot.view.is_gold,
                         hot.project.max_labels, pipeline=pipe)
            hot.settled_synced = True
            # tasks of labels replayed from SQL (applied by a holder that died before its
            # Redis writes, or that did them): their ``applied`` counts are set from SQL,
            # where the increments may be missing; the others are incremented by this
            # batch's labels
            replayed = set(hot.dirty or ())
            if replayed:  # (less what a lazy rebuild's stream still adds: backfill)
                counts = applied_counts(engine, project_id)
                set_applied(redis, k, {t: counts.get(t, 0) for t in replayed}, pipeline=pipe)
            for task, n in applied_per_task.items():
                if task not in replayed:
                    pipe.hincrby(k.applied, task, n)
            if marks or replayed:  # every label up to ``seq`` is pushed now (last: set
                pipe.set(k.pushed_seq, seq)  # only once every write before it was made)
            pipe.execute()
            if hot.dirty:
                hot.dirty.clear()
        if suspicion is not None and label_workers:
            self._newly_suspect(project_id, k, suspicion, sorted(label_workers))
        return len(rows) + len(raw), hot

    def _newly_suspect(self, project_id: int, k: Keys, schedule: Any,
                       workers: list[int]) -> None:
        """Release the held inbox reservations of those of ``workers`` who have just
        become suspect (:mod:`.suspicion`): they were decided at the lower gold rate.
        Remembered per process; a new process releases once more, which is harmless."""
        was = self.suspect.setdefault(project_id, set())
        now = suspects(self.redis, k, schedule, workers)
        for w in sorted(now - was):
            n = release_held(self.redis, self.scripts, k, w)
            if n:
                log.info("project %s: worker %s is suspect; %d held reservations released "
                         "for gold at the suspect rate", project_id, w, n)
        self.suspect[project_id] = (was - set(workers)) | now

    # --- snapshots and refills -----------------------------------------------------------
    def maybe_snapshot(self, project_id: int, every_s: float | None = None) -> None:
        """Write the cached state's snapshot if the last is older than ``every_s`` — or
        than ``tuning.snapshot_share`` times the last one's duration, if that is longer: a
        snapshot costs O(tasks) (1M tasks: most of a second), and the applier spends at
        most about 1/``snapshot_share`` of its time writing them."""
        hot = self.cache.peek(project_id)
        now = time.monotonic()
        every = self.tuning.snapshot_every_s if every_s is None else every_s
        every = max(every, self.tuning.snapshot_share * self.snapshot_took.get(project_id, 0.0))
        if hot is not None and now - self.last_snapshot.get(project_id, 0.0) >= every:
            save = self._save_due(project_id, now)
            with hot.lock:
                blob = write_snapshot(self.redis, hot)
                # what the snapshot was folded at, taken with it (under the lock)
                seq, gold = (hot.seq, gold_digest(hot)) if save else (0, "")
            self.last_snapshot[project_id] = done = time.monotonic()
            self.snapshot_took[project_id] = done - now
            if save:  # (outside the lock: decisions meanwhile are not held up)
                save_state(self.engine, hot, blob, gold=gold, seq=seq)
                self.last_saved[project_id] = saved = time.monotonic()
                self.saved_took[project_id] = saved - done

    def _save_due(self, project_id: int, now: float) -> bool:
        """Whether this snapshot goes to SQL too (:mod:`.saved`): at most every
        ``tuning.saved_every_s`` seconds, or ``tuning.snapshot_share`` times the last
        write's duration if longer."""
        every = self.tuning.saved_every_s
        if every <= 0:
            return False
        every = max(every, self.tuning.snapshot_share * self.saved_took.get(project_id, 0.0))
        last = self.last_saved.get(project_id)
        return last is None or now - last >= every

    def refill_project(self, project_id: int) -> int:
        """Top up the active workers' inboxes (:func:`.refill.refill_inboxes`) with the
        cached state of this process (caught up with SQL first if older than
        ``tuning.refill_state_max_age``)."""
        hot = self.cache.get(self.engine, self.redis, project_id,
                             max_age=self.tuning.refill_state_max_age)
        lease_ms = self.settings.lease_seconds * 1000
        return refill_inboxes(self.engine, self.redis, self.scripts, hot,
                              inbox_size=self.settings.inbox_size,
                              inbox_max=self.settings.inbox_max, lease_ms=lease_ms,
                              key_ttl_ms=self.tuning.lease_key_ttl_ms(lease_ms),
                              rng=self.rng, rng_lock=self.rng_lock, pace=self.pace,
                              tuning=self.tuning)
