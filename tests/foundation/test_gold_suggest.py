"""``labelq gold suggest``: the suggestions as a CSV an expert fills in and ``labelq gold mark
--file`` takes back; SQLite and PostgreSQL."""

import csv
import json
import time
import uuid

import numpy as np
import pytest
from click.testing import CliRunner
from sqlmodel import select

from cli.main import cli
from labelq.record.db import engine_for, init_schema, session_scope
from labelq.record.loading import load_tasks
from labelq.record.models import Assignment, DashboardFigures, Label, Task, utcnow
from labelq.record.projects import create_project, enroll_worker, get_project

NO_REDIS = "redis://127.0.0.1:1/0"  # nothing listens: gold mark marks in SQL only


@pytest.fixture
def project_db(db_url, tmp_path):
    """Project p (neg,pos; aggregation ds): 60 tasks in two categories, 2 gold questions;
    worker a always right, b and c right 60% of the time, on every task; task t59 is left
    unlabelled. Where b and c agree against a, majority vote and Dawid-Skene disagree."""
    engine = engine_for(db_url)
    init_schema(engine)
    tasks = tmp_path / "t.csv"
    tasks.write_text("id,category,text\n" + "".join(f"t{i},c{i % 2},x{i}\n" for i in range(60)))
    gold = tmp_path / "g.csv"
    gold.write_text("id,answer\ng0,pos\ng1,neg\n")
    rng = np.random.default_rng(5)
    with session_scope(engine) as s:
        p = create_project(s, "p", "neg,pos", aggregation="ds")
        load_tasks(s, p, tasks)
        load_tasks(s, p, gold, gold=True)
        ws = [enroll_worker(s, p, h, cost=1)[0] for h in ("a", "b", "c")]
        for t in s.exec(select(Task).where(Task.project_id == p.id)):
            if t.external_id == "t59":
                continue
            truth = t.gold_answer if t.is_gold else ("pos" if int(t.external_id[1:]) % 3
                                                     else "neg")
            for w, acc in zip(ws, (1.0, 0.6, 0.6), strict=True):
                value = truth if rng.random() < acc else ("neg" if truth == "pos" else "pos")
                a = Assignment(id=uuid.uuid4().hex, project_id=p.id, task_id=t.id,
                               worker_id=w.id, expires=utcnow(), state="submitted",
                               is_gold=t.is_gold)
                s.add(a)
                s.flush()
                s.add(Label(assignment_id=a.id, project_id=p.id, task_id=t.id,
                            worker_id=w.id, value=value, is_gold=t.is_gold))
    return db_url


def run(db_url, *args, ok=True):
    res = CliRunner().invoke(cli, [str(a) for a in args], env={"LABELQ_DATABASE_URL": db_url},
                             catch_exceptions=False)
    if ok:
        assert res.exit_code == 0, res.output
    return res


def truth_of(ext):
    return "pos" if int(ext[1:]) % 3 else "neg"


def test_suggest_fill_mark_round_trip(project_db, tmp_path):
    # When gold suggest writes its CSV
    out = tmp_path / "suggest.csv"
    res = run(project_db, "gold", "suggest", "p", "--n", "8", "--out", out)
    assert "wrote 8 suggestions" in res.output
    with open(out, newline="") as f:
        rows = list(csv.DictReader(f))
    # Then it has id and an empty answer, with the task's payload (its `text`) and the
    # helpful columns, best first; not the current answer, which invites copying
    assert list(rows[0]) == ["id", "answer", "category", "text", "candidates", "labels",
                             "n_labels", "score", "reason"]
    ids = [r["id"] for r in rows]
    assert len(ids) == 8 and not {"g0", "g1", "t59"} & set(ids)
    assert all(r["answer"] == "" and r["category"] in ("c0", "c1") for r in rows)
    assert all(r["text"] == "x" + r["id"][1:] for r in rows)
    # (JSON keeps it, with the payload as an object)
    js = json.loads(run(project_db, "gold", "suggest", "p", "--n", "8", "-o", "json").output)
    assert all(r["current_method"] == "ds" and r["current"] in ("neg", "pos") for r in js)
    assert [r["payload"] for r in js] == [{"text": "x" + r["id"][1:]} for r in js]
    assert all(set(r["candidates"].split(",")) <= {"neg", "pos"} for r in rows)
    # the labels given, as `label:count` (every one of the task's labels counted)
    assert all(r["labels"] for r in rows), rows
    given = [dict(cell.split(":") for cell in r["labels"].split(",")) for r in rows]
    assert all(set(g) <= {"neg", "pos"} for g in given)
    assert [sum(map(int, g.values())) for g in given] == [int(r["n_labels"]) for r in rows]
    assert all(r["reason"] for r in rows)
    scores = [float(r["score"]) for r in rows]
    assert all(s > 0 for s in scores)
    # the tasks where the candidates split (b and c against a) lead
    assert any(r["candidates"] in ("neg,pos", "pos,neg") for r in rows)
    # When the expert fills in the answers and gold mark reads the file back
    for r in rows:
        r["answer"] = truth_of(r["id"])
    with open(out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    res = run(project_db, "gold", "mark", "p", "--file", out, "--redis-url", NO_REDIS)
    assert "marked 8 tasks" in res.output
    # Then those tasks are gold with the expert's answers
    with session_scope(engine_for(project_db)) as s:
        marked = {t.external_id: t.gold_answer for t in s.exec(
            select(Task).where(Task.is_gold, Task.marked.is_not(None)))}
    assert marked == {i: truth_of(i) for i in ids}
    # and are not suggested again
    again = json.loads(run(project_db, "gold", "suggest", "p", "--n", "8", "-o", "json").output)
    assert len(again) == 8 and not set(ids) & {r["id"] for r in again}
    assert isinstance(again[0]["candidates"], list) and isinstance(again[0]["labels"], dict)


def test_outputs_and_unknown_project(project_db, tmp_path):
    table = run(project_db, "gold", "suggest", "p", "--n", "3").output
    assert "reason" in table.splitlines()[0] and len(table.splitlines()) == 5
    out = tmp_path / "s.json"
    run(project_db, "gold", "suggest", "p", "--n", "3", "-o", "json", "--out", out)
    assert len(json.loads(out.read_text())) == 3
    csv_out = run(project_db, "gold", "suggest", "p", "--n", "3", "-o", "csv").output
    assert csv_out.splitlines()[0] == "id,answer,category,text,candidates,labels,n_labels," \
        "score,reason"
    assert "current" not in table.splitlines()[0]
    res = run(project_db, "gold", "suggest", "nope", ok=False)
    assert res.exit_code == 4 and "no project named 'nope'" in res.output


def test_auto_gives_its_choice_as_the_current_method(project_db):
    run(project_db, "project", "update", "p", "--aggregation", "auto")
    rows = json.loads(run(project_db, "gold", "suggest", "p", "--n", "3", "--json").output)
    assert rows and all(r["current_method"].startswith("auto (") for r in rows)


@pytest.mark.redis
def test_dashboard_list_from_the_api(project_db, tmp_path, redis_url):
    from fastapi.testclient import TestClient

    from labelq.api import create_app
    from labelq.record.settings import Settings

    app = create_app(Settings(database_url=project_db, redis_url=redis_url,
                              operator_token="op-token-op-token-op-token"))
    c = TestClient(app)
    auth = {"Authorization": "Bearer op-token-op-token-op-token"}
    assert c.get("/api/v1/projects/p/gold-suggestions").status_code == 401
    assert c.get("/api/v1/projects/nope/gold-suggestions", headers=auth).status_code == 404
    def listed(until) -> dict:
        """The list as the page polls it: computed in the background, never in the request
        (which waits half a second at most for it)."""
        deadline = time.monotonic() + 120
        while True:
            t0 = time.monotonic()
            r = c.get("/api/v1/projects/p/gold-suggestions", headers=auth)
            assert r.status_code == 200, r.text
            assert time.monotonic() - t0 < 5  # (a request that computed would take longer)
            if until(r.json()):
                return r.json()
            assert time.monotonic() < deadline, r.json()
            time.sleep(0.2)

    d = listed(lambda d: d["computed"] != "")
    # the top 10, as labelq gold suggest gives them (current: the method, ds, a member)
    cli_rows = json.loads(run(project_db, "gold", "suggest", "p", "--n", "10", "-o",
                              "json").output)
    assert d["tasks"] == [{k: v for k, v in r.items() if k != "payload"} for r in cli_rows]
    assert d["labels"] == 183  # 59 tasks and 2 gold, 3 each
    # kept: a second request does not compute again
    with session_scope(engine_for(project_db)) as s:
        before = s.get(DashboardFigures, get_project(s, "p").id).computed
    assert c.get("/api/v1/projects/p/gold-suggestions", headers=auth).json() == d
    with session_scope(engine_for(project_db)) as s:
        assert s.get(DashboardFigures, get_project(s, "p").id).computed == before
    # a gold mark changes the list as soon as the figures are computed again
    f = tmp_path / "m.csv"
    f.write_text(f"id,answer\n{d['tasks'][0]['id']},{truth_of(d['tasks'][0]['id'])}\n")
    run(project_db, "gold", "mark", "p", "--file", f, "--redis-url", NO_REDIS)
    after = listed(lambda a: d["tasks"][0]["id"] not in [t["id"] for t in a["tasks"]])
    assert after["computed"] >= d["computed"]
    # the dashboard's own data does not carry (nor compute) it
    assert "gold_suggestions" not in c.get("/api/v1/projects/p/dashboard", headers=auth).json()
