"""Two labelq databases on one Redis database (issue 35): every key names its database, so
loading, labelling, the applier, the beat's upkeep, a rebuild and a project's deletion in
one leave the other's hot state byte for byte as it was — with a project of the same id in
both (the collision that emptied a live queue when keys were ``lq:P:...``). And each database
has its own Celery queue by default (issue 43): a worker of one never takes the other's
wake-ups, and ``labelq check`` names the database each worker serves."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest
from click.testing import CliRunner
from sqlalchemy import func
from sqlmodel import select

from cli.main import cli
from labelq.live.applier import Applier
from labelq.live.hotstate import StateCache
from labelq.live.rebuild import rebuild_project
from labelq.live.redis.keys import Keys, home_key, parse_key, projects_key
from labelq.live.upkeep import maintain_project
from labelq.record.db import database_id, session_scope
from labelq.record.models import Label
from labelq.record.settings import Settings
from labelq.service import Service
from workers.main import create_app, queue_for

from .conftest import ROOT, RunWorker, make_project


def dump_of(r, database: str) -> dict[bytes, bytes]:
    """DUMP of every key of ``database`` (its projects' keys and its projects set)."""
    out = {}
    for key in r.scan_iter(match="lq:*", count=1000):
        owner = parse_key(key)
        if owner is not None and owner.database == database:
            out[key] = r.dump(key)
    return out


def label(s: Service, handles: list[str], n: int, rng) -> int:
    done = 0
    for i in range(n):
        h = handles[i % len(handles)]
        a = s.next_assignment(h)
        if a is None:
            continue
        s.submit(h, a.assignment_id, "ab"[int(rng.random() < 0.3)])
        done += 1
    return done


def test_two_databases_share_one_redis_db_without_touching_each_other(r, db_url, tmp_path,
                                                                     redis_url):
    rng = np.random.default_rng(3)
    # Given database B (SQLite or PostgreSQL) with a live project: labels applied, inboxes
    # filled, an open lease
    eng_b, pid_b = make_project(db_url, n_tasks=30, workers=3, max_labels=3)
    s_b = Service(eng_b, r, settings=Settings(database_url=db_url), worker_max_age=0)
    applier_b = Applier(eng_b, r, settings=s_b.settings, cache=StateCache(track_dirty=True))
    assert label(s_b, ["p-w0", "p-w1", "p-w2"], 12, rng) == 12
    applier_b.apply_pending(pid_b)
    s_b.next_assignment("p-w0")  # (held open across everything below)
    db_b = database_id(eng_b)
    before = dump_of(r, db_b)
    assert Keys(pid_b, db_b).meta.encode() in before and len(before) > 10

    # and database A, another SQLite file, whose project has the same id and name
    url_a = f"sqlite:///{tmp_path / 'a.db'}"
    eng_a, pid_a = make_project(url_a, n_tasks=10, workers=2, max_labels=3)
    db_a = database_id(eng_a)
    assert pid_a == pid_b and db_a != db_b
    env = {"LABELQ_DATABASE_URL": url_a, "LABELQ_REDIS_URL": redis_url}
    run = CliRunner().invoke

    # When A loads tasks, labels through its service, applies, runs the beat's upkeep,
    # rebuilds and finally deletes its project
    tasks = tmp_path / "more.jsonl"
    tasks.write_text("".join(json.dumps({"id": f"n{i}", "payload": {"i": i}}) + "\n"
                             for i in range(5)))
    res = run(cli, ["tasks", "load", "p", str(tasks)], env=env)
    assert res.exit_code == 0, res.output
    s_a = Service(eng_a, r, settings=Settings(database_url=url_a), worker_max_age=0)
    applier_a = Applier(eng_a, r, settings=s_a.settings, cache=StateCache(track_dirty=True))
    assert label(s_a, ["p-w0", "p-w1"], 8, rng) == 8
    applier_a.apply_pending(pid_a)
    maintain_project(applier_a, pid_a)
    assert r.sismember(projects_key(db_a), pid_a)
    assert rebuild_project(eng_a, r, pid_a)["labels"] == 8
    res = run(cli, ["rebuild", "p"], env=env)
    assert res.exit_code == 0, res.output
    with session_scope(eng_a) as ses:
        assert ses.exec(select(func.count()).select_from(Label)).one() == 8
    res = run(cli, ["project", "delete", "p", "--yes"], env=env)
    assert res.exit_code == 0, res.output

    # Then B's hot state is byte-identical, and A's is gone
    assert dump_of(r, db_b) == before
    assert list(r.scan_iter(match=Keys(pid_a, db_a).pattern())) == []
    assert not r.sismember(projects_key(db_a), pid_a)
    # (no key made outside a database's names: the Lua scripts build none of their own,
    # they get every key, and the prefix of the per-lease and per-worker ones, from Python)
    # (A's identity keeps its home, labelq.live.home: the one key a project's deletion
    # leaves, so that a copy of A is still told it is one)
    left = {key for key in r.scan_iter(match="lq:*")} - {home_key(db_a).encode()}
    owners = {parse_key(key) for key in left}
    assert {o.database if o else None for o in owners} == {db_b}
    assert r.exists(home_key(db_a))
    # and B goes on: its annotators get work, its applier folds their labels
    assert label(s_b, ["p-w1", "p-w2"], 4, rng) == 4
    applier_b.apply_pending(pid_b)
    assert int(r.hget(Keys(pid_b, db_b).meta, "built")) == 1


def test_check_reports_the_keys_of_other_databases(r, tmp_path, redis_url):
    # Given two databases with hot state on one Redis database, and a key of an earlier
    # labelq (no database id)
    urls = [f"sqlite:///{tmp_path / n}" for n in ("a.db", "b.db")]
    ids = []
    for url in urls:
        eng, pid = make_project(url, n_tasks=5, workers=1)
        Service(eng, r, settings=Settings(database_url=url)).next_assignment("p-w0")
        ids.append(database_id(eng))
    r.set("lq:1:spent", "0")
    others = dump_of(r, ids[1])
    # When the operator checks database A
    res = CliRunner().invoke(cli, ["check", "--timeout", "0.2", "-o", "json"],
                             env={"LABELQ_DATABASE_URL": urls[0],
                                  "LABELQ_REDIS_URL": redis_url})
    # Then the keys row names the other database and how many keys it has, touching none
    rows = {row["check"]: row for row in json.loads(res.output)}
    keys = rows["redis keys"]
    assert keys["database"] == ids[0] and keys["keys"] == len(dump_of(r, ids[0]))
    assert {"database": ids[1], "keys": len(others)} in keys["other_databases"]
    assert keys["legacy_keys"] >= 1
    assert ids[1] in keys["detail"] and "LABELQ_CELERY_QUEUE" in keys["detail"]
    assert dump_of(r, ids[1]) == others


def queue_dump(r, queue: str) -> dict[bytes, bytes]:
    """DUMP of every broker key of Celery queue ``queue`` and its long work queue: the
    lists of waiting messages (kombu's priority steps too) and their bindings."""
    return {key: r.dump(key) for key in r.scan_iter(match=f"*{queue}*", count=1000)}


class Snapshot:
    """Keys' DUMPs and their time to live: :meth:`assert_unchanged` says every key is byte
    for byte as it was, but for one whose TTL ran out meanwhile (``apply_wanted``, a
    wake-up flag of 30 s: it expires by itself, nobody deletes it), which may be gone."""

    def __init__(self, r, dumps: dict[bytes, bytes]) -> None:
        self.r, self.dumps, self.at = r, dumps, time.monotonic()
        self.ttls = {key: r.pttl(key) for key in dumps}

    def assert_unchanged(self, now: dict[bytes, bytes]) -> None:
        elapsed_ms = (time.monotonic() - self.at) * 1000 + 1000
        may_expire = {k for k, ttl in self.ttls.items() if 0 <= ttl <= elapsed_ms}
        assert {k: v for k, v in now.items() if k not in may_expire} == \
            {k: v for k, v in self.dumps.items() if k not in may_expire}
        for key in may_expire:
            assert key not in now or now[key] == self.dumps[key]


def notify_for(app, database: str):
    """``workers.tasks.notify_for`` on this test's broker: the wake-up of a project of
    ``database``, sent to that database's queue."""
    queue = queue_for("labelq.apply_labels", database)
    return lambda p: app.send_task("labelq.apply_labels", args=[p, database], queue=queue)


def unapplied(eng) -> int:
    with session_scope(eng) as ses:
        return ses.exec(select(func.count()).select_from(Label)
                        .where(Label.applied_seq.is_(None))).one()


def wait_for(cond, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)


@pytest.mark.timeout(300)
def test_default_settings_give_each_database_its_own_queue(r, db_url, tmp_path, redis_url,
                                                           celery_env, celery_worker):
    """Issue 43: two databases on one Redis with default settings shared one Celery queue,
    and a worker of one took the other's wake-ups off it and ignored them (30 labels sat
    unapplied)."""
    rng = np.random.default_rng(5)
    settings = Settings()  # (LABELQ_CELERY_QUEUE unset: the default)
    assert settings.celery_queue is None
    app = create_app(redis_url)
    # Given database B (SQLite or PostgreSQL) with a live project: labels applied, an open
    # lease, and three labels whose wake-ups wait on B's queue (no worker of B runs)
    eng_b, pid_b = make_project(db_url, n_tasks=30, workers=3, max_labels=3)
    db_b = database_id(eng_b)
    queue_b = settings.queue_of(db_b)
    s_b = Service(eng_b, r, settings=Settings(database_url=db_url), worker_max_age=0,
                  notify=notify_for(app, db_b))
    assert label(s_b, ["p-w0", "p-w1", "p-w2"], 9, rng) == 9
    Applier(eng_b, r, settings=s_b.settings, cache=StateCache()).apply_pending(pid_b)
    assert label(s_b, ["p-w0", "p-w1", "p-w2"], 3, rng) == 3
    s_b.next_assignment("p-w1")
    assert queue_b == f"labelq.{db_b}" and r.llen(queue_b) >= 1  # (B's wake-ups, waiting)
    before_b = Snapshot(r, {**dump_of(r, db_b), **queue_dump(r, queue_b)})
    # and database A, a SQLite file (its project has the same id), served by `labelq
    # run-worker` with its beat, given its database and Redis by options (the variables
    # name others: the options win)
    url_a = f"sqlite:///{tmp_path / 'a.db'}"
    eng_a, pid_a = make_project(url_a, n_tasks=40, workers=4, max_labels=3)
    db_a = database_id(eng_a)
    assert pid_a == pid_b and db_a != db_b
    env = celery_env(f"sqlite:///{tmp_path / 'nowhere.db'}", queue=None)
    env["LABELQ_REDIS_URL"] = "redis://127.0.0.1:1/0"  # (nothing listens there)
    log_a = tmp_path / "worker-a.log"
    with RunWorker(env, log_a, "--database-url", url_a, "--redis-url", redis_url, "-c", "1"):
        assert f"serving database {db_a} on queue labelq.{db_a}".encode() in log_a.read_bytes()
        # When A's annotators label through its service (wake-ups to A's queue), A's
        # worker applies and its beat runs A's upkeep
        s_a = Service(eng_a, r, settings=Settings(database_url=url_a), notify=notify_for(app, db_a))
        n = label(s_a, [f"p-w{j}" for j in range(4)], 40, rng)
        wait_for(lambda: unapplied(eng_a) == 0)
        time.sleep(2.5)  # (a few beats more)
    # Then A's labels are applied, B's three still wait (no wake-up of B reached A's
    # worker: it ignored none), and B's keys, its queue's included, are byte-identical
    with session_scope(eng_a) as ses:
        assert ses.exec(select(func.count()).select_from(Label)
                        .where(Label.applied_seq.is_not(None))).one() == n > 0
    assert unapplied(eng_b) == 3
    assert b"ignored" not in log_a.read_bytes()
    before_b.assert_unchanged({**dump_of(r, db_b), **queue_dump(r, queue_b)})
    assert r.sismember(projects_key(db_a), pid_a)

    # When B's own worker (default settings: B's queue) then runs, while A rests
    before_a = Snapshot(r, {**dump_of(r, db_a), **queue_dump(r, settings.queue_of(db_a))})
    assert before_a.dumps
    worker_b = celery_worker(celery_env(db_url, queue=None))
    assert f"labelq.{db_b}".encode() in worker_b.logfile.read_bytes()
    # Then B's waiting labels are applied (its wake-ups were kept for it), and new ones too
    wait_for(lambda: unapplied(eng_b) == 0)
    assert label(s_b, ["p-w0", "p-w2"], 4, rng) == 4
    wait_for(lambda: unapplied(eng_b) == 0)
    time.sleep(2.5)
    worker_b.stop()
    assert b"ignored" not in worker_b.logfile.read_bytes()
    # and A's keys, its queue's included, are byte-identical
    before_a.assert_unchanged({**dump_of(r, db_a), **queue_dump(r, settings.queue_of(db_a))})


@pytest.mark.timeout(240)
def test_check_names_the_database_each_worker_serves(r, tmp_path, redis_url, celery_env,
                                                     celery_worker):
    # Given databases A and B on one Redis, a worker of A on A's own queue (the default),
    # and another worker of A on the shared queue `labelq` (LABELQ_CELERY_QUEUE=labelq, as
    # deployments shared it before queues were per database)
    urls = [f"sqlite:///{tmp_path / n}" for n in ("a.db", "b.db")]
    ids = []
    for url in urls:
        eng, _pid = make_project(url, n_tasks=5, workers=1)
        ids.append(database_id(eng))
    db_a, db_b = ids
    celery_worker(celery_env(urls[0], queue=None), beat=False, name="own@%h")
    celery_worker(celery_env(urls[0], queue="labelq"), beat=False, name="shared@%h")
    # and `labelq run-worker`'s own helpers of A: its exports' and its webhooks' processes
    celery_worker(celery_env(urls[0], queue=None), beat=False, name="long@%h",
                  queues=f"labelq.{db_a}.long")
    celery_worker(celery_env(urls[0], queue=None), beat=False, name="hooks@%h",
                  queues=f"labelq.{db_a}.hooks")

    def check(url: str, **extra: str) -> tuple[int, dict]:
        res = CliRunner().invoke(cli, ["check", "--timeout", "3", "-o", "json"],
                                 env={"LABELQ_DATABASE_URL": url,
                                      "LABELQ_REDIS_URL": redis_url, **extra})
        rows = {row["check"]: row for row in json.loads(res.output)}
        return res.exit_code, rows["celery worker"]

    def verdicts(row: dict) -> dict[str, tuple[str, str]]:
        return {w["worker"].split("@")[0]: (w["database"], w["verdict"])
                for w in row["workers"]}

    # When A is checked: its own worker serves it, with its exports' and webhooks'
    # processes (not flagged); the one on the shared queue is flagged
    code, row = check(urls[0])
    assert row["ok"] and row["warning"] and row["queue"] == f"labelq.{db_a}"
    assert verdicts(row) == {"own": (db_a, "serves this database"),
                             "long": (db_a, "serves this database's exports"),
                             "hooks": (db_a, "serves this database's webhooks"),
                             "shared": (db_a, "serves this database on another queue")}
    assert row["detail"].count("serves this database but consumes") == 1  # shared@ only
    assert f"database {db_a}, queue labelq.{db_a}" in row["detail"]
    # When B is checked: no worker of B, so the check fails, naming A's workers
    code, row = check(urls[1])
    assert code == 9 and not row["ok"]
    assert "no Celery worker of this database" in row["detail"] and db_a in row["detail"]
    assert {v for _db, v in verdicts(row).values()} == {"serves another database"}
    # When B shares the queue `labelq` too: the worker of A there is no worker of B's
    # (it takes B's wake-ups and ignores them): a failure, not "ok"
    code, row = check(urls[1], LABELQ_CELERY_QUEUE="labelq")
    assert code == 9 and not row["ok"]
    assert verdicts(row)["shared"] == (db_a, "serves another database on this database's "
                                             "queue")
    assert f"serves database {db_a} but consumes this database's queue labelq" \
        in row["detail"]


@pytest.mark.parametrize("process", ["worker", "beat"])
def test_a_worker_or_beat_without_its_database_does_not_start(tmp_path, redis_url, process):
    # Given no database where the settings say (and no LABELQ_CELERY_QUEUE: its queue
    # would be the database's own)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LABELQ_")}
    env.update(LABELQ_DATABASE_URL=f"sqlite:///{tmp_path / 'none.db'}",
               LABELQ_REDIS_URL=redis_url, PYTHONPATH=str(ROOT))
    # When a bare Celery worker or beat starts, it exits at once, saying why
    args = ["-c", "1", "--without-gossip", "--without-mingle"] if process == "worker" \
        else ["-s", str(tmp_path / "beat")]
    res = subprocess.run([sys.executable, "-m", "celery", "-A", "workers.main", process,
                          *args], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=120)
    assert res.returncode != 0
    assert "cannot start" in res.stderr + res.stdout
    assert "labelq init" in res.stderr + res.stdout
    assert not (tmp_path / "none.db").exists()


def test_importing_the_workers_opens_no_database_until_a_send_needs_its_queue(tmp_path,
                                                                             redis_url):
    # Given a database (its id: its queue's name)
    url = f"sqlite:///{tmp_path / 'lazy.db'}"
    eng, _ = make_project(url, n_tasks=1, workers=1)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LABELQ_")}
    env.update(LABELQ_DATABASE_URL=url, LABELQ_REDIS_URL=redis_url, PYTHONPATH=str(ROOT))
    # When a process imports what the API, the CLI and `labelq check` import, then routes
    # a task it sends without naming a queue
    code = ("import workers.main as m, workers.client, workers.tasks, workers.jobs, "
            "workers.hooks, workers.serving, cli.main\n"
            "print(m._database.cache_info().currsize)\n"
            "print(m.app.amqp.router.route({}, 'labelq.export')['queue'].name)\n"
            "print(m._database.cache_info().currsize)\n")
    res = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    # Then the import read no database; the send read it once, for its database's queue
    assert res.stdout.split() == ["0", f"labelq.{database_id(eng)}.long", "1"]
