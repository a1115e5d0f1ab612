"""Export jobs per database, bounded, off the label path (issue 45): an export job is
kept under its database's prefix (another database's operator or CLI never finds it); the
same export asked for again while it is queued or running returns that job, and a project
has at most ``EXPORTS_PER_PROJECT`` distinct ones queued or running; with 150 exports
queued, a label submitted meanwhile is applied within 5 s by ``labelq run-worker`` (real
Celery processes). Real Redis and SQLite."""

from __future__ import annotations

import os
import time
import uuid

import pytest
from sqlmodel import select

from labelq.errors import NotFound, TooManyJobs
from labelq.jobs import EXPORTS_PER_PROJECT, create_export_job, get_job, run_export_job
from labelq.live.redis.keys import parse_key
from labelq.record.db import database_id, engine_for, init_schema, session_scope
from labelq.record.models import Assignment, Label, Task, utcnow
from labelq.record.projects import create_project, enroll_worker
from labelq.record.settings import Settings
from labelq.service import Service

from .conftest import ROOT, RunWorker, make_project


def _db(tmp_path, name: str) -> str:
    url = f"sqlite:///{tmp_path / name}"
    init_schema(engine_for(url))
    return url


def test_a_job_is_its_databases_only(r, tmp_path):
    # Given two databases sharing one Redis, each with a project named "p"
    a, b = _db(tmp_path, "a.db"), _db(tmp_path, "b.db")
    make_project(a, n_tasks=3, workers=1)
    make_project(b, n_tasks=3, workers=1)
    da, db = database_id(engine_for(a)), database_id(engine_for(b))
    # When A queues an export job and runs it
    job_id, new = create_export_job(r, da, "p", out=str(tmp_path / "a.csv"))
    assert new and run_export_job(engine_for(a), r, job_id)["state"] == "done"
    # Then A finds it, B does not (not to read, not to run)
    assert get_job(r, da, job_id)["state"] == "done"
    with pytest.raises(NotFound):
        get_job(r, db, job_id)
    with pytest.raises(NotFound):
        run_export_job(engine_for(b), r, job_id)
    # and every key of it is A's
    owners = {parse_key(k) for k in r.scan_iter(match="lq:*job*")}
    assert owners and {o.database for o in owners if o is not None} == {da}


def test_the_same_export_returns_its_job_and_distinct_ones_are_bounded(r, tmp_path):
    url = _db(tmp_path, "a.db")
    make_project(url, n_tasks=3, workers=1)
    make_project(url, n_tasks=3, workers=1, name="q")
    d = database_id(engine_for(url))
    out = str(tmp_path / "x")
    # the same export while queued: the same job (the server chose the file: any will do)
    first = create_export_job(r, d, "p", out=out + "1", method="mv", any_out=True)
    again = create_export_job(r, d, "p", out=out + "2", method="mv", any_out=True)
    assert first.new and not again.new and again.job_id == first.job_id
    # a file named by the caller is part of the export asked for
    other_file = create_export_job(r, d, "p", out=out + "3", method="mv")
    assert other_file.new
    kinds = [{"method": "ds"}, {"raw": True}, {"fmt": "jsonl"}]
    made = [create_export_job(r, d, "p", out=out + str(i), any_out=True, **kw)
            for i, kw in enumerate(kinds[:EXPORTS_PER_PROJECT - 2])]
    assert all(m.new for m in made)
    # one more distinct export of the project: refused, with nothing written
    before = r.hgetall(f"lq:{{{d}}}:exports")
    with pytest.raises(TooManyJobs) as got:
        create_export_job(r, d, "p", out=out + "9", method="glad", any_out=True)
    assert got.value.http_status == 429 and got.value.code == "too_many_exports"
    assert "at most" in got.value.message
    assert r.hgetall(f"lq:{{{d}}}:exports") == before
    # ... but a request for a queued one still returns it, and another project has its own
    assert create_export_job(r, d, "p", out=out, method="mv", any_out=True) == (
        first.job_id, False)
    assert create_export_job(r, d, "q", out=out + "q", method="mv", any_out=True).new
    # When one ends, its place is free, and asking for it again makes a new job
    assert run_export_job(engine_for(url), r, first.job_id)["state"] == "done"
    fresh = create_export_job(r, d, "p", out=out + "8", method="mv", any_out=True)
    assert fresh.new and fresh.job_id != first.job_id
    # a failed job leaves the list too (its file cannot be written: a folder is a file)
    (tmp_path / "afile").write_text("")
    bad = create_export_job(r, d, "q", out=str(tmp_path / "afile" / "x.csv"))
    assert bad.new
    with pytest.raises(OSError):
        run_export_job(engine_for(url), r, bad.job_id)
    assert get_job(r, d, bad.job_id)["state"] == "failed"
    assert bad.job_id.encode() not in r.hvals(f"lq:{{{d}}}:exports")


def _projects(url: str, n: int, tasks: int = 300) -> None:
    """``n`` more projects ``e0..`` with ``tasks`` tasks each and 3 labels on every task
    (written to the record directly: they are what the exports read)."""
    import random

    eng = engine_for(url)
    rng = random.Random(0)
    for i in range(n):
        with session_scope(eng) as s:
            p = create_project(s, f"e{i}", "a,b", policy="uniform")
            ts = [Task(project_id=p.id, seq=t, external_id=f"t{t}") for t in range(tasks)]
            s.add_all(ts)
            ws = [enroll_worker(s, p, f"e{i}-w{j}")[0] for j in range(3)]
            s.flush()
            now = utcnow()
            for t in ts:
                for w in ws:
                    aid = f"e{i}-{t.seq}-{w.seq}"
                    s.add(Assignment(id=aid, project_id=p.id, task_id=t.id, worker_id=w.id,
                                     expires=now, state="submitted"))
                    s.add(Label(assignment_id=aid, project_id=p.id, task_id=t.id,
                                worker_id=w.id, value=rng.choice("ab")))


def test_a_label_is_applied_within_5s_with_150_exports_queued(r, redis_url, tmp_path):
    # Given `labelq run-worker` (the labels' worker, and its long work process)
    url = _db(tmp_path, "big.db")
    eng, pid = make_project(url, n_tasks=20, workers=2)
    n_projects = -(-150 // EXPORTS_PER_PROJECT)
    _projects(url, n_projects)
    queue = f"labelq-ex-{uuid.uuid4().hex[:8]}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("LABELQ_")}
    env.update(LABELQ_REDIS_URL=redis_url, LABELQ_DATABASE_URL=url, LABELQ_CELERY_QUEUE=queue,
               PYTHONPATH=str(ROOT), LABELQ_BEAT_SECONDS="1", LABELQ_VISIBILITY_TIMEOUT="30")
    with RunWorker(env, tmp_path / "worker.log", "-c", "1"):
        # When 150 exports are queued (the CLI's way: `labelq export --background`)
        from workers.main import create_app
        celery = create_app(redis_url, Settings(redis_url=redis_url, celery_queue=queue))
        d = database_id(eng)
        queued = []
        for i in range(150):
            job = create_export_job(r, d, f"e{i // EXPORTS_PER_PROJECT}",
                                    out=str(tmp_path / "out" / f"{i}.csv"),
                                    method=["mv", "ds", "glad", "auto"][i % 4], any_out=True)
            assert job.new
            celery.send_task("labelq.export", args=[job.job_id, d],
                             queue=f"{queue}.long")
            queued.append(job.job_id)
        # and, once the long work process is busy with them, a label is submitted
        deadline = time.monotonic() + 60
        while get_job(r, d, queued[0])["state"] == "queued":
            assert time.monotonic() < deadline, "no export started"
            time.sleep(0.1)
        from workers.tasks import notify_for
        svc = Service(eng, r, settings=Settings(database_url=url, redis_url=redis_url,
                                                celery_queue=queue),
                      notify=lambda p: celery.send_task("labelq.apply_labels", args=[p, d],
                                                        queue=queue))
        assert notify_for  # (the service's hook names the database the same way)
        a = svc.next_assignment("p-w0")
        t0 = time.monotonic()
        svc.submit("p-w0", a.assignment_id, "a")
        # Then it is applied within 5 s, while most exports still wait
        while True:
            with session_scope(eng) as s:
                applied = s.exec(select(Label.applied_seq)
                                 .where(Label.assignment_id == a.assignment_id)).one()
            if applied is not None:
                break
            assert time.monotonic() - t0 < 5, "the label waited behind the exports"
            time.sleep(0.05)
        took = time.monotonic() - t0
        left = sum(get_job(r, d, j)["state"] == "queued" for j in queued)
        assert took < 5 and left >= 50, (took, left)
