"""Fixtures of the pipeline tests: a project in SQL, a real flushed Redis, a real Celery
worker subprocess (no eager mode)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis as redis_lib

from bench._procs import stop_groups
from labelq.record.db import database_id, engine_for, init_schema, session_scope
from labelq.record.models import Task
from labelq.record.projects import create_project, enroll_worker

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def r(redis_url):
    import redis
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


@pytest.fixture
def sqlite_url(tmp_path) -> str:
    """A new SQLite database, initialised as ``labelq init`` leaves it (no other command
    creates one)."""
    url = f"sqlite:///{tmp_path / 'labelq.db'}"
    init_schema(engine_for(url))
    return url


def make_project(url: str, *, n_tasks=40, n_gold=0, workers=3, max_labels=None, budget=None,
                 capacity=None, cost=1.0, policy="uniform", gold_schedule=None,
                 quality=None, name="p", labels="a,b", categories=("x",)):
    """Create a project with tasks ``t0..``, gold ``g0..`` (answer = first label) and
    workers ``w0..``; returns (engine, project id)."""
    eng = engine_for(url)
    init_schema(eng)
    with session_scope(eng) as s:
        p = create_project(s, name, labels, policy=policy, max_labels=max_labels,
                           budget=budget, gold_schedule=gold_schedule, quality=quality)
        first = p.labels[0]
        for i in range(n_tasks):
            s.add(Task(project_id=p.id, seq=i, external_id=f"t{i}",
                       category=categories[i % len(categories)]))
        for i in range(n_gold):
            s.add(Task(project_id=p.id, seq=n_tasks + i, external_id=f"g{i}", is_gold=True,
                       gold_answer=first, category=categories[i % len(categories)]))
        for j in range(workers):
            enroll_worker(s, p, f"{name}-w{j}", capacity=capacity, cost=cost)
        return eng, p.id


def hot_sets(r, pid: int, eng) -> dict:
    """What a rebuild recomputes (and gold marking must keep in step): open and gold tasks, the
    workers' issued counts (gold, per category, gold records) of project ``pid`` of the
    database behind ``eng``."""
    from labelq.live.redis.keys import Keys
    k = Keys(pid, database_id(eng))
    return {"pending": sorted(int(t) for t in r.zrange(k.pending, 0, -1)),
            "parked": sorted(int(t) for t in r.zrange(k.parked, 0, -1)),
            "gold": sorted(int(t) for t in r.smembers(k.gold)),
            "nissued": {f.decode(): int(v) for f, v in r.hgetall(k.nissued).items()}}


def worker_queues(env: dict) -> str:
    """The queues a worker with ``env`` serves, as ``labelq run-worker`` picks them: its
    database's (``LABELQ_CELERY_QUEUE``, else ``labelq.<database id>``) and its long work
    queue."""
    from labelq.record.settings import Settings
    queue = env.get("LABELQ_CELERY_QUEUE") or Settings().queue_of(
        database_id(engine_for(Settings(database_url=env["LABELQ_DATABASE_URL"])
                               .sqlalchemy_url)))
    return f"{queue},{queue}.long"


class CeleryWorker:
    """A real ``celery -A workers.main worker`` subprocess."""

    def __init__(self, env: dict, concurrency: int = 1, logfile: Path | None = None,
                 beat: bool = True, queues: str | None = None,
                 name: str | None = None) -> None:
        self.env, self.concurrency, self.logfile, self.beat = env, concurrency, logfile, beat
        self.queues, self.name = queues or worker_queues(env), name
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 60.0) -> CeleryWorker:
        log = open(self.logfile, "ab") if self.logfile else subprocess.DEVNULL
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "workers.main", "worker",
             # the labels' queue and the long work queue (exports) both: a worker may
             # serve both (``labelq run-worker`` gives the long work its own process)
             "-Q", self.queues,
             "-c", str(self.concurrency), "--pool", "prefork", "--loglevel", "info",
             "--without-gossip", "--without-mingle", "--without-heartbeat",
             *(["--beat", "--schedule", str(self.logfile) + ".beat"] if self.beat else []),
             *(["-n", self.name] if self.name else [])],
            cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.logfile and b"ready." in self.logfile.read_bytes():
                return self
            if self.proc.poll() is not None:
                raise RuntimeError(f"celery worker exited: {self.logfile.read_text()[-2000:]}")
            time.sleep(0.1)
        raise RuntimeError("celery worker did not get ready")

    def kill9(self) -> None:
        """SIGKILL the whole process group (main process and its pool children)."""
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        """A warm shutdown: SIGTERM to the main process only, which lets the running task
        finish (``bench._procs.stop_groups``, ``warm``), then anything of its group left."""
        if self.proc is not None:
            stop_groups([self.proc], warm=True)


class RunWorker:
    """``labelq run-worker`` as an operator runs it (it execs into Celery's label worker;
    its long work and hooks processes are its children), in a process group of its own; a
    context manager. Ready once each of its Celery processes says so (the labels', and the
    long work's and the hooks' unless ``--no-long-work``/``--no-hooks``); stopped as a
    supervisor stops it: SIGTERM to the main process (its children follow), then anything
    of its group left."""

    def __init__(self, env: dict, log: Path, *args: str, timeout: float = 120.0) -> None:
        self.env, self.log, self.args, self.timeout = env, log, args, timeout
        self.processes = 1 + ("--no-long-work" not in args) + ("--no-hooks" not in args)
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> RunWorker:
        with open(self.log, "wb") as fh:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "cli.main", "run-worker", *self.args],
                cwd=self.log.parent, env=self.env, stdout=fh, stderr=subprocess.STDOUT,
                start_new_session=True)
        deadline = time.monotonic() + self.timeout
        while self.log.read_bytes().count(b"ready.") < self.processes:
            if not self.running() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"labelq run-worker did not get ready: {self.tail()}")
            time.sleep(0.2)
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def tail(self, n: int = 3000) -> str:
        """The end of its log (for an assertion's message)."""
        return self.log.read_text(errors="replace")[-n:]

    def stop(self) -> None:
        if self.proc is not None:
            stop_groups([self.proc], warm=True)


@pytest.fixture
def celery_env(redis_url, tmp_path):
    def make(database_url: str, queue: str | None = "labelq") -> dict:
        """A worker's environment; ``queue``: its LABELQ_CELERY_QUEUE (the tests that send
        to ``labelq`` themselves), ``None``: unset, the database's own queue."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("LABELQ_")}
        env.update(LABELQ_REDIS_URL=redis_url, LABELQ_DATABASE_URL=database_url,
                   PYTHONPATH=str(ROOT), LABELQ_VISIBILITY_TIMEOUT="5",
                   LABELQ_BEAT_SECONDS="1",
                   # the tests' webhook receivers listen on loopback (labelq/hooknet.py)
                   LABELQ_HOOK_ALLOW_NETWORKS="127.0.0.1/32")
        if queue is not None:
            env["LABELQ_CELERY_QUEUE"] = queue
        return env
    return make


@pytest.fixture
def celery_worker(tmp_path):
    started: list[CeleryWorker] = []

    def start(env: dict, concurrency: int = 1, **options) -> CeleryWorker:
        w = CeleryWorker(env, concurrency, tmp_path / f"celery{len(started)}.log",
                         **options).start()
        started.append(w)
        return w
    yield start
    for w in started:
        w.stop()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PrivateRedis:
    """``redis-server`` on its own free port and data directory, restartable, its data
    kept across restarts (append-only file; ``SHUTDOWN`` fsyncs it). For tests that stop
    Redis: never the shared server."""

    def __init__(self, path) -> None:
        self.port, self.path = _free_port(), path
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
             "--dir", str(self.path), "--appendonly", "yes", "--save", ""],
            stdout=open(self.path / "redis.log", "ab"), stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                if redis_lib.Redis(port=self.port).ping():
                    return
            except redis_lib.ConnectionError:
                time.sleep(0.05)
        raise RuntimeError("private redis-server did not start")

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            redis_lib.Redis(port=self.port).shutdown(nosave=False)
        except redis_lib.ConnectionError:
            pass  # the server closes the connection as it exits
        self.proc.wait(10)


@pytest.fixture
def private_redis(tmp_path):
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server not installed")
    d = tmp_path / "redis"
    d.mkdir()
    server = PrivateRedis(d)
    server.start()
    yield server
    if server.proc is not None and server.proc.poll() is None:
        server.proc.terminate()
        server.proc.wait(10)
