"""The API test stack: PostgreSQL (own schema), a flushed real Redis, a real Celery worker
subprocess and ``labelq serve`` (uvicorn) on a loopback port — started once for the
``tests/api`` package and stopped after it, so nothing keeps running into other tests.

Helpers: :func:`make_project` writes a project with tasks straight into SQL (operators do
that with ``labelq load``); :meth:`Stack.enroll` enrolls an annotator through the operator
API and returns its token.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from pipeline.conftest import ROOT, CeleryWorker  # the pipeline tests' real-worker helper
from sqlmodel import select

from labelq.record.db import session_scope
from labelq.record.models import Assignment, Task

IN_CI = bool(os.environ.get("CI"))
POSTGRES_URL = os.environ.get("LABELQ_TEST_POSTGRES_URL",
                              "postgresql+psycopg://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("LABELQ_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
OPERATOR_TOKEN = "operator-" + uuid.uuid4().hex


def unavailable(what: str, why: str) -> None:
    if IN_CI:
        pytest.fail(f"{what} is required in CI but unavailable: {why}", pytrace=False)
    pytest.skip(f"{what} unavailable: {why}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A real ``python -m cli.main serve`` subprocess on a free loopback port."""

    def __init__(self, env: dict[str, str], cwd: Path, logfile: Path,
                 args: tuple[str, ...] = ()) -> None:
        self.env, self.cwd, self.logfile, self.args = env, cwd, logfile, args
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 60.0) -> Server:
        with open(self.logfile, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "cli.main", "serve", "--host", "127.0.0.1",
                 "--port", str(self.port), "--log-level", "warning", *self.args],
                cwd=self.cwd, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"labelq serve exited: {self.logfile.read_text()[-3000:]}")
            try:
                if httpx.get(self.base + "/healthz", timeout=2).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"labelq serve not ready: {self.logfile.read_text()[-3000:]}")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)


@dataclass
class Stack:
    base: str
    operator_token: str
    database_url: str
    redis_url: str
    engine: Any
    redis: Any
    tmp: Path
    env: dict[str, str]

    def client(self, token: str | None = None) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.base, headers=headers, timeout=30)

    def operator(self) -> httpx.Client:
        return self.client(self.operator_token)

    def task_of(self, assignment_id: str) -> str:
        """The external id of the task an assignment is for (annotators are not shown it):
        from its live lease in Redis, else from the durable record once it has ended."""
        for key in self.redis.scan_iter(match=f"lq:*:lease:{assignment_id}"):
            from labelq.live.redis.keys import parse_key
            owner = parse_key(key)
            assert owner is not None and owner.project_id is not None, key
            project_id, seq = owner.project_id, int(self.redis.hget(key, "task"))
            where = (Task.project_id == project_id, Task.seq == seq)
            break
        else:
            where = (Assignment.id == assignment_id,)
        with session_scope(self.engine) as s:
            return s.exec(select(Task.external_id).join(Assignment, isouter=True,
                                                        onclause=Assignment.task_id == Task.id)
                          .where(*where)).first()

    def enroll(self, project: str, handle: str, **body: Any) -> str:
        with self.operator() as op:
            r = op.post(f"/api/v1/projects/{project}/workers", json={"handle": handle, **body})
        assert r.status_code == 201, r.text
        return r.json()["token"]


def make_project(stack: Stack, name: str, *, payloads: list[dict] | None = None,
                 n_tasks: int = 6, labels: str = "pos,neg,neutral", gold: int = 0,
                 max_labels: int | None = 2, policy: str = "uniform",
                 gold_schedule: str | None = None, budget: float | None = None) -> int:
    """A project with tasks ``t0..`` (payload ``{"text": ...}`` unless given) and gold
    questions ``g0..`` whose answer is the first label."""
    from labelq.record.db import session_scope
    from labelq.record.models import Task
    from labelq.record.projects import create_project

    payloads = payloads or [{"text": f"sentence number {i} of {name}"} for i in range(n_tasks)]
    with session_scope(stack.engine) as s:
        p = create_project(s, name, labels, policy=policy, max_labels=max_labels,
                           gold_schedule=gold_schedule, budget=budget)
        for i, payload in enumerate(payloads):
            s.add(Task(project_id=p.id, seq=i, external_id=f"t{i}", payload=payload))
        for i in range(gold):
            s.add(Task(project_id=p.id, seq=len(payloads) + i, external_id=f"g{i}",
                       is_gold=True, gold_answer=p.labels[0], payload={"text": f"gold {i}"}))
        return p.id


@pytest.fixture
def browser(tmp_path):
    """A headless Chromium with a fresh profile (closed after the test)."""
    from .cdp import Browser, find_chromium

    binary = find_chromium()
    if binary is None:
        unavailable("Chromium", "no chromium binary on PATH (apt-get install chromium)")
    b = Browser(binary, tmp_path / "profile")
    yield b
    b.close()


@pytest.fixture(scope="package")
def stack(tmp_path_factory):
    import redis as redis_lib
    import sqlalchemy

    from labelq.record.db import engine_for, init_schema

    tmp = tmp_path_factory.mktemp("api")
    schema = f"api_{uuid.uuid4().hex[:12]}"
    try:
        admin = sqlalchemy.create_engine(POSTGRES_URL)
        with admin.begin() as conn:
            conn.exec_driver_sql(f"CREATE SCHEMA {schema}")
    except Exception as exc:  # noqa: BLE001 - any connection failure means unavailable
        unavailable("PostgreSQL", str(exc).splitlines()[0])
    r = redis_lib.Redis.from_url(REDIS_URL)
    try:
        r.ping()
    except redis_lib.RedisError as exc:
        unavailable("Redis", str(exc))
    r.flushdb()
    sep = "&" if "?" in POSTGRES_URL else "?"
    db_url = f"{POSTGRES_URL}{sep}options=-csearch_path%3D{schema}"
    engine = engine_for(db_url)
    init_schema(engine)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LABELQ_")}
    env.update(LABELQ_DATABASE_URL=db_url, LABELQ_REDIS_URL=REDIS_URL,
               LABELQ_OPERATOR_TOKEN=OPERATOR_TOKEN, LABELQ_VISIBILITY_TIMEOUT="5",
               LABELQ_BEAT_SECONDS="2", PYTHONPATH=str(ROOT),
               LABELQ_HOOK_ALLOW_NETWORKS="127.0.0.1/32")  # (webhook receivers: loopback)
    worker = CeleryWorker(env, 1, tmp / "celery.log")
    server = Server(env, tmp, tmp / "serve.log")
    try:
        worker.start()
        server.start()
        yield Stack(server.base, OPERATOR_TOKEN, db_url, REDIS_URL, engine, r, tmp, env)
    finally:
        server.stop()
        worker.stop()
        engine.dispose()
        r.flushdb()
        r.close()
        with admin.begin() as conn:
            conn.exec_driver_sql(f"DROP SCHEMA {schema} CASCADE")
        admin.dispose()
