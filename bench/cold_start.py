"""Benchmark: the first ``next`` after a cold start of a 1,000,000-task project (issue 36).

    python bench/cold_start.py [--tasks 1000000] [--labels 200000] [--runs 3]
                               [--postgres postgresql://127.0.0.1/postgres]
                               [--cases restart,flushed] [--compare REF] [--no-write]
                               [--section cold-start]

Builds a project of ``--tasks`` tasks (a CSV loaded by the streaming loader,
``labelq.record.loading.load_tasks``) with ``--labels`` labels already applied (written
straight into SQL, ``applied_seq`` 1..N) and its hot state in Redis (``rebuild_project``:
priorities, counters, the policy-state snapshot), in SQLite and (``--postgres``) in a fresh
PostgreSQL schema. Then, ``--runs`` times per case, starts ``labelq serve`` and ``labelq
run-worker`` as real processes on a free port and times, from just before they are started,
the first successful ``POST /api/v1/assignments/next`` (an assignment handed out) of an
annotator who has none yet:

* **restart** — the processes restart, Redis keeps the hot state;
* **flushed** — Redis was flushed (a Redis restart without persistence): the first request
  finds no hot state and it is rebuilt from SQL (since issue 44 from the policy state the
  set-up's rebuild saved in SQL, ``labelq.live.saved``, where the code has it; and with only
  the highest priorities of ``pending`` before the request is served, the rest streamed in
  behind it, ``labelq.live.backfill``).

Also reported: when the server first accepted a connection (imports, app set-up), so the
first ``next``'s own share shows. ``--compare REF`` starts the servers from another commit
too (a temporary git worktree), alternated with this tree's in every run — on this shared
machine only a same-sitting ratio means much. Medians go to docs/benchmarks.md, section ``cold-start``,
unless ``--no-write``.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._procs import free_port, stop_groups  # noqa: E402
from bench._report import command_line, machine, write_section  # noqa: E402

QUEUE = "labelq-cold-start"


def make_file(path: Path, rows: int) -> None:
    with path.open("w") as fh:
        fh.write("id,category,text\n")
        for i in range(rows):
            fh.write(f"task-{i},cat{i % 7},sentence number {i} to label\n")


def fresh_database(database: str, d: str) -> tuple[str, Any]:
    """(URL, cleanup): a SQLite file in ``d``, or a fresh schema in the PostgreSQL database
    at ``database`` (a ``postgresql://`` URL)."""
    if database == "sqlite":
        return f"sqlite:///{d}/cold.db", lambda: None
    from sqlalchemy import create_engine
    schema = f"labelq_cold_{os.getpid()}"
    admin = create_engine(database.replace("postgresql://", "postgresql+psycopg://", 1))
    with admin.begin() as conn:
        conn.exec_driver_sql(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        conn.exec_driver_sql(f"CREATE SCHEMA {schema}")

    def cleanup() -> None:
        with admin.begin() as conn:
            conn.exec_driver_sql(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        admin.dispose()
    sep = "&" if "?" in database else "?"
    return f"{database}{sep}options=-csearch_path%3D{schema}", cleanup


def build(url: str, csv: Path, n_labels: int, labellers: int, probes: int,
          policy: str) -> tuple[int, list[str], dict[str, float]]:
    """The project: tasks from ``csv``, ``labellers`` annotators who gave ``n_labels``
    labels (all applied), ``probes`` annotators who gave none (one per timed run). Returns
    (project id, the probes' tokens, seconds per step)."""
    import numpy as np
    from sqlmodel import select

    from labelq.record.db import engine_for, init_schema, session_scope
    from labelq.record.loading import load_tasks
    from labelq.record.models import Assignment, Label, Task, utcnow
    from labelq.record.projects import create_project, enroll_worker
    took = {}
    eng = engine_for(url)
    init_schema(eng)
    t = time.perf_counter()
    with session_scope(eng) as s:
        p = create_project(s, "cold", "a,b", policy=policy, max_labels=3)
        pid = p.id
        assert pid is not None
        load_tasks(s, p, csv)
    took["load"] = time.perf_counter() - t
    t = time.perf_counter()
    with session_scope(eng) as s:
        p = s.get(type(p), pid)
        assert p is not None
        workers = [enroll_worker(s, p, f"cold-l{j}")[0] for j in range(labellers)]
        tokens = [enroll_worker(s, p, f"cold-p{j}")[1] for j in range(probes)]
        wids = [w.id for w in workers]
        ids = s.exec(select(Task.id).where(Task.project_id == pid).order_by(Task.seq)
                     .limit(n_labels)).all()
    rng = np.random.default_rng(36)
    values = rng.choice(["a", "b"], size=n_labels, p=[0.7, 0.3])
    now = utcnow()
    chunk = 20_000
    with session_scope(eng) as s:
        conn = s.connection()
        for i in range(0, n_labels, chunk):
            part = range(i, min(n_labels, i + chunk))
            # task i gets its label from annotator i % labellers: no pair twice
            conn.execute(Assignment.__table__.insert(), [  # type: ignore[attr-defined]
                {"id": f"cold-{j}", "project_id": pid, "task_id": ids[j],
                 "worker_id": wids[j % labellers], "is_gold": False, "issued": now,
                 "expires": now, "state": "submitted"} for j in part])
            conn.execute(Label.__table__.insert(), [  # type: ignore[attr-defined]
                {"assignment_id": f"cold-{j}", "project_id": pid, "task_id": ids[j],
                 "worker_id": wids[j % labellers], "value": str(values[j]), "is_gold": False,
                 "received": now, "applied_seq": j + 1} for j in part])
    took["labels"] = time.perf_counter() - t
    eng.dispose()
    return pid, tokens, took


def hot_state(url: str, redis_url: str, pid: int, tree: Path) -> tuple[float, dict[bytes, bytes]]:
    """The project's hot state as a running system leaves it (priorities, counters, the
    policy-state snapshot), made by the code of ``tree`` (its snapshot's format is that
    code's): (seconds it took, every key's DUMP, for :func:`restore`)."""
    import redis
    r = redis.Redis.from_url(redis_url)
    r.flushdb()
    t = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import sys; from labelq.live.rebuild import "
                    "rebuild_project; from labelq.record.db import engine_for; "
                    "import redis; rebuild_project(engine_for(sys.argv[1]), "
                    "redis.Redis.from_url(sys.argv[2]), int(sys.argv[3]))",
                    url, redis_url, str(pid)], cwd=tree, check=True,
                   env={**os.environ, "PYTHONPATH": str(tree)})
    took = time.perf_counter() - t
    return took, {key: r.dump(key) for key in r.scan_iter(count=1000)}


def saved_rows(url: str, pid: int) -> list[dict[str, Any]]:
    """The project's ``saved_state`` row(s) as the last rebuild left them (none where the
    code keeps no state in SQL)."""
    import sqlalchemy as sa
    eng = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        with eng.connect() as conn:
            if not sa.inspect(conn).has_table("saved_state"):
                return []
            return [dict(row._mapping) for row in conn.execute(
                sa.text("SELECT * FROM saved_state WHERE project_id = :p"), {"p": pid})]
    finally:
        eng.dispose()


def restore_saved(url: str, pid: int, rows: list[dict[str, Any]]) -> None:
    """Put back the ``saved_state`` a tree's own rebuild wrote: the trees share the
    database, and each one's runs (its rebuild, its applier) write their own layout, which
    the other's code rightly refuses and folds from the labels instead (an earlier run of
    this bench timed that slow path for whichever tree ran second)."""
    import sqlalchemy as sa
    eng = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        with eng.begin() as conn:
            if not sa.inspect(conn).has_table("saved_state"):
                return
            conn.execute(sa.text("DELETE FROM saved_state WHERE project_id = :p"), {"p": pid})
            for row in rows:
                cols = ", ".join(row)
                conn.execute(sa.text(f"INSERT INTO saved_state ({cols}) VALUES "
                                     f"({', '.join(':' + c for c in row)})"), row)
    finally:
        eng.dispose()


def restore(redis_url: str, dump: dict[bytes, bytes]) -> None:
    import redis
    r = redis.Redis.from_url(redis_url)
    r.flushdb()
    pipe = r.pipeline(transaction=False)
    for key, value in dump.items():
        pipe.restore(key, 0, value, replace=True)
    pipe.execute()


def first_next(port: int, token: str, procs: list[subprocess.Popen[bytes]], t0: float,
               limit: float) -> tuple[float, float]:
    """(seconds to the server's first accepted connection, seconds to the first ``next``
    that handed out an assignment), both from ``t0``."""
    listen = None
    while True:
        if time.monotonic() - t0 > limit:
            raise RuntimeError(f"no assignment within {limit} s")
        for proc in procs:
            if proc.poll() is not None:
                raise RuntimeError(f"{proc.args!r} exited with {proc.returncode}")
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=limit)
        try:
            conn.connect()
        except OSError:
            time.sleep(0.02)
            continue
        if listen is None:
            listen = time.monotonic() - t0
        try:
            conn.request("POST", "/api/v1/assignments/next",
                         headers={"Authorization": f"Bearer {token}"})
            resp = conn.getresponse()
            body = resp.read()
        finally:
            conn.close()
        if resp.status == 200 and json.loads(body).get("assignment"):
            return listen, time.monotonic() - t0
        if resp.status not in (502, 503):
            raise RuntimeError(f"next: {resp.status} {body[:300]!r}")
        time.sleep(0.02)


def one_run(env: dict[str, str], token: str, log_dir: Path, tag: str, procs_n: int,
            limit: float, tree: Path) -> tuple[float, float]:
    """One start of ``labelq serve`` and ``labelq run-worker`` with the code of ``tree``."""
    env = {**env, "PYTHONPATH": str(tree)}
    port = free_port()
    started: list[subprocess.Popen[bytes]] = []
    t0 = time.monotonic()
    try:
        started.append(subprocess.Popen(
            [sys.executable, "-m", "cli.main", "serve", "--port", str(port),
             "--log-level", "warning"], cwd=tree, env=env, start_new_session=True,
            stdout=open(log_dir / f"api-{tag}.log", "wb"), stderr=subprocess.STDOUT))
        started.append(subprocess.Popen(
            [sys.executable, "-m", "cli.main", "run-worker", "-c", str(procs_n),
             "--loglevel", "warning"], cwd=tree, env=env, start_new_session=True,
            stdout=open(log_dir / f"worker-{tag}.log", "wb"), stderr=subprocess.STDOUT))
        return first_next(port, token, started, t0, limit)
    finally:
        stop_groups(started)  # (the beat too, which can outlive SIGTERM)


def bench_database(database: str, args: argparse.Namespace, csv: Path, d: str,
                   trees: list[tuple[str, Path]]) -> dict[str, Any]:
    url, cleanup = fresh_database(database, d)
    try:
        pid, tokens, took = build(url, csv, args.labels, args.labellers,
                                  2 * args.runs * len(trees), args.policy)
        dumps, saved = {}, {}
        for name, tree in trees:
            took[f"hot state ({name})"], dumps[name] = hot_state(url, args.redis_url, pid, tree)
            saved[name] = saved_rows(url, pid)
        print(f"{database}: built {took}", flush=True)
        env = {**os.environ, "LABELQ_DATABASE_URL": url, "LABELQ_REDIS_URL": args.redis_url,
               "LABELQ_CELERY_QUEUE": QUEUE}
        out: dict[tuple[str, str], list[tuple[float, float]]] = {}
        probe = iter(tokens)
        for i in range(args.runs):  # the cases and the trees alternated
            for case in args.cases:
                order = trees if i % 2 == 0 else trees[::-1]
                for name, tree in order:
                    # the hot state as that code left it, or none (a flushed Redis)
                    restore(args.redis_url, dumps[name] if case == "restart" else {})
                    restore_saved(url, pid, saved[name])  # (and in SQL, its own layout)
                    got = one_run(env, next(probe), Path(d), f"{case}{i}-{name[:8]}",
                                  args.procs, args.limit, tree)
                    out.setdefault((case, name), []).append(got)
                    print(f"{database} {case} {name} run {i + 1}: listening {got[0]:.2f} s, "
                          f"first next {got[1]:.2f} s", flush=True)
        return {"took": took, "runs": out}
    finally:
        cleanup()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tasks", type=int, default=1_000_000)
    ap.add_argument("--labels", type=int, default=200_000,
                    help="labels already given and applied before the start")
    ap.add_argument("--labellers", type=int, default=20,
                    help="annotators who gave them")
    ap.add_argument("--policy", default="auto", help="the project's policy (default: auto)")
    ap.add_argument("--runs", type=int, default=3, help="timed starts per case and database")
    ap.add_argument("--procs", type=int, default=2, help="labelq run-worker -c")
    ap.add_argument("--limit", type=float, default=600.0,
                    help="give up on a start after this many seconds")
    ap.add_argument("--redis-url", default="redis://127.0.0.1:6379/11")
    ap.add_argument("--postgres", default=None, help="also PostgreSQL at this URL")
    ap.add_argument("--cases", default="restart,flushed",
                    help="restart (Redis hot state kept), flushed (Redis flushed)")
    ap.add_argument("--compare", metavar="REF", default=None,
                    help="A/B: also start the servers from git commit REF (a temporary "
                         "worktree), alternated with this tree in every run")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--section", default="cold-start",
                    help="the docs/benchmarks.md section written (default: cold-start)")
    args = ap.parse_args()
    args.cases = [c for c in args.cases.split(",") if c]
    if not args.cases or set(args.cases) - {"restart", "flushed"}:
        ap.error("--cases: restart and/or flushed")
    if args.labels > args.tasks:
        ap.error("--labels: at most one label per task here (at most --tasks)")
    loads = [os.getloadavg()[0]]
    here = _git("rev-parse", "--short", "HEAD")
    dirty = _git("status", "--porcelain", "--untracked-files=no", "--", "labelq", "cli",
                 "workers")
    trees = [(f"this tree ({here}{', modified' if dirty else ''})", ROOT)]
    results = {}
    with tempfile.TemporaryDirectory() as d:
        if args.compare:
            base = Path(d) / "base"
            sha = _git("rev-parse", "--short", args.compare)
            subprocess.run(["git", "worktree", "add", "--detach", str(base), args.compare],
                           cwd=ROOT, check=True, capture_output=True)
            trees.append((sha, base))
        try:
            csv = Path(d) / "tasks.csv"
            make_file(csv, args.tasks)
            for database in ["sqlite"] + ([args.postgres] if args.postgres else []):
                results["SQLite" if database == "sqlite" else "PostgreSQL"] = \
                    bench_database(database, args, csv, d, trees)
                loads.append(os.getloadavg()[0])
        finally:
            if args.compare:
                subprocess.run(["git", "worktree", "remove", "--force", str(base)], cwd=ROOT)
    labels = {"restart": "processes restarted, Redis hot state kept",
              "flushed": "Redis flushed: hot state rebuilt from SQL"}
    rows = []
    for name, res in results.items():
        for case in args.cases:
            for tree, _path in trees:
                runs = res["runs"][(case, tree)]
                listen = statistics.median(x[0] for x in runs)
                first = statistics.median(x[1] for x in runs)
                every = ", ".join(f"{x[1]:.1f}" for x in runs)
                rows.append(f"| {name} | {labels[case]} | {tree} | {listen:.2f} | "
                            f"**{first:.2f}** | {every} |")
            if len(trees) == 2:
                a = statistics.median(x[1] for x in res["runs"][(case, trees[1][0])])
                b = statistics.median(x[1] for x in res["runs"][(case, trees[0][0])])
                rows.append(f"| {name} | {labels[case]} | before / after | | "
                            f"**{a / b:.2f}x** | |")
    lines = [
        f"## Cold start: the first `next` after a start at {args.tasks:,} tasks (issues 36, 44)",
        "",
        f"Command: `{command_line()}`",
        "",
        f"Machine: {machine()}; load average (1 min) {', '.join(f'{x:.1f}' for x in loads)} "
        "(start, after each database). A project of "
        f"{args.tasks:,} tasks (policy `{args.policy}`, cap 3) with {args.labels:,} labels "
        f"applied ({args.labellers} annotators), loaded by the streaming loader; `labelq "
        f"serve` and `labelq run-worker -c {args.procs}` started together as real "
        "processes; time from just before their start to the first `POST "
        "/api/v1/assignments/next` that handed an annotator (with nothing open) an "
        f"assignment; median of {args.runs} starts per row"
        + (" (the code trees alternated in every run, each start with the hot state its "
           "own code wrote)" if len(trees) == 2 else "") + ". Target: ≤ 5 s.",
        "",
        "| database | case | code | server listening (s) | first `next` (s) | each start (s) |",
        "|---|---|---|---|---|---|",
        *rows,
        "",
        "Set-up, once per database (s): " + "; ".join(
            f"{name}: " + ", ".join(f"{k} {v:.1f}" for k, v in res["took"].items())
            for name, res in results.items()) + ".",
    ]
    text = "\n".join(lines)
    print(text)
    if not args.no_write:
        write_section(args.section, text)


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True,
                          text=True).stdout.strip()


if __name__ == "__main__":
    main()
