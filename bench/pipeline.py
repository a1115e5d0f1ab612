"""Live pipeline benchmark: next-assignment latency and end-to-end labels/s.

    python bench/pipeline.py --sizes 10000,100000,1000000 --procs 1,2,4

* latency of ``Service.next_assignment`` on a project of N pending tasks (SQLite record,
  uniform policy), over ``--requests`` calls per size, on its two paths:
  - *inbox*: the worker's inbox holds reservations the applier made
    (``refill_project``, not timed): ``POP_INBOX`` (one Redis round trip, the lease starts
    now) and the task row from SQL;
  - *decide at once*: the inbox is empty (a worker's first request, or an applier behind):
    the policy decides in the calling process (``CANDIDATES`` + ``RESERVE`` scripts);
* throughput: ``--annotators`` simulated annotators spread over ``--load-procs`` processes
  (so the load generator is not one GIL) pull and submit — every label committed to SQLite
  (WAL, ``synchronous=NORMAL``), or with ``--database postgresql://…`` to PostgreSQL, before
  the OK — while a real Celery worker with 1, 2, 4
  processes applies the labels and refills the inboxes; labels/s is counted from the first
  request to the moment the last label is folded into the posterior (``applied_seq`` set).

Needs a real Redis (``LABELQ_REDIS_URL``, default db 14 of localhost), which it flushes.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# (cpu_seconds: named here too, as peers.py, scaling.py and through_api.py import it)
from bench._procs import cpu_seconds, start_load, stop_groups  # noqa: E402
from bench._procs import start_celery as _start_celery  # noqa: E402
from bench._report import command_line, machine, write_section  # noqa: E402


def fresh_database(database: str, d: str):
    """(URL, cleanup) of an empty record: a SQLite file in ``d`` (``sqlite``), or a fresh
    schema in the PostgreSQL database at ``database`` (a ``postgresql://`` URL)."""
    if database == "sqlite":
        return f"sqlite:///{d}/b.db", lambda: None
    from sqlalchemy import create_engine
    schema = f"labelq_bench_{os.getpid()}"
    admin = create_engine(database.replace("postgresql://", "postgresql+psycopg://", 1))
    with admin.begin() as conn:
        conn.exec_driver_sql(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        conn.exec_driver_sql(f"CREATE SCHEMA {schema}")

    def cleanup():
        with admin.begin() as conn:
            conn.exec_driver_sql(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        admin.dispose()
    sep = "&" if "?" in database else "?"
    return f"{database}{sep}options=-csearch_path%3D{schema}", cleanup


def project(url, n, workers=8, max_labels=3):
    from labelq.record.db import engine_for, init_schema, session_scope
    from labelq.record.models import Task
    from labelq.record.projects import create_project, enroll_worker
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

    from labelq.live.applier import Applier
    from labelq.live.hotstate import StateCache
    from labelq.live.rebuild import rebuild_project
    from labelq.live.redis.keys import Keys
    from labelq.record.settings import Settings
    from labelq.service import Service
    r = redis.Redis.from_url(redis_url)
    r.flushdb()
    d = tempfile.mkdtemp()
    url = f"sqlite:///{d}/b.db"
    eng, pid = project(url, n)
    t = time.perf_counter()
    rebuild_project(eng, r, pid)
    build = time.perf_counter() - t
    # each worker takes many assignments without answering them: the bound on open
    # assignments (LABELQ_MAX_OPEN, 1 by default) is lifted, or next would repeat the first
    svc = Service(eng, r, settings=Settings(database_url=url, max_open=1 << 30),
                  state_max_age=3600, worker_max_age=3600)
    for j in range(8):
        svc.next_assignment(f"b{j}")  # warm the caches; every worker is active
    from labelq.record.db import database_id
    k = Keys(pid, database_id(eng))
    decide_ms, inbox_ms = [], []
    applier = Applier(eng, r, cache=StateCache())  # one applier process (its pace meter)
    while len(decide_ms) < requests or len(inbox_ms) < requests:
        # decide at once: inboxes emptied, their held reservations returned to the pool
        # (as the reaper does when a hold runs out)
        for j in range(8):
            for aid in r.lrange(k.inbox(j), 0, -1):
                svc.scripts.release(k, aid.decode())
            r.delete(k.inbox(j))
        for j in range(8):
            t = time.perf_counter()
            a = svc.next_assignment(f"b{j}")
            decide_ms.append(time.perf_counter() - t)
            assert a is not None
        # from the inbox the applier filled (untimed)
        applier.refill_project(pid)
        for _ in range(5):
            for j in range(8):
                if not r.llen(k.inbox(j)):
                    continue
                t = time.perf_counter()
                a = svc.next_assignment(f"b{j}")
                inbox_ms.append(time.perf_counter() - t)
                assert a is not None
    out = [build]
    for ms in (np.array(inbox_ms[:requests]) * 1000, np.array(decide_ms[:requests]) * 1000):
        out += [float(np.percentile(ms, 50)), float(np.percentile(ms, 99))]
    return tuple(out)


def start_celery(env: dict, procs: int, log: Path) -> subprocess.Popen:
    """A real Celery worker (``procs`` processes, queue ``labelq-bench``) in its own process
    group, once it says it is ready (:func:`bench._procs.start_celery`)."""
    return _start_celery(env, log, procs=procs, queue="labelq-bench", timeout=120)


def wait_applied(eng) -> None:
    """Return once every label in the record is folded into the posterior."""
    from sqlalchemy import func
    from sqlmodel import select

    from labelq.record.db import session_scope
    from labelq.record.models import Label
    while True:
        with session_scope(eng) as s:
            left = s.exec(select(func.count()).select_from(Label)
                          .where(Label.applied_seq.is_(None))).one()
        if left == 0:
            return
        time.sleep(0.05)


def throughput(redis_url, procs, n_tasks, seconds, annotators, load_procs, database="sqlite",
               separate=False):
    import redis
    r = redis.Redis.from_url(redis_url)
    r.flushdb()
    d = tempfile.mkdtemp()
    url, cleanup = fresh_database(database, d)
    eng, pid = project(url, n_tasks, workers=annotators)
    env = {**os.environ, "LABELQ_DATABASE_URL": url, "LABELQ_REDIS_URL": redis_url,
           "LABELQ_CELERY_QUEUE": "labelq-bench", "PYTHONPATH": str(ROOT)}
    proc = start_celery(env, procs, Path(d) / "celery.log")
    try:
        load = start_load(url, redis_url, [f"b{j}" for j in range(annotators)], seconds,
                          load_procs, separate=separate)
        redis_pid = int(r.info("server")["process_id"])
        c_celery, c_redis = cpu_seconds(pgid=proc.pid), cpu_seconds(pids={redis_pid})
        t0 = time.time()
        load.go.set()
        got = load.results()
        t_sub = time.time() - t0
        wait_applied(eng)
        t_all = time.time() - t0
        load.join()
        cpu = {"load": sum(g[1] for g in got),
               "celery": cpu_seconds(pgid=proc.pid) - c_celery,
               "redis": cpu_seconds(pids={redis_pid}) - c_redis}
        total = sum(g[0] for g in got)
        return total, t_sub, t_all, cpu, sum(g[2] for g in got)
    finally:
        stop_groups([proc])
        eng.dispose()
        cleanup()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--procs", default="1,2,4")
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--annotators", type=int, default=16)
    ap.add_argument("--load-procs", type=int, default=4)
    ap.add_argument("--database", default="sqlite",
                    help="record of the throughput runs: sqlite (a file, WAL) or a "
                         "postgresql:// URL (a fresh schema there)")
    ap.add_argument("--separate-next", action="store_true",
                    help="annotators ask for the next assignment in a request of its own "
                         "instead of with the submit (?next=true)")
    ap.add_argument("--redis-url", default=os.environ.get("LABELQ_REDIS_URL",
                                                          "redis://127.0.0.1:6379/14"))
    args = ap.parse_args()
    lines = ["## Live pipeline (`bench/pipeline.py`)", "", f"Command: `{command_line()}`", "",
             f"Machine: {machine()}; shared with other jobs while it ran — the load "
             "average (runnable processes, 2 cores) is in the last column; in the "
             "throughput rows it includes the benchmark's own processes.", "",
             "Next-assignment latency (`Service.next_assignment`, SQLite record, uniform "
             f"policy, {args.requests} requests per path). *Inbox*: served from the "
             "reservations the applier made (the common case while labels flow); *decide at "
             "once*: the inbox is empty, the policy decides in the request:",
             "", "| pending tasks | hot-state build (s) | inbox p50 (ms) | inbox p99 (ms) "
             "| decide-at-once p50 (ms) | decide-at-once p99 (ms) | load avg (1 min) |",
             "|---:|---:|---:|---:|---:|---:|---:|"]
    for n in [int(x) for x in args.sizes.split(",") if x]:
        build, i50, i99, d50, d99 = latency(args.redis_url, n, args.requests)
        lines.append(f"| {n:,} | {build:.1f} | {i50:.2f} | {i99:.2f} | {d50:.2f} | {d99:.2f} "
                     f"| {os.getloadavg()[0]:.1f} |")
        print(lines[-1], flush=True)
    lines += ["", f"End-to-end: {args.annotators} simulated annotators in {args.load_procs} "
              "load processes ("
              f"{'next, then submit' if args.separate_next else 'submit-and-next, one call per label'}"
              ", each label committed to "
              f"{'SQLite' if args.database == 'sqlite' else 'PostgreSQL'} before the OK), "
              "a Celery worker applies the labels and refills the inboxes; labels/s from the "
              "start until the last label is folded into the posterior:", "",
              "| Celery processes | labels | submit phase (s) | until all applied (s) | labels/s "
              "| CPU ms/label: load procs | Celery | Redis | bound on 2 idle cores (labels/s) "
              "| decided at once (% of next) | load avg (1 min) |",
              "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for p in [int(x) for x in args.procs.split(",") if x]:
        total, t_sub, t_all, cpu, at_once = throughput(args.redis_url, p, 20_000, args.seconds,
                                                       args.annotators, args.load_procs,
                                                       args.database, args.separate_next)
        per = {k_: 1000 * v / max(total, 1) for k_, v in cpu.items()}
        bound = 2 * 1000 / sum(per.values())
        lines.append(f"| {p} | {total} | {t_sub:.1f} | {t_all:.1f} | {total / t_all:.0f} "
                     f"| {per['load']:.2f} | {per['celery']:.2f} | {per['redis']:.2f} "
                     f"| {bound:.0f} | {100 * at_once / max(total, 1):.1f} "
                     f"| {os.getloadavg()[0]:.1f} |")
        print(lines[-1], flush=True)
    write_section("pipeline", "\n".join(lines))


if __name__ == "__main__":
    main()
