"""Benchmark: how long a CLI command takes from start to exit (issue 36).

    python bench/cli_start.py [--runs 20] [--before REV ...] [--plain-exit] [--tasks 50]
                              [--bytecode as-env]

Makes a small project in a fresh SQLite database (a temporary folder: ``labelq init``,
``project create``, ``tasks load``, two annotators), then times, as wall time of a fresh
process each, ``labelq --help``, ``labelq status NAME`` and ``labelq status NAME -o json``
(and ``labelq project list``); with ``--before REV`` (repeatable) the same commands of that
git revision (its tree extracted with ``git archive`` into the temporary folder), and with
``--plain-exit`` this tree's commands ended by the interpreter's own teardown, alternated
with this tree's run by run, so all see the same load on a shared machine. Each process is
``python -c 'from cli.main import main; main()'`` (what the ``labelq`` script runs, without
a pyenv shim's own start-up), on the same database; also the CPU time (user + system) each
process used, which a loaded machine inflates much less than the wall time. Writes the
medians to docs/benchmarks.md (section ``cli-start``).

Bytecode: an installed labelq starts from its compiled ``.pyc`` files (pip writes them at
install). The runs write and read theirs under the temporary folder
(``PYTHONPYCACHEPREFIX``, both trees alike; a first, untimed run of each command fills it),
whatever ``PYTHONDONTWRITEBYTECODE`` says: with it set and no cache, every run would
compile the project's own modules from source again. ``--bytecode as-env`` keeps the
environment's setting instead (this machine's sessions set PYTHONDONTWRITEBYTECODE=1,
and the script did not override it before: the run recorded in fb97f9b was likely made
so).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._report import command_line, machine, write_section  # noqa: E402

ENTRY = "import sys; sys.argv[0] = 'labelq'; from cli.main import main; main()"
# --plain-exit: this tree's command without main()'s own ending (cli/main.py _before_exit),
# the interpreter's teardown as it was
PLAIN_EXIT = ("import sys; sys.argv[0] = 'labelq'; from cli.main import cli; "
              "sys.exit(cli.main(prog_name='labelq', standalone_mode=True))")
COMMANDS = [("labelq --help", ["--help"]),
            ("labelq status NAME", ["status", "bench"]),
            ("labelq status NAME -o json", ["status", "bench", "-o", "json"]),
            ("labelq project list", ["project", "list"])]


def _children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def run(tree: Path, args: list[str], env: dict[str, str],
        entry: str = ENTRY) -> tuple[float, float]:
    """(wall time, CPU time: user + system) of one command, in seconds."""
    t0, c0 = time.perf_counter(), _children_cpu()
    subprocess.run([sys.executable, "-c", entry, *args], cwd=tree, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   env={**env, "PYTHONPATH": str(tree)})
    return time.perf_counter() - t0, _children_cpu() - c0


def setup(tree: Path, folder: Path, env: dict[str, str], n_tasks: int) -> None:
    tasks = folder / "tasks.csv"
    tasks.write_text("id,category,text\n" + "".join(
        f"t{i},c{i % 3},sentence {i}\n" for i in range(n_tasks)))
    for args in (["init"], ["project", "create", "bench", "--labels", "neg,pos",
                            "--budget", "100", "--max-labels", "3"],
                 ["tasks", "load", "bench", str(tasks)],
                 ["workers", "enroll", "bench", "alice"], ["workers", "enroll", "bench", "bob"]):
        subprocess.run([sys.executable, "-c", ENTRY, *args], cwd=tree, check=True,
                       capture_output=True, env={**env, "PYTHONPATH": str(tree)})


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--before", action="append", default=[],
                    help="git revision to compare with (repeat for several)")
    ap.add_argument("--plain-exit", action="store_true",
                    help="also this tree without main()'s own ending (the interpreter's "
                         "teardown as it was before e2cd314)")
    ap.add_argument("--tasks", type=int, default=50)
    ap.add_argument("--section", default="cli-start")
    ap.add_argument("--bytecode", choices=["warm", "as-env"], default="warm",
                    help="warm: each tree's .pyc cached in the temporary folder (default); "
                         "as-env: as PYTHONDONTWRITEBYTECODE and PYTHONPYCACHEPREFIX say")
    args = ap.parse_args()
    load_start = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as d:
        folder = Path(d)
        env = {k: v for k, v in os.environ.items() if not k.startswith("LABELQ_")}
        env["LABELQ_DATABASE_URL"] = f"sqlite:///{folder / 'cli.db'}"
        if args.bytecode == "warm":
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            env["PYTHONPYCACHEPREFIX"] = str(folder / "pycache")
        bytecode = ("bytecode cached in the temporary folder (PYTHONPYCACHEPREFIX), as an "
                    "installed labelq's .pyc" if args.bytecode == "warm" else
                    "bytecode as the environment said (PYTHONDONTWRITEBYTECODE="
                    f"{os.environ.get('PYTHONDONTWRITEBYTECODE', '') or 'unset'}: "
                    + ("the project's modules compiled from source in every run)"
                       if os.environ.get("PYTHONDONTWRITEBYTECODE") else "cached)"))
        # name -> (folder, entry)
        trees: dict[str, tuple[Path, str]] = {"this tree": (ROOT, ENTRY)}
        if args.plain_exit:
            trees["this tree, plain exit"] = (ROOT, PLAIN_EXIT)
        for rev in args.before:
            old = folder / f"before-{rev}"
            old.mkdir()
            archive = subprocess.run(["git", "archive", rev], cwd=ROOT, check=True,
                                     capture_output=True).stdout
            subprocess.run(["tar", "-x", "-C", str(old)], input=archive, check=True)
            trees[f"before ({rev})"] = (old, ENTRY)
        setup(ROOT, folder, env, args.tasks)
        times: dict[tuple[str, str], list[float]] = {}
        cpus: dict[tuple[str, str], list[float]] = {}
        for tree, entry in trees.values():  # warm the bytecode caches (and the file cache)
            for _, cmd in COMMANDS:
                run(tree, cmd, env, entry)
        for _ in range(args.runs):
            for label, cmd in COMMANDS:
                for name, (tree, entry) in trees.items():
                    wall, cpu = run(tree, cmd, env, entry)
                    times.setdefault((label, name), []).append(wall)
                    cpus.setdefault((label, name), []).append(cpu)
    load = os.getloadavg()[0]
    names = list(trees)
    lines = ["## CLI start-up (`bench/cli_start.py`)", "",
             f"Command: `{command_line()}`", "",
             f"Machine: {machine()}; load average (1 min) {load_start:.1f} at the start, "
             f"{load:.1f} at the end (the machine is shared: other jobs ran; wall times "
             "grow with the load, CPU times much less).", "",
             f"Wall time of a fresh process per command (`python -c 'from cli.main import "
             f"main; main()'`, what the `labelq` script runs; a pyenv shim adds its own "
             f"~0.1-0.2 s), a small project ({args.tasks} tasks, 2 annotators, SQLite); "
             f"{bytecode}; median, 10th and 90th percentile of {args.runs} runs"
             + (", the trees alternated run by run." if len(names) > 1 else ".")
             + (" `this tree, plain exit`: the same tree with the interpreter's own teardown "
                "(`sys.exit(cli.main(...))`, not `main()`, which disposes the engines and "
                "freezes the imported objects first)." if args.plain_exit else ""), "",
             "| command | " + " | ".join(f"{n} median s (p10-p90)" for n in names)
             + "".join(f" | {n} / this tree" for n in names[1:]) + " | "
             + " | ".join(f"{n} CPU s (median)" for n in names) + " |",
             "|---|" + "---:|" * (3 * len(names) - 1)]
    for label, _ in COMMANDS:
        cells, medians = [], []
        for n in names:
            xs = sorted(times[(label, n)])
            med = statistics.median(xs)
            medians.append(med)
            q = statistics.quantiles(xs, n=10) if len(xs) >= 2 else [xs[0]] * 9
            cells.append(f"{med:.3f} ({q[0]:.3f}-{q[-1]:.3f})")
        cells += [f"{m / medians[0]:.2f}x" for m in medians[1:]]
        cells += [f"{statistics.median(cpus[(label, n)]):.3f}" for n in names]
        lines.append(f"| `{label}` | " + " | ".join(cells) + " |")
    help_med = statistics.median(times[("labelq --help", names[0])])
    status_med = statistics.median(times[("labelq status NAME", names[0])])
    lines += ["", f"Targets (issue 36): `labelq --help` ≤ 0.3 s: {help_med:.3f} s "
              f"({'met' if help_med <= 0.3 else 'not met'}); `labelq status NAME` ≤ 0.6 s: "
              f"{status_med:.3f} s ({'met' if status_med <= 0.6 else 'not met'})."]
    text = "\n".join(lines)
    print(text)
    write_section(args.section, text)


if __name__ == "__main__":
    main()
