"""The operator API's webhooks (``/api/v1/projects/{name}/hooks``): list, add (the secret
in that answer only), remove and the delivery log, with ``labelq hooks add``'s checks
answered 422 naming the field, and the routes in the OpenAPI schema. A delivery made to
a real HTTP receiver (a ``http.server`` thread) shows in the log. SQLite and PostgreSQL,
a real Redis."""

from __future__ import annotations

import uuid

import pytest
from pipeline.receiver import Receiver
from sqlmodel import select

from labelq.hooknet import parse_networks
from labelq.hooks import deliver, verify
from labelq.record.db import engine_for, session_scope
from labelq.record.hooks import hook_view, list_hooks
from labelq.record.models import Hook, HookEvent
from labelq.record.projects import create_project, enroll_worker, get_project, set_worker_status

OPERATOR = "op-token-" + uuid.uuid4().hex


@pytest.fixture
def api(db_url, redis_url):
    """Project p (budget 10) with annotator ann, q without a budget; the app in-process
    with an operator token."""
    from fastapi.testclient import TestClient

    from labelq.api import create_app
    from labelq.record.settings import Settings

    engine = engine_for(db_url)
    with session_scope(engine) as s:
        p = create_project(s, "p", "a,b", budget=10.0)
        create_project(s, "q", "a,b")
        enroll_worker(s, p, "ann")
    app = create_app(Settings(database_url=db_url, redis_url=redis_url,
                              operator_token=OPERATOR))
    with TestClient(app, headers={"Authorization": f"Bearer {OPERATOR}"}) as client:
        yield client, engine


def test_add_list_deliveries_remove(api):
    c, engine = api
    rx = Receiver()
    try:
        # When the operator adds a hook (no name: the URL's host) and a second one
        added = c.post("/api/v1/projects/p/hooks",
                       json={"url": rx.url + "/in", "events": ["annotator.paused",
                                                               "export.ready"]})
        assert added.status_code == 201, added.text
        hook = added.json()
        assert hook["name"] == "127.0.0.1" and len(hook["secret"]) == 64
        assert hook["events"] == ["annotator.paused", "export.ready"]
        second = c.post("/api/v1/projects/p/hooks",
                        json={"url": "https://example.com/budget", "budget_below": 0.2,
                              "name": "budget"}).json()
        assert second["events"] == ["budget.below"] and second["budget_below"] == 0.2
        again = c.post("/api/v1/projects/p/hooks", json={"url": rx.url, "events": ["all"]})
        assert again.json()["name"] == "127.0.0.1-2"
        # Then the list is `labelq hooks list -o json`'s, without secrets
        listed = c.get("/api/v1/projects/p/hooks")
        assert listed.status_code == 200
        with session_scope(engine) as s:
            assert listed.json() == [hook_view(s, h) for h in list_hooks(s, get_project(s, "p"))]
        assert [h["name"] for h in listed.json()] == ["127.0.0.1", "budget", "127.0.0.1-2"]
        assert all("secret" not in h for h in listed.json())
        assert c.get("/api/v1/projects/q/hooks").json() == []
        # and the secret given once signs the deliveries
        with session_scope(engine) as s:
            set_worker_status(s, "ann", "paused")
            event = s.exec(select(HookEvent).join(Hook, Hook.id == HookEvent.hook_id)
                           .where(Hook.name == "127.0.0.1")).one().id
        assert deliver(engine, event, allowed=parse_networks("127.0.0.1")).state == "delivered"
        headers, body = rx.posts()[0]
        assert verify(hook["secret"], body, headers["X-Labelq-Signature"],
                      headers["X-Labelq-Timestamp"])
        log = c.get("/api/v1/projects/p/hooks/127.0.0.1/deliveries")
        assert log.status_code == 200
        assert [(d["event"], d["type"], d["attempt"], d["status"], d["state"])
                for d in log.json()] == [(event, "annotator.paused", 1, 200, "delivered")]
        assert c.get("/api/v1/projects/p/hooks/127.0.0.1/deliveries",
                     params={"limit": 0}).status_code == 422
        # When one is removed: gone with its events; a second removal is 404
        gone = c.delete("/api/v1/projects/p/hooks/127.0.0.1")
        assert gone.status_code == 200 and gone.json() == {
            "project": "p", "name": "127.0.0.1", "url": rx.url + "/in", "removed": True}
        assert c.delete("/api/v1/projects/p/hooks/127.0.0.1").status_code == 404
        assert c.get("/api/v1/projects/p/hooks/127.0.0.1/deliveries").status_code == 404
        with session_scope(engine) as s:
            assert s.get(HookEvent, event) is None
        assert [h["name"] for h in c.get("/api/v1/projects/p/hooks").json()] == [
            "budget", "127.0.0.1-2"]
    finally:
        rx.close()


@pytest.mark.parametrize(("body", "field", "says"), [
    ({"url": "file:///etc/passwd", "events": ["all"]}, "url", "not http or https"),
    ({"url": "ftp://example.com/x", "events": ["all"]}, "url", "not http or https"),
    ({"url": "example.com/hook", "events": ["all"]}, "url", "not http or https"),
    ({"url": "http://", "events": ["all"]}, "url", "no host"),
    ({"url": "http://[", "events": ["all"]}, "url", "not a URL"),
    ({"url": "http://a:99999/", "events": ["all"]}, "url", "not a URL"),
    ({"url": "http://\x00/", "events": ["all"]}, "url", "control characters"),
    ({"url": "http://a b/", "events": ["all"]}, "url", "control characters"),
    ({"url": "https://example.com", "events": ["nope"]}, "events", "unknown event nope"),
    ({"url": "https://example.com", "events": []}, "events", "at least one event"),
    ({"url": "https://example.com", "events": ["budget.below"]}, "budget_below",
     "needs --budget-below"),
    ({"url": "https://example.com", "budget_below": 1.5}, "budget_below", "in (0, 1)"),
])
def test_bad_hooks_are_422_naming_the_field_and_add_nothing(api, body, field, says):
    c, engine = api
    got = c.post("/api/v1/projects/p/hooks", json=body)
    assert got.status_code == 422, got.text
    assert got.json()["code"] == "invalid_input" and got.json()["field"] == field
    assert says in got.json()["message"]
    with session_scope(engine) as s:
        assert s.exec(select(Hook)).all() == []


def test_other_refusals(api):
    c, engine = api
    # a budget share on a project without a budget; a malformed body; an unknown project;
    # a name taken; no operator token
    nobudget = c.post("/api/v1/projects/q/hooks",
                      json={"url": "https://example.com", "budget_below": 0.2})
    assert nobudget.status_code == 422 and nobudget.json()["field"] == "budget_below"
    assert "no budget" in nobudget.json()["message"]
    typed = c.post("/api/v1/projects/p/hooks", json={"url": "https://example.com",
                                                     "events": ["all"], "budget_below": "0.2"})
    assert typed.status_code == 422 and typed.json()["code"] == "validation_error"
    extra = c.post("/api/v1/projects/p/hooks", json={"url": "https://example.com",
                                                     "events": ["all"], "secret": "mine"})
    assert extra.status_code == 422
    assert c.post("/api/v1/projects/nope/hooks",
                  json={"url": "https://example.com", "events": ["all"]}).status_code == 404
    assert c.get("/api/v1/projects/nope/hooks").status_code == 404
    ok = c.post("/api/v1/projects/p/hooks",
                json={"url": "https://example.com", "events": ["all"], "name": "ops"})
    assert ok.status_code == 201
    taken = c.post("/api/v1/projects/p/hooks",
                   json={"url": "https://example.org", "events": ["all"], "name": "ops"})
    assert taken.status_code == 409 and taken.json()["code"] == "already_exists"
    for method, path in (("get", "/api/v1/projects/p/hooks"),
                         ("delete", "/api/v1/projects/p/hooks/ops")):
        assert c.request(method, path, headers={"Authorization": "Bearer x"}
                         ).status_code == 403
    with session_scope(engine) as s:
        assert [h.name for h in s.exec(select(Hook))] == ["ops"]


def test_the_hook_routes_are_in_the_openapi_schema(api):
    c, _ = api
    schema = c.get("/openapi.json").json()
    paths = schema["paths"]
    assert set(paths["/api/v1/projects/{name}/hooks"]) == {"get", "post"}
    assert set(paths["/api/v1/projects/{name}/hooks/{hook}"]) == {"delete"}
    assert set(paths["/api/v1/projects/{name}/hooks/{hook}/deliveries"]) == {"get"}
    post = paths["/api/v1/projects/{name}/hooks"]["post"]
    assert {"201", "404", "409", "422"} <= set(post["responses"])
    hook_in = schema["components"]["schemas"]["HookIn"]
    assert set(hook_in["properties"]) == {"url", "events", "budget_below", "name"}
    assert "secret" in schema["components"]["schemas"]["HookAddedOut"]["required"]
    assert "secret" not in schema["components"]["schemas"]["HookOut"]["properties"]


@pytest.mark.timeout(240)
def test_an_event_the_api_writes_is_delivered_at_once_not_at_the_next_beat(tmp_path,
                                                                          redis_url):
    # Given `labelq serve` and `labelq run-worker` (the hooks' sweep, the safety net, every
    # 120 s: the first one 120 s after it started) of one database, with default queues,
    # and a hook of project p for pauses
    import json
    import os
    import time
    from datetime import datetime

    import httpx
    from pipeline.conftest import ROOT, RunWorker

    from labelq.record.db import init_schema
    from labelq.record.hooks import add_hook

    from .conftest import Server

    url = f"sqlite:///{tmp_path / 'api-now.db'}"
    engine = engine_for(url)
    init_schema(engine)
    rx = Receiver()
    with session_scope(engine) as s:
        p = create_project(s, "p", "a,b")
        enroll_worker(s, p, "ann")
        add_hook(s, p, "ops", rx.url + "/in", ["annotator.paused"])
    env = {k: v for k, v in os.environ.items() if not k.startswith("LABELQ_")}
    env.update(LABELQ_DATABASE_URL=url, LABELQ_REDIS_URL=redis_url,
               LABELQ_OPERATOR_TOKEN=OPERATOR, LABELQ_BEAT_SECONDS="120",
               PYTHONPATH=str(ROOT),
               LABELQ_HOOK_ALLOW_NETWORKS="127.0.0.1/32")  # (the receiver: loopback)
    server = Server(env, tmp_path, tmp_path / "serve.log")
    try:
        with RunWorker(env, tmp_path / "worker.log", "-c", "1") as worker:
            server.start()
            # When the operator pauses the annotator through the API
            res = httpx.post(server.base + "/api/v1/workers/ann/status",
                             json={"status": "paused"},
                             headers={"Authorization": f"Bearer {OPERATOR}"})
            assert res.status_code == 200, res.text
            deadline = time.monotonic() + 60
            while not rx.got:
                assert worker.running(), worker.tail()
                assert time.monotonic() < deadline, (server.logfile.read_text()[-3000:],
                                                     worker.tail())
                time.sleep(0.1)
            # Then the receiver has it within seconds, at its first try, no sweep run yet
            (headers, raw), = rx.posts()
            body = json.loads(raw)
            assert (body["type"], body["data"]["worker"]) == ("annotator.paused", "ann")
            assert headers["X-Labelq-Attempt"] == "1"
            lag = int(headers["X-Labelq-Timestamp"]) - datetime.fromisoformat(
                body["at"]).timestamp()
            assert lag < 5, lag
            assert b"labelq.hooks_sweep[" not in worker.log.read_bytes()  # (none received)
    finally:
        server.stop()
        rx.close()
        engine.dispose()
