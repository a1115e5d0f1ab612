"""Databases labelq refuses (issue 45): an in-memory SQLite database (``init`` passed and
every later command, a process of its own, said "run init"), a file that is not a database
(a traceback, exit 1) or not labelq's — refused with exit code 9 and the file byte for byte
as it was — and a command that only reads never changes a SQLite file's journal mode."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli.main import cli
from labelq.errors import ConfigError
from labelq.record.db import engine_for
from labelq.record.settings import Settings


def run(*args: str, env: dict | None = None):
    return CliRunner().invoke(cli, list(args), env=env)


@pytest.mark.parametrize("url", ["sqlite://", "sqlite:///:memory:",
                                 "sqlite:///file:x?mode=memory&uri=true"])
def test_an_in_memory_database_is_refused_at_init_and_everywhere(url, tmp_path,
                                                                monkeypatch):
    monkeypatch.chdir(tmp_path)
    for args in (["init"], ["status", "p"], ["project", "list"], ["check"]):
        res = run(*args, "--database-url", url) if args[0] != "check" else \
            run("check", "--database-url", url, "--timeout", "0.1")
        assert res.exit_code in (2, 9), (args, res.output)
        assert "in-memory SQLite database lives only as long as one process" in res.output
    res = run("status", "p", env={"LABELQ_DATABASE_URL": url})
    assert res.exit_code == 2 and "in-memory" in res.output
    with pytest.raises(ConfigError):
        engine_for(url)
    assert list(tmp_path.iterdir()) == []  # (nothing made)


def foreign_sqlite(path: Path) -> bytes:
    """Another program's SQLite database (rollback journal); its bytes."""
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
    conn.execute("INSERT INTO notes (body) VALUES ('mine')")
    conn.commit()
    conn.close()
    return path.read_bytes()


@pytest.mark.parametrize("kind", ["text", "sqlite"])
def test_a_file_that_is_not_a_labelq_database_is_left_as_it_was(kind, tmp_path):
    path = tmp_path / "other.db"
    if kind == "text":
        path.write_text("name,age\nada,36\n")
        before = path.read_bytes()
    else:
        before = foreign_sqlite(path)
    url = f"sqlite:///{path}"
    for args in (["init"], ["status", "p"], ["project", "list"], ["rebuild", "p"],
                 ["workers", "list"]):
        res = run(*args, "--database-url", url)
        # Then a clean error (exit 9, no traceback) naming the file
        assert res.exit_code == 9, (args, res.output, res.exception)
        assert "not a labelq database" in res.output and str(path) in res.output
        assert "Traceback" not in res.output
    res = run("check", "--database-url", url, "--timeout", "0.1")
    assert res.exit_code == 9 and "not a labelq database" in res.output
    # and the file is byte for byte as it was: no journal switched, no table, no WAL
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.db"]


def test_a_command_that_only_reads_keeps_the_journal_mode(tmp_path):
    # Given a labelq database whose owner set it back to a rollback journal
    path = tmp_path / "labelq.db"
    url = f"sqlite:///{path}"
    assert run("init", "--database-url", url).exit_code == 0
    assert run("project", "create", "p", "--labels", "a,b", "--database-url",
               url).exit_code == 0
    engine_for(Settings(database_url=url).sqlalchemy_url).dispose()
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode=DELETE").fetchone() == ("delete",)
    conn.close()
    # When commands that only read run on it
    for args in (["status", "p"], ["project", "list"], ["project", "show", "p"],
                 ["workers", "list"], ["check", "--timeout", "0.1"]):
        run(*args, "--database-url", url)
    engine_for(Settings(database_url=url).sqlalchemy_url).dispose()
    # Then its journal mode is still its own
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone() == ("delete",)
    conn.close()
    # (`labelq init` is the one that sets WAL)
    assert run("init", "--database-url", url).exit_code == 0
    engine_for(Settings(database_url=url).sqlalchemy_url).dispose()
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    conn.close()
