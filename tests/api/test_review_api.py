"""The review page's API (``/review/api``) with a reviewer token (``labelq reviewers add``):
who may call what, the queue (audit first, payload, no labels), and answers recorded as
gold of the task's kind — or queued while the task is assigned. SQLite and PostgreSQL, a
real Redis."""

from __future__ import annotations

import json
import uuid

import numpy as np
import pytest
from click.testing import CliRunner
from sqlmodel import select

from cli.main import cli
from labelq.record.db import engine_for, init_schema, session_scope
from labelq.record.models import Assignment, Label, PendingGoldMark, Task, utcnow
from labelq.record.projects import create_project, enroll_worker

OPERATOR = "op-token-" + uuid.uuid4().hex


@pytest.fixture
def setup(db_url, redis_url):
    """Project p (neg,pos): 12 tasks with a text payload, each labelled by two annotators
    who disagree on every third; project q beside it. Five tasks are suggested
    (``gold suggest``), three drawn by an audit."""
    import redis as redis_lib
    r = redis_lib.Redis.from_url(redis_url)
    r.flushdb()
    engine = engine_for(db_url)
    init_schema(engine)
    with session_scope(engine) as s:
        p = create_project(s, "p", "neg,pos")
        create_project(s, "q", "neg,pos")
        for i in range(12):
            s.add(Task(project_id=p.id, seq=i, external_id=f"t{i}",
                       payload={"text": f"review me {i}", "source": "web"}))
        s.flush()
        ws = [enroll_worker(s, p, h)[0] for h in ("ann-a", "ann-b", "ann-c")]
        for t in s.exec(select(Task).where(Task.project_id == p.id)):
            for w, v in zip(ws[:2], ("pos", "neg" if t.seq % 3 == 0 else "pos"), strict=True):
                a = Assignment(id=uuid.uuid4().hex, project_id=p.id, task_id=t.id,
                               worker_id=w.id, expires=utcnow(), state="submitted")
                s.add(a)
                s.flush()
                s.add(Label(assignment_id=a.id, project_id=p.id, task_id=t.id, worker_id=w.id,
                            value=v))
    env = {"LABELQ_DATABASE_URL": db_url, "LABELQ_REDIS_URL": redis_url}

    def run(*args):
        res = CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)
        assert res.exit_code == 0, res.output
        return res.output

    from labelq.record.golddraw import audit_draw
    with session_scope(engine) as s:
        from labelq.record.projects import get_project
        audit = [t.external_id for t in
                 audit_draw(s, get_project(s, "p"), 3, np.random.default_rng(1)).tasks]
    suggested = [row["id"] for row in json.loads(run("gold", "suggest", "p", "--n", "5",
                                                     "-o", "json"))]
    token = json.loads(run("reviewers", "add", "expert", "--project", "p", "-o", "json"))["token"]
    from fastapi.testclient import TestClient

    from labelq.api import create_app
    from labelq.record.settings import Settings
    app = create_app(Settings(database_url=db_url, redis_url=redis_url,
                              operator_token=OPERATOR))
    yield {"client": TestClient(app), "token": token, "engine": engine, "audit": audit,
           "suggested": suggested, "run": run, "redis": r, "db_url": db_url}
    r.flushdb()


def h(token):
    return {"Authorization": f"Bearer {token}"}


def test_who_may_review_what(setup):
    c, token = setup["client"], setup["token"]
    # no token or an unknown one: 401; the reviewer token opens review, nothing else
    assert c.get("/review/api/me").status_code == 401
    assert c.get("/review/api/me", headers=h("nope")).status_code == 401
    me = c.get("/review/api/me", headers=h(token)).json()
    assert me["reviewer"] == "expert" and [p["name"] for p in me["projects"]] == ["p"]
    assert me["projects"][0]["labels"] == ["neg", "pos"]
    assert c.get("/api/v1/projects", headers=h(token)).status_code == 403
    assert c.post("/api/v1/assignments/next", headers=h(token)).status_code == 401
    # a project it was not given: 403; the operator token reviews every project
    assert c.get("/review/api/projects/q/queue", headers=h(token)).status_code == 403
    op = c.get("/review/api/me", headers=h(OPERATOR)).json()
    assert op["reviewer"] == "operator" and [p["name"] for p in op["projects"]] == ["p", "q"]
    # a removed reviewer's token stops at once; the page and its script are served
    setup["run"]("reviewers", "remove", "expert")
    assert c.get("/review/api/me", headers=h(token)).status_code == 401
    page = c.get("/review")
    assert page.status_code == 200 and "script-src 'self'" in page.headers[
        "content-security-policy"]
    assert '<script src="/static/review.js"></script>' in page.text and "onclick" not in page.text
    assert c.get("/static/review.js").status_code == 200
    paths = c.get("/openapi.json").json()["paths"]
    assert {"/review/api/me", "/review/api/projects/{name}/queue",
            "/review/api/projects/{name}/answers",
            "/review/api/projects/{name}/tasks/{task}/answers"} <= set(paths)


def test_a_deleted_projects_reviewers_do_not_review_a_new_project_of_its_name(setup):
    # Given reviewer expert of p alone (the fixture's) and reviewer both of p and q
    c, run = setup["client"], setup["run"]
    both = json.loads(run("reviewers", "add", "both", "--project", "p", "--project", "q",
                          "-o", "json"))["token"]
    # When p is deleted and a new project is created under its name
    run("project", "delete", "p", "--yes")
    with session_scope(setup["engine"]) as s:
        create_project(s, "p", "neg,pos")
    # Then neither reviews the new p: expert, who had p only, went with it (its token
    # stops, as p's annotators' do; left with no project it would have reviewed every
    # one), and both keeps q
    assert c.get("/review/api/me", headers=h(setup["token"])).status_code == 401
    assert c.get("/review/api/projects/p/queue", headers=h(both)).status_code == 403
    me = c.get("/review/api/me", headers=h(both)).json()
    assert [p["name"] for p in me["projects"]] == ["q"]
    listed = json.loads(run("reviewers", "list", "-o", "json"))
    assert [(r["name"], r["projects"]) for r in listed] == [("both", ["q"])]


def test_queue_answers_and_gold_kinds(setup):
    c, token, eng = setup["client"], h(setup["token"]), setup["engine"]
    audit, suggested = setup["audit"], setup["suggested"]
    # The queue: audit tasks first (in draw order), then the suggested ones not audited,
    # each with its payload and no annotator's label
    q = c.get("/review/api/projects/p/queue", headers=token).json()
    want = audit + [t for t in suggested if t not in audit]
    assert [t["id"] for t in q["tasks"]] == want
    assert [t["kind"] for t in q["tasks"]] == ["audit"] * 3 + ["suggested"] * (len(want) - 3)
    assert q["left"] == {"audit": 3, "suggested": len(want) - 3}
    first = q["tasks"][0]
    assert first["payload"] == {"text": f"review me {first['id'][1:]}", "source": "web"}
    assert "labels" not in json.dumps(q) and "ann-a" not in json.dumps(q)
    only = c.get("/review/api/projects/p/queue?kind=suggested", headers=token).json()
    assert all(t["kind"] == "suggested" for t in only["tasks"])
    skip = c.get("/review/api/projects/p/queue", params={"skip": want[:2]},
                 headers=token).json()
    assert [t["id"] for t in skip["tasks"]] == want[2:]
    # The annotators' answers, on request
    got = c.get(f"/review/api/projects/p/tasks/{first['id']}/answers", headers=token).json()
    assert [a["worker"] for a in got["answers"]] == ["ann-a", "ann-b"]
    # When the expert answers an audit task and a suggested one
    s_task = want[3]
    for t, kind in ((first["id"], "audit"), (s_task, "suggested")):
        out = c.post("/review/api/projects/p/answers", headers=token,
                     json={"task": t, "answer": "pos", "kind": kind})
        assert out.status_code == 200, out.text
        assert out.json() == {"task": t, "state": "marked", "kind": kind, "replaced": None}
    # Then they are gold of those kinds, and leave the queue
    # and record who answered them (the reviewer's name: gold_source)
    with session_scope(eng) as s:
        rows = {t.external_id: (t.gold_answer, t.gold_kind) for t in
                s.exec(select(Task).where(Task.is_gold))}
        sources = set(s.exec(select(Task.gold_source).where(Task.is_gold)))
    assert rows == {first["id"]: ("pos", "audit"), s_task: ("pos", "suggested")}
    assert sources == {"review expert"}
    left = c.get("/review/api/projects/p/queue", headers=token).json()
    assert [t["id"] for t in left["tasks"]] == [t for t in want if t not in rows]
    # and a bad answer is refused with what was wrong, changing nothing
    bad = c.post("/review/api/projects/p/answers", headers=token,
                 json={"task": want[1], "answer": "maybe", "kind": "audit"})
    assert bad.status_code == 422 and "not in the label set" in bad.json()["message"]
    other = c.post("/review/api/projects/p/answers", headers=token,
                   json={"task": first["id"], "answer": "neg", "kind": "audit"})
    assert other.status_code == 409 and "labelq gold correct" in other.json()["message"]
    # and the kind is the draw's: a suggested task cannot be answered as an audit's (which
    # would score its annotators), nor a task never drawn at all
    s_only = next(t for t in want if t not in audit and t not in rows)
    lie = c.post("/review/api/projects/p/answers", headers=token,
                 json={"task": s_only, "answer": "pos", "kind": "audit"})
    assert lie.status_code == 409 and "not drawn by an audit" in lie.json()["message"]
    never = next(f"t{i}" for i in range(12) if f"t{i}" not in want)
    assert c.post("/review/api/projects/p/answers", headers=token,
                  json={"task": never, "answer": "pos", "kind": "suggested"}).status_code == 409
    with session_scope(eng) as s:
        assert len(s.exec(select(Task).where(Task.is_gold)).all()) == 2


def test_an_answer_to_a_task_assigned_right_now_is_queued(setup):
    # Given a suggested task an annotator holds right now (the hot state is live)
    from labelq.record.settings import Settings
    from labelq.service import Service
    c, token, eng, r = setup["client"], h(setup["token"]), setup["engine"], setup["redis"]
    svc = Service(eng, r, settings=Settings(database_url=setup["db_url"]), worker_max_age=0,
                  state_max_age=0)
    held = None
    while (a := svc.next_assignment("ann-c")) is not None:
        if a.task in setup["suggested"] and a.task not in setup["audit"]:
            held = a
            break
        svc.submit("ann-c", a.assignment_id, "pos")
    assert held is not None
    # When the expert answers it
    out = c.post("/review/api/projects/p/answers", headers=token,
                 json={"task": held.task, "answer": "neg", "kind": "suggested"})
    # Then it is queued, not gold yet, and off the review queue
    assert out.status_code == 200 and out.json()["state"] == "queued"
    with session_scope(eng) as s:
        t = s.exec(select(Task).where(Task.external_id == held.task)).one()
        assert not t.is_gold
        # (with who answered: the reviewer's name)
        assert s.exec(select(PendingGoldMark.answer, PendingGoldMark.kind,
                             PendingGoldMark.source)
                      .where(PendingGoldMark.task_id == t.id)).one() == (
            "neg", "suggested", "review expert")
    q = c.get("/review/api/projects/p/queue", headers=token).json()
    assert held.task not in [x["id"] for x in q["tasks"]]
    # and once the annotator's label is in, the queue is applied: gold of kind suggested,
    # still credited to the reviewer who answered
    from labelq.live.goldmark import apply_queued_marks
    svc.submit("ann-c", held.assignment_id, "pos")
    with session_scope(eng) as s:
        pid = s.exec(select(Task.project_id).where(Task.external_id == held.task)).first()
    assert apply_queued_marks(eng, r, pid)["applied"] == [held.task]
    with session_scope(eng) as s:
        t = s.exec(select(Task).where(Task.external_id == held.task)).one()
        assert (t.is_gold, t.gold_answer, t.gold_kind) == (True, "neg", "suggested")
        assert t.gold_source == "review expert"


def test_an_answer_replacing_a_queued_one_says_so(setup, tmp_path):
    # Given two suggested tasks an annotator held when `labelq gold mark` queued them
    # (answer pos, the second from a file), whose assignments have ended since, the queue
    # not applied yet
    from labelq.record.settings import Settings
    from labelq.service import Service
    c, token, eng, r = setup["client"], h(setup["token"]), setup["engine"], setup["redis"]
    run = setup["run"]
    svc = Service(eng, r, settings=Settings(database_url=setup["db_url"], max_open=2),
                  worker_max_age=0, state_max_age=0)
    held = []
    while len(held) < 2 and (a := svc.next_assignment("ann-c")) is not None:
        if a.task in setup["suggested"] and a.task not in setup["audit"]:
            held.append(a)
            continue
        svc.submit("ann-c", a.assignment_id, "pos")
    assert len(held) == 2
    first, second = held
    assert "queued until its assignment ends" in run("gold", "mark", "p", first.task, "pos")
    marks = tmp_path / "marks.csv"
    marks.write_text(f"id,answer\n{second.task},pos\n")
    assert "queued until" in run("gold", "mark", "p", "--file", str(marks))
    for a in held:
        svc.submit("ann-c", a.assignment_id, "neg")
    # When the expert answers the first on the review page with another answer
    out = c.post("/review/api/projects/p/answers", headers=token,
                 json={"task": first.task, "answer": "neg", "kind": "suggested"})
    # Then it is gold with the expert's answer, and the answer says which queued one it
    # replaced
    assert out.status_code == 200, out.text
    assert out.json() == {"task": first.task, "state": "marked", "kind": "suggested",
                          "replaced": "pos"}
    # When the operator marks the second again, with another answer
    said = run("gold", "mark", "p", second.task, "neg")
    # Then the output names the answer queued earlier, its file, and what replaced it
    assert (f"{second.task}: the answer queued earlier from {marks}, 'pos', replaced by "
            f"'neg'") in said
    with session_scope(eng) as s:
        got = {t.external_id: (t.is_gold, t.gold_answer) for t in s.exec(
            select(Task).where(Task.external_id.in_([first.task, second.task])))}
        assert got == {first.task: (True, "neg"), second.task: (True, "neg")}
        # (each credited to what gave the answer that stands, not the queued one's source)
        assert dict(s.exec(select(Task.external_id, Task.gold_source).where(
            Task.external_id.in_([first.task, second.task]))).all()) == {
            first.task: "review expert", second.task: "cli"}
        assert s.exec(select(PendingGoldMark)).all() == []
    # and an answer that replaces nothing says so too (null)
    again = c.post("/review/api/projects/p/answers", headers=token,
                   json={"task": first.task, "answer": "neg", "kind": "suggested"})
    assert again.json()["replaced"] is None and again.json()["state"] == "skipped"
