"""What an operator types is checked when it is given: a policy against the label set, project
names and worker handles against one pattern (SQLite and PostgreSQL, library and CLI)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from sqlmodel import select

from cli.main import cli
from labelq.errors import InputError, PolicyError
from labelq.policies import PolicySpec
from labelq.record.db import engine_for, init_schema, session_scope
from labelq.record.models import Project, Worker
from labelq.record.projects import create_project, enroll_worker, get_project, update_project


@pytest.fixture
def eng(db_url):
    engine = engine_for(db_url)
    init_schema(engine)
    return engine


@pytest.fixture
def run(db_url):
    def invoke(*args):
        return CliRunner().invoke(cli, [str(a) for a in args],
                                  env={"LABELQ_DATABASE_URL": db_url})
    return invoke


# optkg-workers and optkg-multi serve k classes (one-coin Dirichlet); the batch refit is binary
@pytest.mark.parametrize("policy", ["optkg-workers:refit=5"])
def test_a_binary_policy_on_three_labels_is_refused_at_creation(eng, policy):
    with session_scope(eng) as s, pytest.raises(PolicyError) as exc:
        create_project(s, "three", "a,b,c", policy=policy)
    assert "cannot serve the label set ['a', 'b', 'c'] (3 classes)" in str(exc.value)
    with session_scope(eng) as s:
        assert s.exec(select(Project)).all() == []


def test_multi_class_policies_are_accepted_on_three_labels(eng):
    with session_scope(eng) as s:
        for i, policy in enumerate(["optkg", "uniform", "bbta", "kg", "optkg-workers",
                                     "optkg-multi"]):
            create_project(s, f"ok{i}", "a,b,c", policy=policy)
        create_project(s, "two", "a,b", policy="optkg-workers")


def test_update_refuses_a_project_whose_policy_cannot_serve_its_labels(eng):
    # Given a project stored before the check existed: a binary policy on three labels
    with session_scope(eng) as s:
        s.add(Project(name="old", labels=["a", "b", "c"],
                      policy=PolicySpec.parse("optkg-workers:refit=5").to_json()))
    # When the operator updates it, Then it is named as unusable, and nothing changes
    with session_scope(eng) as s, pytest.raises(PolicyError, match="cannot serve"):
        update_project(s, "old", budget=10)
    with session_scope(eng) as s:
        assert get_project(s, "old").budget is None


def test_cli_create_with_a_binary_policy_on_three_labels_exits_8(run):
    res = run("project", "create", "p3", "--labels", "a,b,c", "--policy",
              "optkg-workers:refit=5")
    assert res.exit_code == 8, res.output
    assert "optkg-workers:refit=5 cannot serve the label set" in res.output
    assert run("project", "show", "p3").exit_code == 4


BAD_NAMES = ["../../x", "<script>", "a b", "", "-lead", ".hidden", "x" * 65, "a/b", "é"]


@pytest.mark.parametrize("handle", BAD_NAMES)
def test_bad_worker_handles_are_refused(eng, handle):
    with session_scope(eng) as s:
        create_project(s, "p", "0,1")
    with session_scope(eng) as s, pytest.raises(InputError, match="worker handle"):
        enroll_worker(s, get_project(s, "p"), handle)
    with session_scope(eng) as s:
        assert s.exec(select(Worker)).all() == []


@pytest.mark.parametrize("name", BAD_NAMES)
def test_bad_project_names_are_refused(eng, name):
    with session_scope(eng) as s, pytest.raises(InputError, match="project name"):
        create_project(s, name, "0,1")


def test_handles_and_names_of_the_documented_pattern_are_accepted(eng):
    with session_scope(eng) as s:
        p = create_project(s, "Reviews-2026.v1", "0,1")
        for handle in ("alice", "ann-fuzz", "bob.smith@example.org", "w_07", "x" * 64):
            enroll_worker(s, p, handle)


def test_cli_enroll_of_a_bad_handle_exits_3(run):
    assert run("project", "create", "p", "--labels", "0,1").exit_code == 0
    res = run("workers", "enroll", "p", "../../x")
    assert res.exit_code == 3, res.output
    assert "worker handle '../../x' is not allowed" in res.output
