"""The database's identity names its Redis keys (issue 35): made once by init, read from SQL
once per process and engine, then from memory (the request path pays no SQL for it)."""

from __future__ import annotations

import pytest
from sqlalchemy import event

from labelq.live.redis.keys import KeyOwner, Keys, parse_key, projects_key
from labelq.record.db import database_id, engine_for, init_schema
from labelq.record.settings import Settings
from labelq.service import Service

from .conftest import make_project


def test_keys_name_the_database_and_keep_one_slot_per_project():
    k = Keys(7, "a1b2c3")
    assert k.pending == "lq:{a1b2c3:7}:pending" and k.lease("x") == "lq:{a1b2c3:7}:lease:x"
    assert k.projects == projects_key("a1b2c3") == "lq:{a1b2c3}:projects"
    assert parse_key(k.inbox(3)) == KeyOwner("a1b2c3", 7)
    assert parse_key(k.projects.encode()) == KeyOwner("a1b2c3", None)
    assert parse_key(b"lq:7:pending") == KeyOwner(None, 7)  # an earlier labelq's
    assert parse_key(b"lq:projects") == KeyOwner(None, None)
    assert parse_key(b"lq:job:abc") is None and parse_key(b"_kombu.binding.labelq") is None
    # one project's glob matches none of another's, in this database or another
    assert Keys(1, "a1b2c3").pattern() == "lq:{a1b2c3:1}:*"
    with pytest.raises(ValueError):
        Keys(1, "")
    with pytest.raises(ValueError):
        Keys(1, "a}b")


def test_the_identity_is_read_once_then_from_memory(db_url, r):
    eng = engine_for(Settings(database_url=db_url).sqlalchemy_url)
    uid = init_schema(eng)
    assert init_schema(eng) == uid  # kept by every init
    eng2, pid = make_project(db_url)
    assert eng2 is eng and database_id(eng) == uid
    statements: list[str] = []

    def count(conn, cursor, statement, *args):
        statements.append(statement)

    event.listen(eng, "before_cursor_execute", count)
    try:
        s = Service(eng, r, settings=Settings(database_url=db_url))
        assert s.live.database == uid and s.live.keys(pid).meta.startswith(f"lq:{{{uid}:")
        assert not any("labelq_database" in st for st in statements)
        s.next_assignment("p-w0")
        assert not any("labelq_database" in st for st in statements)
    finally:
        event.remove(eng, "before_cursor_execute", count)
