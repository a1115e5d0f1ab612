"""Gold on suspicion in the demo: how many careless annotators the quality rule pauses, how
many skilled ones, and what the extra gold costs, with and without ``suspect``.

Runs ``labelq demo --seed S --gold-schedule SPEC`` for each seed and each schedule
(alternated, on this machine's Redis when ``LABELQ_REDIS_URL`` is set, else the demo's own)
and writes the section ``gold-suspicion`` of docs/benchmarks.md. The demo's annotators work
in threads against a live Celery worker, so one seed does not give one outcome: the counts
are over the runs, not per seed.

    python bench/gold_suspicion.py --seeds 10
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._report import command_line, machine, write_section  # noqa: E402
from cli.demo import GOLD_SCHEDULE  # noqa: E402

WITHOUT = re.sub(r",suspect=[^,]*|,suspect_below=[^,]*", "", GOLD_SCHEDULE)
_PAUSED = re.compile(r"paused (\d+) of the (\d+) careless annotators and (\d+) of the (\d+) "
                     r"others")
_LABELS = re.compile(r"(\d+) labels \((\d+) on gold\)")
_POSTERIOR = re.compile(r"posterior \(\w+\)\s+([0-9.]+)")


def one(seed: int, schedule: str) -> dict:
    out = subprocess.run([sys.executable, "-m", "cli.main", "demo", "--seed", str(seed),
                          "--gold-schedule", schedule], cwd=ROOT, capture_output=True,
                         text=True, timeout=600, check=True).stdout
    paused, labels, acc = _PAUSED.search(out), _LABELS.search(out), _POSTERIOR.search(out)
    if not (paused and labels and acc):
        raise SystemExit(f"unexpected demo output:\n{out}")
    return {"careless": int(paused[1]), "n_careless": int(paused[2]),
            "others": int(paused[3]), "n_others": int(paused[4]),
            "labels": int(labels[1]), "gold": int(labels[2]), "accuracy": float(acc[1])}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=10, help="demo seeds 0..N-1")
    ap.add_argument("--section", default="gold-suspicion")
    args = ap.parse_args()
    runs: dict[str, list[dict]] = {WITHOUT: [], GOLD_SCHEDULE: []}
    for seed in range(args.seeds):
        for schedule in runs:
            runs[schedule].append(one(seed, schedule))
            r = runs[schedule][-1]
            print(f"seed {seed} {schedule}: {r}", flush=True)
    lines = ["## Gold on suspicion in the demo (`bench/gold_suspicion.py`)", "",
             f"Command: `{command_line()}`", "", f"Machine: {machine()}.", "",
             "`labelq demo` (300 tasks, 40 gold, 12 annotators of whom 2 careless at accuracy "
             "0.35, budget 1,200 labels; quality rule: pause below 0.6 gold accuracy with "
             "confidence 0.95 after 8 gold answers) with seeds "
             f"0–{args.seeds - 1}, once per schedule, alternated. Totals over the runs:", "",
             "| gold schedule | careless annotators paused | others paused | gold labels "
             "(share of all) | posterior accuracy (mean) |", "|---|---:|---:|---:|---:|"]
    for schedule, rs in runs.items():
        careless = sum(r["careless"] for r in rs)
        n_careless = sum(r["n_careless"] for r in rs)
        others = sum(r["others"] for r in rs)
        n_others = sum(r["n_others"] for r in rs)
        gold, labels = sum(r["gold"] for r in rs), sum(r["labels"] for r in rs)
        acc = sum(r["accuracy"] for r in rs) / len(rs)
        lines.append(f"| `{schedule}` | {careless} of {n_careless} | {others} of {n_others} "
                     f"| {gold:,} ({gold / labels:.1%}) | {acc:.3f} |")
        print(lines[-1], flush=True)
    write_section(args.section, "\n".join(lines))


if __name__ == "__main__":
    main()
