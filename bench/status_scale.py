"""Benchmark: ``labelq status -o json`` and the dashboard's data at scale (issue 36).

    python bench/status_scale.py [--tasks 1000000] [--labels 5000000] [--runs 20]
                                 [--database URL] [--keep]

Builds a project (a fresh SQLite database in a temporary folder, or ``--database``: a
SQLite file or a PostgreSQL database, emptied first unless it already holds the project
at this size): tasks in 7 categories (1 % gold, a gold schedule), 50 annotators,
``--labels`` labels with their assignments by direct SQL inserts (received over 30 days),
all applied (``applied_seq``) but the last 1,000, and one declined and one expired
assignment for every 40 labels. Folds the status counters once (what the applier and the
beat do as labels are applied) and computes the dashboard's background figures once (what
the beat's ``labelq.figures`` does), then times, each in a fresh session, ``status_report``
(``labelq status -o json``, the API's status) and ``dashboard`` (the body of
``/api/v1/projects/{name}/dashboard``): medians of ``--runs``. Writes docs/benchmarks.md
(section ``status-scale``).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._report import command_line, machine, write_section  # noqa: E402

BASE = datetime(2026, 1, 1)
SPAN_S = 30 * 86400


def build(engine, n_tasks: int, n_labels: int) -> tuple[int, float]:  # type: ignore[no-untyped-def]
    """The project ``big`` (see the module docstring); (project id, seconds it took)."""
    from sqlalchemy import text

    from labelq.record.db import session_scope
    from labelq.record.projects import create_project, enroll_worker

    t0 = time.perf_counter()
    with session_scope(engine) as s:
        p = create_project(s, "big", "a,b", max_labels=5, budget=1e9,
                           gold_schedule="fixed:rate=0.1")
        for j in range(50):
            enroll_worker(s, p, f"w{j}")
        pid = p.id
        wids = [r[0] for r in s.exec(text("SELECT id FROM worker WHERE project_id=:p "  # type: ignore[call-overload]
                                          "ORDER BY seq"), params={"p": pid}).all()]
    rng = random.Random(0)
    with engine.begin() as c:
        for b in range(0, n_tasks, 200_000):
            c.execute(text("INSERT INTO task (project_id, seq, external_id, category, payload,"
                           " is_gold, gold_answer, created) VALUES (:p, :s, :e, :c, '{}', "
                           ":g, :a, '2026-01-01 00:00:00')"),
                      [{"p": pid, "s": i, "e": f"t{i}", "c": f"c{i % 7}", "g": i % 100 == 0,
                        "a": "a" if i % 100 == 0 else None}
                       for i in range(b, min(b + 200_000, n_tasks))])
        first = c.execute(text("SELECT min(id) FROM task WHERE project_id=:p"),
                          {"p": pid}).scalar()
        batch = 200_000
        for b in range(0, n_labels, batch):
            rows, ended = [], []
            for i in range(b, min(b + batch, n_labels)):
                t = rng.randrange(n_tasks)
                at = (BASE + timedelta(seconds=SPAN_S * i / n_labels)).isoformat(" ")
                rows.append({"a": f"a{i}", "p": pid, "t": first + t,
                             "w": wids[i % len(wids)], "g": t % 100 == 0, "r": at,
                             "v": "a" if rng.random() < 0.7 else "b",
                             "q": i + 1 if i < n_labels - 1000 else None})
                if i % 40 == 0:
                    for state in ("declined", "expired"):
                        u = rng.randrange(n_tasks)
                        ended.append({"a": f"{state[0]}{i}", "p": pid, "t": first + u,
                                      "w": wids[rng.randrange(len(wids))], "g": u % 100 == 0,
                                      "r": at, "s": state})
            c.execute(text("INSERT INTO assignment (id, project_id, task_id, worker_id, "
                           "is_gold, issued, expires, state) VALUES (:a, :p, :t, :w, :g, "
                           ":r, :r, 'submitted')"), rows)
            c.execute(text("INSERT INTO assignment (id, project_id, task_id, worker_id, "
                           "is_gold, issued, expires, state) VALUES (:a, :p, :t, :w, :g, "
                           ":r, :r, :s)"), ended)
            c.execute(text("INSERT INTO label (assignment_id, project_id, task_id, "
                           "worker_id, value, is_gold, received, applied_seq) VALUES "
                           "(:a, :p, :t, :w, :v, :g, :r, :q)"), rows)
    if engine.dialect.name == "postgresql":
        with engine.connect() as c:
            c.execution_options(isolation_level="AUTOCOMMIT").execute(text("ANALYZE"))
    else:
        with engine.begin() as c:
            c.execute(text("ANALYZE"))
    return int(pid), time.perf_counter() - t0


def existing(engine, n_tasks: int, n_labels: int) -> int | None:  # type: ignore[no-untyped-def]
    """The id of project ``big`` if the database holds it at this size (a kept database)."""
    from sqlalchemy import text
    try:
        with engine.connect() as c:
            pid = c.execute(text("SELECT id FROM project WHERE name='big'")).scalar()
            if pid is None:
                return None
            nt = c.execute(text("SELECT count(*) FROM task WHERE project_id=:p"),
                           {"p": pid}).scalar()
            nl = c.execute(text("SELECT count(*) FROM label WHERE project_id=:p"),
                           {"p": pid}).scalar()
    except Exception:  # noqa: BLE001 - no schema yet
        return None
    return int(pid) if (nt, nl) == (n_tasks, n_labels) else None


def empty(engine) -> None:  # type: ignore[no-untyped-def]
    from sqlmodel import SQLModel

    import labelq.record.models  # noqa: F401 - the tables
    from labelq.record.db import forget_database_id
    SQLModel.metadata.drop_all(engine)
    forget_database_id(engine)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=1_000_000)
    ap.add_argument("--labels", type=int, default=5_000_000)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--database", help="SQLAlchemy URL (default: SQLite in a temporary "
                    "folder); a database holding project 'big' at this size is reused")
    ap.add_argument("--aggregation", default="mv", help="the project's aggregation method "
                    "(default mv: auto's fits at millions of labels take the background far "
                    "longer; the dashboard's request reads the stored figures either way)")
    ap.add_argument("--refresh-figures", action="store_true", help="compute the background "
                    "figures again even if a kept database has them stored")
    ap.add_argument("--no-figures", action="store_true", help="compute no background "
                    "figures: the dashboard is timed serving what is stored (pending before "
                    "the first)")
    ap.add_argument("--no-write", action="store_true", help="print, leave the doc alone")
    args = ap.parse_args()

    from labelq.dashboard import dashboard, refresh_figures
    from labelq.record.db import engine_for, init_schema, session_scope
    from labelq.record.projects import get_project
    from labelq.record.tally import fold
    from labelq.reporting import status_report

    with tempfile.TemporaryDirectory() as d:
        url = args.database or f"sqlite:///{d}/status.db"
        engine = engine_for(url)
        pid = existing(engine, args.tasks, args.labels)
        built = pid is None
        build_s = 0.0
        if pid is None:
            empty(engine)
            init_schema(engine)
            pid, build_s = build(engine, args.tasks, args.labels)
        init_schema(engine)  # (a kept database of an earlier labelq: its new indexes)
        t0 = time.perf_counter()
        with session_scope(engine) as s:
            folded = fold(s, pid)
        fold_s = time.perf_counter() - t0
        from sqlalchemy import text
        with engine.begin() as c:
            c.execute(text("UPDATE project SET aggregation=:a WHERE id=:p"),
                      {"a": args.aggregation, "p": pid})
        times: dict[str, list[float]] = {"status": [], "dashboard": []}
        for _ in range(args.runs):  # (first, before the figures: printed at once)
            t0 = time.perf_counter()
            with session_scope(engine) as s:
                st = status_report(s, get_project(s, "big"))
            times["status"].append(time.perf_counter() - t0)
        print(f"folded in {fold_s:.1f} s; status_report median "
              f"{statistics.median(times['status']) * 1000:.1f} ms", flush=True)
        from labelq.record.models import DashboardFigures
        with session_scope(engine) as s:
            row = s.get(DashboardFigures, pid)
            stored = row is not None and row.computed is not None
        figures_s, figures_labels = None, 0
        if not args.no_figures:
            if args.refresh_figures or not stored or built:
                refresh_figures(engine, pid, force=True)
            with session_scope(engine) as s:
                row = s.get(DashboardFigures, pid)
                assert row is not None and row.computed is not None
                figures_s, figures_labels = row.took_s, row.labels
            print(f"figures computed in {figures_s:.1f} s", flush=True)
        times["status"] = []
        cpu: dict[str, list[float]] = {"status": [], "dashboard": []}
        for _ in range(args.runs):
            for name, fn in (("status", status_report), ("dashboard", dashboard)):
                t0, c0 = time.perf_counter(), time.process_time()
                with session_scope(engine) as s:
                    out = fn(s, get_project(s, "big"))
                times[name].append(time.perf_counter() - t0)
                cpu[name].append(time.process_time() - c0)
                if name == "status":
                    st = out
                else:
                    db = out
        engine.dispose()
    med = {k: statistics.median(v) for k, v in times.items()}
    dialect = "PostgreSQL" if url.startswith("postgresql") else "SQLite"
    load = os.getloadavg()
    q = db["quality"]
    text_ = "\n".join([
        f"### {dialect}", "",
        f"Command: `{command_line()}`", "",
        f"Machine: {machine()} (shared with other jobs; load average at the end "
        f"{load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}).", "",
        f"{args.tasks:,} tasks (1 % gold, 7 categories, a gold schedule), 50 annotators, "
        f"{args.labels:,} labels (all applied but the last 1,000) and "
        f"{2 * ((args.labels + 39) // 40):,} declined or expired assignments, aggregation "
        f"`{args.aggregation}`; "
        + (f"built in {build_s:.0f} s by direct SQL inserts; " if built else
           "a database built by an earlier run; ")
        + (f"the counters folded once, {folded:,} labels in {fold_s:.1f} s (what the "
           f"applier does batch by batch); " if folded else
           "the counters already folded by that run; ") + (
            "no background figures computed by this run (`--no-figures`): the dashboard "
            "is timed serving what is stored (see below)." if figures_s is None else
            f"the background figures (agreement, accuracy estimate and its curve, gold "
            f"suggestions, throughput, gold per annotator) computed once from "
            f"{figures_labels:,} labels in {figures_s:.0f} s (what the beat's "
            f"`labelq.figures` does; the machine was shared, see the load)."), "",
        "| call (fresh session each) | median ms | min | max | CPU ms, median | runs |",
        "|---|---:|---:|---:|---:|---:|",
        *[f"| `{'status_report' if k == 'status' else 'dashboard'}` | "
          f"{med[k] * 1000:.1f} | {min(v) * 1000:.1f} | {max(v) * 1000:.1f} | "
          f"{statistics.median(cpu[k]) * 1000:.1f} | {args.runs} |"
          for k, v in times.items()], "",
        "(wall time; CPU ms: this process's CPU time, which on SQLite includes the "
        "database's work and not the time spent waiting for a core on a shared machine; on "
        "PostgreSQL the server's work is not in it.)", "",
        f"(status: labels {st['labels']:,}, unapplied {st['unapplied']:,}; dashboard: "
        + ("figures pending" if q.get("pending") else
           f"the quality figure of {q.get('labels', 0):,} labels, estimate "
           f"{q.get('estimate')}, aged {q.get('age_s')} s at the last run") + ".)", "",
        f"Target (issue 36) ≤ 100 ms at 1M tasks and 5M labels: status "
        f"{'met' if med['status'] <= 0.1 else 'not met'}, dashboard "
        f"{'met' if med['dashboard'] <= 0.1 else 'not met'} at this size."])
    print(text_)
    if not args.no_write:
        from bench._report import DOC
        doc = DOC.read_text() if DOC.exists() else ""
        import re
        m = re.search(r"<!-- bench:status-scale -->\n(.*?)<!-- /bench:status-scale -->",
                      doc, re.S)
        parts = {}
        if m:
            for chunk in re.split(r"(?m)^### ", m.group(1))[1:]:
                head = chunk.split("\n", 1)[0].strip()
                parts[head] = "### " + chunk.rstrip()
        parts[dialect] = text_
        intro = ("## Status and dashboard at scale (`bench/status_scale.py`)\n\n"
                 "`status_report` from the status counters (labelq/record/tally.py) and a "
                 "few index range reads; `dashboard` from them and the figures the beat "
                 "computes in the background (labelq/dashboard.py, served with their age). "
                 "Before (0c7a978, 200k tasks and 1M labels on SQLite): `status_report` "
                 "1.16 s median; the dashboard computed its figures in the request. Each "
                 "dialect's part is rewritten by its own run; a run on a kept database "
                 "(`--database`) reuses what an earlier run built, folded and computed.")
        write_section("status-scale", "\n\n".join(
            [intro, *[parts[k] for k in ("SQLite", "PostgreSQL") if k in parts]]))


if __name__ == "__main__":
    main()
