"""Issue 41: does the export's 95 % accuracy interval hold, and are its confidences
calibrated, with n random gold answers?

    nice -n 10 python -m bench.interval_coverage [--draws 50] [--n 20 50 100] [--jobs 2]
        [--only rte temp] [--no-write]

For every shared data set with a truth file and every n: ``--draws`` seeded draws of n gold
tasks uniformly among the labelled tasks with a truth (they keep their crowd labels, as
audit answers drawn from the labelled tasks do); the default export (``auto``, all gold
random: it calibrates and bounds) is fitted with their truth as gold, and scored on the
*other* labelled tasks with a truth:

* **coverage**: the share of draws whose 95 % interval holds the accuracy of those tasks'
  exported answers; zero-width intervals are counted; the median width is reported;
* **ECE** at n = 50 (or the n given with ``--ece-n``): the expected calibration error of the
  exported confidences on those tasks, 10 equal-width bins, mean over draws with its
  standard error (std / sqrt(draws)).

On the sets with truth for only part of their tasks (trec2010, trec2011_crowd, adult2) the
accuracy scored is of the other tasks *with a truth*, itself a sample of the tasks the
interval speaks of. Fits run in a process pool (``--jobs``), one fit per draw.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from labelq.aggregation import get_aggregator
from labelq.datasets import load_dataset, shared_datasets_dir

from ._report import command_line, machine, write_section

BINS = 10
CACHE = Path(__file__).resolve().parent / "results" / "interval_coverage.jsonl"
_CACHE: dict[str, Any] = {}


def ece(conf: np.ndarray, right: np.ndarray, bins: int = BINS) -> float:
    """Expected calibration error over ``bins`` equal-width bins of confidence."""
    b = np.minimum((conf * bins).astype(int), bins - 1)
    c = np.bincount(b, weights=conf, minlength=bins)
    r = np.bincount(b, weights=right, minlength=bins)
    return float(np.abs(r - c).sum() / max(conf.size, 1))


def ece_floor(conf: np.ndarray, reps: int = 200, seed: int = 0) -> float:
    """The ECE perfectly calibrated confidences ``conf`` would show on as many tasks (right
    drawn at each task's confidence): how much of a measured ECE is the scoring's own
    noise (58 tasks, bluebirds: about 0.07)."""
    rng = np.random.default_rng(seed)
    return float(np.mean([ece(conf, (rng.random(conf.size) < conf).astype(float))
                          for _ in range(reps)]))


def _data(name: str) -> Any:
    if name not in _CACHE:
        _CACHE[name] = load_dataset(shared_datasets_dir() / name)
    return _CACHE[name]


def one_draw(name: str, n: int, draw: int) -> dict[str, Any]:
    """Fit the export with ``n`` random gold answers (draw ``draw``) and score it."""
    d = _data(name)
    labelled = np.bincount(d.task, minlength=d.n_tasks) > 0
    pool = np.flatnonzero((d.truth >= 0) & labelled)
    rng = np.random.default_rng([draw, n, sum(map(ord, name))])
    pick = rng.choice(pool, min(n, pool.size - 1), replace=False)
    gold = np.full(d.n_tasks, -1, dtype=np.int64)
    gold[pick] = d.truth[pick]
    t0 = time.process_time()
    res = get_aggregator("auto").fit(d.task, d.worker, d.label, n_tasks=d.n_tasks,
                                     n_workers=d.n_workers, n_classes=d.n_classes,
                                     categories=d.category, gold=gold)
    cpu = time.process_time() - t0
    score = (d.truth >= 0) & labelled & (gold < 0)
    right = (res.labels_[score] == d.truth[score]).astype(float)
    conf = res.confidence_[score]
    acc = float(right.mean())
    a = res.accuracy_
    low = np.nan if a.low is None else a.low
    high = np.nan if a.high is None else a.high
    return {"name": name, "n": n, "draw": draw, "acc": acc, "estimate": a.estimate,
            "low": low, "high": high, "covered": bool(low <= acc <= high),
            "width": high - low, "floor_ece": ece_floor(conf), "basis": a.basis, "ece": ece(conf, right),
            "calibrated": bool(res.calibration_["calibrated"]), "cpu": cpu,
            "method": res.method_}


def _run(job: tuple[str, int, int]) -> dict[str, Any]:
    return one_draw(*job)


def run(names: list[str], ns: list[int], draws: int, jobs: int, cache: Path
        ) -> list[dict[str, Any]]:
    """Fit every (set, n, draw) of ``names`` not in ``cache`` (JSON lines: a run can be
    resumed, or extended by draws, sets or values of n); returns every cached fit."""
    done: dict[tuple[str, int, int], dict[str, Any]] = {}
    if cache.exists():
        for line in cache.read_text().splitlines():
            r = json.loads(line)
            done[(r["name"], r["n"], r["draw"])] = r
    work = [(name, n, s) for s in range(draws) for name in names for n in ns
            if (name, n, s) not in done]
    cache.parent.mkdir(parents=True, exist_ok=True)
    with ProcessPoolExecutor(max_workers=jobs) as ex, cache.open("a") as fh:
        for i, r in enumerate(ex.map(_run, work, chunksize=2)):
            done[(r["name"], r["n"], r["draw"])] = r
            fh.write(json.dumps(r) + "\n")
            fh.flush()
            if (i + 1) % 50 == 0:
                print(f"{i + 1}/{len(work)} fits", flush=True)
    return list(done.values())


def summarise(rows: list[dict[str, Any]], ece_n: int) -> dict[str, Any]:
    by_n: dict[int, list[dict[str, Any]]] = defaultdict(list)
    by_set: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by_n[r["n"]].append(r)
        by_set[(r["name"], r["n"])].append(r)
    per_n = {n: {"coverage": float(np.mean([r["covered"] for r in rs])),
                 "cases": len(rs),
                 "zero_width": int(sum(r["width"] <= 0 for r in rs)),
                 "median_width": float(np.median([r["width"] for r in rs]))}
             for n, rs in sorted(by_n.items())}
    per_set = {k: {"coverage": float(np.mean([r["covered"] for r in rs])),
                   "median_width": float(np.median([r["width"] for r in rs])),
                   "acc": float(np.mean([r["acc"] for r in rs])),
                   "ece": float(np.mean([r["ece"] for r in rs])),
                   "ece_se": float(np.std([r["ece"] for r in rs], ddof=1) / np.sqrt(len(rs)))
                   if len(rs) > 1 else float("nan"),
                   "floor": float(np.mean([r["floor_ece"] for r in rs])),
                   "draws": len(rs)}
               for k, rs in sorted(by_set.items())}
    eces = {name: v for (name, n), v in per_set.items() if n == ece_n}
    return {"per_n": per_n, "per_set": per_set, "ece": eces,
            "ece_ok": sum(v["ece"] <= 0.05 for v in eces.values()),
            "cpu": float(sum(r["cpu"] for r in rows))}


def render(s: dict[str, Any], names: list[str], ns: list[int], draws: int, ece_n: int,
           wall: float) -> str:
    lines = ["## An accuracy interval that holds, and calibrated confidences "
             "(`bench/interval_coverage.py`, issue 41)", "",
             f"Command: `nice -n 10 {command_line()}`", "",
             f"Machine: {machine()} (shared with other jobs); {len(names)} data sets x "
             f"up to {draws} draws x n in {{{', '.join(map(str, ns))}}}: "
             f"{sum(v['cases'] for v in s['per_n'].values())} fits, {s['cpu']:.0f} s of "
             f"fitting CPU (this run's wall time {wall:.0f} s; fits cached in "
             f"bench/results/interval_coverage.jsonl are read, not redone).", "",
             "n random gold answers drawn uniformly among the labelled tasks with a truth "
             "(keeping their crowd labels); the default export (`auto`) fitted with them; "
             "scored on the *other* labelled tasks with a truth. Coverage: share of draws "
             "whose 95 % interval (exact, finite-population Clopper-Pearson on the held-out "
             "answers, labelq/aggregation/guard.py) holds those tasks' accuracy.", "",
             "| n | cases | coverage | zero-width | median width |", "|---|---|---|---|---|"]
    for n, v in s["per_n"].items():
        lines.append(f"| {n} | {v['cases']} | {v['coverage']:.3f} | {v['zero_width']} | "
                     f"{v['median_width']:.3f} |")
    lines += ["", "Per set: coverage (median width; draws) per n; accuracy of the other tasks; "
              f"ECE at n = {ece_n} (10 equal-width bins, mean over draws ± its standard "
              "error).", "",
              "| data set | " + " | ".join(f"n={n}" for n in ns)
              + f" | accuracy | ECE, n={ece_n} | ECE of calibrated confidences |",
              "|---|" + "---|" * (len(ns) + 3)]
    for name in names:
        cells = []
        for n in ns:
            v = s["per_set"].get((name, n))
            cells.append("-" if v is None else
                         f"{v['coverage']:.2f} ({v['median_width']:.3f}; {v['draws']})")
        e = s["ece"].get(name)
        acc = s["per_set"].get((name, ece_n), s["per_set"].get((name, ns[0])))
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {acc['acc']:.3f} | "
                     + ("- | -" if e is None else
                        f"{e['ece']:.3f} ± {e['ece_se']:.3f} | {e['floor']:.3f}") + " |")
    lines += ["", f"ECE <= 0.05 at n = {ece_n}: {s['ece_ok']} of {len(s['ece'])} sets. The last "
              "column is the ECE that perfectly calibrated confidences (the same ones, right "
              "drawn at their confidence) would show on as many tasks: the measurement's own "
              "noise, large where few tasks are scored."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--draws", type=int, default=50)
    ap.add_argument("--n", type=int, nargs="+", default=[20, 50, 100])
    ap.add_argument("--ece-n", type=int, default=50)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--only", nargs="*", help="fit only these sets")
    ap.add_argument("--table", nargs="*", help="tabulate only these sets (default: all)")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--cache", type=Path, default=CACHE,
                    help="JSON lines of the fits done (resumed; delete to refit)")
    args = ap.parse_args(argv)
    root = shared_datasets_dir()
    if root is None or not root.exists():
        raise SystemExit("shared data sets not found (set LABELQ_SHARED)")
    names = sorted(p.name for p in root.iterdir()
                   if (p / "truth.csv").exists() and (not args.only or p.name in args.only))
    t0 = time.monotonic()
    rows = run(names, args.n, args.draws, args.jobs, args.cache)
    # the table: every cached fit of the sets and n asked for, whatever run made it
    # (a set whose fits are slow may have fewer draws: the table says how many)
    names = sorted(p.name for p in root.iterdir() if (p / "truth.csv").exists()
                   and (not args.table or p.name in args.table))
    rows = [r for r in rows if r["name"] in names and r["n"] in args.n
            and r["draw"] < args.draws]
    s = summarise(rows, args.ece_n)
    text = render(s, names, args.n, args.draws, args.ece_n, time.monotonic() - t0)
    print(text)
    if not args.no_write:
        write_section("interval-coverage", text)


if __name__ == "__main__":
    main()
