"""A database that knows it is a copy (issue 45): a copied database has its original's
identity, so its keys would be the original's. The identity's home (``lq:{D}:home``,
``labelq.live.home``) names where the database lives; a copy acting on the same Redis is
refused before it reads or writes a key, ``labelq check`` says so, and ``labelq init
--new-identity`` makes it a database of its own. PostgreSQL URLs spelled differently are the
same database, not a copy."""

from __future__ import annotations

import json
import sqlite3
import threading

import numpy as np
import pytest
from click.testing import CliRunner
from sqlalchemy import func, text
from sqlmodel import select

from cli.main import cli
from labelq.errors import BudgetExhausted, LabelqError
from labelq.live.applier import Applier
from labelq.live.home import DatabaseCopy
from labelq.live.rebuild import rebuild_project
from labelq.live.redis.keys import Keys, home_key, parse_key
from labelq.record.db import database_id, engine_for, init_schema, session_scope
from labelq.record.models import Label
from labelq.record.settings import Settings
from labelq.service import Service

from .conftest import make_project


def dump_of(r, database: str) -> dict[bytes, bytes]:
    """DUMP of every key of ``database`` (as tests/pipeline/test_two_databases.py)."""
    return {key: r.dump(key) for key in r.scan_iter(match="lq:*", count=1000)
            if (owner := parse_key(key)) is not None and owner.database == database}


def label_until_spent(s: Service, handles: list[str], rng, limit: int = 100) -> int:
    done = 0
    for i in range(limit):
        h = handles[i % len(handles)]
        try:
            a = s.next_assignment(h)
        except BudgetExhausted:
            break
        if a is None:
            continue
        try:
            s.submit(h, a.assignment_id, "ab"[int(rng.random() < 0.3)])
        except LabelqError:
            continue
        done += 1
    return done


def copy_sqlite(src: str, dst: str) -> None:
    """A backup restored beside the original (SQLite's online backup: every committed
    page, the write-ahead log's too)."""
    with sqlite3.connect(src) as a, sqlite3.connect(dst) as b:
        a.backup(b)
    a.close()
    b.close()


def test_a_copy_is_refused_and_the_original_keeps_its_keys_and_budget(r, tmp_path,
                                                                       redis_url):
    rng = np.random.default_rng(5)
    # Given a live original with a budget of 10 (4 labels spent and applied, an open lease)
    orig = tmp_path / "orig.db"
    url = f"sqlite:///{orig}"
    eng, pid = make_project(url, n_tasks=8, workers=3, max_labels=3, budget=10)
    s = Service(eng, r, settings=Settings(database_url=url), worker_max_age=0)
    applier = Applier(eng, r, settings=s.settings)
    assert label_until_spent(s, ["p-w0", "p-w1"], rng, limit=4) == 4
    applier.apply_pending(pid)
    uid = database_id(eng)
    # and its backup restored beside it, the same identity
    copy = tmp_path / "restored" / "copy.db"
    copy.parent.mkdir()
    copy_sqlite(str(orig), str(copy))
    copy_url = f"sqlite:///{copy}"
    eng_c = engine_for(copy_url)
    assert database_id(eng_c) == uid
    s.next_assignment("p-w2")  # (held open across everything below)
    before = dump_of(r, uid)
    assert Keys(pid, uid).meta.encode() in before

    # When the copy deletes the project, rebuilds, hands out work and applies
    env = {"LABELQ_DATABASE_URL": copy_url, "LABELQ_REDIS_URL": redis_url}
    run = CliRunner().invoke
    outs = [run(cli, args, env=env) for args in (
        ["project", "delete", "p", "--yes"], ["rebuild", "p"],
        ["gold", "mark", "p", "t7", "a"],
        ["init", "--claim", "--new-identity"])]
    # Then each is refused (exit 9) naming both places, and the copy's SQL is untouched
    for res in outs[:3]:
        assert res.exit_code == 9, res.output
        assert str(copy) in res.output and str(orig) in res.output, res.output
        assert "is a copy" in res.output and "labelq init --new-identity" in res.output
    assert outs[3].exit_code == 2  # (the two exclude each other)
    with pytest.raises(DatabaseCopy):
        Service(eng_c, r, settings=Settings(database_url=copy_url))
    with pytest.raises(DatabaseCopy):
        Applier(eng_c, r)
    with pytest.raises(DatabaseCopy):
        rebuild_project(eng_c, r, pid)
    from labelq.api import create_app  # (the API of the copy does not start)
    with pytest.raises(DatabaseCopy):
        create_app(Settings(database_url=copy_url, redis_url=redis_url))
    # and the original's keys are byte for byte as they were
    assert dump_of(r, uid) == before
    # and `labelq check` on the copy reports it (exit 9), on the original not
    res = run(cli, ["check", "--timeout", "0.2", "-o", "json"], env=env)
    home_row = {row["check"]: row for row in json.loads(res.output)}["database home"]
    assert res.exit_code == 9 and not home_row["ok"] and "is a copy" in home_row["detail"]
    res = run(cli, ["check", "--timeout", "0.2", "-o", "json"],
              env={**env, "LABELQ_DATABASE_URL": url})
    assert {row["check"]: row for row in json.loads(res.output)}["database home"]["ok"]

    # and the original goes on to spend exactly its budget of 10 (no counter reset)
    label_until_spent(s, ["p-w0", "p-w1", "p-w2"], rng)
    with session_scope(eng) as ses:
        assert ses.exec(select(func.count()).select_from(Label)).one() == 10
    assert float(r.get(Keys(pid, uid).spent)) == 10.0

    # When the copy is given its own identity
    res = run(cli, ["init", "--new-identity", "-o", "json"], env=env)
    assert res.exit_code == 0, res.output
    new = json.loads(res.output)
    assert new["id"] != uid and new["rebuilt"] == ["p"]
    # Then it works on its own keys (its hot state rebuilt from its 4 labels), and the
    # original's are still its own
    after_orig = dump_of(r, uid)
    assert database_id(eng_c) == new["id"]
    s_c = Service(eng_c, r, settings=Settings(database_url=copy_url), worker_max_age=0)
    assert float(r.get(Keys(pid, new["id"]).spent)) == 4.0
    assert label_until_spent(s_c, ["p-w0", "p-w1"], rng, limit=3) == 3
    Applier(eng_c, r).apply_pending(pid)
    assert dump_of(r, uid) == after_orig
    res = run(cli, ["check", "--timeout", "0.2", "-o", "json"], env=env)
    assert {row["check"]: row for row in json.loads(res.output)}["database home"]["ok"]


def test_a_moved_database_is_told_and_claims_its_home(r, tmp_path, redis_url):
    # Given a database used from one place, then moved (the old file gone)
    old = tmp_path / "old.db"
    eng, pid = make_project(f"sqlite:///{old}", n_tasks=4, workers=1)
    Service(eng, r, settings=Settings(database_url=f"sqlite:///{old}")).next_assignment("p-w0")
    uid = database_id(eng)
    # (the first request's rebuild streams the rest and saves its state in a thread of its
    # own: a move is made with the file closed, so the thread ends first; else the file
    # went without the pages its open write-ahead log still held, on a loaded machine)
    for t in threading.enumerate():
        if t.name.startswith("labelq-backfill-"):
            t.join(60)
    eng.dispose()
    new = tmp_path / "moved" / "new.db"
    new.parent.mkdir()
    old.rename(new)
    env = {"LABELQ_DATABASE_URL": f"sqlite:///{new}", "LABELQ_REDIS_URL": redis_url}
    run = CliRunner().invoke
    # When it is used from the new place, it is refused with a move's message
    res = run(cli, ["rebuild", "p"], env=env)
    assert res.exit_code == 9 and "moved" in res.output and "--claim" in res.output
    assert str(old) in res.output and str(new) in res.output
    # Then `init --claim` makes the new place the home, keeping the identity and hot state
    res = run(cli, ["init", "--claim", "-o", "json"], env=env)
    assert res.exit_code == 0, res.output and json.loads(res.output)["id"] == uid
    assert str(new) in r.get(home_key(uid)).decode()
    res = run(cli, ["rebuild", "p", "-o", "json"], env=env)
    assert res.exit_code == 0, res.output


def test_postgres_spelled_differently_is_the_same_database_and_a_copy_is_not(r, pg_url):
    # Given a PostgreSQL database in use through 127.0.0.1
    url = pg_url
    if "127.0.0.1" not in url:
        pytest.skip("the PostgreSQL test URL does not name 127.0.0.1")
    from sqlmodel import SQLModel, create_engine

    import labelq.record.models  # noqa: F401 - registers the tables
    fresh = create_engine(url)
    SQLModel.metadata.drop_all(fresh)
    fresh.dispose()
    eng, pid = make_project(url, n_tasks=4, workers=1)
    Service(eng, r, settings=Settings(database_url=url)).next_assignment("p-w0")
    uid = database_id(eng)
    # When the same database is named through localhost, it is its own home
    other = engine_for(url.replace("127.0.0.1", "localhost"))
    Service(other, r, settings=Settings(database_url=url))
    # But a copy of its tables in another schema (pg_dump restored there) is refused
    schema = "copy_" + uid
    with eng.begin() as conn:
        conn.exec_driver_sql(f"CREATE SCHEMA {schema}")
    try:
        copy_url = url.split("?")[0] + f"?options=-csearch_path%3D{schema}"
        eng_c = engine_for(copy_url)
        init_schema(eng_c)
        with eng.connect() as conn:
            nonce = conn.execute(text("SELECT nonce FROM labelq_database")).scalar()
        with eng_c.begin() as conn:
            conn.execute(text("UPDATE labelq_database SET uid = :u, nonce = :n"),
                         {"u": uid, "n": nonce})
        from labelq.record.db import forget_database_id
        forget_database_id(eng_c)
        assert database_id(eng_c) == uid
        with pytest.raises(DatabaseCopy) as err:
            Service(eng_c, r, settings=Settings(database_url=copy_url))
        assert "moved" in str(err.value) and repr(schema) in str(err.value)
    finally:
        other.dispose()
        eng_c.dispose()
        with eng.begin() as conn:
            conn.exec_driver_sql(f"DROP SCHEMA {schema} CASCADE")
        eng.dispose()


def test_an_identity_of_an_earlier_labelq_gets_its_nonce_at_init(r, tmp_path, redis_url):
    # Given a database of a labelq before the nonce (no column), its identity kept
    path = tmp_path / "old.db"
    url = f"sqlite:///{path}"
    eng, _pid = make_project(url, n_tasks=3, workers=1)
    uid = database_id(eng)
    with eng.begin() as conn:
        conn.exec_driver_sql("ALTER TABLE labelq_database DROP COLUMN nonce")
    from labelq.record.db import forget_database_id
    forget_database_id(eng)
    env = {"LABELQ_DATABASE_URL": url, "LABELQ_REDIS_URL": redis_url}
    # When a command that touches Redis runs: it asks for `labelq init`, touching nothing
    res = CliRunner().invoke(cli, ["rebuild", "p"], env=env)
    assert res.exit_code == 9 and "run `labelq init` to upgrade it" in res.output
    assert list(r.scan_iter(match="lq:*")) == []
    # Then init adds the column and a nonce, keeping the identity, and the command works
    res = CliRunner().invoke(cli, ["init", "-o", "json"], env=env)
    assert res.exit_code == 0 and json.loads(res.output)["id"] == uid
    with eng.connect() as conn:
        nonce = conn.execute(text("SELECT nonce FROM labelq_database")).scalar()
    assert isinstance(nonce, str) and len(nonce) == 16
    assert CliRunner().invoke(cli, ["rebuild", "p"], env=env).exit_code == 0
    assert nonce in r.get(home_key(uid)).decode()
