"""Live pipeline benchmark: next-assignment latency and end-to-end labels/s.

    python bench/pipeline.py --sizes 10000,100000,1000000 --procs 1,2,4

* latency: ``Service.next_assignment`` (worker lookup cached, policy state cached, top-K
  from ``pending``, eligibility from Redis, the RESERVE script, the task row from SQL) over
  ``--requests`` calls per size, on a project of N pending tasks (SQLite, uniform policy);
* throughput: 8 annotator threads pull and submit (durable in SQL before the OK) while
  Celery worker subprocesses (1, 2, 4 processes) apply the labels; labels/s is counted from
  the first submission to the moment the last label is applied.

Needs a real Redis (``LABELQ_REDIS_URL``, default db 14 of localhost), which it flushes.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._report import command_line, machine, write_section  # noqa: E402


def project(url, n, workers=8, max_labels=3):
    from labelq.db import engine_for, init_schema, session_scope
    from labelq.models import Task
    from labelq.projects import create_project, enroll_worker
    eng = engine_for(url)
    init_schema(eng)
    with session_scope(eng) as s:
        p = create_project(s, "bench", "a,b", policy="uniform", max_labels=max_labels)
        conn = s.connection()
        for i in range(0, n, 50_000):
            conn.execute(Task.__table__.insert(), [
                {"project_id": p.id, "seq": j, "external_id": f"t{j}", "category": "",
                 "payload": {}, "is_gold": False, "gold_answer": None}
                for j in range(i, min(n, i + 50_000))])
        for j in range(workers):
            enroll_worker(s, p, f"b{j}")
        return eng, p.id


def latency(redis_url, n, requests):
    import redis
    from labelq.queue.rebuild import rebuild_project
    from labelq.service import Service
    from labelq.settings import Settings
    r = redis.Redis.from_url(redis_url)
    r.flushdb()
    d = tempfile.mkdtemp()
    url = f"sqlite:///{d}/b.db"
    eng, pid = project(url, n)
    t = time.perf_counter()
    rebuild_project(eng, r, pid)
    build = time.perf_counter() - t
    svc = Service(eng, r, settings=Settings(database_url=url), state_max_age=3600,
                  worker_max_age=3600)
    svc.next_assignment("b0")  # warm the caches
    out = []
    for i in range(requests):
        t = time.perf_counter()
        a = svc.next_assignment(f"b{i % 8}")
        out.append(time.perf_counter() - t)
        assert a is not None
    ms = np.array(out) * 1000
    return build, float(np.percentile(ms, 50)), float(np.percentile(ms, 99))


def throughput(redis_url, procs, n_tasks, seconds):
    import redis
    from sqlalchemy import func
    from sqlmodel import select
    from labelq.db import session_scope
    from labelq.models import Label
    from labelq.service import Service
    from labelq.settings import Settings
    from workers.main import create_app
    r = redis.Redis.from_url(redis_url)
    r.flushdb()
    d = tempfile.mkdtemp()
    url = f"sqlite:///{d}/b.db"
    eng, pid = project(url, n_tasks, workers=8)
    env = {**os.environ, "LABELQ_DATABASE_URL": url, "LABELQ_REDIS_URL": redis_url,
           "LABELQ_CELERY_QUEUE": "labelq-bench", "PYTHONPATH": str(ROOT)}
    log = Path(d) / "celery.log"
    proc = subprocess.Popen([sys.executable, "-m", "celery", "-A", "workers.main", "worker",
                             "-c", str(procs), "-Q", "labelq-bench", "--loglevel", "info", "--without-gossip",
                             "--without-mingle", "--without-heartbeat"], cwd=ROOT, env=env,
                            stdout=open(log, "wb"), stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while b"ready." not in log.read_bytes():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"celery worker did not start: {log.read_text()[-1000:]}")
            time.sleep(0.1)
        app = create_app(redis_url)
        svc = Service(eng, r, settings=Settings(database_url=url),
                      notify=lambda p: app.send_task("labelq.apply_labels", args=[p],
                                                     queue="labelq-bench"))
        stop = time.monotonic() + seconds
        counts = [0] * 8

        def annotator(j):
            while time.monotonic() < stop:
                a = svc.next_assignment(f"b{j}")
                if a is None:
                    return
                svc.submit(f"b{j}", a.assignment_id, "a")
                counts[j] += 1
        t0 = time.monotonic()
        ts = [threading.Thread(target=annotator, args=(j,)) for j in range(8)]
        [t.start() for t in ts]
        [t.join() for t in ts]
        t_sub = time.monotonic() - t0
        while True:
            with session_scope(eng) as s:
                left = s.exec(select(func.count()).select_from(Label)
                              .where(Label.applied_seq.is_(None))).one()
            if left == 0:
                break
            time.sleep(0.05)
        total = sum(counts)
        return total, t_sub, time.monotonic() - t0
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--procs", default="1,2,4")
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--redis-url", default=os.environ.get("LABELQ_REDIS_URL",
                                                          "redis://127.0.0.1:6379/14"))
    args = ap.parse_args()
    lines = ["## Live pipeline (`bench/pipeline.py`)", "", f"Command: `{command_line()}`", "",
             f"Machine: {machine()}.", "",
             "Next-assignment latency (`Service.next_assignment`, SQLite record, uniform policy):",
             "", "| pending tasks | hot-state build (s) | p50 (ms) | p99 (ms) |",
             "|---:|---:|---:|---:|"]
    for n in [int(x) for x in args.sizes.split(",") if x]:
        build, p50, p99 = latency(args.redis_url, n, args.requests)
        lines.append(f"| {n:,} | {build:.1f} | {p50:.2f} | {p99:.2f} |")
        print(lines[-1], flush=True)
    lines += ["", "End-to-end: 8 annotator threads in one process (next + submit, durable in "
              "SQLite before the OK), Celery applies the labels; labels/s from the first "
              "submission until the last label is applied:", "",
              "| Celery processes | labels | submit phase (s) | until all applied (s) | labels/s |",
              "|---:|---:|---:|---:|---:|"]
    for p in [int(x) for x in args.procs.split(",") if x]:
        total, t_sub, t_all = throughput(args.redis_url, p, 20_000, args.seconds)
        lines.append(f"| {p} | {total} | {t_sub:.1f} | {t_all:.1f} | {total / t_all:.0f} |")
        print(lines[-1], flush=True)
    write_section("pipeline", "\n".join(lines))


if __name__ == "__main__":
    main()
