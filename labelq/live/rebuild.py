"""Rebuild a project's whole hot state from SQL, and keep it in step with new tasks.

``rebuild_project`` is ``labelq rebuild NAME``: after a Redis flush (or to repair counters
exactly) it drops every key of the project (``lq:{D:P}:``, of its own database ``D`` only:
``labelq.live.redis.keys``) and recomputes them from the record:

* the policy state: a fresh fold of the applied labels in ``applied_seq`` order (unapplied
  labels are left to the applier, which is woken);
* ``pending``: the non-gold tasks below the cap, with their priorities; ``gold``;
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

import time
from typing import Any

import numpy as np
from sqlalchemy import func
from sqlalchemy.engine import Engine
from sqlmodel import col, select

from ..errors import Conflict, NotFound
from ..record.db import session_scope
from ..record.goldstats import project_gold_scores
from ..record.models import ENDED_UNLABELLED, Assignment, Label, Project, Task, Worker
from .home import claim_home
from .hotstate import StateCache, fold_from_sql, write_snapshot
from .modelsettled import sync_settled
from .redis.keys import Keys, gold_category_field, gold_issued_field, gold_records
from .redis.lock import RedisLock
from .saved import load_saved, n_applied, save_state

__all__ = ["rebuild_project", "ensure_hot", "add_new_tasks", "reopen_below_cap", "delete_hot"]

CHUNK = 10_000


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


def _zadd_chunks(pipe: Any, key: str, tasks: np.ndarray, pri: np.ndarray,
                 nx: bool = False) -> None:
    for i in range(0, tasks.size, CHUNK):
        pipe.zadd(key, {int(t): float(p) for t, p in zip(tasks[i:i + CHUNK], pri[i:i + CHUNK], strict=True)},
                  nx=nx)


def rebuild_project(engine: Engine, redis: Any, project_id: int, *,
                    cache: StateCache | None = None, wait_s: float = 60.0,
                    unless_built: bool = False, from_saved: bool = True) -> dict[str, Any]:
    """Rebuild the project's hot state (module docstring). The policy state starts from
    the one kept in SQL (:mod:`.saved`) when it holds, unless ``from_saved`` is False,
    and only the labels applied after it are folded; the result's ``folded`` says how
    many labels were, ``saved_seq`` the saved state's sequence (None: none used)."""
    k = Keys(project_id, claim_home(engine, redis))
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
            saved = load_saved(session, project) if from_saved else None
            saved_seq: int | None
            if saved is not None:  # the state kept in SQL and the labels applied since
                hot, folded, saved_seq = saved
            else:
                hot = fold_from_sql(session, project)
                folded, saved_seq = n_applied(session, project_id, hot.seq), None
            pid = hot.project_id
            per_task = session.exec(
                select(col(Task.seq), func.count())
                .join(Label, col(Label.task_id) == col(Task.id))
                .where(Label.project_id == pid).group_by(col(Task.seq))).all()
            applied = session.exec(
                select(col(Task.seq), func.count())
                .join(Label, col(Label.task_id) == col(Task.id))
                .where(Label.project_id == pid, col(Label.applied_seq).is_not(None),
                       col(Label.applied_seq) <= hot.seq).group_by(col(Task.seq))).all()
            per_worker = session.exec(
                select(col(Worker.seq), func.count(), col(Worker.cost))
                .join(Label, col(Label.worker_id) == col(Worker.id))
                .where(Label.project_id == pid)
                .group_by(col(Worker.seq), col(Worker.cost))).all()
            seen_rows = session.exec(
                select(col(Worker.seq), col(Task.seq))
                .join(Label, col(Label.worker_id) == col(Worker.id))
                .join(Task, col(Task.id) == col(Label.task_id))
                .where(Label.project_id == pid)).all()
            unlabelled = session.exec(
                select(col(Worker.seq), col(Task.seq))
                .join(Assignment, col(Assignment.worker_id) == col(Worker.id))
                .join(Task, col(Task.id) == col(Assignment.task_id))
                .where(Assignment.project_id == pid,
                       col(Assignment.state).in_(ENDED_UNLABELLED))).all()
            record = project_gold_scores(session, project).scores \
                if project.gold_schedule else None
        # a new epoch, not the deleted one's 0: a process whose state predates a gold
        # answer marked or corrected just before (epoch bumped, not yet followed) would
        # find 0 = its own epoch and keep the old view; with a new one every process folds
        # again (from the snapshot written below)
        hot.epoch = int(redis.hget(k.meta, "epoch") or 0) + 1
        delete_hot(redis, k)
        view = hot.view
        nlabels = np.zeros(view.n_tasks, dtype=np.int64)
        for seq, n in per_task:
            nlabels[seq] = n
        open_ = ~view.is_gold
        if project.max_labels is not None:
            open_ &= nlabels < project.max_labels
        tasks = np.flatnonzero(open_)
        pri = hot.policy.priority(hot.state, tasks) if tasks.size else np.empty(0)
        pipe = redis.pipeline(transaction=False)
        _zadd_chunks(pipe, k.pending, tasks, pri)
        # the tasks a model settled alone leave it again (auto:min_human_labels=0)
        sync_settled(redis, k, hot.policy, hot.state, view.is_gold, project.max_labels,
                     pipeline=pipe)
        gold = np.flatnonzero(view.is_gold)
        for i in range(0, gold.size, CHUNK):
            pipe.sadd(k.gold, *map(int, gold[i:i + CHUNK]))
        if per_task:
            pipe.hset(k.nlabels, mapping={int(s): int(n) for s, n in per_task})
        if applied:
            pipe.hset(k.applied, mapping={int(s): int(n) for s, n in applied})
        if per_worker:
            pipe.hset(k.wcount, mapping={int(s): int(n) for s, n, _c in per_worker})
        spent = sum(float(n) * float(c) for _s, n, c in per_worker)
        pipe.set(k.spent, repr(spent))
        pipe.set(k.reserved_cost, "0")
        seen: dict[int, list[int]] = {}
        issued: dict[int | str, int] = {}
        for w, t in list(seen_rows) + list(unlabelled):
            seen.setdefault(int(w), []).append(int(t))
            issued[int(w)] = issued.get(int(w), 0) + 1
            if view.is_gold[int(t)]:  # and per category, as RESERVE counts them
                for g in (gold_issued_field(int(w)),
                          gold_category_field(int(w), int(view.task_category[int(t)]))):
                    issued[g] = issued.get(g, 0) + 1
        for w, ts in seen.items():
            for i in range(0, len(ts), CHUNK):
                pipe.sadd(k.seen(w), *ts[i:i + CHUNK])
        if record is not None:  # every worker's gold record (gold on suspicion)
            answered = record.total.sum(axis=1)
            issued.update(gold_records(range(answered.size), answered,
                                       record.correct.sum(axis=1)))
        if issued:
            pipe.hset(k.nissued, mapping=issued)
        pipe.set(k.pushed_seq, hot.seq)  # the priorities and counts above are the fold's
        pipe.execute()
        blob = write_snapshot(redis, hot)
        if folded or saved is None:  # (a saved state with nothing after it is kept)
            save_state(engine, hot, blob)
        redis.hset(k.meta, mapping={"built": 1, "n_tasks": view.n_tasks,
                                    "n_workers": view.n_workers, "epoch": hot.epoch,
                                    "cap": _cap_field(project.max_labels)})
        redis.sadd(k.projects, pid)
        if cache is not None:
            cache.drop(pid)
        return {"project_id": pid, "tasks": view.n_tasks, "pending": int(tasks.size),
                "gold": int(gold.size), "labels": int(nlabels.sum()), "state_seq": hot.seq,
                "folded": int(folded), "saved_seq": saved_seq}
    finally:
        lock.release()


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
                                       unless_built=True)
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
        pipe = redis.pipeline(transaction=False)
        if rest.size:
            pri = hot.policy.priority(hot.state, rest)
            for i in range(0, rest.size, CHUNK):
                pipe.zadd(k.pending, {int(t): float(p) for t, p in
                                      zip(rest[i:i + CHUNK], pri[i:i + CHUNK], strict=True)}, nx=True)
        if gold.size:
            pipe.sadd(k.gold, *map(int, gold))
        pipe.execute()
    return int(new.size)


def _cap_field(cap: int | None) -> str:
    return "" if cap is None else str(int(cap))


def reopen_below_cap(engine: Engine, redis: Any, project_id: int, cache: StateCache) -> int:
    """After the label cap was raised (or lifted) by ``labelq project update``, put back
    into ``pending`` the tasks that left it at the old cap and are below the new one
    (labels + live leases; ZADD NX, out of ``parked``). Returns how many came back; a
    lowered cap needs nothing (decisions and submits check the cap they are given)."""
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
            seqs = np.flatnonzero(~hot.view.is_gold)
            held = np.zeros(hot.view.n_tasks, dtype=np.int64)
            for name in (k.nlabels, k.reserved):
                for t, n in redis.hgetall(name).items():
                    if int(t) < held.size:
                        held[int(t)] += int(n)
            below = True if new is None else held[seqs] < new
            seqs = seqs[(held[seqs] >= old) & below]
            if seqs.size:
                pri = hot.policy.priority(hot.state, seqs)
                pipe = redis.pipeline(transaction=False)
                _zadd_chunks(pipe, k.pending, seqs, pri, nx=True)
                for i in range(0, seqs.size, CHUNK):
                    pipe.zrem(k.parked, *map(int, seqs[i:i + CHUNK]))
                pipe.execute()
            back = int(seqs.size)
    redis.hset(k.meta, "cap", now)
    return back
