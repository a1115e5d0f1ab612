"""`labelq next|submit|decline HANDLE` from a shell: token from --token or LABELQ_TOKEN."""

import json

from click.testing import CliRunner
from sqlmodel import select

from cli.main import cli
from labelq.live.redis.keys import Keys
from labelq.record.db import database_id, session_scope
from labelq.record.models import Assignment, Label, Task
from labelq.record.projects import enroll_worker, get_project

from .conftest import make_project


def test_next_submit_decline_with_token(r, redis_url, sqlite_url):
    # Given a project and two annotators with their tokens
    eng, pid = make_project(sqlite_url, n_tasks=5, workers=0)
    with session_scope(eng) as s:
        _, alice = enroll_worker(s, get_project(s, "p"), "alice")
        _, bob = enroll_worker(s, get_project(s, "p"), "bob")
    env = {"LABELQ_DATABASE_URL": sqlite_url, "LABELQ_REDIS_URL": redis_url,
           "LABELQ_TOKEN": alice}
    run = CliRunner().invoke
    # When alice asks for work with her token (from the environment) and answers it
    res = run(cli, ["next", "alice", "-o", "json"], env=env)
    assert res.exit_code == 0, res.output
    first = json.loads(res.stdout)["assignment"]
    res = run(cli, ["submit", "alice", first["assignment_id"], "a"], env=env)
    assert res.exit_code == 0, res.output
    # and declines the next one, passing the token as an option this time
    second = json.loads(run(cli, ["next", "alice", "-o", "json", "--token", alice],
                            env={**env, "LABELQ_TOKEN": ""}).stdout)["assignment"]
    assert run(cli, ["decline", "alice", second["assignment_id"]], env=env).exit_code == 0
    # Then the label is durable, and bob's token cannot act as alice (exit 6), nor none
    with session_scope(eng) as s:
        assert [l.value for l in s.exec(select(Label))] == ["a"]
    res = run(cli, ["next", "alice"], env={**env, "LABELQ_TOKEN": bob})
    assert res.exit_code == 6 and "does not belong to worker 'alice'" in res.output
    res = run(cli, ["next", "alice"], env={k: v for k, v in env.items() if k != "LABELQ_TOKEN"})
    assert res.exit_code == 2 and "--token" in res.output


def one_annotator(sqlite_url: str, redis_url: str, handle: str, capacity: int):
    """A five-task project with one annotator; returns (engine, project id, the CLI
    environment with their token)."""
    eng, pid = make_project(sqlite_url, n_tasks=5, workers=0)
    with session_scope(eng) as s:
        _, tok = enroll_worker(s, get_project(s, "p"), handle, capacity=capacity)
    return eng, pid, {"LABELQ_DATABASE_URL": sqlite_url, "LABELQ_REDIS_URL": redis_url,
                      "LABELQ_TOKEN": tok}


def test_next_with_nothing_left_says_why_and_prints_a_null_assignment(r, redis_url,
                                                                      sqlite_url):
    # Given an annotator of capacity 1 who holds one assignment
    _, _, env = one_annotator(sqlite_url, redis_url, "cara", capacity=1)
    run = CliRunner().invoke
    first = json.loads(run(cli, ["next", "cara", "-o", "json"], env=env).stdout)["assignment"]
    # When they ask again, they get the same one (a repeated next is idempotent)
    res = run(cli, ["next", "cara", "-o", "json"], env=env)
    assert res.exit_code == 0 and json.loads(res.stdout) == {"assignment": first,
                                                             "message": None}
    # and once it is answered, asking again is no error: stderr says why, and JSON is the
    # API's answer, a null assignment with its message (one record: an object)
    assert run(cli, ["submit", "cara", first["assignment_id"], "a"], env=env).exit_code == 0
    res = run(cli, ["next", "cara", "-o", "json"], env=env)
    assert res.exit_code == 0
    assert json.loads(res.stdout) == {"assignment": None,
                                      "message": "you have reached your capacity of 1 labels"}
    res = run(cli, ["next", "cara"], env=env)
    assert res.exit_code == 0 and res.stdout == ""
    assert "you have reached your capacity of 1 labels" in res.stderr


def test_submit_next_records_the_label_and_issues_the_next_assignment(r, redis_url,
                                                                      sqlite_url):
    # Given an annotator of capacity 2 holding their first assignment
    eng, pid, env = one_annotator(sqlite_url, redis_url, "dana", capacity=2)
    run = CliRunner().invoke
    first = json.loads(run(cli, ["next", "dana", "-o", "json"], env=env).stdout)["assignment"]
    # When they answer it with --next
    res = run(cli, ["submit", "dana", first["assignment_id"], "a", "--next", "-o", "json"],
              env=env)
    # Then the submission and a new assignment for another task are printed, as one JSON
    # document (the next assignment is the submission's `next`)
    assert res.exit_code == 0, res.output
    done = json.loads(res.stdout)
    nxt = done.pop("next")
    assert nxt["message"] is None
    second = [nxt["assignment"]]
    assert done == {"assignment_id": first["assignment_id"], "label": "a",
                    "duplicate": False}
    lease = r.hgetall(Keys(pid, database_id(eng)).lease(second[0]["assignment_id"]))  # (open: in Redis)
    with session_scope(eng) as s:
        done_seq = s.exec(select(Task.seq).join(Assignment, Assignment.task_id == Task.id)
                          .where(Assignment.id == first["assignment_id"])).one()
    assert int(lease[b"task"]) != done_seq
    assert "task" not in first and "task_seq" not in first  # (it would tell gold apart)
    assert first["labels"] == second[0]["labels"] == ["a", "b"]  # what to answer with
    # and answering that one with --next says on stderr why nothing follows
    res = run(cli, ["submit", "dana", second[0]["assignment_id"], "b", "--next"], env=env)
    assert res.exit_code == 0, res.output
    assert "you have reached your capacity of 2 labels" in res.stderr
    with session_scope(eng) as s:
        assert sorted(l.value for l in s.exec(select(Label))) == ["a", "b"]


def test_submit_next_that_spends_the_budget_records_the_label(r, redis_url, sqlite_url):
    # Given a budget of 0.2, an annotator paid 0.1 a label, their second assignment taken
    eng, pid = make_project(sqlite_url, n_tasks=5, workers=0, budget=0.2)
    with session_scope(eng) as s:
        _, tok = enroll_worker(s, get_project(s, "p"), "erin", cost=0.1)
    env = {"LABELQ_DATABASE_URL": sqlite_url, "LABELQ_REDIS_URL": redis_url,
           "LABELQ_TOKEN": tok}
    run = CliRunner().invoke
    first = json.loads(run(cli, ["next", "erin", "-o", "json"], env=env).stdout)["assignment"]
    res = run(cli, ["submit", "erin", first["assignment_id"], "a", "--next", "-o", "json"],
              env=env)
    second = json.loads(res.stdout)["next"]["assignment"]
    # When the label that spends the budget is submitted with --next
    res = run(cli, ["submit", "erin", second["assignment_id"], "b", "--next", "-o", "json"],
              env=env)
    # Then it succeeds (exit 0, not 7 budget exhausted): the label is printed and recorded,
    # and stderr says why there is no next
    assert res.exit_code == 0, res.output
    got = json.loads(res.stdout)
    # (the project is finished by this label: the reason says so, issue 41)
    assert got["next"]["assignment"] is None and "budget spent" in got["next"]["message"]
    assert got == {"assignment_id": second["assignment_id"], "label": "b",
                   "duplicate": False, "next": got["next"]}
    assert "budget spent" in res.stderr
    with session_scope(eng) as s:
        assert sorted(l.value for l in s.exec(select(Label))) == ["a", "b"]
