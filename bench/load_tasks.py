"""Benchmark: `labelq tasks load` of 1,000,000 tasks (validate, then insert in one transaction).

    python bench/load_tasks.py [--rows 1000000] [--repeats 3] [--postgres URL]

Generates a CSV (id, category, text) in a temporary folder, loads it into a fresh SQLite
database each repeat (and optionally a fresh PostgreSQL schema), and writes the median
wall time to docs/benchmarks.md (section `load-tasks`).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._report import command_line, machine, write_section  # noqa: E402
from labelq.db import engine_for, init_schema, session_scope  # noqa: E402
from labelq.loading import load_tasks  # noqa: E402
from labelq.projects import create_project, get_project  # noqa: E402


def make_file(path: Path, rows: int) -> None:
    with path.open("w") as fh:
        fh.write("id,category,text\n")
        for i in range(rows):
            fh.write(f"task-{i},cat{i % 7},sentence number {i} to label\n")


def time_load(url: str, path: Path) -> float:
    engine = engine_for(url)
    init_schema(engine)
    with session_scope(engine) as s:
        create_project(s, "bench", "0,1")
    t0 = time.perf_counter()
    with session_scope(engine) as s:
        result = load_tasks(s, get_project(s, "bench"), path)
    elapsed = time.perf_counter() - t0
    assert result.inserted == result.rows
    engine.dispose()
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--postgres", default=None, help="also load into this PostgreSQL URL")
    args = ap.parse_args()
    results: dict[str, list[float]] = {"SQLite": []}
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "tasks.csv"
        make_file(path, args.rows)
        for r in range(args.repeats):
            results["SQLite"].append(time_load(f"sqlite:///{d}/bench{r}.db", path))
            print(f"sqlite run {r}: {results['SQLite'][-1]:.1f} s", file=sys.stderr)
            if args.postgres:
                import sqlalchemy
                schema = f"bench_{uuid.uuid4().hex[:8]}"
                admin = sqlalchemy.create_engine(args.postgres)
                with admin.begin() as c:
                    c.exec_driver_sql(f"CREATE SCHEMA {schema}")
                try:
                    url = f"{args.postgres}?options=-csearch_path%3D{schema}"
                    results.setdefault("PostgreSQL", []).append(time_load(url, path))
                    print(f"postgres run {r}: {results['PostgreSQL'][-1]:.1f} s", file=sys.stderr)
                finally:
                    with admin.begin() as c:
                        c.exec_driver_sql(f"DROP SCHEMA {schema} CASCADE")
    lines = [
        "## Loading tasks (`labelq tasks load`)",
        "",
        f"Command: `{command_line()}` — {machine()}.",
        "",
        f"{args.rows:,} rows (id, category, one payload field), parsed and validated in full, "
        "then inserted in one transaction. Median of the repeats:",
        "",
        "| database | median (s) | rows/s | runs (s) |",
        "|---|---|---|---|",
    ]
    for name, times in results.items():
        med = statistics.median(times)
        lines.append(f"| {name} | {med:.1f} | {args.rows / med:,.0f} | "
                     f"{', '.join(f'{t:.1f}' for t in times)} |")
    write_section("load-tasks", "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
