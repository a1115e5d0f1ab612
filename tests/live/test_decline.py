"""Declines: a repeated decline is an idempotent OK, and a decline whose process dies
between its release in Redis and its record is finished — by its retry or by the beat —
never lost, never handed to the applier twice (``labelq.live.decline``). Real Redis;
SQLite and PostgreSQL."""

from __future__ import annotations

import pytest
from sqlmodel import select

import labelq.live.decline as decline_module
from labelq.errors import Forbidden, NotFound
from labelq.live.decline import recover_declines
from labelq.live.redis.scripts import Scripts
from labelq.record.db import session_scope
from labelq.record.models import Assignment, Label
from labelq.record.settings import Settings
from labelq.service import Service

from .conftest import make_project


class Died(BaseException):
    """The process dies here (not an Exception: nothing on the way catches it)."""


@pytest.fixture
def svc(r, db_url):
    eng, pid = make_project(db_url, n_tasks=6, workers=3, max_labels=2)
    return Service(eng, r, settings=Settings(database_url=db_url), worker_max_age=0), pid


def rows(s, aid):
    with session_scope(s.engine) as ses:
        return [(a.state, a.worker_id) for a in
                ses.exec(select(Assignment).where(Assignment.id == aid)).all()]


def test_a_repeated_decline_is_an_idempotent_ok(svc):
    s, pid = svc
    k = s.live.keys(pid)
    # Given a declined assignment
    a = s.next_assignment("p-w0")
    first = s.decline("p-w0", a.assignment_id)
    # When the annotator declines it again (its answer was lost)
    again = s.decline("p-w0", a.assignment_id)
    # Then both answer OK, the repeat says so, and one decline is recorded and handed over
    assert first == {"assignment_id": a.assignment_id, "declined": True, "duplicate": False}
    assert again == {"assignment_id": a.assignment_id, "declined": True, "duplicate": True}
    assert [state for state, _w in rows(s, a.assignment_id)] == ["declined"]
    assert s.redis.lrange(k.declines, 0, -1) == [f"{a.task_seq}:0".encode()]
    # another annotator may not, and an assignment that ended otherwise is not found
    with pytest.raises(Forbidden):
        s.decline("p-w1", a.assignment_id)
    b = s.next_assignment("p-w0")
    s.submit("p-w0", b.assignment_id, "a")
    with pytest.raises(NotFound):
        s.decline("p-w0", b.assignment_id)
    assert s.redis.llen(k.declines) == 1


@pytest.fixture
def killed_before_its_row(svc, monkeypatch):
    """A decline (of annotator ``p-w0``'s assignment) whose process died after Redis
    released the lease, before its SQL row: (service, project id, assignment)."""
    s, pid = svc
    a = s.next_assignment("p-w0")

    def killed(*_a, **_k):
        raise Died()
    with monkeypatch.context() as m:
        m.setattr(decline_module, "_record", killed)
        with pytest.raises(Died):
            s.decline("p-w0", a.assignment_id)
    return s, pid, a


def test_a_decline_killed_before_its_row_is_finished_by_its_retry(killed_before_its_row):
    # Given a decline whose process dies after Redis released the lease, before SQL
    s, pid, a = killed_before_its_row
    k = s.live.keys(pid)
    # Then the lease is gone, nothing is in SQL yet, but the decline is noted
    assert not s.redis.exists(k.lease(a.assignment_id))
    assert rows(s, a.assignment_id) == []
    assert s.redis.hexists(k.declining, a.assignment_id)
    # and a submit of it is refused (it is not taken again as a lease lost with Redis)
    with pytest.raises(NotFound):
        s.submit("p-w0", a.assignment_id, "a")
    with session_scope(s.engine) as ses:
        assert ses.exec(select(Label)).all() == []
    # When the annotator retries the decline
    again = s.decline("p-w0", a.assignment_id)
    # Then it is recorded once and handed to the applier once
    assert again["declined"] is True and again["duplicate"] is True
    assert [state for state, _w in rows(s, a.assignment_id)] == ["declined"]
    assert s.redis.lrange(k.declines, 0, -1) == [f"{a.task_seq}:0".encode()]
    assert not s.redis.hexists(k.declining, a.assignment_id)
    # and the decliner never gets the task again
    for _ in range(5):
        b = s.next_assignment("p-w0")
        assert b.task_seq != a.task_seq
        s.submit("p-w0", b.assignment_id, "a")


def test_a_decline_killed_before_its_row_is_finished_by_the_beat(killed_before_its_row):
    # Given a decline whose process dies after Redis released the lease, before SQL
    s, pid, a = killed_before_its_row
    k = s.live.keys(pid)
    scripts = Scripts(s.redis)
    # a note younger than the grace is left to its own process
    assert recover_declines(s.engine, s.redis, pid, scripts) == 0
    assert rows(s, a.assignment_id) == []
    # When the beat's upkeep finds it older than that
    assert recover_declines(s.engine, s.redis, pid, scripts, stale_ms=0) == 1
    # Then the decline is recorded (state declined, by its annotator) and handed over once
    assert [state for state, _w in rows(s, a.assignment_id)] == ["declined"]
    assert s.redis.lrange(k.declines, 0, -1) == [f"{a.task_seq}:0".encode()]
    assert recover_declines(s.engine, s.redis, pid, scripts, stale_ms=0) == 0
    again = s.decline("p-w0", a.assignment_id)
    assert again["duplicate"] is True and s.redis.llen(k.declines) == 1


def test_a_decline_killed_after_its_row_is_handed_over_once(svc, monkeypatch):
    s, pid = svc
    k = s.live.keys(pid)
    a = s.next_assignment("p-w2")
    # Given a decline whose process dies after its SQL row, before the applier's entry
    with monkeypatch.context() as m:
        def killed(*_a, **_k):
            raise Died()
        m.setattr(Scripts, "decline_done", killed)
        with pytest.raises(Died):
            s.decline("p-w2", a.assignment_id)
    assert [state for state, _w in rows(s, a.assignment_id)] == ["declined"]
    assert s.redis.llen(k.declines) == 0
    # When the beat and a retry both finish it
    assert recover_declines(s.engine, s.redis, pid, Scripts(s.redis), stale_ms=0) == 1
    assert s.decline("p-w2", a.assignment_id)["duplicate"] is True
    # Then it is handed over once, recorded once
    assert s.redis.lrange(k.declines, 0, -1) == [f"{a.task_seq}:2".encode()]
    assert len(rows(s, a.assignment_id)) == 1
