"""Several API processes and several Celery workers on one Redis and one PostgreSQL, as a
deployment that outgrew one machine runs them (issue 44).

Given two ``labelq serve`` processes on their own ports (behind a load balancer: each
annotator's client sends its requests round-robin to them, and retries a request that got no
answer on the other one) and two ``celery -A workers.main worker`` processes;
when eight simulated annotators label over HTTP and, mid-run, one API process and one Celery
worker are killed with SIGKILL (the API process is restarted on its port, the worker is not:
its unacknowledged message comes back to the other worker after the visibility timeout);
then every acknowledged label is in SQL exactly once and applied exactly once, no task is
above its cap, no task went twice to one annotator, the budget and the capacities hold, and
Redis' counters equal SQL (:mod:`tests.pipeline.invariants`, as the stress test checks)."""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import redis as redislib
from sqlmodel import SQLModel, select

from labelq.record.db import engine_for, init_schema, session_scope
from labelq.record.models import Label, Task
from labelq.record.projects import create_project, enroll_worker

from .conftest import ROOT, CeleryWorker, _free_port
from .invariants import check_invariants, settle

N_ANNOTATORS = 8
N_TASKS = 300
CAP = 3
KILL_API_AT = 150  # acknowledged labels before one API process is killed...
KILL_WORKER_AT = 300  # ...and before one Celery worker is


class Api:
    """One ``labelq serve`` subprocess on ``port``, in its own process group."""

    def __init__(self, env: dict, port: int, log: Path) -> None:
        self.env, self.port, self.log = env, port, log
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 90.0) -> Api:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "cli.main", "serve", "--port", str(self.port),
             "--log-level", "warning"], cwd=ROOT, env=self.env, start_new_session=True,
            stdout=open(self.log, "ab"), stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
                conn.request("GET", "/healthz")
                if conn.getresponse().status == 200:
                    return self
            except OSError:
                pass
            if self.proc.poll() is not None:
                raise RuntimeError(f"labelq serve exited: {self.log.read_text()[-2000:]}")
            time.sleep(0.1)
        raise RuntimeError(f"labelq serve on {self.port} did not answer")

    def kill9(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)


class Client:
    """One annotator's client behind the load balancer: request ``i`` goes to port
    ``i mod n``; a request that got no answer (connection refused or cut) is sent again to
    the next port — replaying a label is idempotent (200, ``duplicate: true``)."""

    def __init__(self, ports: list[int], token: str) -> None:
        self.ports, self.i = ports, 0
        self.conns: dict[int, http.client.HTTPConnection] = {}
        self.hdr = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        self.retried = 0

    def post(self, path: str, body: bytes = b"") -> tuple[int, dict]:
        for attempt in range(300):
            port = self.ports[self.i % len(self.ports)]
            self.i += 1
            conn = self.conns.get(port)
            if conn is None:
                conn = self.conns[port] = http.client.HTTPConnection("127.0.0.1", port,
                                                                       timeout=30)
            try:
                conn.request("POST", path, body=body, headers=self.hdr)
                resp = conn.getresponse()
                return resp.status, json.loads(resp.read())
            except (OSError, http.client.HTTPException):
                conn.close()
                del self.conns[port]
                self.retried += 1
                time.sleep(0.05 if attempt < 20 else 0.2)
        raise RuntimeError(f"{path}: no API process answered")


def _annotator(j: int, ports: list[int], token: str, acked: list[str],
               declined: list[str], retried: list[int], errors: list[str]) -> None:
    """Pull and submit (5 % declines) until the service has nothing left for ``j``."""
    rng = np.random.default_rng(100 + j)
    c = Client(ports, token)
    try:
        status, got = c.post("/api/v1/assignments/next")
        a = got.get("assignment") if status == 200 else None
        while a is not None:
            aid = a["assignment_id"]
            if rng.random() < 0.05:
                status, got = c.post(f"/api/v1/assignments/{aid}/decline")
                # a decline is idempotent: its replay (the first answer lost with the
                # killed process) answers 200 too, with duplicate: true
                assert status == 200 and got["declined"] is True, (status, got)
                declined.append(aid)
                status, got = c.post("/api/v1/assignments/next")
                a = got.get("assignment") if status == 200 else None
                continue
            label = "abc"[int(rng.integers(3))]
            status, got = c.post(f"/api/v1/assignments/{aid}/label?next=true",
                                 json.dumps({"label": label}).encode())
            assert status == 200, (status, got)
            acked.append(aid)
            a = (got.get("next") or {}).get("assignment")
    except BaseException as exc:  # noqa: BLE001 - reported by the test
        errors.append(f"annotator {j}: {type(exc).__name__}: {exc}")
    retried.append(c.retried)


@pytest.mark.timeout(240)
def test_two_apis_two_workers_survive_kill9(redis_url, pg_url, celery_env, tmp_path):
    eng = engine_for(pg_url)
    import labelq.record.models  # noqa: F401 - registers the tables

    SQLModel.metadata.drop_all(eng)
    init_schema(eng)
    costs = [0.5, 1.0, 1.5, 1.0] * (N_ANNOTATORS // 4)
    caps = [80 if j % 4 == 0 else None for j in range(N_ANNOTATORS)]
    budget = 0.9 * N_TASKS * CAP * float(np.mean(costs))  # binds before the caps do
    with session_scope(eng) as s:
        p = create_project(s, "many", "a,b,c", policy="uniform", max_labels=CAP,
                           budget=budget, gold_schedule="fixed:rate=0.1")
        s.connection().execute(Task.__table__.insert(), [
            {"project_id": p.id, "seq": i, "external_id": f"t{i}", "category": "",
             "payload": {}, "is_gold": i >= N_TASKS,
             "gold_answer": "a" if i >= N_TASKS else None}
            for i in range(N_TASKS + 10)])
        tokens = [enroll_worker(s, p, f"m{j}", cost=costs[j], capacity=caps[j])[1]
                  for j in range(N_ANNOTATORS)]
        pid = p.id
    env = celery_env(pg_url)
    # the beat on the worker that stays; the other is the one killed
    workers = [CeleryWorker(env, 1, tmp_path / "celery0.log", beat=True),
               CeleryWorker(env, 1, tmp_path / "celery1.log", beat=False)]
    ports = [_free_port(), _free_port()]
    apis = [Api(env, port, tmp_path / f"api{port}.log") for port in ports]
    r = redislib.Redis.from_url(redis_url)
    try:
        for w in workers:
            w.start()
        for api in apis:
            api.start()
        acked: list[str] = []
        declined: list[str] = []
        errors: list[str] = []
        retried: list[int] = []
        threads = [threading.Thread(target=_annotator,
                                    args=(j, ports, tokens[j], acked, declined, retried,
                                          errors))
                   for j in range(N_ANNOTATORS)]
        t0 = time.monotonic()
        for t in threads:
            t.start()

        def wait_acked(n: int) -> None:
            while len(acked) < n and any(t.is_alive() for t in threads):
                time.sleep(0.01)
        wait_acked(KILL_API_AT)
        apis[1].kill9()
        killed_api_at = len(acked)
        # restarted, as a supervisor would (the clients find it again once it answers)
        restart = threading.Thread(target=apis[1].start)
        restart.start()
        wait_acked(KILL_WORKER_AT)
        # the worker killed had its share of the work (Celery logs each task it takes)
        assert b"received" in (tmp_path / "celery1.log").read_bytes()
        workers[1].kill9()
        killed_worker_at = len(acked)
        for t in threads:
            t.join(150)
        restart.join(60)
        assert not any(t.is_alive() for t in threads)
        assert not errors, errors[:3]
        # the kills came mid-run, not after it
        assert killed_api_at < killed_worker_at < len(acked)
        assert sum(retried) > 0  # clients did meet the killed API process
        # the worker left applies what is left (its beat wakes it every second)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with session_scope(eng) as s:
                if s.exec(select(Label.id).where(Label.applied_seq.is_(None))).first() is None:
                    break
            time.sleep(0.2)
        elapsed = time.monotonic() - t0
    finally:
        for api in apis:
            api.kill9()
        for w in workers:
            w.stop()
    settle(eng, r, pid)
    n = check_invariants(eng, r, pid, acked, cap=CAP, caps=caps, budget=budget)
    print(f"\n{n} labels, {len(declined)} declines in {elapsed:.1f} s; API killed after "
          f"{killed_api_at}, worker after {killed_worker_at}; {sum(retried)} requests retried")
    assert n >= 0.8 * budget / float(np.mean(costs))  # the run went on to the budget's end
