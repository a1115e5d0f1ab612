"""The Lua scripts against a real, flushed Redis: every limit is checked atomically."""

from __future__ import annotations

import time

from labelq.queue.keys import Keys
from labelq.queue.scripts import Scripts

K = Keys(1)
NOW = int(time.time() * 1000)


def reserve(s, task, worker, aid, *, cap=2, capacity=None, cost=1.0, budget=None,
            expires=NOW + 60_000):
    return s.reserve(K, task=task, worker=worker, cap=cap, capacity=capacity, cost=cost,
                     budget=budget, assignment_id=aid, expires_ms=expires, key_ttl_ms=600_000)


def test_reserve_refuses_a_task_the_worker_has_seen(r):
    s = Scripts(r)
    assert reserve(s, 5, 0, "a1").ok
    res = reserve(s, 5, 0, "a2")
    assert (res.ok, res.reason) == (False, "seen")


def test_cap_counts_live_leases_and_parks_then_returns_the_task(r):
    # Given a task in pending and a cap of two labels
    s = Scripts(r)
    r.zadd(K.pending, {7: 1.0})
    # When two workers hold leases on it
    assert reserve(s, 7, 0, "a").ok and reserve(s, 7, 1, "b").ok
    # Then a third is refused and the task left pending for parked
    assert reserve(s, 7, 2, "c").reason == "cap"
    assert r.zscore(K.pending, 7) is None and r.zscore(K.parked, 7) == 1.0
    # When one lease is released, the task is back with its priority
    assert s.release(K, "b", worker=1)[0]
    assert r.zscore(K.pending, 7) == 1.0
    # When both labels are recorded, the task leaves the pool for good
    assert reserve(s, 7, 2, "c").ok
    assert s.submit_begin(K, "a", 0, NOW)[0] == "ok" and s.submit_finish(K, "a", 2)
    assert s.submit_begin(K, "c", 2, NOW)[0] == "ok" and s.submit_finish(K, "c", 2)
    assert r.zscore(K.pending, 7) is None and r.zscore(K.parked, 7) is None
    assert int(r.hget(K.nlabels, 7)) == 2 and int(r.hget(K.reserved, 7)) == 0


def test_gold_is_exempt_from_the_cap(r):
    s = Scripts(r)
    r.sadd(K.gold, 9)
    assert all(reserve(s, 9, w, f"g{w}", cap=1).ok for w in range(4))


def test_capacity_and_budget(r):
    s = Scripts(r)
    assert reserve(s, 1, 0, "a", capacity=1).ok
    assert reserve(s, 2, 0, "b", capacity=1).reason == "capacity"
    assert reserve(s, 3, 1, "c", cost=2.0, budget=3.5).ok   # 1 + 2 held
    assert reserve(s, 4, 2, "d", cost=1.0, budget=3.5).reason == "budget"
    assert s.release(K, "c", worker=1)[0]
    assert reserve(s, 4, 2, "d", cost=1.0, budget=3.5).ok


def test_submit_finish_counts_once_and_checks_owner_and_expiry(r):
    s = Scripts(r)
    assert reserve(s, 1, 0, "a", expires=NOW + 1000).ok
    assert s.submit_begin(K, "a", 3, NOW) == ("forbidden",)
    assert s.submit_begin(K, "a", 0, NOW + 2000) == ("expired",)
    assert s.submit_begin(K, "a", 0, NOW)[0] == "ok"
    assert s.release(K, "a", worker=0) == (False, "submitting")  # reaper/decline wait
    assert s.submit_finish(K, "a", None) is True
    assert s.submit_finish(K, "a", None) is False  # a second finish does nothing
    assert int(r.hget(K.nlabels, 1)) == 1 and float(r.get(K.spent)) == 1.0
    assert float(r.get(K.reserved_cost)) == 0.0 and int(r.hget(K.wcount, 0)) == 1
    assert s.submit_begin(K, "a", 0, NOW) == ("missing",)


def test_release_only_after_expiry_for_the_reaper(r):
    s = Scripts(r)
    assert reserve(s, 1, 0, "a", expires=NOW + 1000).ok
    assert s.release(K, "a", expired_before_ms=NOW) == (False, "live")
    assert s.release(K, "a", expired_before_ms=NOW + 5000) == (True, 1, 0)
    assert s.release(K, "a", expired_before_ms=NOW + 5000) == (False, "missing")
    assert int(r.hget(K.wcount, 0)) == 0 and int(r.hget(K.reserved, 1)) == 0
