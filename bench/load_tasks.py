"""Benchmark: `labelq tasks load` of 1,000,000 tasks (validate, then insert in one transaction).

    python bench/load_tasks.py [--rows 1000000] [--repeats 3] [--postgres URL] [--no-write]

Generates a CSV (id, category, text) in a temporary folder and loads it, each repeat, into a
fresh SQLite database and (with ``--postgres``) a fresh PostgreSQL schema, the two
alternated. Every load runs in a process of its own, which reports its wall time and its
peak resident memory (``ru_maxrss``: imports included) and CPU time (user + system, the
load's own: on PostgreSQL the client's, not the server's; on a shared machine it moves
less than the wall time). Writes the medians to docs/benchmarks.md (section `load-tasks`)
unless ``--no-write``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
if os.environ.get("LOAD_TASKS_CODE"):  # --baseline: another checkout's labelq
    sys.path.insert(0, os.environ["LOAD_TASKS_CODE"])

from bench._report import command_line, machine, write_section  # noqa: E402
from labelq.record.db import engine_for, init_schema, session_scope  # noqa: E402
from labelq.record.loading import load_tasks  # noqa: E402
from labelq.record.projects import create_project, get_project  # noqa: E402


def make_file(path: Path, rows: int) -> None:
    with path.open("w") as fh:
        fh.write("id,category,text\n")
        for i in range(rows):
            fh.write(f"task-{i},cat{i % 7},sentence number {i} to label\n")


def time_load(url: str, path: Path) -> tuple[float, float]:
    """Wall and CPU seconds of loading ``path`` (commit included) into a new project."""
    engine = engine_for(url)
    init_schema(engine)
    with session_scope(engine) as s:
        create_project(s, "bench", "0,1")
    t0, c0 = time.perf_counter(), time.process_time()
    with session_scope(engine) as s:
        result = load_tasks(s, get_project(s, "bench"), path)
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    assert result.inserted == result.rows
    engine.dispose()
    return elapsed, cpu


def one(url: str, path: Path) -> None:
    """Run in a child process: load ``path`` into ``url``; print seconds, CPU seconds and
    peak RSS."""
    elapsed, cpu = time_load(url, path)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"seconds": elapsed, "cpu": cpu, "peak_mb": peak_mb}))


def measure(url: str, path: Path, code: str | None = None) -> dict[str, float]:
    env = dict(os.environ, LOAD_TASKS_CODE=code) if code else None
    out = subprocess.run([sys.executable, __file__, "--one", url, str(path)], check=True,
                         capture_output=True, text=True, env=env).stdout
    result: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    return result


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--postgres", default=None, help="also load into this PostgreSQL URL")
    ap.add_argument("--no-write", action="store_true", help="print the table only")
    ap.add_argument("--baseline", default=None, metavar="DIR",
                    help="also load with the labelq of this checkout (e.g. one made with "
                         "`git archive REV`), alternated with this one")
    ap.add_argument("--one", nargs=2, metavar=("URL", "FILE"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        one(args.one[0], Path(args.one[1]))
        return
    results: dict[str, list[dict[str, float]]] = {}
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "tasks.csv"
        make_file(path, args.rows)
        size_mb = path.stat().st_size / 2**20
        codes = [("", None)] + ([(" (baseline)", args.baseline)] if args.baseline else [])
        for r in range(args.repeats):
            for tag, code in codes:
                results.setdefault(f"SQLite{tag}", []).append(
                    measure(f"sqlite:///{d}/bench{r}{len(tag)}.db", path, code))
                print(f"sqlite{tag} run {r}: {results[f'SQLite{tag}'][-1]}", file=sys.stderr)
                if args.postgres:
                    import sqlalchemy
                    schema = f"bench_{uuid.uuid4().hex[:8]}"
                    admin = sqlalchemy.create_engine(args.postgres)
                    with admin.begin() as c:
                        c.exec_driver_sql(f"CREATE SCHEMA {schema}")
                    try:
                        url = f"{args.postgres}?options=-csearch_path%3D{schema}"
                        results.setdefault(f"PostgreSQL{tag}", []).append(
                            measure(url, path, code))
                        print(f"postgres{tag} run {r}: {results[f'PostgreSQL{tag}'][-1]}",
                              file=sys.stderr)
                    finally:
                        with admin.begin() as c:
                            c.exec_driver_sql(f"DROP SCHEMA {schema} CASCADE")
                        admin.dispose()
    lines = [
        "## Loading tasks (`labelq tasks load`)",
        "",
        f"Command: `{command_line()}` — {machine()}, load average (1, 5, 15 min) "
        f"{', '.join(f'{x:.1f}' for x in load_before)} at the start, "
        f"{', '.join(f'{x:.1f}' for x in os.getloadavg())} at the end.",
        "",
        f"{args.rows:,} rows (id, category, one payload field; a {size_mb:.0f} MB CSV), "
        "streamed: validated in a first pass keeping only the ids' hashes, inserted in a "
        "second in batches (PostgreSQL COPY, SQLite executemany; into an empty SQLite "
        "table the secondary indexes built after the insert), in one transaction. Each "
        "load in a process of its own, the databases (and the baseline, if any) alternated; "
        "peak memory is the process's peak resident set (imports included); CPU is the "
        "loading process's user + system time (PostgreSQL's server not included). "
        "Median of the repeats:",
        "",
        "| database | median (s) | rows/s | CPU (s) | peak RSS (MB) | runs (s) |",
        "|---|---|---|---|---|---|",
    ]
    for name, runs in results.items():
        med = statistics.median(r["seconds"] for r in runs)
        cpu = statistics.median(r["cpu"] for r in runs)
        peak = statistics.median(r["peak_mb"] for r in runs)
        times = ", ".join(f"{r['seconds']:.1f}" for r in runs)
        lines.append(f"| {name} | {med:.1f} | {args.rows / med:,.0f} | {cpu:.1f} | "
                     f"{peak:.0f} | {times} |")
    if args.baseline:
        lines += ["", f"Baseline: the labelq of `{args.baseline}`. Same-run ratios of the "
                  "medians (this / baseline):", ""]
        for name in [n for n in results if "(baseline)" not in n]:
            this, base = results[name], results.get(f"{name} (baseline)")
            if base:
                wall = (statistics.median(r["seconds"] for r in this)
                        / statistics.median(r["seconds"] for r in base))
                cpu = (statistics.median(r["cpu"] for r in this)
                       / statistics.median(r["cpu"] for r in base))
                lines.append(f"* {name}: wall {wall:.2f}, CPU {cpu:.2f}")
    cores = os.cpu_count() or 1
    if max(load_before[0], os.getloadavg()[0]) > cores:
        lines += ["", f"The machine was busy (a load average above its {cores} cores): "
                  "the wall times include waiting for a CPU, and the CPU times are the "
                  "steadier measure of the work a load does."]
    if not args.no_write:
        write_section("load-tasks", "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
