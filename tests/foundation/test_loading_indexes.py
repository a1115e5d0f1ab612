"""Loading into an empty SQLite task table drops its secondary indexes and builds them again
after the insert (issue 36): afterwards the schema is exactly as before, and a load that
fails while inserting leaves them there too — rolled back, or even committed by a caller
that catches the error. The rows' shared values (project, is_gold, created) are written
into the insert statement once: checked on both databases, tasks and gold."""

import pytest
from sqlalchemy import text
from sqlmodel import Session, select

from labelq.record import loading
from labelq.record.db import engine_for, init_schema, session_scope
from labelq.record.loading import load_tasks
from labelq.record.models import Task, as_utc
from labelq.record.projects import create_project, get_project


def _schema(engine) -> list[tuple[str, str]]:
    with engine.connect() as c:
        return sorted(c.execute(text("SELECT name, sql FROM sqlite_master WHERE type = 'index' "
                                     "AND tbl_name = 'task'")).all())


def _csv(path, n, prefix="t"):
    path.write_text("id,category,text\n" + "".join(f"{prefix}{i},c{i % 2},x {i}\n"
                                                   for i in range(n)))
    return path


@pytest.fixture
def sqlite_eng(tmp_path):
    engine = engine_for(f"sqlite:///{tmp_path / 'l.db'}")
    init_schema(engine)
    with session_scope(engine) as s:
        create_project(s, "p", "0,1")
        create_project(s, "q", "0,1")
    return engine


def test_indexes_are_the_same_after_a_load_into_an_empty_table(sqlite_eng, tmp_path,
                                                               monkeypatch):
    before = _schema(sqlite_eng)
    assert {"ix_task_project_gold"} <= {n for n, _ in before}
    dropped = []
    real = loading._defer_indexes
    monkeypatch.setattr(loading, "_defer_indexes",
                        lambda conn: dropped.extend(real(conn)) or dropped)
    with session_scope(sqlite_eng) as s:
        n = 2 * loading.CHUNK + 7
        assert load_tasks(s, get_project(s, "p"), _csv(tmp_path / "t.csv", n)).inserted == n
    assert "ix_task_project_gold" in {ix.name for ix in dropped}  # (they were dropped)
    assert _schema(sqlite_eng) == before
    with sqlite_eng.connect() as c:  # and they index the rows loaded
        assert c.execute(text("PRAGMA integrity_check")).scalar() == "ok"
        plan = " ".join(r[-1] for r in c.execute(text(
            "EXPLAIN QUERY PLAN SELECT count(*) FROM task WHERE project_id = 1 "
            "AND is_gold = 1")))
        assert "ix_task_project_gold" in plan, plan


def test_indexes_are_not_dropped_when_the_table_has_rows(sqlite_eng, tmp_path, monkeypatch):
    with session_scope(sqlite_eng) as s:
        load_tasks(s, get_project(s, "p"), _csv(tmp_path / "t.csv", 5))
    dropped = []
    real = loading._defer_indexes
    monkeypatch.setattr(loading, "_defer_indexes",
                        lambda conn: dropped.extend(real(conn)) or [])
    with session_scope(sqlite_eng) as s:  # another project: the table is not empty
        assert load_tasks(s, get_project(s, "q"), _csv(tmp_path / "u.csv", 5, "u")).inserted == 5
    assert dropped == []


class _Broken(RuntimeError):
    pass


def _failing_writes(monkeypatch):
    real = loading._BulkWriter.write
    calls = []

    def write(self, rows):
        calls.append(len(rows))
        if len(calls) == 2:
            raise _Broken("disk on fire")
        real(self, rows)

    monkeypatch.setattr(loading._BulkWriter, "write", write)


@pytest.mark.parametrize("caller", ["rolls back", "commits anyway"])
def test_a_load_failing_while_inserting_leaves_the_indexes(sqlite_eng, tmp_path, monkeypatch,
                                                           caller):
    before = _schema(sqlite_eng)
    _failing_writes(monkeypatch)
    path = _csv(tmp_path / "t.csv", 3 * loading.CHUNK)
    if caller == "rolls back":
        with pytest.raises(_Broken), session_scope(sqlite_eng) as s:
            load_tasks(s, get_project(s, "p"), path)
    else:
        with Session(sqlite_eng) as s:
            with pytest.raises(_Broken):
                load_tasks(s, get_project(s, "p"), path)
            s.commit()
    assert _schema(sqlite_eng) == before
    if caller == "rolls back":
        with session_scope(sqlite_eng) as s:
            assert s.exec(select(Task)).first() is None


@pytest.mark.parametrize("gold", [False, True])
def test_shared_values_are_stored_for_every_row(db_url, tmp_path, gold):
    engine = engine_for(db_url)
    init_schema(engine)
    with session_scope(engine) as s:
        create_project(s, "p", "0,1")
        create_project(s, "q", "0,1")  # p's id is not the only one
    path = tmp_path / "g.csv"
    path.write_text("id,category,answer,text\n" + "".join(
        f"g{i},c{i % 2},{i % 2},x\\{i}\n" for i in range(7)))
    with session_scope(engine) as s:
        r = load_tasks(s, get_project(s, "q"), path, gold=gold)
        assert r.inserted == 7
    with session_scope(engine) as s:
        q = get_project(s, "q")
        rows = list(s.exec(select(Task).order_by(Task.seq)))
        assert [t.external_id for t in rows] == [f"g{i}" for i in range(7)]
        assert {t.project_id for t in rows} == {q.id}
        assert [t.is_gold for t in rows] == [gold] * 7
        assert [t.gold_answer for t in rows] == ([str(i % 2) for i in range(7)] if gold
                                                 else [None] * 7)
        assert [t.payload for t in rows] == [{"text": f"x\\{i}"} for i in range(7)]
        assert len({t.created for t in rows}) == 1
        assert as_utc(rows[0].created) > as_utc(q.created)
