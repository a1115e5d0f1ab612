"""Issue 42, independence: ``project.show_suggestions`` and ``label.suggested`` are added to
a database of an earlier labelq by ``labelq init`` (SQLite and PostgreSQL), off / unmarked
for what was there, and ``project create|update --show-suggestions`` sets the setting."""

from __future__ import annotations

import json

from click.testing import CliRunner
from sqlalchemy import inspect, text

from cli.main import cli
from labelq.record.db import engine_for, init_schema, session_scope
from labelq.record.projects import create_project, get_project


def test_init_adds_the_suggestion_columns_to_an_old_database(db_url):
    # Given a database of an earlier labelq: neither column, one project
    eng = engine_for(db_url)
    init_schema(eng)
    with session_scope(eng) as s:
        create_project(s, "old", "a,b")
    with eng.begin() as conn:
        conn.execute(text("ALTER TABLE project DROP COLUMN show_suggestions"))
        conn.execute(text("ALTER TABLE label DROP COLUMN suggested"))
    eng.dispose()
    # When labelq init runs (twice: safe to repeat)
    init_schema(engine_for(db_url))
    init_schema(engine_for(db_url))
    # Then both columns are there, and the old project shows no suggestion
    insp = inspect(engine_for(db_url))
    assert "show_suggestions" in {c["name"] for c in insp.get_columns("project")}
    assert "suggested" in {c["name"] for c in insp.get_columns("label")}
    with session_scope(engine_for(db_url)) as s:
        assert not get_project(s, "old").show_suggestions


def test_project_create_and_update_set_show_suggestions(db_url):
    init_schema(engine_for(db_url))
    env = {"LABELQ_DATABASE_URL": db_url}
    run = CliRunner().invoke
    out = run(cli, ["project", "create", "p", "--labels", "a,b", "-o", "json"], env=env)
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["show_suggestions"] is False  # off by default
    out = run(cli, ["project", "update", "p", "--show-suggestions", "-o", "json"], env=env)
    assert out.exit_code == 0 and json.loads(out.output)["show_suggestions"] is True
    out = run(cli, ["project", "update", "p", "--budget", "5", "-o", "json"], env=env)
    assert json.loads(out.output)["show_suggestions"] is True  # other changes keep it
    out = run(cli, ["project", "update", "p", "--no-show-suggestions", "-o", "json"], env=env)
    assert json.loads(out.output)["show_suggestions"] is False
