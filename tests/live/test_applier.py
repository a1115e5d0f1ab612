"""The applier and the rebuild: exactly-once application, catch-up from a stale snapshot,
and a rebuilt posterior equal to the one before a Redis flush."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import pytest
from sqlalchemy import func
from sqlmodel import select

from labelq.live.applier import Applier
from labelq.live.hotstate import StateCache, fold_from_sql, write_snapshot
from labelq.live.rebuild import rebuild_project
from labelq.live.redis.keys import Keys
from labelq.record.db import database_id, session_scope
from labelq.record.models import Label, Project
from labelq.record.settings import Settings
from labelq.service import Service

from .conftest import make_project


class Setup(NamedTuple):
    """A project (``make_project``), its service and its Redis keys."""

    eng: Any
    pid: int
    settings: Settings
    s: Service
    k: Keys


@pytest.fixture
def project_setup(r) -> Callable[..., Setup]:
    """``project_setup(url, **make_project_kwargs)``: a project in the database at ``url``, the
    settings for that database, a :class:`Service` on them and Redis ``r``, and the
    project's :class:`Keys`."""
    def make(url: str, **kw) -> Setup:
        eng, pid = make_project(url, **kw)
        settings = Settings(database_url=url)
        return Setup(eng, pid, settings, Service(eng, r, settings=settings), Keys(pid, database_id(eng)))
    return make


def label_some(s: Service, n: int, workers: int, rng) -> int:
    done = 0
    for i in range(n):
        h = f"p-w{i % workers}"
        a = s.next_assignment(h)
        if a is None:
            continue
        s.submit(h, a.assignment_id, "ab"[int(rng.random() < 0.3)])
        done += 1
    return done


def fresh_posterior(eng, pid):
    with session_scope(eng) as ses:
        hot = fold_from_sql(ses, ses.get(Project, pid))
        return hot.policy.predict_proba(hot.state), hot.seq


def assert_redis_is_the_fold(r, eng, pid, k):
    """Redis counts every label as applied, and its pending priorities are those of the
    state folded afresh from SQL."""
    assert r.hgetall(k.applied) == {t: n for t, n in r.hgetall(k.nlabels).items()}
    with session_scope(eng) as ses:
        hot = fold_from_sql(ses, ses.get(Project, pid))
    for t, p in r.zrange(k.pending, 0, -1, withscores=True):
        assert p == pytest.approx(float(hot.policy.priority(hot.state, np.array([int(t)]))[0]))


@pytest.mark.parametrize("policy", ["uniform", "optkg"])
def test_apply_exactly_once_and_rebuild_after_flush(r, db_url, policy, project_setup):
    rng = np.random.default_rng(1)
    eng, pid, settings, s, k = project_setup(db_url, n_tasks=30, workers=4, max_labels=3,
                                             policy=policy)
    n = label_some(s, 60, 4, rng)
    cache = StateCache()
    # When the applier runs twice (a redelivered message)
    first = Applier(eng, r, cache=cache).apply_pending(pid)
    second = Applier(eng, r, cache=cache).apply_pending(pid)
    # Then every label was applied once, in a dense sequence
    assert first.applied == n and second.applied == 0
    with session_scope(eng) as ses:
        seqs = sorted(ses.exec(select(Label.applied_seq).where(Label.project_id == pid)).all())
    assert seqs == list(range(1, n + 1))
    before = cache.peek(pid).policy.predict_proba(cache.peek(pid).state)
    np.testing.assert_allclose(before, fresh_posterior(eng, pid)[0])
    # Pending priorities equal the policy's own
    hot = cache.peek(pid)
    pend = r.zrange(k.pending, 0, -1, withscores=True)
    for t, p in pend:
        assert p == pytest.approx(float(hot.policy.priority(hot.state, np.array([int(t)]))[0]))
    # When Redis is flushed and the project rebuilt
    nl_before = {t: v for t, v in r.hgetall(k.nlabels).items() if int(v)}
    r.flushdb()
    info = rebuild_project(eng, r, pid)
    # Then the rebuilt posterior (from the Redis snapshot) equals the one before the flush
    rebuilt = StateCache().get(eng, r, pid)
    assert info["state_seq"] == n and rebuilt.seq == n
    np.testing.assert_allclose(rebuilt.policy.predict_proba(rebuilt.state), before)
    assert r.hgetall(k.nlabels) == nl_before
    assert int(r.zcard(k.pending)) == sum(1 for v in range(30)
                                          if int(nl_before.get(str(v).encode(), 0)) < 3)


def test_a_snapshot_behind_sql_is_caught_up(r, sqlite_url, project_setup):
    rng = np.random.default_rng(2)
    eng, pid, settings, s, k = project_setup(sqlite_url, n_tasks=20, workers=3, policy="optkg")
    label_some(s, 15, 3, rng)
    cache = StateCache()
    Applier(eng, r, cache=cache).apply_pending(pid)
    write_snapshot(r, cache.peek(pid))
    assert int(r.get(k.state_seq)) == 15
    # Given labels applied in SQL after the snapshot (the applier died before writing Redis)
    label_some(s, 10, 3, rng)
    Applier(eng, r, cache=cache).apply_pending(pid, snapshot_every_s=1e9)
    assert int(r.get(k.state_seq)) == 15
    # When another process loads the state with no cache
    other = StateCache().get(eng, r, pid)
    # Then it replays the missing labels from SQL and equals a fresh fold
    want, seq = fresh_posterior(eng, pid)
    assert other.seq == seq == 25
    np.testing.assert_allclose(other.policy.predict_proba(other.state), want)


def test_an_applier_killed_after_its_commit_is_caught_up_by_the_next(r, sqlite_url,
                                                                      monkeypatch,
                                                                      project_setup):
    """An applier killed between its SQL commit and its Redis writes (kill -9, or a
    SIGTERM that reaches a Celery pool process): the next applier, which replays those
    labels from SQL, pushes the tasks' priorities and sets their ``applied`` counts (before,
    the counts stayed short for good: those tasks never looked settled again)."""
    import labelq.live.applier as applier

    rng = np.random.default_rng(4)
    eng, pid, settings, s, k = project_setup(sqlite_url, n_tasks=20, workers=3, max_labels=3,
                                             policy="optkg")
    label_some(s, 12, 3, rng)
    Applier(eng, r, cache=StateCache(track_dirty=True)).apply_pending(pid)
    # Given labels an applier committed as applied and then died before writing Redis
    label_some(s, 12, 3, rng)

    def killed(*_a, **_kw):
        raise KeyboardInterrupt("killed")
    monkeypatch.setattr(applier, "push_priorities", killed)
    with pytest.raises(KeyboardInterrupt):
        Applier(eng, r, cache=StateCache(track_dirty=True)).apply_pending(pid, refill=False)
    monkeypatch.undo()
    with session_scope(eng) as ses:
        assert ses.exec(select(func.count()).select_from(Label)
                        .where(Label.applied_seq.is_(None))).one() == 0
    # When the next applier (another process: no cache) runs, with nothing new to apply
    Applier(eng, r, cache=StateCache(track_dirty=True)).apply_pending(pid)
    # Then Redis counts every label as applied, and the priorities are the fold's
    assert_redis_is_the_fold(r, eng, pid, k)


def test_applier_refills_active_inboxes_and_pop_starts_the_lease(r, db_url, project_setup):
    from labelq.live.reaper import expire_leases
    from labelq.live.tuning import TUNING
    eng, pid, settings, s, k = project_setup(db_url, n_tasks=12, workers=3, max_labels=2)
    # Given worker 0 asked once (inbox empty: decided at once) and labelled
    a = s.next_assignment("p-w0")
    s.submit("p-w0", a.assignment_id, "a")
    # When the applier runs, it folds the label in and fills the active worker's inbox
    rep = Applier(eng, r, cache=StateCache()).apply_pending(pid)
    assert rep.applied == 1
    inbox = [x.decode() for x in r.lrange(k.inbox(0), 0, -1)]
    assert rep.refilled == len(inbox) == settings.inbox_size
    assert r.llen(k.inbox(1)) == 0  # never asked: not active, nothing held for them
    # held reservations count against the cap, are tasks the worker has not had...
    held = [int(r.hget(k.lease(x), "task")) for x in inbox]
    assert a.task_seq not in held and len(set(held)) == len(held)
    assert all(int(r.hget(k.reserved, t)) == 1 for t in held)
    # ...and expire within the hold, unlike a lease
    exp = int(r.hget(k.lease(inbox[0]), "expires"))
    # Then the next request pops the inbox head and its lease starts at pop time
    before = int(__import__("time").time() * 1000)
    b = s.next_assignment("p-w0")
    assert b.assignment_id == inbox[0] and b.task_seq == held[0]
    assert b.expires_ms >= before + settings.lease_seconds * 1000 > exp
    assert int(r.zscore(k.leases, b.assignment_id)) == b.expires_ms
    assert exp <= before + TUNING.hold_ms + 1000
    # and an unpopped held reservation goes back to the pool after the hold
    out = expire_leases(eng, r, pid, lease_ms=600_000, now_ms=exp + 5_000)
    assert out["expired"] == settings.inbox_size - 1
    assert all(int(r.hget(k.reserved, t) or 0) == 0 for t in held[1:])
    assert r.exists(k.lease(b.assignment_id))
    # asking again while holding it gives it again (one open assignment at a time)
    assert s.next_assignment("p-w0") == b
    # and once it is answered, a worker that popped stale ids (released) gets a fresh
    # decision instead
    s.submit("p-w0", b.assignment_id, "a")
    c = s.next_assignment("p-w0")
    assert c is not None and c.task_seq not in (a.task_seq, b.task_seq)


def test_pace_meter_and_inbox_depth():
    from labelq.live.refill import PaceMeter, inbox_depth
    from labelq.live.tuning import TUNING
    pm = PaceMeter(weight=0.5)
    assert pm.update(1, {0: 5, 1: 0}, 100.0) == {0: 0.0, 1: 0.0}  # first sample: no pace
    assert pm.update(1, {0: 15, 1: 1}, 101.0) == {0: 10.0, 1: 1.0}
    assert pm.update(1, {0: 45, 1: 1}, 102.0) == {0: 20.0, 1: 0.5}  # weighted mean
    assert pm.update(1, {0: 2, 1: 1}, 103.0)[0] == 0.0  # counters rebuilt: start again
    assert inbox_depth(0.0, 5, 50) == 5 and inbox_depth(1.0, 5, 50) == 5
    assert inbox_depth(40.0, 5, 50) == round(40 * TUNING.lookahead_s) == 20
    assert inbox_depth(1e6, 5, 50) == 50 and inbox_depth(1e6, 5, 3) == 5


def test_inbox_depth_follows_each_workers_pace(r, sqlite_url, project_setup):
    import time

    from labelq.live.refill import PaceMeter, refill_inboxes
    from labelq.live.tuning import TUNING
    eng, pid, settings, s, k = project_setup(sqlite_url, n_tasks=200, workers=2)
    pm, cache = PaceMeter(), StateCache()

    def refill():
        return refill_inboxes(eng, r, s.scripts, cache.get(eng, r, pid), inbox_size=3,
                              inbox_max=12, lease_ms=600_000,
                              key_ttl_ms=TUNING.lease_key_ttl_ms(600_000),
                              rng=np.random.default_rng(0), pace=pm)
    # Given two active workers, first seen by the refill: both get the base inbox
    for h in ("p-w0", "p-w1"):
        s.next_assignment(h)
    assert refill() == 6 and r.llen(k.inbox(0)) == r.llen(k.inbox(1)) == 3
    # When worker 0 asks for 30 assignments before the next refill and worker 1 for none
    t0 = time.monotonic()
    for _ in range(30):
        assert s.next_assignment("p-w0") is not None
    time.sleep(0.1)
    elapsed = time.monotonic() - t0
    refill()
    # Then worker 0's inbox is deeper (what they ask for in half a second, at most 12)
    # and worker 1's stays at the base size
    assert 3 < r.llen(k.inbox(0)) <= 12 and r.llen(k.inbox(1)) == 3
    if elapsed < 1.2:  # a pace above 24/s: the cap
        assert r.llen(k.inbox(0)) == 12
    # (the project's very first request, which built the hot state, is not counted)
    assert int(r.hget(k.requests, 0)) == 30 and int(r.hget(k.requests, 1)) == 1


def test_snapshot_interval_grows_with_the_snapshot_cost(r, sqlite_url):
    import time

    eng, pid = make_project(sqlite_url, n_tasks=50, workers=2)
    cache = StateCache()
    cache.get(eng, r, pid)
    applier = Applier(eng, r, cache=cache)
    k = Keys(pid, database_id(eng))
    # Given the last snapshot took 0.5 s: the next waits 20 x 0.5 = 10 s, not 2 s
    applier.last_snapshot[pid] = time.monotonic() - 3.0
    applier.snapshot_took[pid] = 0.5
    applier.maybe_snapshot(pid, every_s=2.0)
    assert not r.exists(k.state)
    # When it has been longer than that, a snapshot is written and its cost recorded
    applier.last_snapshot[pid] = time.monotonic() - 11.0
    applier.maybe_snapshot(pid, every_s=2.0)
    assert r.exists(k.state) and applier.snapshot_took[pid] < 0.5


def test_expired_leases_are_recorded_and_rebuilt_as_issued(r, db_url, project_setup):
    from labelq.api.progress import worker_progress
    from labelq.errors import LeaseExpired
    from labelq.live.reaper import expire_leases
    from labelq.record.models import Assignment, Worker
    from labelq.reporting import project_status
    eng, pid, settings, s, k = project_setup(db_url, n_tasks=12, workers=3, max_labels=3)
    # Given worker 0 holds a lease, worker 1 labelled one task, and the applier filled the
    # active workers' inboxes with held reservations (never shown to anyone)
    a = s.next_assignment("p-w0")
    b = s.next_assignment("p-w1")
    s.submit("p-w1", b.assignment_id, "a")
    Applier(eng, r, cache=StateCache()).apply_pending(pid)
    assert r.llen(k.inbox(0)) and r.llen(k.inbox(1))
    # and worker 2 holds a lease that lapses before they submit
    c = s.next_assignment("p-w2")
    r.hset(k.lease(c.assignment_id), "expires", 1)
    with pytest.raises(LeaseExpired):
        s.submit("p-w2", c.assignment_id, "a")
    # and worker 1 declines their next one
    s.decline("p-w1", s.next_assignment("p-w1").assignment_id)
    # When the reaper expires everything else
    out = expire_leases(eng, r, pid, lease_ms=600_000, now_ms=a.expires_ms + 10_000)
    # Then the two leases that lapsed are assignments in state "expired", with their worker,
    # task and lease times; the held reservations left no row
    assert out["expired"] >= 1 + r.llen(k.inbox(0))  # a, and every held reservation
    with session_scope(eng) as ses:
        rows = {x.id: x for x in ses.exec(select(Assignment)
                                          .where(Assignment.state == "expired")).all()}
        handles = dict(ses.exec(select(Worker.id, Worker.handle)).all())
        w0 = ses.exec(select(Worker).where(Worker.handle == "p-w0")).one()
        progress = worker_progress(ses, r, w0)
        status = {w["handle"]: (w["declined"], w["expired"])
                  for w in project_status(ses, ses.get(Project, pid))["workers"]}
    assert set(rows) == {a.assignment_id, c.assignment_id}
    assert handles[rows[a.assignment_id].worker_id] == "p-w0"
    lapse = rows[a.assignment_id]
    assert int(lapse.expires.timestamp() * 1000) == pytest.approx(a.expires_ms, abs=1)
    assert (lapse.expires - lapse.issued).total_seconds() == pytest.approx(
        settings.lease_seconds, abs=0.01)
    assert progress["expired"] == 1 and progress["declined"] == 0
    assert status == {"p-w0": (0, 1), "p-w1": (1, 0), "p-w2": (0, 1)}  # `labelq status`
    # and a rebuild after a flush counts them as issued, as the hot state did: the tasks
    # stay in the workers' seen sets
    seen = {w: {int(t) for t in r.smembers(k.seen(w))} for w in range(3)}
    nissued = {f: int(v) for f, v in r.hgetall(k.nissued).items() if int(v)}
    assert a.task_seq in seen[0] and c.task_seq in seen[2]
    r.flushdb()
    rebuild_project(eng, r, pid)
    assert {w: {int(t) for t in r.smembers(k.seen(w))} for w in range(3)} == seen
    assert {f: int(v) for f, v in r.hgetall(k.nissued).items() if int(v)} == nissued


def test_a_submit_stalled_past_the_reaper_gets_lease_expired(r, db_url, monkeypatch,
                                                            project_setup):
    from labelq.errors import LeaseExpired
    from labelq.live.reaper import expire_leases
    from labelq.record.models import Assignment
    eng, pid, settings, s, k = project_setup(db_url, n_tasks=6, workers=2, max_labels=3)
    a = s.next_assignment("p-w0")
    # Given a submit that stalls between SUBMIT_BEGIN and its commit for longer than the
    # reaper's grace, so the reaper finds no label, releases the lease and records it expired
    insert, reaped = s.submitter.insert, []

    def stalled(conn, rows, now):
        if not reaped:  # (the submit retries alone after the conflict: no second stall)
            reaped.append(expire_leases(eng, r, pid, lease_ms=600_000, now_ms=a.expires_ms + 20 * 60_000))
        return insert(conn, rows, now)
    monkeypatch.setattr(s.submitter, "insert", stalled)
    # When it commits after all
    with pytest.raises(LeaseExpired, match="expired while its label"):
        s.submit("p-w0", a.assignment_id, "a")
    # Then no label is recorded, the assignment stays expired, and the counters moved once
    assert reaped[0]["expired"] == 1
    with session_scope(eng) as ses:
        assert ses.exec(select(func.count()).select_from(Label)).one() == 0
        assert ses.get(Assignment, a.assignment_id).state == "expired"
    assert not r.exists(k.lease(a.assignment_id))
    assert int(r.hget(k.reserved, a.task_seq) or 0) == 0


def test_an_idle_applier_process_keeps_the_states_of_hot_projects_loaded(r, sqlite_url,
                                                                         project_setup,
                                                                         monkeypatch):
    from labelq.live.warm import Warmer
    rng = np.random.default_rng(5)
    eng, pid, settings, s, k = project_setup(sqlite_url, n_tasks=20, workers=3, policy="optkg")
    label_some(s, 12, 3, rng)  # the first next builds the hot state (its database's projects set)
    Applier(eng, r, cache=StateCache()).apply_pending(pid)  # another process applies them
    idle = Applier(eng, r, cache=StateCache(track_dirty=True))
    warmer = Warmer(idle, every_s=60.0)
    # When the warmer of an idle process makes a pass
    assert warmer.run_once() == [pid]
    # Then the process holds the state, equal to a fresh fold
    hot = idle.cache.peek(pid)
    want, seq = fresh_posterior(eng, pid)
    assert hot is not None and hot.seq == seq == 12
    np.testing.assert_allclose(hot.policy.predict_proba(hot.state), want)
    # and a pass within the period leaves it alone; one after it catches it up
    label_some(s, 6, 3, rng)
    Applier(eng, r, cache=StateCache()).apply_pending(pid)
    assert warmer.run_once() == []
    assert Warmer(idle, every_s=0.0).run_once() == [pid]
    assert idle.cache.peek(pid) is hot and hot.seq == 18
    # it tracks the tasks the replayed labels touched; their applier pushed them, so this
    # process's next run does not push them again (nor reads every label's count for it)
    assert hot.dirty and max(hot.dirty.values()) == 18 == int(r.get(k.pushed_seq))
    # When the process runs a task, the warmer leaves its cache alone
    idle.cache.drop(pid)
    with idle.busy():
        assert Warmer(idle, every_s=0.0).run_once() == []
    assert idle.cache.peek(pid) is None
    # and a run finds the state loaded by a pass and applies on it
    Warmer(idle, every_s=0.0).run_once()
    hot = idle.cache.peek(pid)
    label_some(s, 3, 3, rng)
    import labelq.live.applier as applier_mod

    def no_counts(*_a, **_kw):
        raise AssertionError("every replayed label was pushed by its applier")
    monkeypatch.setattr(applier_mod, "applied_counts", no_counts)
    assert idle.apply_pending(pid).applied == 3
    assert idle.cache.peek(pid) is hot and hot.seq == 21 and not hot.dirty


def test_concurrent_loads_of_one_state_load_it_once(r, sqlite_url, project_setup,
                                                    monkeypatch):
    import threading
    import time as time_mod
    rng = np.random.default_rng(6)
    eng, pid, settings, s, k = project_setup(sqlite_url, n_tasks=20, workers=3)
    label_some(s, 6, 3, rng)
    cache = StateCache()
    loads = []
    real = StateCache._load

    def slow_load(self, session, redis, project_id):
        loads.append(project_id)
        time_mod.sleep(0.2)
        return real(self, session, redis, project_id)
    monkeypatch.setattr(StateCache, "_load", slow_load)
    got: list[Any] = []
    ts = [threading.Thread(target=lambda: got.append(cache.get(eng, r, pid)))
          for _ in range(3)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    # Then one thread loaded the state and the others followed it
    assert loads == [pid]
    assert len(got) == 3 and all(h is got[0] for h in got)


def test_an_applier_taking_over_from_another_pushes_only_what_was_not_pushed(
        r, sqlite_url, project_setup, monkeypatch):
    """Two applier processes taking turns: the one taking over replays the other's labels
    from SQL; the other pushed their tasks (``pushed_seq``), so it pushes nothing again and
    reads no label counts from SQL (it would after a kill: the test above)."""
    import labelq.live.applier as applier

    rng = np.random.default_rng(7)
    eng, pid, settings, s, k = project_setup(sqlite_url, n_tasks=20, workers=3, max_labels=3,
                                             policy="optkg")
    label_some(s, 6, 3, rng)
    first = Applier(eng, r, cache=StateCache(track_dirty=True))
    first.apply_pending(pid)
    label_some(s, 9, 3, rng)
    Applier(eng, r, cache=StateCache(track_dirty=True)).apply_pending(pid)
    assert int(r.get(k.pushed_seq)) == 15

    def no_counts(*_a, **_kw):
        raise AssertionError("every replayed label was pushed by its applier")
    monkeypatch.setattr(applier, "applied_counts", no_counts)
    label_some(s, 3, 3, rng)
    assert first.apply_pending(pid).applied == 3
    assert not first.cache.peek(pid).dirty and int(r.get(k.pushed_seq)) == 18
    assert_redis_is_the_fold(r, eng, pid, k)


def test_a_refresh_catches_a_cached_state_up_in_the_background(r, sqlite_url, project_setup):
    import time as time_mod
    rng = np.random.default_rng(8)
    eng, pid, settings, s, k = project_setup(sqlite_url, n_tasks=20, workers=3)
    label_some(s, 6, 3, rng)
    Applier(eng, r, cache=StateCache()).apply_pending(pid)
    cache = StateCache()
    hot = cache.get(eng, r, pid)
    label_some(s, 6, 3, rng)
    Applier(eng, r, cache=StateCache()).apply_pending(pid)
    # a state younger than ``after`` is left alone; an older one is caught up meanwhile
    cache.refresh(eng, r, pid, after=60.0)
    assert not hot.refreshing and hot.seq == 6
    cache.refresh(eng, r, pid, after=0.0)
    deadline = time_mod.monotonic() + 10
    while (hot.refreshing or hot.seq < 12) and time_mod.monotonic() < deadline:
        time_mod.sleep(0.01)
    assert cache.peek(pid) is hot and hot.seq == 12
    # nothing cached: nothing loaded
    other = StateCache()
    other.refresh(eng, r, pid, after=0.0)
    assert other.peek(pid) is None
