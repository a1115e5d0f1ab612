"""Two labelq databases on one Redis database (issue 35): every key names its database, so
loading, labelling, the applier, the beat's upkeep, a rebuild and a project's deletion in
one leave the other's hot state byte for byte as it was — with a project of the same id in
both (the collision that emptied a live queue when keys were ``lq:P:...``)."""

from __future__ import annotations

import json
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
from workers.main import create_app

from .conftest import make_project


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


@pytest.mark.timeout(240)
def test_a_celery_worker_and_its_beat_touch_only_their_own_database(r, db_url, tmp_path,
                                                                    redis_url, celery_env,
                                                                    celery_worker):
    rng = np.random.default_rng(5)
    # Given database B with a live project (labels applied, an open lease, and three labels
    # waiting for an applier that is not running)
    eng_b, pid_b = make_project(db_url, n_tasks=30, workers=3, max_labels=3)
    s_b = Service(eng_b, r, settings=Settings(database_url=db_url), worker_max_age=0)
    assert label(s_b, ["p-w0", "p-w1", "p-w2"], 9, rng) == 9
    Applier(eng_b, r, settings=s_b.settings, cache=StateCache()).apply_pending(pid_b)
    assert label(s_b, ["p-w0", "p-w1", "p-w2"], 3, rng) == 3
    s_b.next_assignment("p-w1")
    db_b = database_id(eng_b)
    before = dump_of(r, db_b)
    # and database A (its project has the same id) served by a real Celery worker with its
    # beat, which wakes A's appliers through the shared Redis
    url_a = f"sqlite:///{tmp_path / 'a.db'}"
    eng_a, pid_a = make_project(url_a, n_tasks=40, workers=4, max_labels=3)
    db_a = database_id(eng_a)
    assert pid_a == pid_b
    worker = celery_worker(celery_env(url_a))
    app = create_app(redis_url)

    def send(project_id: int, database: str) -> None:
        app.send_task("labelq.apply_labels", args=[project_id, database], queue="labelq")

    s_a = Service(eng_a, r, settings=Settings(database_url=url_a),
                  notify=lambda p: send(p, db_a))
    # When A's annotators label through its service, its worker applies, its beat runs
    # its upkeep, and a wake-up of B's project lands in A's worker's queue
    n = label(s_a, [f"p-w{j}" for j in range(4)], 40, rng)
    send(pid_b, db_b)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        with session_scope(eng_a) as ses:
            left = ses.exec(select(func.count()).select_from(Label)
                            .where(Label.applied_seq.is_(None))).one()
        if left == 0 and b"ignored" in worker.logfile.read_bytes():
            break
        time.sleep(0.2)
    time.sleep(2.5)  # (a few beats more)
    worker.stop()
    # Then A's labels are applied, B's three still wait (A's worker left B's wake-up
    # alone, saying so), and B's hot state is byte-identical
    with session_scope(eng_a) as ses:
        assert ses.exec(select(func.count()).select_from(Label)
                        .where(Label.applied_seq.is_not(None))).one() == n > 0
    with session_scope(eng_b) as ses:
        assert ses.exec(select(func.count()).select_from(Label)
                        .where(Label.applied_seq.is_(None))).one() == 3
    assert b"ignored" in worker.logfile.read_bytes()
    assert dump_of(r, db_b) == before
    assert r.sismember(projects_key(db_a), pid_a)
