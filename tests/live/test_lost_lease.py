"""A submit whose lease was lost with Redis (issue 35): Redis restarted without persistence
(here: ``FLUSHDB``) between ``next`` and the label. Recorded when the task still takes it
(same worker, the task's cap, the budget, not labelled by them since), else a clear
``LeaseLost`` saying it was not saved; retries consistent. Real Redis, SQLite and
PostgreSQL."""

from __future__ import annotations

import pytest
from sqlmodel import select

from labelq.errors import LeaseExpired, LeaseLost, NotFound
from labelq.live.leaseid import IdSigner, parse_assignment_id
from labelq.record.db import session_scope
from labelq.record.models import Assignment, Label
from labelq.record.secret import assignment_key
from labelq.record.settings import Settings
from labelq.service import Service

from .conftest import make_project


def _service(r, url, **kw):
    eng, pid = make_project(url, **kw)
    return Service(eng, r, settings=Settings(database_url=url), worker_max_age=0), pid


def _labels(s):
    with session_scope(s.engine) as ses:
        return [(lab.assignment_id, lab.worker_id, lab.value)
                for lab in ses.exec(select(Label)).all()]


def test_the_id_names_task_and_time():
    signer = IdSigner(b"k" * 32)
    aid = signer.new(7, 3, 123456, 1_800_000_000_123)
    assert len(aid) <= 40
    got = signer.issued(aid, 7, 3)
    assert got is not None and (got.task, got.reserved_ms) == (123456, 1_800_000_000_123)
    # the time is shown; the task is masked (only the server reads it: tests/live/
    # test_signed_ids.py), and the largest seq still fits the id
    shown = parse_assignment_id(aid)
    assert shown is not None and shown.reserved_ms == got.reserved_ms
    assert shown.task != got.task
    big = signer.new(7, 3, 2**40, 1_800_000_000_123)
    assert len(big) <= 40 and signer.issued(big, 7, 3).task == 2**40
    assert parse_assignment_id("f" * 32) is None


def test_a_lease_lost_with_redis_is_recorded_when_the_task_still_takes_it(r, db_url):
    s, pid = _service(r, db_url, n_tasks=4, workers=2, max_labels=2)
    a = s.next_assignment("p-w0")
    r.flushdb()  # Redis restarted without persistence: every lease is gone
    out = s.submit("p-w0", a.assignment_id, "a")
    assert out == {"assignment_id": a.assignment_id, "label": "a", "duplicate": False}
    # a retry is an idempotent OK, recorded once, and the hot state counts it
    again = s.submit("p-w0", a.assignment_id, "a")
    assert again["duplicate"] is True
    assert len(_labels(s)) == 1
    with session_scope(s.engine) as ses:
        assert ses.get(Assignment, a.assignment_id).state == "submitted"
    # the task counts the label: the worker is not given it again
    for _ in range(3):
        b = s.next_assignment("p-w0")
        assert b is not None and b.task_seq != a.task_seq
        s.submit("p-w0", b.assignment_id, "b")


def test_a_lost_lease_whose_task_is_at_its_cap_is_not_saved(r, db_url):
    s, pid = _service(r, db_url, n_tasks=1, workers=2, max_labels=1)
    a = s.next_assignment("p-w0")
    r.flushdb()
    # another annotator labels the task meanwhile (the rebuilt hot state offers it again)
    b = s.next_assignment("p-w1")
    assert b is not None and b.task_seq == a.task_seq
    s.submit("p-w1", b.assignment_id, "b")
    with pytest.raises(LeaseLost) as got:
        s.submit("p-w0", a.assignment_id, "a")
    err = got.value.to_dict()
    assert err["code"] == "lease_lost" and err["recorded"] is False
    assert "not saved" in err["message"] and err["reason"] == "cap"
    assert got.value.http_status == 410
    # a retry says the same; nothing was written for it
    with pytest.raises(LeaseLost):
        s.submit("p-w0", a.assignment_id, "a")
    assert [x[0] for x in _labels(s)] == [b.assignment_id]


def test_a_lost_lease_over_the_budget_is_not_saved(r, db_url):
    s, pid = _service(r, db_url, n_tasks=3, workers=2, budget=1.0)
    a = s.next_assignment("p-w0")
    r.flushdb()
    b = s.next_assignment("p-w1")
    s.submit("p-w1", b.assignment_id, "a")
    with pytest.raises(LeaseLost) as got:
        s.submit("p-w0", a.assignment_id, "a")
    assert got.value.to_dict()["reason"] == "budget"


def test_a_lost_lease_of_a_task_labelled_by_the_worker_since_is_not_saved(r, db_url):
    s, pid = _service(r, db_url, n_tasks=1, workers=1, max_labels=3)
    a = s.next_assignment("p-w0")
    r.flushdb()
    b = s.next_assignment("p-w0")  # the same task, issued again after the loss
    assert b is not None and b.task_seq == a.task_seq
    s.submit("p-w0", b.assignment_id, "b")
    with pytest.raises(LeaseLost) as got:
        s.submit("p-w0", a.assignment_id, "a")
    assert got.value.to_dict()["reason"] == "labelled"
    assert len(_labels(s)) == 1


def test_ids_that_name_no_lost_lease_are_not_found_or_expired(r, db_url):
    s, pid = _service(r, db_url, n_tasks=2, workers=1)
    s.next_assignment("p-w0")
    # ids this database signed for the worker (w0 is seq 0): a task that does not exist,
    # a time in the future
    signer = IdSigner(assignment_key(s.engine))
    # an id of an earlier labelq, a task that does not exist, a time in the future
    for aid in ("f" * 32, signer.new(pid, 0, 99, 1_700_000_000_000),
                signer.new(pid, 0, 0, 4_000_000_000_000)):
        with pytest.raises(NotFound) as got:
            s.submit("p-w0", aid, "a")
        assert got.value.to_dict()["recorded"] is False
        assert got.value.to_dict()["code"] == "not_found"
    # a lease whose length has run out
    with pytest.raises(LeaseExpired):
        s.submit("p-w0", signer.new(pid, 0, 1, 1_700_000_000_000), "a")
    assert _labels(s) == []
