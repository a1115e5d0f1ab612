"""The pipeline's invariants after a run, checked against SQL and Redis: what
``test_stress.py`` and ``test_many_processes.py`` assert once the annotators have stopped."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import pytest
from sqlmodel import select

from labelq.live.applier import Applier
from labelq.live.hotstate import StateCache, fold_from_sql
from labelq.live.reaper import expire_leases
from labelq.live.redis.keys import Keys
from labelq.record.db import database_id, session_scope
from labelq.record.models import Assignment, Label, Project, Task, Worker


def settle(eng, r, pid: int) -> None:
    """Apply what is left and return every reservation still held (the Celery workers
    stopped first, else they go on refilling the inboxes): each one left is a held inbox
    entry of an annotator who stopped, which the reaper returns once its hold is over."""
    import time

    Applier(eng, r, cache=StateCache()).apply_pending(pid, refill=False)
    expire_leases(eng, r, pid, lease_ms=600_000, now_ms=int(time.time() * 1000) + 10 * 60_000)


def check_invariants(eng, r, pid: int, acked: Sequence[str], *, cap: int,
                     caps: Sequence[int | None], budget: float) -> int:
    """Assert, for project ``pid``: every acknowledged label (``acked``: assignment ids) in
    SQL exactly once and nothing else recorded; no task above ``cap`` labels (gold exempt);
    no task issued twice to one worker (labels and declines together); the ``budget`` and
    each worker's capacity (``caps[worker seq]``, None: unlimited) respected; every label
    applied exactly once, densely; Redis' counters (labels per task and per worker, spent,
    reservations) equal to SQL. Returns the number of labels."""
    with session_scope(eng) as s:
        rows = s.exec(select(Label.assignment_id, Task.seq, Task.is_gold, Worker.seq,
                             Worker.cost, Label.applied_seq)
                      .join(Task, Task.id == Label.task_id)
                      .join(Worker, Worker.id == Label.worker_id)
                      .where(Label.project_id == pid)).all()
        declines = s.exec(select(Task.seq, Worker.seq).select_from(Assignment)
                          .join(Task, Task.id == Assignment.task_id)
                          .join(Worker, Worker.id == Assignment.worker_id)
                          .where(Assignment.state == "declined",
                                 Assignment.project_id == pid)).all()
        hot = fold_from_sql(s, s.get(Project, pid))
    n = len(rows)
    # no acknowledged label lost, none acknowledged twice, nothing recorded unacknowledged
    assert len(set(acked)) == len(acked)
    assert sorted(x[0] for x in rows) == sorted(acked)
    # the cap (gold exempt)
    per_task = Counter(x[1] for x in rows if not x[2])
    assert max(per_task.values()) <= cap
    # never one task twice to one worker (labels and declines together)
    pairs = Counter([(x[1], x[3]) for x in rows] + [tuple(d) for d in declines])
    assert max(pairs.values()) == 1
    # budget and capacities
    assert sum(x[4] for x in rows) <= budget + 1e-6
    per_worker = Counter(x[3] for x in rows)
    for j, c in enumerate(caps):
        if c is not None:
            assert per_worker[j] <= c
    # every label applied exactly once, densely
    assert sorted(x[5] for x in rows) == list(range(1, n + 1))
    assert hot.seq == n
    # Redis counters equal SQL; no reservation left behind
    k = Keys(pid, database_id(eng))
    nl = {int(t): int(v) for t, v in r.hgetall(k.nlabels).items() if int(v)}
    assert nl == dict(Counter(x[1] for x in rows))
    assert all(int(v) == 0 for v in r.hgetall(k.reserved).values())
    assert float(r.get(k.spent)) == pytest.approx(sum(x[4] for x in rows))
    assert float(r.get(k.reserved_cost)) == pytest.approx(0.0, abs=1e-6)
    assert {int(w): int(v) for w, v in r.hgetall(k.wcount).items() if int(v)} == \
        dict(per_worker)
    return n
