"""Redis goes away under a running ``labelq serve``: 503s on the same keep-alive connection,
each saying whether the label was recorded, the outage logged once (no traceback per
request), and work resumes when Redis is back. Its own server on a private Redis (it is
stopped here: never the shared one) and SQLite, not the package's stack."""

from __future__ import annotations

import http.client
import json
import os
import shutil
import time

import pytest
from pipeline.conftest import ROOT, PrivateRedis

from labelq.record.db import engine_for, init_schema, session_scope
from labelq.record.models import Task
from labelq.record.projects import create_project, enroll_worker

from .conftest import OPERATOR_TOKEN, Server

pytestmark = pytest.mark.skipif(shutil.which("redis-server") is None,
                                reason="redis-server not installed")


class Client:
    """One HTTP/1.1 connection, kept alive; ``call`` says which local port it used, so a
    test sees whether the server closed it."""

    def __init__(self, port: int, token: str) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        self.headers = {"Authorization": f"Bearer {token}",
                        "Content-Type": "application/json"}

    def call(self, path: str, body: dict | None = None,
             method: str = "POST") -> tuple[int, dict, int, str]:
        payload = json.dumps(body) if body else None
        self.conn.request(method, path, body=payload, headers=self.headers)
        resp = self.conn.getresponse()
        data = json.loads(resp.read())
        port = self.conn.sock.getsockname()[1] if self.conn.sock else -1
        return resp.status, data, port, resp.getheader("connection", "")


def _stack(tmp_path, name, *, tasks, cap, annotators):
    """A started private Redis, a SQLite project ``name`` of ``tasks`` tasks with label
    cap ``cap`` and the ``annotators`` enrolled: (redis, the server's env, their tokens)."""
    (tmp_path / "redis").mkdir()
    redis = PrivateRedis(tmp_path / "redis")
    redis.start()
    db = f"sqlite:///{tmp_path / 'labelq.db'}"
    engine = engine_for(db)
    init_schema(engine)
    with session_scope(engine) as s:
        p = create_project(s, name, "pos,neg", max_labels=cap)
        for i in range(tasks):
            s.add(Task(project_id=p.id, seq=i, external_id=f"t{i}", payload={"text": str(i)}))
        tokens = tuple(enroll_worker(s, p, h)[1] for h in annotators)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LABELQ_")}
    # (idle connections kept 120 s, not uvicorn's 5: stopping and starting Redis can take
    # longer on a loaded machine, and a connection the server closed meanwhile is not
    # what these tests are about; `labelq serve --keep-alive`)
    env.update(LABELQ_DATABASE_URL=db, LABELQ_REDIS_URL=redis.url, PYTHONPATH=str(ROOT),
               LABELQ_OPERATOR_TOKEN=OPERATOR_TOKEN, LABELQ_KEEP_ALIVE="120")
    return redis, env, tokens


@pytest.mark.timeout(120)
def test_a_redis_outage_is_503_once_logged_on_a_kept_connection(tmp_path):
    # Given a server on a private Redis and an annotator holding an assignment
    redis, env, (token,) = _stack(tmp_path, "outage", tasks=4, cap=2,
                                  annotators=("ann-outage",))
    server = Server(env, tmp_path, tmp_path / "serve.log").start()
    try:
        c = Client(server.port, token)
        status, body, port, _ = c.call("/api/v1/assignments/next")
        assert status == 200, body
        aid = body["assignment"]["assignment_id"]
        # (idle past uvicorn's default 5 s keep-alive, the connection is still open: the
        # server's --keep-alive, here 120 s through LABELQ_KEEP_ALIVE)
        time.sleep(6)
        status, body, used, _ = c.call("/api/v1/assignments/current", method="GET")
        assert (status, used) == (200, port), body
        # When Redis goes away and the annotator keeps sending the label and asking
        redis.stop()
        for _ in range(10):
            status, body, used, close = c.call(f"/api/v1/assignments/{aid}/label",
                                               {"label": "pos"})
            # Then each answer is a 503 saying the label was not recorded and a retry is
            # safe, on the same connection (not closed by the server)
            assert status == 503, body
            assert body["code"] == "service_unavailable"
            assert body["recorded"] is False and body["retry_safe"] is True
            assert "not recorded" in body["message"]
            assert (used, close.lower()) == (port, "")
            status, body, used, _ = c.call("/api/v1/assignments/next")
            assert (status, used) == (503, port)
        # When Redis is back (its data kept), the same label is recorded, on the same
        # connection
        redis.start()
        status, body, used, _ = c.call(f"/api/v1/assignments/{aid}/label", {"label": "pos"})
        assert status == 200 and body["duplicate"] is False, body
        assert used == port
    finally:
        server.stop()
        redis.stop()
    # And the outage was logged once, and its end once, without a traceback
    log = (tmp_path / "serve.log").read_text()
    assert log.count("does not answer") == 1, log[-3000:]
    assert log.count("answer again") == 1 and "20 requests answered 503" in log, log[-3000:]
    assert "Traceback" not in log, log[-3000:]


@pytest.mark.timeout(120)
def test_a_label_whose_lease_redis_lost_in_a_restart_is_recorded_on_retry(tmp_path):
    # Given a server on a private Redis and two annotators each holding an assignment of
    # the same task (a cap of one: whoever's label comes second, it is not saved)
    redis, env, (token, other) = _stack(tmp_path, "restart", tasks=2, cap=1,
                                        annotators=("ann-a", "ann-b"))
    server = Server(env, tmp_path, tmp_path / "serve.log").start()
    try:
        a, b = Client(server.port, token), Client(server.port, other)
        status, body, _, _ = a.call("/api/v1/assignments/next")
        assert status == 200, body
        aid = body["assignment"]["assignment_id"]
        # When Redis restarts without persistence while the label is on its way
        redis.stop()
        status, body, _, _ = a.call(f"/api/v1/assignments/{aid}/label", {"label": "pos"})
        assert status == 503 and body["recorded"] is False, body
        assert "else the answer says it was not saved" in body["message"]
        for f in (tmp_path / "redis").iterdir():
            if f.name != "redis.log":
                shutil.rmtree(f) if f.is_dir() else f.unlink()
        redis.start()
        # Then the retry records it (the lease is taken again: the task still takes it)
        status, body, _, _ = a.call(f"/api/v1/assignments/{aid}/label", {"label": "pos"})
        assert status == 200 and body["duplicate"] is False, body
        status, body, _, _ = a.call(f"/api/v1/assignments/{aid}/label", {"label": "pos"})
        assert status == 200 and body["duplicate"] is True, body
        # And when the task no longer takes it, the answer says it was not saved
        status, body, _, _ = b.call("/api/v1/assignments/next")
        assert status == 200, body
        bid = body["assignment"]["assignment_id"]
        redis.stop()
        for f in (tmp_path / "redis").iterdir():
            if f.name != "redis.log":
                shutil.rmtree(f) if f.is_dir() else f.unlink()
        redis.start()
        status, body, _, _ = a.call("/api/v1/assignments/next")  # the task is open again
        assert status == 200, body
        mine = body["assignment"]["assignment_id"]
        status, body, _, _ = a.call(f"/api/v1/assignments/{mine}/label", {"label": "pos"})
        assert status == 200, body
        status, body, _, _ = b.call(f"/api/v1/assignments/{bid}/label", {"label": "neg"})
        assert status == 410 and body["code"] == "lease_lost", body
        assert body["recorded"] is False and "not saved" in body["message"]
    finally:
        server.stop()
        redis.stop()
