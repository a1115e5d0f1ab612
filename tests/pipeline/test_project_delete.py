"""``labelq project delete``: everything of the project goes, from SQL and Redis, and
nothing of another project; a project created after it starts clean."""

from __future__ import annotations

from click.testing import CliRunner
from sqlalchemy import func
from sqlmodel import select

from cli.main import cli
from labelq.live.redis.keys import Keys, projects_key
from labelq.record.db import database_id, session_scope
from labelq.record.models import Assignment, Label, PauseEvent, Project, Task, Worker
from labelq.record.settings import Settings
from labelq.service import Service

from .conftest import make_project


def label_once(s: Service, handle: str) -> None:
    a = s.next_assignment(handle)
    s.submit(handle, a.assignment_id, "a")


def test_delete_removes_the_project_from_sql_and_redis_and_nothing_else(r, redis_url,
                                                                        db_url):
    # Given two live projects with labels and hot state
    eng, gone = make_project(db_url, n_tasks=5, n_gold=1, workers=2, name="gone")
    _, kept = make_project(db_url, n_tasks=5, workers=1, name="kept")
    s = Service(eng, r, settings=Settings(database_url=db_url), worker_max_age=0)
    label_once(s, "gone-w0")
    s.next_assignment("gone-w1")  # (an open lease)
    label_once(s, "kept-w0")
    env = {"LABELQ_DATABASE_URL": db_url, "LABELQ_REDIS_URL": redis_url}
    run = CliRunner().invoke
    # (a pause of one of its annotators left a trail: issue 41)
    assert run(cli, ["workers", "pause", "gone-w1"], env=env).exit_code == 0
    # When the operator asks without --yes, nothing goes and they are told what would
    res = run(cli, ["project", "delete", "gone"], env=env)
    assert res.exit_code == 2
    assert "tasks: 6, workers: 2, labels: 1, assignments: 1" in res.output
    assert r.exists(Keys(gone, database_id(eng)).meta)
    # When they confirm
    res = run(cli, ["project", "delete", "gone", "--yes"], env=env)
    # Then no row and no key of it is left, and the other project is whole
    assert res.exit_code == 0, res.output
    with session_scope(eng) as db:
        for model in (Task, Worker, Label, Assignment, PauseEvent):
            assert db.exec(select(func.count()).select_from(model)
                           .where(model.project_id == gone)).one() == 0
        assert db.get(Project, gone) is None
        assert db.exec(select(func.count()).select_from(Label)
                       .where(Label.project_id == kept)).one() == 1
    assert list(r.scan_iter(match=Keys(gone, database_id(eng)).pattern())) == []
    projects = projects_key(database_id(eng))
    assert not r.sismember(projects, gone) and r.sismember(projects, kept)
    assert r.exists(Keys(kept, database_id(eng)).meta)
    # And a project created afterwards (SQLite may give it the same id) starts clean
    _, again = make_project(db_url, n_tasks=3, workers=1, name="again")
    s2 = Service(eng, r, settings=Settings(database_url=db_url), worker_max_age=0)
    got = []
    while (a := s2.next_assignment("again-w0")) is not None:
        got.append(a.task)
        s2.submit("again-w0", a.assignment_id, "b")
    assert sorted(got) == ["t0", "t1", "t2"]
    assert run(cli, ["project", "delete", "nope", "--yes"], env=env).exit_code == 4
