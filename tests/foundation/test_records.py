"""The durable record on SQLite and PostgreSQL: constraints that the pipeline relies on."""

import pytest
from sqlalchemy.exc import IntegrityError

from labelq.errors import AlreadyExists, InputError, NotFound, PolicyError
from labelq.record.db import engine_for, init_schema, session_scope
from labelq.record.models import Assignment, Label, Task, utcnow
from labelq.record.projects import (
    create_project,
    enroll_worker,
    get_project,
    get_worker,
    hash_token,
    list_projects,
    set_worker_status,
    worker_by_token,
)


@pytest.fixture
def eng(db_url):
    engine = engine_for(db_url)
    init_schema(engine)
    init_schema(engine)  # safe to repeat
    return engine


def test_project_roundtrip_and_validation(eng):
    with session_scope(eng) as s:
        p = create_project(s, "p", "cat,dog,bird", policy="uniform", budget=10, max_labels=3)
    with session_scope(eng) as s:
        p = get_project(s, "p")
        assert p.labels == ["cat", "dog", "bird"] and not p.is_binary
        assert p.policy == {"name": "uniform", "params": {}}
        assert [q.name for q in list_projects(s)] == ["p"]
    with pytest.raises(AlreadyExists), session_scope(eng) as s:
        create_project(s, "p", "0,1")
    with pytest.raises(InputError, match="at least two"), session_scope(eng) as s:
        create_project(s, "q", "0")
    with pytest.raises(PolicyError, match="unknown policy 'nope'"), session_scope(eng) as s:
        create_project(s, "q", "0,1", policy="nope")
    with pytest.raises(NotFound), session_scope(eng) as s:
        get_project(s, "missing")


def test_worker_tokens_are_hashed_and_handles_unique(eng):
    with session_scope(eng) as s:
        p = create_project(s, "p", "0,1")
        w, token = enroll_worker(s, p, "alice", cost=0.2, capacity=5, categories=["a", " b"])
        w2, _ = enroll_worker(s, p, "bob", cost=1)
        assert (w.seq, w2.seq) == (0, 1)
        assert w.token_hash == hash_token(token) and token not in w.token_hash
    with session_scope(eng) as s:
        assert worker_by_token(s, token).handle == "alice"
        assert worker_by_token(s, "wrong") is None
        assert get_worker(s, "alice").categories == ["a", "b"]
        set_worker_status(s, "alice", "paused")
    with session_scope(eng) as s:
        assert get_worker(s, "alice").status == "paused"
        with pytest.raises(AlreadyExists, match="already enrolled in project 'p'"):
            enroll_worker(s, get_project(s, "p"), "alice", cost=1)
        # (in another project the handle is the same person: tests/foundation/test_people.py)
        with pytest.raises(InputError, match="capacity"):
            enroll_worker(s, get_project(s, "p"), "carol", cost=1, capacity=0)


def test_one_label_per_assignment(eng):
    with session_scope(eng) as s:
        p = create_project(s, "p", "0,1")
        w, _ = enroll_worker(s, p, "alice", cost=1)
        t = Task(project_id=p.id, seq=0, external_id="t0")
        s.add(t)
        s.flush()
        a = Assignment(id="a1", project_id=p.id, task_id=t.id, worker_id=w.id, expires=utcnow())
        s.add(a)
        s.flush()
        s.add(Label(assignment_id="a1", project_id=p.id, task_id=t.id, worker_id=w.id, value="1"))
        ids = (p.id, t.id, w.id)
    with pytest.raises(IntegrityError), session_scope(eng) as s:
        s.add(Label(assignment_id="a1", project_id=ids[0], task_id=ids[1], worker_id=ids[2],
                    value="0"))
    with pytest.raises(IntegrityError), session_scope(eng) as s:
        s.add(Task(project_id=ids[0], seq=1, external_id="t0"))


def test_init_schema_adds_columns_added_after_a_database_was_created(tmp_path):
    """A database created before Project.instructions and Project.label_names gets them
    from init_schema (labelq init, or any command), its rows kept."""
    import sqlite3

    from sqlmodel import select as sm_select

    from labelq.record.db import ADDED_COLUMNS, ADDED_INDEXES, engine_for, init_schema
    from labelq.record.db import session_scope as scope
    from labelq.record.models import Project

    path = tmp_path / "old.db"
    url = f"sqlite:///{path}"
    init_schema(engine_for(url))
    con = sqlite3.connect(path)  # as a database of the earlier release was: no such columns
    for names in ADDED_INDEXES.values():  # nor the indexes added since (one is on task.marked)
        for name in names:
            con.execute(f"DROP INDEX {name}")
    for table, names in ADDED_COLUMNS.items():
        for name in names:
            con.execute(f"ALTER TABLE {table} DROP COLUMN {name}")
    con.execute("DROP TABLE pause_event")  # (issue 41's pause trails)
    con.execute("INSERT INTO project (name, labels, policy, aggregation, quality, created) "
                "VALUES ('old', '[\"a\", \"b\"]', '{\"name\": \"uniform\", \"params\": {}}', "
                "'mv', '{}', '2026-01-01 00:00:00')")
    con.execute("INSERT INTO task (project_id, seq, external_id, category, payload, is_gold, "
                "created) VALUES (1, 0, 't0', '', '{}', 0, '2026-01-01 00:00:00')")
    con.commit()
    con.close()
    engine_for(url).dispose()  # (connections opened before the columns went)
    eng = engine_for(url)
    init_schema(eng)
    init_schema(eng)  # (safe to repeat)
    from sqlalchemy import inspect as sa_inspect
    insp = sa_inspect(eng)
    for table, names in ADDED_INDEXES.items():  # the indexes added since are back
        assert set(names) <= {ix["name"] for ix in insp.get_indexes(table)}, table
    assert {"worker_id", "rule", "gold_right", "gold_answered", "statistic", "value",
            "bound"} <= {c["name"] for c in insp.get_columns("pause_event")}
    with scope(eng) as s:
        p = s.exec(sm_select(Project).where(Project.name == "old")).one()
        assert p.instructions is None and p.label_names is None
        assert p.display_names() == ["a", "b"]
        p.label_names = {"a": "Alpha"}
        s.add(p)
    with scope(eng) as s:
        assert s.exec(sm_select(Project)).one().display_names() == ["Alpha", "b"]
    from labelq.record.models import Task
    from labelq.record.projects import GoldMark, mark_gold
    with scope(eng) as s:  # the task column added since: a task can be marked gold
        assert s.exec(sm_select(Task)).one().marked is None
        mark_gold(s, s.exec(sm_select(Project)).one(), [GoldMark("t0", "a")])
    with scope(eng) as s:
        assert s.exec(sm_select(Task)).one().marked is not None
