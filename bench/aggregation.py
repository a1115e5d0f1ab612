"""Aggregation benchmark: labelq vs crowd-kit on every shared data set, plus DS at scale.

Run (from the repository root; crowd-kit is the ``bench`` extra):

    nice -n 10 python -m bench.aggregation [--runs 3] [--big 10000000] [--skip-ck-glad]

For every folder in the shared data sets it fits each labelq method and the matching
crowd-kit 1.4 class on the same labels, and reports accuracy against truth.csv and the
median wall time of ``--runs`` runs (crowd-kit's GLAD takes minutes, so it is timed once).
The time ratio is crowd-kit median / labelq median from the same run of this script. Then it
fits labelq's Dawid-Skene on ``--big`` synthetic labels, reporting time (median of
``--big-runs``) and peak memory (tracemalloc peak during one fit, and the process's max RSS).
The section ``aggregation`` of docs/benchmarks.md is rewritten.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import time
import tracemalloc

import numpy as np

from bench._report import machine, write_section
from labelq.aggregation import get_aggregator
from labelq.datasets import load_dataset, shared_datasets_dir

METHODS = ["mv", "wmv", "ds", "onecoin", "glad", "kos", "ds-category"]
# labelq method -> crowd-kit class name (None: crowd-kit has no counterpart)
CROWDKIT = {"mv": "MajorityVote", "wmv": "Wawa", "ds": "DawidSkene",
            "onecoin": "OneCoinDawidSkene", "glad": "GLAD", "kos": "KOS", "ds-category": None}


def timed(fn, runs: int):
    times, out = [], None
    for _ in range(runs):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return out, statistics.median(times)


def run_dataset(d, runs: int, skip_ck_glad: bool) -> list[dict]:
    import pandas as pd
    import crowdkit.aggregation as ck

    df = pd.DataFrame({"task": d.task, "worker": d.worker, "label": d.label})
    known = d.truth >= 0
    rows = []
    for m in METHODS:
        row = {"method": m}
        if m == "kos" and d.n_classes != 2:
            rows.append({**row, "skip": "binary only"})
            continue
        res, t_ours = timed(lambda: get_aggregator(m).fit_data(d), runs)
        row.update(acc=d.accuracy(res.labels_), t=t_ours)
        name = CROWDKIT[m]
        if name and not (m == "glad" and skip_ck_glad):
            n = 1 if m == "glad" else runs
            try:
                pred, t_ck = timed(lambda: getattr(ck, name)().fit_predict(df), n)
            except Exception as exc:  # noqa: BLE001 - report, do not hide, a crowd-kit failure
                row["ck_error"] = f"{type(exc).__name__}"
            else:
                lab = pred.reindex(range(d.n_tasks)).to_numpy()
                row.update(ck_acc=float(np.mean(lab[known] == d.truth[known])), ck_t=t_ck,
                           ck_runs=n)
        rows.append(row)
    return rows


def synthetic(n_labels: int, seed: int = 0, per_task: int = 10, n_workers: int = 2000,
              n_classes: int = 2):
    """Binary crowd: workers with accuracy U(0.55, 0.95), ``per_task`` labels per task."""
    rng = np.random.default_rng(seed)
    n_tasks = n_labels // per_task
    truth = rng.integers(0, n_classes, n_tasks)
    acc = rng.uniform(0.55, 0.95, n_workers)
    task = np.repeat(np.arange(n_tasks, dtype=np.int64), per_task)
    worker = rng.integers(0, n_workers, task.size)
    right = rng.random(task.size) < acc[worker]
    wrong = (truth[task] + rng.integers(1, n_classes, task.size)) % n_classes
    label = np.where(right, truth[task], wrong)
    return task, worker, label, truth


def run_big(n_labels: int, runs: int) -> dict:
    task, worker, label, truth = synthetic(n_labels)
    fit = lambda: get_aggregator("ds").fit(task, worker, label)  # noqa: E731
    res, t = timed(fit, runs)
    tracemalloc.start()
    fit()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    return {"n": n_labels, "t": t, "runs": runs, "acc": float(np.mean(res.labels_ == truth)),
            "iters": res.n_iter_, "peak_mb": peak / 2**20, "rss_mb": rss}


def fmt(x, spec=".4f"):
    return "—" if x is None else format(x, spec)


def render(results: dict, big: dict | None, args) -> str:
    lines = [
        "## Aggregation (labelq vs crowd-kit)", "",
        f"Command: `python -m bench.aggregation {' '.join(sys.argv[1:])}` (run under `nice -n 10`)  ", f"Machine: {machine()} (shared with other jobs).", "",
        f"Accuracy against truth.csv; time = median of {args.runs} runs (crowd-kit GLAD: 1 "
        "run); ratio = crowd-kit time / labelq time, both measured in this run. crowd-kit "
        "counterparts: mv=MajorityVote, wmv=Wawa, ds=DawidSkene, onecoin=OneCoinDawidSkene, "
        "glad=GLAD, kos=KOS; ds-category has none.", "",
    ]
    if args.skip_ck_glad:
        lines += ["crowd-kit GLAD was not run (`--skip-ck-glad`: it takes minutes per data set); "
                  "its accuracy and times are in ALGORITHMS.md §6.", ""]
    for name, rows in results.items():
        lines += [f"### {name}", "",
                  "| method | labelq acc | crowd-kit acc | labelq time (s) | crowd-kit time (s) "
                  "| speed-up |", "|---|---|---|---|---|---|"]
        for r in rows:
            if "skip" in r:
                lines.append(f"| {r['method']} | — ({r['skip']}) | | | | |")
                continue
            ratio = r["ck_t"] / r["t"] if "ck_t" in r else None
            ck_acc = f"fails ({r['ck_error']})" if "ck_error" in r else fmt(r.get("ck_acc"))
            lines.append(f"| {r['method']} | {fmt(r['acc'])} | {ck_acc} | "
                         f"{fmt(r['t'], '.4f')} | {fmt(r.get('ck_t'), '.3f')} | "
                         f"{fmt(ratio, '.1f')}{'×' if ratio else ''} |")
        lines.append("")
    if big:
        lines += ["### Dawid-Skene at scale", "",
                  f"{big['n']:,} synthetic binary labels (10 per task, 2,000 workers with accuracy "
                  f"U(0.55, 0.95)): fit time {big['t']:.1f} s (median of {big['runs']}), "
                  f"{big['iters']} EM iterations, accuracy {big['acc']:.4f}; peak traced memory "
                  f"during one fit {big['peak_mb']:.0f} MiB (tracemalloc), process max RSS "
                  f"{big['rss_mb']:.0f} MiB (includes the generated data set). Target: < 60 s.",
                  ""]
    return "\n".join(lines)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--big", type=int, default=10_000_000, help="0 skips the scale run")
    ap.add_argument("--big-runs", type=int, default=3)
    ap.add_argument("--skip-ck-glad", action="store_true")
    ap.add_argument("--only", nargs="*", help="data set names (default: all)")
    args = ap.parse_args(argv)
    root = shared_datasets_dir()
    if root is None:
        raise SystemExit("shared data sets not found (set LABELQ_SHARED)")
    results = {}
    for folder in sorted(p for p in root.iterdir() if (p / "truth.csv").exists()):
        if args.only and folder.name not in args.only:
            continue
        d = load_dataset(folder)
        results[d.name] = run_dataset(d, args.runs, args.skip_ck_glad)
        print(d.name, [(r["method"], fmt(r.get("acc")), fmt(r.get("ck_acc"))) for r in
                       results[d.name]], flush=True)
    big = run_big(args.big, args.big_runs) if args.big else None
    if big:
        print("big", big, flush=True)
    write_section("aggregation", render(results, big, args))


if __name__ == "__main__":
    main()
