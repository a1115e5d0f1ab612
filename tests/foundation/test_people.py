"""People on several projects (issue 43), on SQLite and PostgreSQL: a handle is a person
with one token, enrolled per project; a database of an earlier labelq (a handle unique
across projects) is upgraded by ``init`` with its tokens still signing in."""

import pytest
from sqlalchemy import inspect
from sqlalchemy.exc import IntegrityError

from labelq.errors import AlreadyExists, InputError, NotFound
from labelq.record.db import engine_for, init_schema, session_scope
from labelq.record.models import Worker
from labelq.record.projects import (
    create_project,
    enroll_worker,
    get_project,
    get_worker,
    hash_token,
    reset_token,
    set_preferred,
    set_worker_status,
    worker_by_token,
    workers_by_token,
)


@pytest.fixture
def eng(db_url):
    engine = engine_for(db_url)
    init_schema(engine)
    return engine


def test_one_person_two_projects_one_token(eng):
    with session_scope(eng) as s:
        a, b = create_project(s, "a", "0,1"), create_project(s, "b", "x,y,z")
        enroll_worker(s, b, "bob")  # (seqs are per project)
        wa, token = enroll_worker(s, a, "alice", cost=0.5)
        wb, again = enroll_worker(s, b, "alice", cost=2.0, capacity=7)
        assert token and again is None  # the person's token, not a new one
        assert wb.token_hash == wa.token_hash == hash_token(token)
        assert (wa.seq, wb.seq) == (0, 1)
        with pytest.raises(AlreadyExists, match="already enrolled in project 'a'"):
            enroll_worker(s, a, "alice")
    with session_scope(eng) as s:
        assert [name for _, name in workers_by_token(s, token)] == ["a", "b"]
        # per project: cost, capacity, status
        assert get_worker(s, "alice", "a").cost == 0.5
        assert get_worker(s, "alice", "b").capacity == 7
        with pytest.raises(InputError, match="enrolled in projects 'a', 'b': name one"):
            get_worker(s, "alice")
        with pytest.raises(InputError, match="name one"):
            worker_by_token(s, token)
        assert worker_by_token(s, token, "b").project_id == get_project(s, "b").id
        with pytest.raises(NotFound, match="not enrolled in project 'c'"):
            worker_by_token(s, token, "c")
        set_worker_status(s, "alice", "paused", "a")
    with session_scope(eng) as s:
        assert get_worker(s, "alice", "a").status == "paused"
        assert get_worker(s, "alice", "b").status == "active"
        # the operator's default answers a request that names no project
        set_preferred(s, "alice", get_project(s, "b"))
        assert worker_by_token(s, token).project_id == get_project(s, "b").id
        set_preferred(s, "alice", get_project(s, "a"))
    with session_scope(eng) as s:
        assert get_worker(s, "alice").project_id == get_project(s, "a").id
        assert [w.preferred for w, _ in workers_by_token(s, token)] == [True, False]
        _, new = reset_token(s, "alice")  # one token: every enrolment's
    with session_scope(eng) as s:
        assert workers_by_token(s, token) == []
        assert len(workers_by_token(s, new)) == 2
        # a removed enrolment is not chosen while another is open
        set_preferred(s, "alice", get_project(s, "a"))
        set_worker_status(s, "alice", "removed", "a")
    with session_scope(eng) as s:
        assert worker_by_token(s, new).project_id == get_project(s, "b").id


def test_a_handle_is_unique_within_a_project(eng):
    with session_scope(eng) as s:
        p = create_project(s, "p", "0,1")
        w, _ = enroll_worker(s, p, "alice")
        pid, th = p.id, w.token_hash
    with pytest.raises(IntegrityError), session_scope(eng) as s:
        s.add(Worker(project_id=pid, seq=1, handle="alice", token_hash=th))


def _make_old(eng):
    """The worker table as labelq made it before issue 43: a handle unique across
    projects, no ``preferred``, no per-project unique index."""
    with eng.begin() as conn:
        conn.exec_driver_sql("DROP INDEX uq_worker_project_handle")
        conn.exec_driver_sql("DROP INDEX ix_worker_handle")
        conn.exec_driver_sql("CREATE UNIQUE INDEX ix_worker_handle ON worker (handle)")
        conn.exec_driver_sql("ALTER TABLE worker DROP COLUMN preferred")
    eng.dispose()


def test_init_upgrades_an_old_database_and_old_tokens_keep_working(eng):
    with session_scope(eng) as s:
        p = create_project(s, "old", "0,1")
        create_project(s, "new", "0,1")
        pid = p.id
    _make_old(eng)
    with eng.begin() as conn:  # an annotator enrolled by the earlier labelq
        conn.exec_driver_sql(
            "INSERT INTO worker (project_id, seq, handle, cost, status, token_hash, "
            f"categories, created) VALUES ({pid}, 0, 'alice', 1.0, 'active', "
            f"'{hash_token('old-token')}', '[]', '2026-01-01 00:00:00')")
    insp = inspect(eng)
    assert {ix["name"]: ix["unique"] for ix in insp.get_indexes("worker")}[
        "ix_worker_handle"]
    init_schema(eng)
    init_schema(eng)  # (safe to repeat)
    insp = inspect(eng)
    indexes = {ix["name"]: bool(ix["unique"]) for ix in insp.get_indexes("worker")}
    assert indexes["ix_worker_handle"] is False
    assert indexes["uq_worker_project_handle"] is True
    assert "preferred" in {c["name"] for c in insp.get_columns("worker")}
    with session_scope(eng) as s:
        old = worker_by_token(s, "old-token")  # the old token, one project: as before
        assert old.handle == "alice" and old.project_id == pid and old.preferred is None
        w, token = enroll_worker(s, get_project(s, "new"), "alice")
        assert token is None and w.token_hash == hash_token("old-token")
    with session_scope(eng) as s:
        assert [n for _, n in workers_by_token(s, "old-token")] == ["old", "new"]
