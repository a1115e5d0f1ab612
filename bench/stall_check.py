"""Benchmark: what the stall check (labelq/record/stalls.py, issue 41) adds to ``status``.

    python bench/stall_check.py [--tasks 1000000] [--labels 2000000] [--end-tasks 45000]
                                [--runs 20] [--database URL] [--no-write]

Two projects built by direct SQL inserts (in a fresh SQLite database in a temporary
folder, or ``--database``: emptied first), their status counters folded once:

* ``big``: ``--tasks`` tasks in 7 categories (cap 3), 50 annotators, ``--labels`` labels on
  random tasks with their assignments — a project that runs: the check's step 1 (the
  counters and one read of the active annotators' categories) settles it. Timed:
  ``project_status`` as it is, and with the stall check replaced by ``None`` (what status
  cost before), alternated, each in a fresh session.
* ``end``: ``--end-tasks`` open tasks and a tenth as many at the cap of 3, 3 annotators;
  two have labelled every task, the third only those at the cap and is paused — stalled:
  step 1 cannot settle it (each active annotator has as many assignments as open tasks),
  step 2 reads both active annotators' assignments (2 x 1.1 x ``--end-tasks``, each
  task's labels counted in its index). Timed: the first status (nothing kept), then again
  (the answer kept while nothing changes); and near the end (the second annotator short
  of one open task: step 2 reads their assignments, the fewer, and stops there).

Medians of ``--runs``; writes docs/benchmarks.md (section ``stall-check``).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._report import command_line, machine, write_section  # noqa: E402


def build(engine: Any, name: str, n_tasks: int, n_workers: int,
          labels: list[tuple[int, int]]) -> int:
    """Project ``name`` (cap 3) with its tasks, annotators ``{name}-w{j}`` and ``labels``
    ((task seq, worker index) pairs, each with its submitted assignment); its id."""
    from sqlalchemy import text

    from labelq.record.db import session_scope
    from labelq.record.projects import create_project, enroll_worker

    with session_scope(engine) as s:
        p = create_project(s, name, "a,b", max_labels=3, budget=1e9, aggregation="mv")
        for j in range(n_workers):
            enroll_worker(s, p, f"{name}-w{j}")
        pid = int(p.id or 0)
    with engine.begin() as c:
        wids = [r[0] for r in c.execute(text("SELECT id FROM worker WHERE project_id=:p "
                                             "ORDER BY seq"), {"p": pid}).all()]
        for b in range(0, n_tasks, 200_000):
            c.execute(text("INSERT INTO task (project_id, seq, external_id, category, payload,"
                           " is_gold, created) VALUES (:p, :s, :e, :c, '{}', false, "
                           "'2026-01-01 00:00:00')"),
                      [{"p": pid, "s": i, "e": f"t{i}", "c": f"c{i % 7}"}
                       for i in range(b, min(b + 200_000, n_tasks))])
        first = c.execute(text("SELECT min(id) FROM task WHERE project_id=:p"),
                          {"p": pid}).scalar()
        for b in range(0, len(labels), 200_000):
            rows = [{"a": f"{name}{i}", "p": pid, "t": first + t, "w": wids[w], "q": i + 1}
                    for i, (t, w) in enumerate(labels[b:b + 200_000], start=b)]
            c.execute(text("INSERT INTO assignment (id, project_id, task_id, worker_id, "
                           "is_gold, issued, expires, state) VALUES (:a, :p, :t, :w, false, "
                           "'2026-01-01 00:00:00', '2026-01-01 00:00:00', 'submitted')"), rows)
            c.execute(text("INSERT INTO label (assignment_id, project_id, task_id, "
                           "worker_id, value, is_gold, received, applied_seq) VALUES "
                           "(:a, :p, :t, :w, 'a', false, '2026-01-01 00:00:00', :q)"), rows)
    return pid


def big_labels(n_tasks: int, n_labels: int) -> list[tuple[int, int]]:
    """``n_labels`` on random tasks, at most 3 a task, never twice one annotator's."""
    rng = random.Random(0)
    seen: set[tuple[int, int]] = set()
    count: dict[int, int] = {}
    out = []
    i = 0
    while len(out) < n_labels:
        t, w = rng.randrange(n_tasks), i % 50
        i += 1
        if (t, w) in seen or count.get(t, 0) >= 3:
            continue
        seen.add((t, w))
        count[t] = count.get(t, 0) + 1
        out.append((t, w))
    return out


def timed(engine: Any, name: str, runs: int, fn: Any) -> list[float]:
    from labelq.record.db import session_scope
    from labelq.record.projects import get_project

    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        with session_scope(engine) as s:
            fn(s, get_project(s, name))
        out.append(time.perf_counter() - t0)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=1_000_000)
    ap.add_argument("--labels", type=int, default=2_000_000)
    ap.add_argument("--end-tasks", type=int, default=45_000)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--database", help="SQLAlchemy URL (default: SQLite in a temporary "
                    "folder); emptied first")
    ap.add_argument("--no-write", action="store_true", help="print, leave the doc alone")
    args = ap.parse_args()

    from sqlalchemy import text
    from sqlmodel import SQLModel

    import labelq.record.models  # noqa: F401 - the tables
    import labelq.reporting as reporting
    from labelq.record import stalls
    from labelq.record.db import engine_for, forget_database_id, init_schema, session_scope
    from labelq.record.projects import set_worker_status
    from labelq.record.tally import fold

    with tempfile.TemporaryDirectory() as d:
        url = args.database or f"sqlite:///{d}/stall.db"
        engine = engine_for(url)
        SQLModel.metadata.drop_all(engine)
        forget_database_id(engine)
        init_schema(engine)
        t0 = time.perf_counter()
        big = build(engine, "big", args.tasks, 50, big_labels(args.tasks, args.labels))
        n, m = args.end_tasks, args.end_tasks // 10
        end = build(engine, "end", n + m, 3, [(t, w) for w in (0, 1) for t in range(n + m)]
                    + [(t, 2) for t in range(n, n + m)])
        with session_scope(engine) as s:
            set_worker_status(s, "end-w2", "paused")
        if engine.dialect.name == "postgresql":
            with engine.connect() as c:
                c.execution_options(isolation_level="AUTOCOMMIT").execute(text("ANALYZE"))
        else:
            with engine.begin() as c:
                c.execute(text("ANALYZE"))
        for pid in (big, end):
            with session_scope(engine) as s:
                fold(s, pid)
        build_s = time.perf_counter() - t0
        print(f"built and folded in {build_s:.0f} s", flush=True)

        status = reporting.project_status
        real = reporting.stall

        def without(s: Any, p: Any) -> Any:
            reporting.stall = lambda *a, **k: None  # type: ignore[assignment]
            try:
                return status(s, p)
            finally:
                reporting.stall = real

        times: dict[str, list[float]] = {"with": [], "without": []}
        for _ in range(args.runs):
            times["with"] += timed(engine, "big", 1, status)
            times["without"] += timed(engine, "big", 1, without)
        first, again = [], []
        for _ in range(max(3, args.runs // 4)):
            stalls._KEPT.clear()
            first += timed(engine, "end", 1, status)
            again += timed(engine, "end", 1, status)
        from labelq.record.projects import get_project
        with session_scope(engine) as s:
            st_end = status(s, get_project(s, "end"))
            st_big = status(s, get_project(s, "big"))
        assert st_end["state"] == "stalled" and st_end["stalled"]["tasks"] == n, st_end
        assert st_big["state"] == "running", st_big["stalled"]
        # near the end: end-w1 short of the last task (their label on it removed)
        with engine.begin() as c:
            w1 = c.execute(text("SELECT id FROM worker WHERE handle='end-w1'")).scalar()
            last = c.execute(text("SELECT id FROM task WHERE project_id=:p AND seq=:s"),
                             {"p": end, "s": n - 1}).scalar()
            aid = c.execute(text("SELECT assignment_id FROM label WHERE worker_id=:w AND "
                                 "task_id=:t"), {"w": w1, "t": last}).scalar()
            c.execute(text("DELETE FROM label WHERE assignment_id=:a"), {"a": aid})
            c.execute(text("DELETE FROM assignment WHERE id=:a"), {"a": aid})
            c.execute(text("DELETE FROM task_tally WHERE project_id=:p"), {"p": end})
            c.execute(text("DELETE FROM worker_tally WHERE project_id=:p"), {"p": end})
            c.execute(text("DELETE FROM status_tally WHERE project_id=:p"), {"p": end})
        with session_scope(engine) as s:
            fold(s, end)
        near = []
        for _ in range(max(3, args.runs // 4)):
            stalls._KEPT.clear()
            near += timed(engine, "end", 1, status)
        with session_scope(engine) as s:
            assert status(s, get_project(s, "end"))["state"] == "running"
        engine.dispose()
    ms = {k: statistics.median(v) * 1000 for k, v in
          {"with": times["with"], "without": times["without"], "first": first,
           "again": again, "near": near}.items()}
    dialect = "PostgreSQL" if url.startswith("postgresql") else "SQLite"
    load = os.getloadavg()
    md = "\n".join([
        f"## Stall check in `status` (`bench/stall_check.py`, issue 41): {dialect}", "",
        f"Command: `{command_line()}`", "",
        f"Machine: {machine()} (shared with other jobs; load average at the end "
        f"{load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}). Built and folded in "
        f"{build_s:.0f} s by direct SQL inserts.", "",
        "| project | call (fresh session each) | median ms | min | max | runs |",
        "|---|---|---:|---:|---:|---:|",
        *[f"| {proj} | {what} | {ms[k]:.1f} | {min(v) * 1000:.1f} | {max(v) * 1000:.1f} "
          f"| {len(v)} |" for proj, what, k, v in (
              (f"big: {args.tasks:,} tasks, {args.labels:,} labels, 50 annotators, running",
               "`project_status`", "with", times["with"]),
              ("big", "`project_status`, stall check off (as before)", "without",
               times["without"]),
              (f"end: {n:,} open tasks and {m:,} at the cap, {2 * (n + m) + m:,} labels, "
               "one of 3 annotators paused: stalled",
               "first `project_status` (step 2 reads both active annotators' "
               "assignments)", "first", first),
              ("end, stalled", "`project_status` again (the answer kept)", "again", again),
              ("end, one task short: running", "`project_status` (step 2 stops at the "
               "first annotator with an unseen task)", "near", near))], "",
        f"The check adds {ms['with'] - ms['without']:.1f} ms to status at the running "
        "project's size (step 1: the counters and one read of the active annotators' "
        "categories). A project near its end pays step 2, bounded by "
        f"`READ_MAX` = {stalls.READ_MAX:,} assignments read (beyond it, `stalled` is null: "
        "not known); a stalled project pays it once, then its answer is kept while nothing "
        "it depends on changes."])
    print(md)
    if not args.no_write:
        write_section(f"stall-check-{dialect.lower()}", md)


if __name__ == "__main__":
    main()
