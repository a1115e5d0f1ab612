"""Benchmark: ``labelq status -o json``'s numbers at scale, from the status counters.

    python bench/status_scale.py [--tasks 1000000] [--labels 5000000] [--runs 20]

Builds a project in a fresh SQLite database (temporary folder): tasks in 7 categories (1 %
gold), 50 annotators, ``--labels`` labels with their assignments by direct SQL inserts, all
applied (``applied_seq``) but the last 1,000; folds the counters once (what the applier and
the beat do as labels are applied), then times ``status_report`` (``labelq status -o json``,
the API's status, the dashboard's status) in a fresh session: median of ``--runs``. Writes
docs/benchmarks.md (section ``status-scale``).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._report import command_line, machine, write_section  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=1_000_000)
    ap.add_argument("--labels", type=int, default=5_000_000)
    ap.add_argument("--runs", type=int, default=20)
    args = ap.parse_args()
    from sqlalchemy import text

    from labelq.db import engine_for, init_schema, session_scope
    from labelq.projects import create_project, enroll_worker, get_project
    from labelq.reporting import status_report
    from labelq.tally import fold

    with tempfile.TemporaryDirectory() as d:
        engine = engine_for(f"sqlite:///{d}/status.db")
        init_schema(engine)
        t0 = time.perf_counter()
        with session_scope(engine) as s:
            p = create_project(s, "big", "a,b", max_labels=5, budget=1e9)
            for j in range(50):
                enroll_worker(s, p, f"w{j}")
            pid = p.id
            wids = [r[0] for r in s.exec(text("SELECT id FROM worker WHERE project_id=:p "
                                              "ORDER BY seq"), params={"p": pid}).all()]
        rng = random.Random(0)
        with engine.begin() as c:
            c.execute(text("INSERT INTO task (project_id, seq, external_id, category, payload,"
                           " is_gold, gold_answer, created) VALUES (:p, :s, :e, :c, '{}', "
                           ":g, :a, '2026-01-01 00:00:00')"),
                      [{"p": pid, "s": i, "e": f"t{i}", "c": f"c{i % 7}", "g": i % 100 == 0,
                        "a": "a" if i % 100 == 0 else None} for i in range(args.tasks)])
            first = c.execute(text("SELECT min(id) FROM task WHERE project_id=:p"),
                              {"p": pid}).scalar()
            batch = 200_000
            for b in range(0, args.labels, batch):
                rows = []
                for i in range(b, min(b + batch, args.labels)):
                    t = rng.randrange(args.tasks)
                    rows.append({"a": f"a{i}", "p": pid, "t": first + t,
                                 "w": wids[i % len(wids)], "g": t % 100 == 0,
                                 "q": i + 1 if i < args.labels - 1000 else None})
                c.execute(text("INSERT INTO assignment (id, project_id, task_id, worker_id, "
                               "is_gold, issued, expires, state) VALUES (:a, :p, :t, :w, :g, "
                               "'2026-01-01 00:00:00', '2026-01-01 00:00:00', 'submitted')"), rows)
                c.execute(text("INSERT INTO label (assignment_id, project_id, task_id, "
                               "worker_id, value, is_gold, received, applied_seq) VALUES "
                               "(:a, :p, :t, :w, 'a', :g, '2026-01-01 00:00:00', :q)"), rows)
        build_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        with session_scope(engine) as s:
            fold(s, pid)
        fold_s = time.perf_counter() - t0
        times = []
        for _ in range(args.runs):
            t0 = time.perf_counter()
            with session_scope(engine) as s:
                st = status_report(s, get_project(s, "big"))
            times.append(time.perf_counter() - t0)
        engine.dispose()
    med = statistics.median(times)
    text_ = "\n".join([
        "## Status at scale, from the counters (`bench/status_scale.py`)", "",
        f"Command: `{command_line()}`", "", f"Machine: {machine()} (shared with other jobs).",
        "",
        f"{args.tasks:,} tasks (1 % gold, 7 categories), 50 annotators, {args.labels:,} labels "
        f"(all applied but the last 1,000), SQLite; built in {build_s:.0f} s by direct SQL "
        f"inserts, the counters folded once in {fold_s:.1f} s (what the applier does batch "
        f"by batch). `status_report` (`labelq status -o json`, the API's status, the "
        f"dashboard's status), fresh session each: median {med * 1000:.1f} ms, min "
        f"{min(times) * 1000:.1f}, max {max(times) * 1000:.1f} over {args.runs} runs "
        f"(labels {st['labels']:,}, unapplied {st['unapplied']:,}).",
        "", f"Target (issue 36) ≤ 100 ms at 1M tasks and 5M labels: "
        f"{'met' if med <= 0.1 else 'not met'} at this size."])
    print(text_)
    write_section("status-scale", text_)


if __name__ == "__main__":
    main()
