"""Where the database is (issue 35, labelq/record/location.py): a command run from the wrong folder
used to create ./labelq.db there and answer "no project named 'reviews'". Now only `labelq
init` creates a database; the others exit 9 naming where they looked, and "not found"
errors name the database they looked in (password masked)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy import text

from cli.main import cli
from labelq.errors import ServiceUnavailable
from labelq.record.db import database_id, engine_for, init_schema, masked_url
from labelq.record.location import locate, open_database, per_user_url
from labelq.record.settings import Settings


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    """A user without a labelq database, working in an empty folder."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return home


def run(*args: str, env: dict | None = None):
    return CliRunner().invoke(cli, list(args), env=env)


def files_under(path: Path) -> list[Path]:
    return sorted(p for p in path.rglob("*") if p.is_file())


@pytest.mark.parametrize("args", [["project", "list"], ["project", "show", "reviews"],
                                  ["status", "reviews"], ["workers", "list"],
                                  ["rebuild", "reviews"], ["serve", "--port", "0"],
                                  ["run-worker"]])
def test_no_command_but_init_creates_a_database(home, tmp_path, args):
    # When an operator runs a command where no database was ever made
    res = run(*args)
    # Then it stops with exit code 9, saying where it looked and what to do, and creates
    # nothing: no ./labelq.db, no per-user file
    assert res.exit_code == 9, res.output
    assert per_user_url().removeprefix("sqlite:///") in res.output
    assert "per-user default" in res.output and "labelq init" in res.output
    assert files_under(tmp_path) == []


def test_init_here_writes_a_config_found_from_below(home, tmp_path, monkeypatch):
    # Given `labelq init --here` in a project folder
    project = tmp_path / "work"
    res = run("init", "--here")
    assert res.exit_code == 0, res.output
    assert (project / "labelq.toml").is_file() and (project / "labelq.db").is_file()
    # When a command runs in a subfolder, it uses that database
    (project / "sub").mkdir()
    monkeypatch.chdir(project / "sub")
    assert run("project", "create", "reviews", "--labels", "neg,pos").exit_code == 0
    res = run("project", "list", "-o", "json")
    assert [p["name"] for p in json.loads(res.output)] == ["reviews"]
    assert locate().source == str(project / "labelq.toml")
    assert locate().url == f"sqlite:///{project / 'labelq.db'}"
    # and a command from another folder does not find it (nor makes a database there)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    res = run("project", "show", "reviews")
    assert res.exit_code == 9 and "labelq init" in res.output
    assert files_under(elsewhere) == [] and files_under(home) == []
    # and a second --here succeeds, saying so, as a plain init does: both idempotent
    # (issue 43: it exited 2, though the README calls init safe to repeat)
    monkeypatch.chdir(project)
    first = database_id(engine_for(locate().url))
    config = (project / "labelq.toml").read_bytes()
    res = run("init", "--here")
    assert res.exit_code == 0, res.output
    assert "already initialised" in res.output and first in res.output
    assert (project / "labelq.toml").read_bytes() == config
    res = run("init", "--here", "-o", "json")
    assert res.exit_code == 0 and json.loads(res.output)["already_initialised"] is True
    assert run("init").exit_code == 0 and database_id(engine_for(locate().url)) == first
    res = run("project", "list", "-o", "json")  # (the project is still there)
    assert [p["name"] for p in json.loads(res.output)] == ["reviews"]


def test_init_here_refuses_a_config_naming_another_database(home, tmp_path, monkeypatch):
    # Given a labelq.toml in this folder that names another database than ./labelq.db
    (tmp_path / "work" / "labelq.toml").write_text('database_url = "sqlite:///db/other.db"\n')
    # When init --here runs, it is refused (nothing made), saying which one it names
    res = run("init", "--here")
    assert res.exit_code == 2 and "names another database" in res.output
    assert "other.db" in res.output
    assert not (tmp_path / "work" / "labelq.db").exists()
    assert not (tmp_path / "work" / "db").exists()


def test_the_variable_and_the_option_come_before_the_config(home, tmp_path, monkeypatch):
    (tmp_path / "work" / "labelq.toml").write_text('database_url = "sqlite:///db/here.db"\n')
    assert locate().url == f"sqlite:///{tmp_path / 'work' / 'db' / 'here.db'}"
    other = f"sqlite:///{tmp_path / 'other.db'}"
    assert locate(env={"LABELQ_DATABASE_URL": other}).source == "LABELQ_DATABASE_URL"
    assert locate("sqlite:///x.db", env={"LABELQ_DATABASE_URL": other}).url == "sqlite:///x.db"
    # init makes the folder of a SQLite file it names, and the per-user default works too
    assert run("init").exit_code == 0
    assert (tmp_path / "work" / "db" / "here.db").is_file()
    (tmp_path / "work" / "labelq.toml").unlink()
    assert run("init").exit_code == 0
    assert Path(per_user_url().removeprefix("sqlite:///")).is_file()
    assert run("project", "list").exit_code == 0


def test_a_config_without_a_url_is_a_configuration_error(home, tmp_path):
    (tmp_path / "work" / "labelq.toml").write_text("database = 'x'\n")
    res = run("project", "list")
    assert res.exit_code == 2 and "database_url" in res.output


def test_not_found_names_the_database_it_looked_in(db_url, tmp_path):
    # Given an initialised database (SQLite or PostgreSQL) with one project
    env = {"LABELQ_DATABASE_URL": db_url}
    assert run("project", "create", "reviews", "--labels", "neg,pos", env=env).exit_code == 0
    shown = masked_url(Settings(database_url=db_url).sqlalchemy_url)
    # When the operator names a project, a worker or a task that is not there
    for args in (["project", "show", "reviwes"], ["status", "nope"],
                 ["workers", "pause", "ghost"], ["tasks", "show", "reviews", "t404"]):
        res = run(*args, env=env)
        # Then the error (exit 4) says which database it looked in, and from where
        assert res.exit_code == 4, (args, res.output)
        assert f"looked in the database at {shown}" in res.output.replace("\n", " ")
        assert "from LABELQ_DATABASE_URL" in res.output


def test_a_password_in_the_url_is_masked():
    assert masked_url("postgresql+psycopg://labelq:s3cret@db:5432/labelq") == \
        "postgresql+psycopg://labelq:***@db:5432/labelq"
    assert "s3cret" not in locate("postgresql://u:s3cret@h/d").describe()


def test_a_database_of_an_earlier_labelq_gets_an_identity_at_init(db_url):
    # Given a database made by a labelq before databases had an identity
    eng = engine_for(Settings(database_url=db_url).sqlalchemy_url)
    with eng.begin() as conn:
        conn.exec_driver_sql("DROP TABLE labelq_database")
    from labelq.record.db import forget_database_id
    forget_database_id(eng)
    env = {"LABELQ_DATABASE_URL": db_url}
    # When a command other than init opens it, it is told to run init (exit 9)
    res = run("project", "list", env=env)
    assert res.exit_code == 9 and "labelq init" in res.output
    # Then init gives it one, kept by every later init
    assert run("init", env=env).exit_code == 0
    uid = database_id(eng)
    assert init_schema(eng) == uid and run("project", "list", env=env).exit_code == 0


def test_the_api_does_not_create_a_database(tmp_path, redis_url):
    from labelq.api import create_app

    url = f"sqlite:///{tmp_path / 'missing.db'}"
    with pytest.raises(ServiceUnavailable, match="labelq init"):
        create_app(Settings(database_url=url, redis_url=redis_url))
    assert not (tmp_path / "missing.db").exists()


def _other_process(db: Path, code: str) -> subprocess.Popen:
    """Another process on the SQLite file ``db`` (``conn`` open), running ``code``."""
    return subprocess.Popen([sys.executable, "-c", "import sqlite3, time\n"
                             f"conn = sqlite3.connect({str(db)!r})\n{code}"])


def test_opening_the_database_again_keeps_this_process_s_sqlite_locks(tmp_path):
    # labelq serve opens the database, then the API opens it again (and a Celery worker
    # per task): the check of the file must not drop the locks SQLite holds on it
    # Given a labelq database this process holds a connection to (and has written to)
    db = tmp_path / "labelq.db"
    url = f"sqlite:///{db}"
    subprocess.run([sys.executable, "-c", "from labelq.record.db import engine_for, "
                    f"init_schema; init_schema(engine_for({url!r}))"], check=True)
    location = locate(url)
    eng = open_database(location)
    with eng.begin() as conn:
        conn.execute(text("CREATE TABLE marker (x INTEGER)"))
        conn.execute(text("INSERT INTO marker VALUES (1)"))
    # When it opens the database again, and then other processes write: one alone (its
    # last close would delete the write-ahead log, were this process's locks gone), then
    # one while a third holds the file open (its log stays)
    open_database(location)
    assert _other_process(db, "conn.execute('INSERT INTO marker VALUES (2)'); "
                              "conn.commit(); conn.close()").wait(30) == 0
    holder = _other_process(db, "conn.execute('SELECT 1 FROM marker').fetchall(); "
                                "time.sleep(60)")
    try:
        time.sleep(1)  # (the holder connected)
        assert _other_process(db, "conn.execute('INSERT INTO marker VALUES (3)'); "
                                  "conn.commit(); conn.close()").wait(30) == 0
        # Then this process sees every row written: it reads the log the others write
        with eng.connect() as conn:
            assert conn.execute(text("SELECT count(*) FROM marker")).scalar() == 3
    finally:
        holder.kill()
        holder.wait()
        eng.dispose()
