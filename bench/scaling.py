"""labels/s and CPU per label with several API processes and several Celery workers.

    nice -n 10 python bench/scaling.py --configs 1x1,2x2,4x2 --seconds 10 --rounds 2 \
        --database postgresql://postgres@127.0.0.1:5432/test

A deployment that outgrew one machine runs several ``labelq serve`` processes behind a load
balancer and several ``celery -A workers.main worker`` processes, all on one Redis and one
PostgreSQL (docs/scaling.md). Each configuration ``AxW`` starts ``A`` API processes
(``labelq serve --workers 1``, own ports) and ``W`` Celery workers (``-c 1`` each, own
process group), then the clients of ``bench/through_api.py``: ``--annotators`` simulated
annotators in ``--load-procs`` processes, annotator ``j`` on API process ``j mod A`` (as a
load balancer with sticky connections spreads them), one kept-alive connection each, one
request per label (``POST /api/v1/assignments/{id}/label?next=true``) for ``--seconds``.
labels/s is counted from the first request until the last label is folded into the
posterior.

CPU per label, from /proc (``bench._procs.cpu_seconds``): the API processes' and the Celery
workers' process groups; Redis — a private ``redis-server`` this script starts on a free port
(``--appendonly yes`` as docker-compose.yml runs it), so no other user of the machine's Redis
is counted; PostgreSQL — the backends serving this run's connections (they carry
``application_name=labelq-scaling-<pid>``; sampled every 0.2 s during the run, so a backend
that ends mid-run is counted until its last sample), not the server's shared background
processes (WAL writer, checkpointer). Configurations alternate over ``--rounds``; the machine
is shared, so the load average is written beside every run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._procs import free_port, groups_cpu, start_celery, stop_groups  # noqa: E402
from bench._report import command_line, machine, write_section  # noqa: E402
from bench.pipeline import cpu_seconds, fresh_database, project, wait_applied  # noqa: E402
from bench.through_api import _client, _pct, wait_http, warm  # noqa: E402

APP = f"labelq-scaling-{os.getpid()}"


def private_redis(d: Path) -> tuple[subprocess.Popen, str]:
    """A ``redis-server`` of this run only (append-only file, as docker-compose.yml)."""
    port = free_port()
    proc = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                             "--dir", str(d), "--appendonly", "yes", "--save", ""],
                            stdout=open(d / "redis.log", "wb"), stderr=subprocess.STDOUT)
    import redis
    deadline = time.monotonic() + 20
    while True:
        try:
            if redis.Redis(port=port).ping():
                return proc, f"redis://127.0.0.1:{port}/0"
        except redis.ConnectionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


class PgBackends:
    """CPU seconds of the PostgreSQL backends whose ``application_name`` is ours, sampled
    in a thread (a backend's CPU is read from /proc while it lives)."""

    def __init__(self, admin_url: str) -> None:
        from sqlalchemy import create_engine
        self.admin = create_engine(admin_url.replace("postgresql://", "postgresql+psycopg://",
                                                     1))
        self.first: dict[int, float] = {}
        self.last: dict[int, float] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def _pids(self) -> set[int]:
        with self.admin.connect() as conn:
            return {int(p) for (p,) in conn.exec_driver_sql(
                "SELECT pid FROM pg_stat_activity WHERE application_name = %s", (APP,))}

    def sample(self) -> None:
        for pid in self._pids():
            c = cpu_seconds(pids={pid})
            self.first.setdefault(pid, c)
            self.last[pid] = c

    def _loop(self) -> None:
        while not self.stop.wait(0.2):
            self.sample()

    def start(self) -> None:
        self.sample()  # the backends open before the clock starts count from here
        self.thread.start()

    def seconds(self) -> float:
        self.stop.set()
        self.thread.join()
        self.sample()
        return sum(self.last[p] - self.first[p] for p in self.last)


def run(database: str, apis: int, workers: int, n_tasks: int, seconds: float,
        annotators: int, load_procs: int) -> dict:
    import multiprocessing as mp

    from labelq.record.db import session_scope
    from labelq.record.models import Project
    from labelq.record.projects import enroll_worker
    d = Path(tempfile.mkdtemp(prefix="labelq-scaling-"))
    started: list[subprocess.Popen] = []
    redis_proc, redis_url = private_redis(d)
    url, cleanup = fresh_database(database, str(d))
    if url.startswith("postgresql"):
        url += f"&application_name={APP}"
    eng, pid = project(url, n_tasks, workers=0)
    try:
        with session_scope(eng) as s:
            p = s.get(Project, pid)
            tokens = [enroll_worker(s, p, f"h{j}")[1] for j in range(annotators)]
        env = {**{k: v for k, v in os.environ.items() if not k.startswith("LABELQ_")},
               "LABELQ_DATABASE_URL": url, "LABELQ_REDIS_URL": redis_url,
               # (the queue its workers serve, -Q labelq: named, not the database's own)
               "LABELQ_CELERY_QUEUE": "labelq", "PYTHONPATH": str(ROOT)}
        celery = [start_celery(env, d / f"celery{i}.log") for i in range(workers)]
        started += celery
        ports = [free_port() for _ in range(apis)]
        servers = [subprocess.Popen(
            [sys.executable, "-m", "cli.main", "serve", "--port", str(port), "--log-level",
             "warning", "--workers", "1"], cwd=ROOT, env=env, start_new_session=True,
            stdout=open(d / f"api{port}.log", "wb"), stderr=subprocess.STDOUT)
            for port in ports]
        started += servers
        deadline = time.monotonic() + 180
        for port, proc in zip(ports, servers, strict=True):
            wait_http(f"http://127.0.0.1:{port}/healthz", proc, deadline)
        assigned = [(ports[j % apis], tok) for j, tok in enumerate(tokens)]
        for port, tok in assigned:
            warm(port, tok)
        ctx = mp.get_context("spawn")
        q, ready, go = ctx.Queue(), ctx.Queue(), ctx.Event()
        ps = [ctx.Process(target=_client, args=(assigned[i::load_procs], seconds, ready, go, q))
              for i in range(load_procs)]
        for p_ in ps:
            p_.start()
        for _ in tokens:
            ready.get(timeout=300)

        def group_cpu(procs: list[subprocess.Popen]) -> float:
            return groups_cpu(pr.pid for pr in procs)
        pg = PgBackends(database) if database != "sqlite" else None
        c0 = {"api": group_cpu(servers), "celery": group_cpu(celery),
              "redis": cpu_seconds(pids={redis_proc.pid})}
        if pg:
            pg.start()
        load0 = os.getloadavg()[0]
        t0 = time.time()
        go.set()
        got = [q.get() for _ in ps]
        t_sub = time.time() - t0
        wait_applied(eng)
        t_all = time.time() - t0
        cpu = {"clients": sum(g[1] for g in got), "api": group_cpu(servers) - c0["api"],
               "celery": group_cpu(celery) - c0["celery"],
               "redis": cpu_seconds(pids={redis_proc.pid}) - c0["redis"],
               "postgres": pg.seconds() if pg else float("nan")}
        for p_ in ps:
            p_.join()
        errors = [e for g in got for e in g[2]]
        if errors:
            raise SystemExit(f"client errors ({apis}x{workers}): {errors[:3]}")
        total = sum(g[0] for g in got)
        lat = sorted(x for g in got for x in g[3])
        return {"config": f"{apis}x{workers}", "labels": total, "t_sub": t_sub,
                "t_all": t_all, "rate": total / t_all,
                "per": {k: 1000 * v / max(total, 1) for k, v in cpu.items()},
                "p50": _pct(lat, 0.5), "p99": _pct(lat, 0.99),
                "load": (load0 + os.getloadavg()[0]) / 2}
    finally:
        stop_groups(started)
        eng.dispose()
        cleanup()
        redis_proc.terminate()
        redis_proc.wait(10)
        shutil.rmtree(d, ignore_errors=True)


_COLS = ("clients", "api", "celery", "redis", "postgres")


def _line(r: dict) -> str:
    per = r["per"]
    return (f"| {r['config']} | {r['labels']} | {r['t_sub']:.1f} | {r['t_all']:.1f} "
            f"| {r['rate']:.0f} | {r['p50']:.1f} / {r['p99']:.1f} | "
            + " | ".join(f"{per[c]:.2f}" for c in _COLS) + f" | {r['load']:.1f} |")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--configs", default="1x1,2x2,4x2",
                    help="API processes x Celery worker processes, comma-separated")
    ap.add_argument("--seconds", type=float, default=10.0, help="clients' run per round")
    ap.add_argument("--rounds", type=int, default=2, help="each configuration, alternated")
    ap.add_argument("--tasks", type=int, default=20_000)
    ap.add_argument("--annotators", type=int, default=16)
    ap.add_argument("--load-procs", type=int, default=2)
    ap.add_argument("--database", default="postgresql://postgres@127.0.0.1:5432/test",
                    help="a postgresql:// URL (a fresh schema there) or sqlite")
    ap.add_argument("--section", default="scaling")
    args = ap.parse_args()
    configs = [tuple(int(x) for x in c.split("x")) for c in args.configs.split(",") if c]
    rows = []
    for rnd in range(args.rounds):
        for apis, workers in configs:
            rows.append(run(args.database, apis, workers, args.tasks, args.seconds,
                            args.annotators, args.load_procs))
            print(f"round {rnd + 1}: {_line(rows[-1])}", flush=True)
    head = ("| API × Celery processes | labels | submit phase (s) | until all applied (s) "
            "| labels/s | request p50 / p99 (ms) | CPU ms/label: clients | API | Celery "
            "| Redis | PostgreSQL | load avg (1 min) |")
    rule = "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    who = "" if args.annotators == 16 else f", {args.annotators} annotators"
    lines = [f"## Several API and Celery processes (`bench/scaling.py`{who})", "",
             f"Command: `nice -n 10 {command_line()}`", "",
             f"Machine: {machine()}, shared with other users (load average beside each "
             "run); clients, API processes, Celery workers, Redis and PostgreSQL all on its "
             "cores.", "",
             f"{args.tasks:,} tasks (cap 3, uniform policy); {args.annotators} annotators' "
             f"clients in {args.load_procs} processes, annotator j on API process j mod A, "
             f"one request per label for {args.seconds:g} s; each label committed to "
             f"{'SQLite' if args.database == 'sqlite' else 'PostgreSQL'} before the answer. "
             "Redis is a private `redis-server --appendonly yes`; PostgreSQL's CPU is its "
             "backends serving this run's connections (not its WAL writer or checkpointer). "
             f"Every run ({args.rounds} rounds, configurations alternated):", "",
             head, rule, *[_line(r) for r in rows], "", "Medians over the rounds:", "",
             "| API × Celery processes | labels/s | CPU ms/label: API | Celery | Redis "
             "| PostgreSQL |", "|---|---:|---:|---:|---:|---:|"]
    for apis, workers in configs:
        mine = [r for r in rows if r["config"] == f"{apis}x{workers}"]

        def med(f):  # noqa: ANN001, ANN202 - a local helper
            return statistics.median(f(r) for r in mine)
        lines.append(f"| {apis}x{workers} | {med(lambda r: r['rate']):.0f} | "
                     + " | ".join(f"{med(lambda r, c=c: r['per'][c]):.2f}"
                                  for c in ("api", "celery", "redis", "postgres")) + " |")
    write_section(args.section, "\n".join(lines))
    print("\n".join(lines[-len(configs) - 2:]))


if __name__ == "__main__":
    main()
