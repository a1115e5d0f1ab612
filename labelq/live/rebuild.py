"""Rebuild a project's whole hot state from SQL, and keep it in step with new tasks.

``rebuild_project`` is ``labelq rebuild NAME``: after a Redis flush (or to repair counters
exactly) it drops every key of the project (``lq:{D:P}:``, of its own database ``D`` only:
``labelq.live.redis.keys``) and recomputes them from the record:

* the policy state: a fresh fold of the applied labels in ``applied_seq`` order (unapplied
  labels are left to the applier, which is woken);
* ``pending``: the non-gold tasks below the cap, with their priorities (with ``first``,
  as ``ensure_hot`` asks: only that many of the highest, the rest streamed in behind by
  :mod:`.backfill`, their counters and ``seen`` entries with them), but for those whose
  gold mark is queued until their assignment ends (``pending_gold_mark``: out of it, as
  the mark left them, and ``gold_queued`` set, so the applier's next run marks them once
  their assignment has ended: :mod:`.goldmark`); ``gold``;
* ``nlabels``, ``wcount``, ``spent`` and ``seen`` (and ``nissued``, with the gold questions
  given to each worker, in all and per category) from the labels and the declined and
  expired assignments; with a gold schedule, each worker's gold record.

The rebuilt state gets a new ``meta`` epoch (the old one plus one), so that every process
folds its policy state again, from the snapshot written here.

Live leases are not in SQL (an assignment row is written when it is submitted, declined or
expired), so they are gone after a rebuild: their holders get ``NotFound`` on submit and ask
again. Run it with the annotators' traffic stopped; it takes the apply lock so no applier
runs during it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from itertools import chain
from typing import Any

import numpy as np
from sqlalchemy import func
from sqlalchemy.engine import Engine
from sqlalchemy.exc import OperationalError, ProgrammingError
from sqlmodel import col, select

from ..errors import Conflict, NotFound
from ..record.db import database_id, session_scope
from ..record.goldstats import project_gold_scores
from ..record.models import (
    ENDED_UNLABELLED,
    Assignment,
    Label,
    PendingGoldMark,
    Project,
    Task,
    Worker,
)
from ..record.secret import assignment_key
from .backfill import FIRST, bulk_write, packs, plan, start_backfill, unstreamed, warming
from .home import claim_home
from .hotstate import StateCache, fold_from_sql, write_snapshot
from .leaseid import IdSigner
from .modelsettled import model_settled, sync_settled
from .redis.keys import Keys, gold_category_field, gold_issued_field, gold_records
from .redis.lock import RedisLock
from .saved import load_saved, n_applied, save_state

__all__ = ["rebuild_project", "ensure_hot", "add_new_tasks", "reopen_below_cap", "delete_hot"]

CHUNK = 10_000
log = logging.getLogger(__name__)


def delete_hot(redis: Any, k: Keys) -> int:
    """Unlink every key of the project ``k`` names (of its database only), but the locks
    of whoever is rebuilding it now; returns how many."""
    n = 0
    batch: list[bytes] = []
    for key in redis.scan_iter(match=k.pattern(), count=1000):
        if key.endswith(b":apply_lock") or key.endswith(b":rebuild_gate"):
            continue  # the locks of whoever is rebuilding now
        batch.append(key)
        if len(batch) >= 1000:
            n += redis.unlink(*batch)
            batch = []
    if batch:
        n += redis.unlink(*batch)
    return n


class _Clock:
    """Seconds per step of a rebuild (its result's ``seconds``; bench/cold_start.py)."""

    def __init__(self) -> None:
        self.laps: dict[str, float] = {}
        self._last = time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.laps[name] = round(now - self._last, 3)
        self._last = now


def _counts(redis: Any, key: str, counts: np.ndarray) -> None:
    """``HSET`` of the non-zero ``counts`` by index (a counter hash)."""
    nz = np.flatnonzero(counts)
    bulk_write(redis, key, "HSET", nz, counts[nz])


def _rows(session: Any, sql: str, project_id: int) -> list[tuple[Any, ...]]:
    """The rows of ``sql`` (one ``{mark}`` for the project id) through the driver's cursor:
    plain tuples, no Row objects."""
    conn = session.connection()
    mark = "?" if conn.dialect.paramstyle == "qmark" else "%s"
    cursor = conn.connection.cursor()
    try:
        cursor.execute(sql.format(mark=mark), (project_id,))
        return list(cursor.fetchall())
    finally:
        cursor.close()


def _seqs(ids: np.ndarray, task_id: np.ndarray) -> np.ndarray:
    """The task seqs of the task ids ``ids`` (``task_id``: the view's seq -> id; ids
    loaded in order are ascending, and then need no sort)."""
    if task_id.size < 2 or bool((task_id[1:] > task_id[:-1]).all()):
        return np.searchsorted(task_id, ids)
    order = np.argsort(task_id, kind="stable")
    return order[np.searchsorted(task_id, ids, sorter=order)]


def _label_rows(session: Any, project_id: int, task_id: np.ndarray,
                worker_seq: dict[int, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The project's labels as (task seq, worker seq, applied seq or -1) arrays, from one
    read of the label rows alone: the counts by task, by worker, applied and the ``seen``
    sets are all made from it with numpy, the seqs through the view's task ids and the
    workers' ids (four ORM queries joining the task and worker rows took ~3 s at 200,000
    labels under load; joining them here, 3-4 times this read's). The rows' integers go
    into one array in one pass (``chain``; unzipping them into tuples first and mapping
    the workers through a dict was most of this read's time)."""
    rows = _rows(session, f"SELECT task_id, worker_id, COALESCE(applied_seq, -1) "
                          f"FROM {_LABEL} WHERE project_id = {{mark}}", project_id)
    n = len(rows)
    if not n:
        empty = np.empty(0, dtype=np.int64)
        return empty, empty, empty
    flat = np.fromiter(chain.from_iterable(rows), dtype=np.int64, count=3 * n).reshape(n, 3)
    del rows
    ids = np.array(sorted(worker_seq), dtype=np.int64)
    seqs = np.array([worker_seq[i] for i in ids.tolist()], dtype=np.int64)
    at = np.minimum(np.searchsorted(ids, flat[:, 1]), max(ids.size - 1, 0))
    if not ids.size or not bool((ids[at] == flat[:, 1]).all()):
        raise KeyError("a label of a worker not of the project")
    return _seqs(flat[:, 0], task_id), seqs[at], flat[:, 2].copy()


_LABEL = getattr(Label, "__table__").name
_TASK = getattr(Task, "__table__").name


def rebuild_project(engine: Engine, redis: Any, project_id: int, *,
                    cache: StateCache | None = None, wait_s: float = 60.0,
                    unless_built: bool = False, from_saved: bool = True,
                    first: int | None = None,
                    snapshot: bool = True) -> dict[str, Any]:
    """Rebuild the project's hot state (module docstring). The policy state starts from
    the one kept in SQL (:mod:`.saved`) when it holds, unless ``from_saved`` is False,
    and only the labels applied after it are folded; the result's ``folded`` says how
    many labels were, ``saved_seq`` the saved state's sequence (None: none used).
    ``snapshot`` False (with a ``cache``): the state's snapshot is not written here; the
    result's ``keep`` is what writes it (:func:`ensure_hot` calls it after the first
    request, in a thread: meanwhile a process loads the state kept in SQL)."""
    k = Keys(project_id, claim_home(engine, redis))
    clock = _Clock()
    lock = RedisLock(redis, k.apply_lock, ttl_ms=300_000)
    if not lock.acquire_within(wait_s):
        raise Conflict("the applier holds the lock; try again", project_id=project_id)
    try:
        if unless_built and redis.hexists(k.meta, "built"):
            return {"project_id": project_id, "skipped": "already built"}
        with session_scope(engine) as session:
            project = session.get(Project, project_id)
            if project is None:
                raise NotFound(f"no project with id {project_id}", project_id=project_id)
            clock.lap("lock")
            saved = load_saved(session, project) if from_saved else None
            saved_seq: int | None
            if saved is not None:  # the state kept in SQL and the labels applied since
                hot, folded, saved_seq = saved
            else:
                hot = fold_from_sql(session, project)
                folded, saved_seq = n_applied(session, project_id, hot.seq), None
            pid = hot.project_id
            if hot.signer is None:  # (what a state loaded by a StateCache has)
                hot.signer = IdSigner(assignment_key(session))
            hot.database = database_id(session)
            clock.lap("policy state")
            workers = session.exec(select(col(Worker.id), col(Worker.seq), col(Worker.cost))
                                   .where(Worker.project_id == pid)).all()
            worker_seq = {int(i): int(s) for i, s, _c in workers}
            task_id = hot.view.task_id
            if task_id is None:  # (a view made without the ids)
                task_id = np.array([i for (i,) in _rows(
                    session, f"SELECT id FROM {_TASK} WHERE project_id = {{mark}} "
                    "ORDER BY seq", pid)], dtype=np.int64)
            labels = _label_rows(session, pid, task_id, worker_seq)
            ended_rows = session.exec(
                select(col(Assignment.worker_id), col(Assignment.task_id))
                .where(Assignment.project_id == pid,
                       col(Assignment.state).in_(ENDED_UNLABELLED))).all()
            record = project_gold_scores(session, project).scores \
                if project.gold_schedule else None
        # a new epoch, not the deleted one's 0: a process whose state predates a gold
        # answer marked or corrected just before (epoch bumped, not yet followed) would
        # find 0 = its own epoch and keep the old view; with a new one every process folds
        # again (from the snapshot written below)
        clock.lap("counts from SQL")
        hot.epoch = int(redis.hget(k.meta, "epoch") or 0) + 1
        delete_hot(redis, k)
        view = hot.view
        t_seq, w_seq, a_seq = labels
        nlabels = np.bincount(t_seq, minlength=view.n_tasks)
        open_ = ~view.is_gold
        if project.max_labels is not None:
            open_ &= nlabels < project.max_labels
        queued = _queued_marks(engine, pid)
        open_[queued] = False
        tasks = np.flatnonzero(open_)
        clock.lap("old keys deleted")
        pri = np.asarray(hot.policy.priority(hot.state, tasks) if tasks.size else (),
                         dtype=float)
        clock.lap("priorities")
        # the tasks a model settled alone stay out of it (auto:min_human_labels=0; the
        # ``settled`` set is filled below), streamed part included
        settled = model_settled(hot.policy, hot.state, view.is_gold)
        if settled.any() and tasks.size:
            keep = ~settled[tasks]
            tasks, pri = tasks[keep], pri[keep]
        # seen: every task a worker labelled or was given and declined or let expire
        ended = np.array(ended_rows, dtype=np.int64).reshape(-1, 2)
        seen_w = np.concatenate([w_seq, [worker_seq[int(w)] for w in ended[:, 0]]]).astype(np.int64)
        seen_t = np.concatenate([t_seq, _seqs(ended[:, 1], task_id)])
        all_w, now_n = seen_w, nlabels  # (what is written now: less the held back)
        applied = np.bincount(t_seq[(a_seq >= 0) & (a_seq <= hot.seq)],
                              minlength=view.n_tasks)
        warm: dict[str, int] = {}
        if first is not None and tasks.size > first:  # the rest streamed in behind
            order = np.argsort(-pri, kind="stable")
            bulk_write(redis, k.pending, "ZADD", tasks[order[:first]], pri[order[:first]])
            rest = tasks[order[first:]]
            if packs(redis):  # their counters and seen entries come with them (backfill)
                later = np.zeros(view.n_tasks, dtype=bool)
                later[rest] = True
                by = later[seen_t]
                warm = plan(redis, k, rest, held=(view.n_tasks, nlabels, applied,
                                                  seen_w[by], seen_t[by]))
                now_n, applied = np.where(later, 0, nlabels), np.where(later, 0, applied)
                seen_w, seen_t = seen_w[~by], seen_t[~by]
            else:
                warm = plan(redis, k, rest)
        else:
            bulk_write(redis, k.pending, "ZADD", tasks, pri)
        clock.lap("pending")
        gold = np.flatnonzero(view.is_gold)
        bulk_write(redis, k.gold, "SADD", gold)
        _counts(redis, k.nlabels, now_n)
        _counts(redis, k.applied, applied)
        per_worker = np.bincount(w_seq, minlength=view.n_workers)
        _counts(redis, k.wcount, per_worker)
        cost = {s: c for _i, s, c in workers}
        spent = sum(float(n) * float(cost[w]) for w, n in enumerate(per_worker.tolist()) if n)
        pipe = redis.pipeline(transaction=False)
        pipe.set(k.spent, repr(spent))
        pipe.set(k.reserved_cost, "0")
        issued: dict[int | str, int] = {
            w: n for w, n in enumerate(np.bincount(all_w).tolist()) if n}
        is_gold = view.is_gold[seen_t]
        for w, t in zip(seen_w[is_gold].tolist(), seen_t[is_gold].tolist(), strict=True):
            # the gold ones per category too, as RESERVE counts them
            for g in (gold_issued_field(w), gold_category_field(w, int(view.task_category[t]))):
                issued[g] = issued.get(g, 0) + 1
        by_worker = np.argsort(seen_w, kind="stable")
        bounds = np.flatnonzero(np.diff(seen_w[by_worker])) + 1
        for part in np.split(by_worker, bounds) if by_worker.size else []:
            bulk_write(redis, k.seen(int(seen_w[part[0]])), "SADD", seen_t[part])
        if record is not None:  # every worker's gold record (gold on suspicion)
            answered = record.total.sum(axis=1)
            issued.update(gold_records(range(answered.size), answered,
                                       record.correct.sum(axis=1)))
        if issued:
            pipe.hset(k.nissued, mapping=issued)
        if queued.size:
            pipe.set(k.gold_queued, 1)
        pipe.set(k.pushed_seq, hot.seq)  # the priorities and counts above are the fold's
        # the tasks a model settled alone, kept out of ``pending`` above (min_human_labels=0)
        sync_settled(redis, k, hot.policy, hot.state, view.is_gold, project.max_labels,
                     pipeline=pipe)
        pipe.execute()
        clock.lap("counters, seen")
        keeper = _keeper(engine, redis, hot, save=bool(folded or saved is None))
        if snapshot or cache is None:
            keeper()
            clock.lap("snapshot")
        redis.hset(k.meta, mapping={"built": 1, "n_tasks": view.n_tasks,
                                    "n_workers": view.n_workers, "epoch": hot.epoch,
                                    "cap": _cap_field(project.max_labels), **warm})
        redis.sadd(k.projects, pid)
        if cache is not None:  # the state just folded and written: the cache's now
            cache.put(hot)
        out: dict[str, Any] = {} if snapshot or cache is None else {"keep": keeper}
        return {**out, "project_id": pid, "tasks": view.n_tasks, "pending": int(tasks.size),
                "streaming": warm.get("warming", 0),
                "gold": int(gold.size), "queued": int(queued.size),
                "labels": int(nlabels.sum()), "state_seq": hot.seq,
                "folded": int(folded), "saved_seq": saved_seq, "seconds": clock.laps}
    finally:
        lock.release()


def _keeper(engine: Engine, redis: Any, hot: Any, *, save: bool) -> Callable[[], None]:
    """What writes the rebuilt state's snapshot to Redis and (``save``: a state folded
    since the one kept in SQL, or none was) to SQL. Deferred (:func:`ensure_hot`), it
    writes nothing when a snapshot is in Redis by then (the applier's: as new or newer)."""
    wrote = [False]

    def keep() -> None:
        if wrote[0] or redis.exists(hot.keys.state):
            return
        wrote[0] = True
        with hot.lock:
            blob = write_snapshot(redis, hot)
            seq = hot.seq
        if save:  # (a saved state with nothing after it is kept)
            save_state(engine, hot, blob, seq=seq)
    return keep


def _queued_marks(engine: Engine, project_id: int) -> np.ndarray:
    """The seqs of the project's tasks whose gold mark is queued until their assignment
    ends (``pending_gold_mark``); none in a database older than the queue."""
    try:
        with session_scope(engine) as session:
            seqs = session.exec(select(col(Task.seq)).join(
                PendingGoldMark, col(PendingGoldMark.task_id) == col(Task.id)).where(
                col(PendingGoldMark.project_id) == project_id)).all()
    except (OperationalError, ProgrammingError):  # (no pending_gold_mark: labelq init)
        return np.zeros(0, dtype=np.int64)
    return np.array(sorted(int(q) for q in seqs), dtype=np.int64)


def ensure_hot(engine: Engine, redis: Any, project_id: int,
               cache: StateCache | None = None) -> bool:
    """Rebuild when the project has no hot state (first use, or after a flush). True if
    a rebuild ran (the caller should then wake the applier: unapplied labels may wait)."""
    k = Keys(project_id, claim_home(engine, redis))
    if redis.hexists(k.meta, "built"):
        return False
    gate = RedisLock(redis, k.rebuild_gate, ttl_ms=600_000)
    if gate.acquire():
        try:
            if not redis.hexists(k.meta, "built"):
                # re-checked under the apply lock too: a rebuild deletes the live leases
                # issued since the first one, so it must never run twice
                done = rebuild_project(engine, redis, project_id, cache=cache,
                                       unless_built=True,
                                       first=None if cache is None else FIRST,
                                       snapshot=cache is None)
                keep = done.pop("keep", None)
                log.info("project %s rebuilt: %s", project_id, done)
                if done.get("streaming") or keep is not None:
                    # the snapshot, then the rest of pending, behind the first requests
                    start_backfill(engine, redis, project_id, k, cache, before=keep)
                return "skipped" not in done
            return False
        finally:
            gate.release()
    deadline = time.monotonic() + 600
    while not redis.hexists(k.meta, "built") and time.monotonic() < deadline:
        time.sleep(0.05)
    return False


def add_new_tasks(engine: Engine, redis: Any, project_id: int, cache: StateCache) -> int:
    """Put tasks loaded since the last rebuild into ``pending``/``gold`` (ZADD NX)."""
    k = Keys(project_id, claim_home(engine, redis))
    known = int(redis.hget(k.meta, "n_tasks") or 0)
    with session_scope(engine) as session:
        n = int(session.exec(select(func.count()).select_from(Task)
                             .where(Task.project_id == project_id)).one())
    if n <= known:
        return 0
    redis.hset(k.meta, "n_tasks", n)
    hot = cache.get(engine, redis, project_id)
    with hot.lock:
        new = np.arange(known, hot.view.n_tasks)
        gold = new[hot.view.is_gold[new]]
        rest = new[~hot.view.is_gold[new]]
        if rest.size:
            bulk_write(redis, k.pending, "ZADDNX", rest,
                       np.asarray(hot.policy.priority(hot.state, rest), dtype=float))
        bulk_write(redis, k.gold, "SADD", gold)
    return int(new.size)


def _cap_field(cap: int | None) -> str:
    return "" if cap is None else str(int(cap))


def reopen_below_cap(engine: Engine, redis: Any, project_id: int, cache: StateCache) -> int:
    """After the label cap was raised (or lifted) by ``labelq project update``, put back
    into ``pending`` the tasks that left it at the old cap and are below the new one
    (labels + live leases; ZADD NX, out of ``parked``), but for those whose gold mark is
    queued. Returns how many came back; a lowered cap needs nothing (decisions and submits
    check the cap they are given)."""
    k = Keys(project_id, claim_home(engine, redis))
    known = redis.hget(k.meta, "cap")
    with session_scope(engine) as session:
        new = session.exec(select(Project.max_labels).where(Project.id == project_id)).one()
    now = _cap_field(new)
    if known is not None and known.decode() == now:
        return 0
    old = None if not known else int(known)  # (None too for a state built before caps
    # were recorded: nothing to reopen, the cap is recorded from now on)
    back = 0
    if old is not None and (new is None or new > old):
        hot = cache.get(engine, redis, project_id)
        with hot.lock:
            seqs = np.setdiff1d(np.flatnonzero(~hot.view.is_gold),
                                _queued_marks(engine, project_id))
            held = np.zeros(hot.view.n_tasks, dtype=np.int64)
            for name in (k.nlabels, k.reserved):
                for t, n in redis.hgetall(name).items():
                    if int(t) < held.size:
                        held[int(t)] += int(n)
            below = True if new is None else held[seqs] < new
            seqs = seqs[(held[seqs] >= old) & below]
            if seqs.size and warming(redis, k):
                # a lazy rebuild's stream takes its tasks in at the cap meta names at each
                # step: the new one from now on, so those not in yet are left to it
                redis.hset(k.meta, "cap", now)
                seqs = seqs[~np.array(unstreamed(redis, k, seqs.tolist()), dtype=bool)]
            if seqs.size:
                pri = np.asarray(hot.policy.priority(hot.state, seqs), dtype=float)
                bulk_write(redis, k.pending, "ZADDNX", seqs, pri)
                pipe = redis.pipeline(transaction=False)
                for i in range(0, seqs.size, CHUNK):
                    pipe.zrem(k.parked, *map(int, seqs[i:i + CHUNK]))
                pipe.execute()
            back = int(seqs.size)
    redis.hset(k.meta, "cap", now)
    return back
