"""A held reservation of an ordinary task that another worker reclaims leaves its worker
owed an ordinary-task decision (issue 43's flaky onboarding test traced a gold rate above
the schedule's to this): gold is never reclaimed, so a reclaimed slot drawn again tilted the
gold an annotator got upwards. Real Redis and SQLite."""

from __future__ import annotations

import numpy as np

from labelq.live.hotstate import StateCache
from labelq.live.redis.keys import Keys, owed_field
from labelq.live.redis.scripts import Released
from labelq.live.refill import refill_inboxes
from labelq.live.tuning import TUNING
from labelq.record.db import database_id
from labelq.record.settings import Settings
from labelq.service import Service

from .conftest import make_project


def _held(r, k, w):
    """(assignment id, gold?) of each reservation held in worker ``w``'s inbox (one
    released stays listed until a pop passes over it)."""
    ids = [a.decode() for a in r.lrange(k.inbox(w), 0, -1)]
    return [(a, r.hget(k.lease(a), "gold") == b"1") for a in ids
            if r.hget(k.lease(a), "held") is not None]


def _refill(eng, r, s, hot, size: int, seed: int) -> None:
    """The applier's top-up of the active workers' inboxes to ``size`` held reservations."""
    refill_inboxes(eng, r, s.scripts, hot, inbox_size=size, lease_ms=600_000,
                   key_ttl_ms=TUNING.lease_key_ttl_ms(600_000), rng=np.random.default_rng(seed))


def _served_gold_share(r, sqlite_url, *, keep: bool, n: int = 400) -> float:
    eng, pid = make_project(sqlite_url, n_tasks=n + 50, n_gold=n, workers=1,
                            gold_schedule="fixed:rate=0.2", max_labels=1,
                            name=f"owed{int(keep)}")
    s = Service(eng, r, settings=Settings(database_url=sqlite_url), worker_max_age=0)
    k = Keys(pid, database_id(eng))
    hot = StateCache().get(eng, r, pid)

    handle, gold = f"owed{int(keep)}-w0", 0
    for i in range(n):
        a = s.next_assignment(handle)
        gold += a.task.startswith("g")
        s.submit(handle, a.assignment_id, "a")
        _refill(eng, r, s, hot, 3, 2 * i)
        # every other time, another worker reclaims the ordinary reservations held
        # (a reclaim never takes gold), and the applier tops the inbox up again
        if i % 2:
            for aid, is_gold in _held(r, k, 0):
                if not is_gold:
                    assert isinstance(s.scripts.release(k, aid, held_only=True,
                                                        keep_decision=keep), Released)
            _refill(eng, r, s, hot, 3, 2 * i + 1)
    return gold / n


def test_reclaims_leave_the_gold_rate_as_scheduled(r, sqlite_url):
    # Given gold at rate 0.2, and an annotator whose held ordinary reservations are
    # reclaimed every other time they ask (as near a project's end)
    # When each reclaimed slot is owed as an ordinary task
    share = _served_gold_share(r, sqlite_url, keep=True)
    # Then the gold they are served is the schedule's 0.2 (binomial sd at 400: 0.02)
    assert abs(share - 0.2) < 0.06, share


def test_without_the_owed_decision_the_rate_drifts_up(r, sqlite_url):
    # The same with the slots drawn again (as before): the annotator gets more gold than
    # the schedule says (what the test above guards against; it could fail)
    share = _served_gold_share(r, sqlite_url, keep=False)
    assert share > 0.26, share


def test_an_owed_decision_is_paid_by_the_next_ordinary_task(r, sqlite_url):
    # Given a gold schedule that makes every slot gold, and a worker whose inbox holds
    # ordinary tasks only (the gold pool is empty: due gold falls back to a task)
    eng, pid = make_project(sqlite_url, n_tasks=10, n_gold=0, workers=1,
                            gold_schedule="fixed:rate=1", max_labels=1, name="pay")
    s = Service(eng, r, settings=Settings(database_url=sqlite_url), worker_max_age=0)
    k = Keys(pid, database_id(eng))
    first = s.next_assignment("pay-w0")
    hot = StateCache().get(eng, r, pid)
    _refill(eng, r, s, hot, 2, 0)
    held = _held(r, k, 0)
    assert len(held) == 2 and not any(g for _, g in held)
    # When both are taken back for another worker
    for aid, _ in held:
        s.scripts.release(k, aid, held_only=True, keep_decision=True)
    # Then the worker is owed two ordinary-task decisions
    assert int(r.hget(k.nissued, owed_field(0))) == 2
    # and each ordinary task issued pays one; the field is gone once paid
    s.submit("pay-w0", first.assignment_id, "a")
    a = s.next_assignment("pay-w0")
    assert a is not None and int(r.hget(k.nissued, owed_field(0))) == 1
    s.submit("pay-w0", a.assignment_id, "a")
    b = s.next_assignment("pay-w0")
    assert b is not None and b.task != a.task
    assert r.hget(k.nissued, owed_field(0)) is None


def test_a_release_not_for_a_reclaim_owes_nothing(r, sqlite_url):
    # An expiry, a decline or a release on suspicion draws the slot again (suspicion wants
    # exactly that: more gold sooner)
    eng, pid = make_project(sqlite_url, n_tasks=10, workers=1,
                            gold_schedule="fixed:rate=0.5", max_labels=1, name="free")
    s = Service(eng, r, settings=Settings(database_url=sqlite_url), worker_max_age=0)
    k = Keys(pid, database_id(eng))
    s.next_assignment("free-w0")
    hot = StateCache().get(eng, r, pid)
    _refill(eng, r, s, hot, 2, 0)
    for aid, _ in _held(r, k, 0):
        s.scripts.release(k, aid, held_only=True)
    assert r.hget(k.nissued, owed_field(0)) is None
