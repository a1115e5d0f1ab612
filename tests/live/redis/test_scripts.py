"""The Lua scripts against a real, flushed Redis: every limit is checked atomically."""

from __future__ import annotations

import time

from labelq.live.redis.keys import Keys
from labelq.live.redis.scripts import Inbox, OpenLease, Popped, Refusal, Released, Scripts

K = Keys(1, "a1b2c3")
NOW = int(time.time() * 1000)


def reserve(s, task, worker, aid, *, cap=2, capacity=None, cost=1.0, budget=None,
            expires=NOW + 60_000):
    return s.reserve(K, task=task, worker=worker, cap=cap, capacity=capacity, cost=cost,
                     budget=budget, assignment_id=aid, expires_ms=expires, key_ttl_ms=600_000)


def test_reserve_refuses_a_task_the_worker_has_seen(r):
    s = Scripts(r)
    assert reserve(s, 5, 0, "a1").ok
    res = reserve(s, 5, 0, "a2")
    assert (res.ok, res.refusal) == (False, Refusal.SEEN)


def test_cap_counts_live_leases_and_parks_then_returns_the_task(r):
    # Given a task in pending and a cap of two labels
    s = Scripts(r)
    r.zadd(K.pending, {7: 1.0})
    # When two workers hold leases on it
    assert reserve(s, 7, 0, "a").ok and reserve(s, 7, 1, "b").ok
    # Then a third is refused and the task left pending for parked
    assert reserve(s, 7, 2, "c").refusal is Refusal.CAP
    assert r.zscore(K.pending, 7) is None and r.zscore(K.parked, 7) == 1.0
    # When one lease is released, the task is back with its priority
    assert isinstance(s.release(K, "b", worker=1), Released)
    assert r.zscore(K.pending, 7) == 1.0
    # When both labels are recorded, the task leaves the pool for good
    assert reserve(s, 7, 2, "c").ok
    assert not isinstance(s.submit_begin(K, "a", 0, NOW), Refusal) and s.submit_finish(K, "a", 2)
    assert not isinstance(s.submit_begin(K, "c", 2, NOW), Refusal) and s.submit_finish(K, "c", 2)
    assert r.zscore(K.pending, 7) is None and r.zscore(K.parked, 7) is None
    assert int(r.hget(K.nlabels, 7)) == 2 and int(r.hget(K.reserved, 7)) == 0


def test_gold_is_exempt_from_the_cap(r):
    s = Scripts(r)
    r.sadd(K.gold, 9)
    assert all(reserve(s, 9, w, f"g{w}", cap=1).ok for w in range(4))


def test_capacity_and_budget(r):
    s = Scripts(r)
    assert reserve(s, 1, 0, "a", capacity=1).ok
    assert reserve(s, 2, 0, "b", capacity=1).refusal is Refusal.CAPACITY
    assert reserve(s, 3, 1, "c", cost=2.0, budget=3.5).ok   # 1 + 2 held
    assert reserve(s, 4, 2, "d", cost=1.0, budget=3.5).refusal is Refusal.BUDGET
    assert isinstance(s.release(K, "c", worker=1), Released)
    assert reserve(s, 4, 2, "d", cost=1.0, budget=3.5).ok


def test_submit_finish_counts_once_and_checks_owner_and_expiry(r):
    s = Scripts(r)
    assert reserve(s, 1, 0, "a", expires=NOW + 1000).ok
    assert s.submit_begin(K, "a", 3, NOW) is Refusal.FORBIDDEN
    assert s.submit_begin(K, "a", 0, NOW + 2000) is Refusal.EXPIRED
    assert not isinstance(s.submit_begin(K, "a", 0, NOW), Refusal)
    assert s.release(K, "a", worker=0) is Refusal.SUBMITTING  # reaper/decline wait
    assert s.submit_finish(K, "a", None) == 1
    assert s.submit_finish(K, "a", None) == 0  # a second finish does nothing
    assert int(r.hget(K.nlabels, 1)) == 1 and float(r.get(K.spent)) == 1.0
    assert float(r.get(K.reserved_cost)) == 0.0 and int(r.hget(K.wcount, 0)) == 1
    assert s.submit_begin(K, "a", 0, NOW) is Refusal.MISSING


def test_release_only_after_expiry_for_the_reaper(r):
    s = Scripts(r)
    assert reserve(s, 1, 0, "a", expires=NOW + 1000).ok
    assert s.release(K, "a", expired_before_ms=NOW) is Refusal.LIVE
    out = s.release(K, "a", expired_before_ms=NOW + 5000)
    assert isinstance(out, Released) and (out.task, out.worker) == (1, 0) and not out.held and out.expires_ms == NOW + 1000
    assert s.release(K, "a", expired_before_ms=NOW + 5000) is Refusal.MISSING
    assert int(r.hget(K.wcount, 0)) == 0 and int(r.hget(K.reserved, 1)) == 0


def test_a_held_reservation_released_unpopped_was_never_issued(r):
    # Given two gold questions of category 1 held in worker 0's inbox
    s = Scripts(r)
    r.sadd(K.gold, 8, 9)
    r.hset(K.meta, "built", 1)
    for task, aid in ((8, "h1"), (9, "h2")):
        assert s.reserve(K, task=task, worker=0, cap=2, capacity=None, cost=1.0, budget=None,
                         assignment_id=aid, expires_ms=NOW + 60_000, key_ttl_ms=600_000,
                         category=1, inbox=True).ok
    assert [int(r.hget(K.nissued, f)) for f in ("0", "g0", "g0:1")] == [2, 2, 2]
    # When the first is popped (issued) and both then expire and are released
    popped = s.pop_inbox(K, 0, now_ms=NOW, lease_ms=1_000, key_ttl_ms=600_000)
    assert isinstance(popped, Popped) and popped.assignment_id == "h1"
    h1 = s.release(K, "h1", allow_submitting=True)
    h2 = s.release(K, "h2", allow_submitting=True)
    assert isinstance(h1, Released) and isinstance(h2, Released) and (h1.held, h2.held) == (False, True) and h1.gold
    # Then only the popped one still counts as issued and as seen: the schedule and the
    # gold pool see what the annotator was really given
    assert [int(r.hget(K.nissued, f)) for f in ("0", "g0", "g0:1")] == [1, 1, 1]
    assert {int(t) for t in r.smembers(K.seen(0))} == {8}


def test_pop_inbox_skips_dead_and_foreign_entries_and_starts_the_lease(r):
    s = Scripts(r)
    # Given no hot state, the script says so and pops nothing
    r.rpush(K.inbox(0), "x")
    assert s.pop_inbox(K, 0, NOW, 600_000, 900_000) is Inbox.UNBUILT
    assert r.llen(K.inbox(0)) == 1
    r.delete(K.inbox(0))
    r.hset(K.meta, "built", 1)
    # Given an inbox: a released id, another worker's reservation, one whose hold is about
    # to run out, then two live held reservations of worker 0
    r.zadd(K.pending, {t: 1.0 for t in range(5)})
    hold = NOW + 30_000
    assert s.reserve(K, task=0, worker=1, cap=2, capacity=None, cost=1.0, budget=None,
                     assignment_id="other", expires_ms=hold, key_ttl_ms=900_000).ok
    for t, aid, exp in [(1, "soon", NOW + 500), (2, "live1", hold), (3, "live2", hold)]:
        assert s.reserve(K, task=t, worker=0, cap=2, capacity=None, cost=1.0, budget=None,
                         assignment_id=aid, expires_ms=exp, key_ttl_ms=900_000,
                         inbox=True).ok
    r.lpush(K.inbox(0), "other", "gone")
    # When worker 0 pops at NOW
    got = s.pop_inbox(K, 0, NOW, 600_000, 900_000, min_left_ms=1_000)
    # Then the dead, foreign and nearly expired entries were dropped, the first live one
    # issued with its lease starting now, the second left in the inbox
    assert got == Popped("live1", 2, NOW + 600_000, None)
    assert [x.decode() for x in r.lrange(K.inbox(0), 0, -1)] == ["live2"]
    assert int(r.hget(K.lease("live1"), "expires")) == NOW + 600_000
    assert int(r.zscore(K.leases, "live1")) == NOW + 600_000
    assert r.hget(K.lease("other"), "worker") == b"1"  # untouched
    assert int(r.zscore(K.active, 0)) == NOW
    # and an empty inbox answers None (the service then decides at once)
    assert s.pop_inbox(K, 0, NOW, 600_000, 900_000) == Popped("live2", 3, NOW + 600_000, None)
    assert s.pop_inbox(K, 0, NOW, 600_000, 900_000) is Inbox.EMPTY


def test_candidates_drop_seen_and_capped_and_mark_settled(r):
    s = Scripts(r)
    r.zadd(K.pending, {t: float(10 - t) for t in range(6)})  # 0 highest
    r.sadd(K.seen(0), 1)
    r.hset(K.nlabels, mapping={2: 2, 3: 1, 4: 1})
    r.hset(K.reserved, mapping={3: 1})
    r.hset(K.applied, mapping={2: 2, 4: 0})
    c = s.candidates(K, 0, cap=2, offset=0, count=64)
    ok, settled, n = c.eligible, c.settled, c.looked
    assert n == 6
    assert [int(t) for t in ok] == [0, 4, 5]  # 1 seen; 2 at the cap; 3 at it with a lease
    assert [int(t) for t in settled] == [0, 5]  # 4 has a label not yet applied
    c = s.candidates(K, 0, cap=2, offset=0, count=64, enough=1)
    ok, settled, n = c.eligible, c.settled, c.looked
    assert (n, [int(t) for t in settled]) == (-1, [0])
    c = s.candidates(K, 0, tasks=[1, 2, 3])  # gold: no cap
    ok, settled, n = c.eligible, c.settled, c.looked
    assert [int(t) for t in ok] == [2, 3]


def _walk_by_windows(s, r, worker, *, cap, top_k, enough, max_scan, settled_scan):
    """The walk down pending as a decision made it before CANDIDATES_SCAN, a CANDIDATES
    round trip per window (and a ZCARD for the jump): the settled lists offered, in order
    (none of them taken), and the fallback."""
    offered, fallback = [], None
    offset, size, jumped, scanned = 0, top_k, False, 0
    while offset < max_scan:
        c = s.candidates(K, worker, cap=cap, offset=offset, count=size, enough=enough)
        if c.looked == 0:
            break
        if c.settled:
            offered.append(c.settled)
        if c.eligible and fallback is None:
            fallback = c.eligible
        if 0 <= c.looked < size:
            break
        if offset > 0:
            scanned += size
        if fallback is not None and scanned >= settled_scan:
            break
        nxt = offset + size
        if fallback is not None and not jumped:
            jumped, nxt = True, max(nxt, int(r.zcard(K.leases)))
        offset, size = nxt, size * 4
    return offered, fallback


def _walk_by_scan(s, worker, *, cap, top_k, enough, max_scan, settled_scan):
    offered, fallback = [], None
    offset, size, jumped, scanned = 0, top_k, False, 0
    while True:
        c = s.candidates_scan(K, worker, cap=cap, offset=offset, size=size, enough=enough,
                              max_scan=max_scan, settled_scan=settled_scan, jumped=jumped,
                              scanned=scanned, has_fallback=fallback is not None)
        if c.fallback and fallback is None:
            fallback = c.fallback
        if c.settled:
            offered.append(c.settled)
        if c.done:
            return offered, fallback
        offset, size, jumped, scanned = c.offset, c.size, c.jumped, c.scanned


def test_candidates_scan_walks_the_windows_as_one_call_per_window_did(r):
    # Given a pending pool whose top the worker has mostly seen (it declined them), tasks
    # at the cap, outstanding ones and leases
    import random
    rng = random.Random(7)
    s = Scripts(r)
    n = 3000
    r.zadd(K.pending, {t: float(rng.choice([0, 0, -1])) for t in range(n)})
    r.sadd(K.seen(0), *range(0, 1500))
    r.sadd(K.seen(0), *rng.sample(range(1500, n), 600))
    r.hset(K.nlabels, mapping={t: rng.randint(0, 3) for t in rng.sample(range(n), 900)})
    r.hset(K.reserved, mapping={t: rng.randint(0, 1) for t in rng.sample(range(n), 900)})
    r.hset(K.applied, mapping={t: rng.randint(0, 2) for t in rng.sample(range(n), 600)})
    r.zadd(K.leases, {f"a{i}": 1.0 for i in range(700)})
    # Then the walk in one call (resumed while no settled list is taken) offers the same
    # settled lists in the same order and ends with the same fallback, whatever the limits
    for cap, top_k, enough, max_scan, settled_scan in [
            (3, 64, 16, 100_000, 1024), (2, 64, 16, 100_000, 1024), (None, 16, 0, 100_000, 0),
            (3, 64, 2, 500, 100), (1, 1, 16, 100_000, 1024), (3, 64, 16, 0, 1024)]:
        kw = dict(cap=cap, top_k=top_k, enough=enough, max_scan=max_scan,
                  settled_scan=settled_scan)
        assert _walk_by_scan(s, 0, **kw) == _walk_by_windows(s, r, 0, **kw), kw
    # And so where the windows past the seen top are outstanding with a settled task here
    # and there: several settled lists in turn, the jump past the leases, the fallback
    r.flushdb()
    r.zadd(K.pending, {t: float(-t) for t in range(n)})
    r.sadd(K.seen(0), *range(0, 200))
    r.hset(K.reserved, mapping={t: 1 for t in range(200, n) if t % 150})
    r.zadd(K.leases, {f"a{i}": 1.0 for i in range(700)})
    kw = dict(cap=None, top_k=64, enough=16, max_scan=100_000, settled_scan=1024)
    offered, fallback = _walk_by_scan(s, 0, **kw)
    assert (offered, fallback) == _walk_by_windows(s, r, 0, **kw)
    assert offered == [[300], list(range(750, 1724, 150))]
    assert fallback == list(range(200, 320))


def test_reserve_refuses_a_gold_schedule_decision_made_on_moved_counts(r):
    # Given a worker whose schedule was asked with 0 issued, 0 gold
    s = Scripts(r)
    r.sadd(K.gold, 9)

    def reserve_expecting(task, aid, expect):
        return s.reserve(K, task=task, worker=0, cap=2, capacity=None, cost=1.0, budget=None,
                         assignment_id=aid, expires_ms=NOW + 60_000, key_ttl_ms=600_000,
                         expect_issued=expect)
    assert reserve_expecting(9, "g1", (0, 0)).ok
    # When a second decision made on the same counts arrives (another process decided for
    # this worker meanwhile), it is refused and nothing moves
    res = reserve_expecting(5, "t1", (0, 0))
    assert (res.ok, res.refusal) == (False, Refusal.STALE)
    assert int(r.hget(K.nissued, "0")) == 1 and not r.sismember(K.seen(0), 5)
    # Then a decision made on the current counts goes through
    assert reserve_expecting(5, "t1", (1, 1)).ok


def test_open_list_answers_the_open_leases_oldest_first_as_pop_inbox_counts_them(r):
    # Given worker 0 popped three reservations in the order c, b, a (ids against the
    # alphabet; c and a with the same expiry, as two issued in one millisecond have), and
    # worker 1 one
    s = Scripts(r)
    r.hset(K.meta, "built", 1)
    for t, w, aid in [(1, 0, "c"), (2, 0, "b"), (3, 0, "a"), (4, 1, "x")]:
        assert s.reserve(K, task=t, worker=w, cap=2, capacity=None, cost=1.0, budget=None,
                         assignment_id=aid, expires_ms=NOW + 30_000, key_ttl_ms=600_000,
                         inbox=True).ok
    for lease_ms, w in [(60_000, 0), (1_000, 0), (60_000, 0), (60_000, 1)]:
        assert isinstance(s.pop_inbox(K, w, NOW, lease_ms, 600_000, max_open=5), Popped)
    # Then they are listed in the order they were issued
    assert s.open_list(K, 0, NOW) == [OpenLease("c", 1, NOW + 60_000),
                                      OpenLease("b", 2, NOW + 1_000),
                                      OpenLease("a", 3, NOW + 60_000)]
    # and bounded to two, the next request is handed the oldest, "c", again
    got = s.pop_inbox(K, 0, NOW, 60_000, 600_000, max_open=2)
    assert isinstance(got, Popped) and got.assignment_id == "c"
    # When "c" is being submitted and "b" has run out
    assert not isinstance(s.submit_begin(K, "c", 0, NOW), Refusal)
    # Then only "a" is open; the ended "b" has left open:{0}, the submitting "c" not yet
    assert s.open_list(K, 0, NOW + 2_000) == [OpenLease("a", 3, NOW + 60_000)]
    assert {m.decode() for m in r.zrange(K.open_leases(0), 0, -1)} == {"a", "c"}
    assert s.open_list(K, 1, NOW) == [OpenLease("x", 4, NOW + 60_000)]
    assert s.open_list(K, 2, NOW) == []


def test_open_assignments_keep_their_issue_order_within_one_millisecond(r):
    # Given a worker bounded to three open assignments, issued at once in one millisecond
    # under ids against the alphabet
    s = Scripts(r)
    r.hset(K.meta, "built", 1)
    for t, aid in [(1, "z"), (2, "m"), (3, "a")]:
        assert s.reserve(K, task=t, worker=0, cap=2, capacity=None, cost=1.0, budget=None,
                         assignment_id=aid, expires_ms=NOW + 60_000, key_ttl_ms=600_000,
                         empty_inbox=True, max_open=3, now_ms=NOW).ok
    # Then the oldest is the first issued, and a fourth is refused as past the bound
    assert [o.assignment_id for o in s.open_list(K, 0, NOW)] == ["z", "m", "a"]
    res = s.reserve(K, task=4, worker=0, cap=2, capacity=None, cost=1.0, budget=None,
                    assignment_id="q", expires_ms=NOW + 60_000, key_ttl_ms=600_000,
                    empty_inbox=True, max_open=3, now_ms=NOW)
    assert res.refusal is Refusal.OPEN


def test_reserve_made_at_once_is_refused_when_the_inbox_was_refilled_meanwhile(r):
    # Given a worker whose inbox holds a reservation the applier made
    s = Scripts(r)
    r.sadd(K.gold, 9)

    def at_once(task, aid, expect=None):
        return s.reserve(K, task=task, worker=0, cap=2, capacity=None, cost=1.0, budget=None,
                         assignment_id=aid, expires_ms=NOW + 60_000, key_ttl_ms=600_000,
                         expect_issued=expect, empty_inbox=True)
    assert s.reserve(K, task=9, worker=0, cap=2, capacity=None, cost=1.0, budget=None,
                     assignment_id="held", expires_ms=NOW + 30_000, key_ttl_ms=600_000,
                     inbox=True, expect_issued=(0, 0)).ok
    # When a request that found the inbox empty a moment ago reserves at once (with or
    # without a gold schedule's counts), it is refused and nothing moves
    for expect in (None, (1, 1)):
        res = at_once(5, "now", expect)
        assert (res.ok, res.refusal) == (False, Refusal.INBOX)
    assert int(r.hget(K.nissued, "0")) == 1 and not r.sismember(K.seen(0), 5)
    assert not r.exists(K.lease("now")) and r.lrange(K.inbox(0), 0, -1) == [b"held"]
    # Then once the worker has popped it, a decision at once goes through and is not held
    r.hset(K.meta, "built", 1)
    assert s.pop_inbox(K, 0, NOW, 60_000, 600_000).assignment_id == "held"
    assert at_once(5, "now", (1, 1)).ok
    assert r.llen(K.inbox(0)) == 0 and r.hget(K.lease("now"), "held") is None


def test_candidates_many_answers_as_candidates_does_for_each_worker(r):
    # Given a pool of 60 tasks with random counters and three workers who have seen some
    import numpy as np
    rng = np.random.default_rng(7)
    s = Scripts(r)
    for trial in range(20):
        r.flushdb()
        r.zadd(K.pending, {t: float(rng.random()) for t in range(60)})
        for t in range(60):
            done, live = int(rng.integers(0, 3)), int(rng.integers(0, 2))
            r.hset(K.nlabels, t, done)
            r.hset(K.reserved, t, live)
            r.hset(K.applied, t, done - int(rng.integers(0, done + 1)))
        for w in range(3):
            r.sadd(K.seen(w), *map(int, rng.choice(60, 15, replace=False)))
        cap = [-1, 2, 3][trial % 3]
        count, enough = int(rng.integers(5, 70)), [int(e) for e in rng.integers(0, 12, 3)]
        # When the many-worker call is made
        many = s.candidates_many(K, [0, 1, 2], cap=None if cap < 0 else cap, count=count,
                                 enough=enough)
        # Then each worker gets exactly what their own CANDIDATES call would give
        for w in range(3):
            one = s.candidates(K, w, cap=None if cap < 0 else cap, offset=0,
                               count=count, enough=enough[w])
            assert (many[w].eligible, many[w].settled) == (one.eligible, one.settled), \
                (trial, w)


def test_scripts_are_loaded_once_per_client_and_survive_a_script_flush(r):
    # Given scripts made twice on one client: the second costs no SCRIPT LOAD
    a, b = Scripts(r), Scripts(r)
    assert a._reserve is b._reserve and a._pop is b._pop
    # When the server forgets its scripts (a restart, SCRIPT FLUSH)
    r.script_flush()
    # Then a new Scripts on the same client still runs them, alone and pipelined
    s = Scripts(r)
    assert reserve(s, 3, 0, "x1").ok
    pipe = s.pipeline()
    s.candidates(K, 1, cap=2, count=10, pipeline=pipe)
    s.reserve(K, task=4, worker=1, cap=2, capacity=None, cost=1.0, budget=None,
              assignment_id="x2", expires_ms=NOW + 60_000, key_ttl_ms=600_000, pipeline=pipe)
    r.script_flush()
    out = pipe.execute()
    assert s.reserve_result(out[1]).ok and r.exists(K.lease("x2"))



def kill_connections_named(r, name: str) -> int:
    """Close, server side, the connections whose CLIENT SETNAME is ``name`` (by CLIENT KILL
    ID), and no other: the Redis server may serve other suites and a user's worker, in
    other databases too, and ``CLIENT KILL TYPE normal`` would drop them all."""
    ids = [c["id"] for c in r.client_list() if c.get("name") == name]
    for cid in ids:
        r.execute_command("CLIENT", "KILL", "ID", cid)
    return len(ids)


def test_a_pipeline_connection_closed_by_the_server_is_replaced_before_reuse(r):
    # Given a script pipeline whose connection, named for this test, now waits idle
    import uuid

    import redis as redis_lib
    kw = r.connection_pool.connection_kwargs
    name = f"labelq-test-{uuid.uuid4().hex[:8]}"
    client = redis_lib.Redis(host=kw["host"], port=kw["port"], db=kw.get("db", 0),
                             client_name=name)
    s = Scripts(client)
    pipe = s.pipeline()
    s.candidates(K, 0, cap=2, count=10, pipeline=pipe)
    pipe.execute()
    # and a bystander: another client of the same server, in another database
    bystander = redis_lib.Redis(host=kw["host"], port=kw["port"], db=(kw.get("db", 0) + 1) % 16)
    bystander_id = bystander.client_id()
    # When the server closes that connection (as a restart would)
    assert kill_connections_named(r, name) >= 1
    # Then the next pipelined call reconnects instead of failing
    pipe = s.pipeline()
    s.reserve(K, task=8, worker=0, cap=2, capacity=None, cost=1.0, budget=None,
              assignment_id="k1", expires_ms=NOW + 60_000, key_ttl_ms=600_000, pipeline=pipe)
    assert s.reserve_result(pipe.execute()[0]).ok and r.exists(K.lease("k1"))
    # and no other client of the server lost its connection
    assert str(bystander_id) in {str(c["id"]) for c in r.client_list()}
    bystander.close()
    client.close()
