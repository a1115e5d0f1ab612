"""Operator endpoints over the real server: the operator token, project status, enrolling,
and export jobs run by the real Celery worker (``labelq.export``)."""

from __future__ import annotations

import csv
import io
import threading
import time

import httpx
import pytest

from labelq.dashboard import status_report
from labelq.record.db import session_scope
from labelq.record.projects import get_project
from labelq.record.settings import Settings

from .conftest import free_port, make_project


def label_all(stack, project: str, handle: str, answer: str) -> int:
    token = stack.enroll(project, handle)
    n = 0
    with stack.client(token) as c:
        while (a := c.post("/api/v1/assignments/next").json()["assignment"]) is not None:
            c.post(f"/api/v1/assignments/{a['assignment_id']}/label", json={"label": answer})
            n += 1
    return n


def test_operator_token_is_required(stack):
    make_project(stack, "optoken")
    url = "/api/v1/projects/optoken/status"
    with stack.client() as none, stack.client("wrong-operator-token") as wrong, \
            stack.client(stack.enroll("optoken", "sneaky")) as annotator:
        assert none.get(url).status_code == 401
        assert wrong.get(url).status_code == 403 and wrong.get(url).json()["code"] == "forbidden"
        # an annotator's token is not an operator's
        assert annotator.get(url).status_code == 403


def test_status_and_enroll(stack):
    # Given a project labelled by two annotators enrolled through the API
    make_project(stack, "status", n_tasks=4, max_labels=2)
    n = label_all(stack, "status", "st-1", "pos") + label_all(stack, "status", "st-2", "neg")
    with stack.operator() as op:
        # When the operator asks for the status
        got = op.get("/api/v1/projects/status/status")
        taken = op.post("/api/v1/projects/status/workers", json={"handle": "st-1"})
        unknown = op.get("/api/v1/projects/nope/status")
        bad = op.post("/api/v1/projects/status/workers", json={"handle": "x", "cost": -1})
    # Then it is the record's status: every task complete, 8 labels by two workers
    assert n == 8 and got.status_code == 200
    with session_scope(stack.engine) as s:
        expected = status_report(s, get_project(s, "status"))  # labelq status -o json
    body = got.json()
    for st in (body, expected):  # (an age: it moves between the two reads)
        assert st.pop("oldest_unapplied_s") is None or st["unapplied"] > 0
        st.pop("unapplied")
    assert body == expected
    assert got.json()["tasks"]["complete"] == 4
    assert [w["labels"] for w in got.json()["workers"]] == [4, 4]
    # And a taken handle, an unknown project, a negative cost are refused with codes
    assert taken.status_code == 409 and taken.json()["code"] == "already_exists"
    assert unknown.status_code == 404 and unknown.json()["code"] == "not_found"
    assert bad.status_code == 422 and bad.json()["code"] == "validation_error"


@pytest.mark.timeout(120)
def test_export_job_runs_in_the_celery_worker(stack):
    # Given a fully labelled project
    make_project(stack, "export", n_tasks=5, max_labels=1)
    assert label_all(stack, "export", "ex-1", "neutral") == 5
    with stack.operator() as op:
        # When the operator starts an export job
        started = op.post("/api/v1/projects/export/exports", json={"method": "mv"})
        assert started.status_code == 202, started.text
        job = started.json()
        assert job["state"] in ("queued", "running", "done")
        assert started.headers["location"] == f"/api/v1/exports/{job['id']}"
        early = op.get(f"/api/v1/exports/{job['id']}/result")
        # Then the Celery worker runs it to completion, with progress
        deadline = time.monotonic() + 60
        while job["state"] not in ("done", "failed") and time.monotonic() < deadline:
            time.sleep(0.2)
            job = op.get(f"/api/v1/exports/{job['id']}").json()
        assert job["state"] == "done", job
        assert job["progress"] == 1.0 and job["done"] == 5 and job["total"] == 5
        # And the result is the aggregated CSV, one row per task
        result = op.get(job["result_url"])
        raw = op.post("/api/v1/projects/export/exports", json={"raw": True, "format": "jsonl"})
        missing = op.post("/api/v1/projects/none/exports", json={})
        unknown = op.get("/api/v1/exports/0123456789abcdef")
    assert early.status_code in (200, 409)  # 409 job_not_done unless the worker was quicker
    assert result.status_code == 200 and result.headers["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(result.text)))
    assert sorted(r["task"] for r in rows) == [f"t{i}" for i in range(5)]
    assert {r["label"] for r in rows} == {"neutral"}
    assert raw.status_code == 202
    assert missing.status_code == 404 and unknown.status_code == 404


def test_operator_endpoints_disabled_without_the_setting(stack):
    # Given the app served by uvicorn (a thread, real socket) with no operator token
    import uvicorn

    from labelq.api import create_app

    app = create_app(Settings(database_url=stack.database_url, redis_url=stack.redis_url))
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port,
                                           log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 20
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.05)
        # When an operator endpoint is called, with any token
        r = httpx.get(f"http://127.0.0.1:{port}/api/v1/projects/x/status",
                      headers={"Authorization": f"Bearer {stack.operator_token}"})
        # Then it is 503 with a message saying how to enable it
        assert r.status_code == 503 and r.json()["code"] == "operator_disabled"
        assert "LABELQ_OPERATOR_TOKEN" in r.json()["message"]
        # And the annotator API still works
        assert httpx.get(f"http://127.0.0.1:{port}/healthz").json()["status"] == "ok"
    finally:
        server.should_exit = True
        thread.join(10)


def test_openapi_schema_describes_both_apis(stack):
    spec = httpx.get(stack.base + "/openapi.json").json()
    assert {"AnnotatorToken", "OperatorToken"} <= set(spec["components"]["securitySchemes"])
    assert "/api/v1/assignments/{assignment_id}/label" in spec["paths"]
    assert "/api/v1/projects/{name}/exports" in spec["paths"]
    assert httpx.get(stack.base + "/label").headers["content-security-policy"]


def test_pause_remove_and_reset_token_through_the_api(stack):
    # Given an annotator with work available
    make_project(stack, "manage", n_tasks=4)
    old = stack.enroll("manage", "mg-1")
    with stack.operator() as op, stack.client(old) as c:
        assert c.post("/api/v1/assignments/next").json()["assignment"] is not None
        # When the operator pauses them, they get no new work (within the cache's second)
        r = op.post("/api/v1/workers/mg-1/status", json={"status": "paused"})
        assert r.status_code == 200 and r.json() == {"handle": "mg-1", "status": "paused",
                                                     "project": "manage"}
        time.sleep(1.1)
        paused = c.post("/api/v1/assignments/next")
        assert paused.status_code == 403 and "paused" in paused.json()["message"]
        # and resumed, they do again
        op.post("/api/v1/workers/mg-1/status", json={"status": "active"})
        time.sleep(1.1)
        assert c.post("/api/v1/assignments/next").json()["assignment"] is not None
        # When the operator issues a new token, it signs in and the old one does not
        t = op.post("/api/v1/workers/mg-1/token")
        assert t.status_code == 200 and t.json()["handle"] == "mg-1"
        time.sleep(1.1)
        assert c.get("/api/v1/me").status_code == 401
        with stack.client(t.json()["token"]) as c2:
            assert c2.get("/api/v1/me").json()["handle"] == "mg-1"
            # And once removed, even the new token is refused
            op.post("/api/v1/workers/mg-1/status", json={"status": "removed"})
            time.sleep(1.1)
            assert c2.get("/api/v1/me").status_code == 403
        # Unknown handles and statuses are refused with codes
        assert op.post("/api/v1/workers/nobody/token").status_code == 404
        bad = op.post("/api/v1/workers/mg-1/status", json={"status": "gone"})
        assert bad.status_code == 422 and bad.json()["code"] == "validation_error"


def test_task_detail_through_the_api(stack):
    # Given a task labelled by two annotators
    make_project(stack, "detail", n_tasks=1, max_labels=2)
    n = label_all(stack, "detail", "dt-1", "pos") + label_all(stack, "detail", "dt-2", "neg")
    with stack.operator() as op:
        got = op.get("/api/v1/projects/detail/task", params={"id": "t0"})
        missing = op.get("/api/v1/projects/detail/task", params={"id": "nope"})
    # Then the operator sees both labels, with the assignment ids the annotators saw
    assert n == 2 and got.status_code == 200, got.text
    body = got.json()
    assert (body["task"], body["gold"], body["gold_answer"]) == ("t0", False, None)
    assert [(l["worker"], l["label"]) for l in body["labels"]] == [("dt-1", "pos"),
                                                                  ("dt-2", "neg")]
    assert all(stack.task_of(l["assignment"]) == "t0" for l in body["labels"])
    assert missing.status_code == 404 and missing.json()["code"] == "not_found"


def test_enroll_refuses_handles_outside_the_documented_pattern(stack):
    make_project(stack, "handles", n_tasks=2)
    with stack.operator() as op:
        for handle in ("../../x", "<script>", "a b"):
            res = op.post("/api/v1/projects/handles/workers", json={"handle": handle})
            assert res.status_code == 422, (handle, res.text)
            assert res.json()["code"] == "invalid_input" and "worker handle" in res.text
        ok = op.post("/api/v1/projects/handles/workers", json={"handle": "h.ok@x-1"})
    assert ok.status_code == 201, ok.text


def test_enroll_refuses_booleans_and_strings_for_numbers_and_spaced_handles(stack):
    # issue 35: "cost": false was taken as 0.0 (and "capacity": true as 1)
    make_project(stack, "strict", n_tasks=2)
    with stack.operator() as op:
        for body in ({"handle": "s1", "cost": False}, {"handle": "s1", "cost": "0.5"},
                     {"handle": "s1", "capacity": True}, {"handle": "s1", "capacity": "5"}):
            res = op.post("/api/v1/projects/strict/workers", json=body)
            assert res.status_code == 422, (body, res.text)
            assert res.json()["code"] == "validation_error"
        res = op.post("/api/v1/projects/strict/workers", json={"handle": " s1"})
        assert res.status_code == 422 and "spaces around it" in res.text, res.text
        ok = op.post("/api/v1/projects/strict/workers",
                     json={"handle": "s1", "cost": 0, "capacity": 5})
    assert ok.status_code == 201, ok.text
