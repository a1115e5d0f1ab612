"""Does the export keep what ``auto`` learned? For every shared data set at 2, 3 and 5
labels per task: the ``auto`` policy's own posterior against the default export of the
labels it collected (``labelq simulate --policy auto --aggregate auto``: the ``auto``
aggregation with the policy's worker model, guarded by majority vote), over ``--runs``
shuffled runs. Writes the section ``export-vs-policy`` of docs/benchmarks.md.

    nice -n 10 python -m bench.export_vs_policy --runs 5 [--datasets rte,temp] [--jobs 2]

Issue 33's bar: the export >= the posterior - 0.005 in at least 90 % of the cells (data
set x budget, means over the runs) and never below it - 0.02.
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._report import command_line, machine, write_section  # noqa: E402
from labelq.datasets import shared_datasets_dir  # noqa: E402
from labelq.policies import build  # noqa: E402
from labelq.simulate.experiment import EnvSource, load_aggregator, run_rngs  # noqa: E402
from labelq.simulate.runner import run_policy  # noqa: E402

BUDGETS = (2, 3, 5)


def unit(args: tuple[str, int, int]) -> tuple[str, int, list[tuple[float, float, float]]]:
    """One shuffled run of ``auto`` on a data set: (budget, posterior, export) per budget."""
    path, run, seed = args
    source = EnvSource(kind="data", value=path)
    env_rng, rng = run_rngs(seed, run, "auto")
    env = source.build(env_rng).shuffled(env_rng)
    policy = build("auto")
    agg = load_aggregator("auto", categories=env.task_category, model="shrunk")
    cps = run_policy(policy, env, [b * env.n_tasks for b in BUDGETS], rng, aggregate=agg)
    out = [(b, cp.accuracy, cp.accuracy_aggregate) for b, cp in zip(BUDGETS, cps, strict=True)]
    return Path(path).name, run, out  # type: ignore[return-value]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--datasets", default="", help="comma-separated names (default: all)")
    ap.add_argument("--section", default="export-vs-policy",
                    help="the section of docs/benchmarks.md to write")
    args = ap.parse_args()
    root = shared_datasets_dir()
    if root is None:
        raise SystemExit("shared data sets not found (set LABELQ_SHARED)")
    # the smallest sets first (a replay's decisions cost O(tasks) each), so a partial run
    # has its cells; the section is rewritten after each set
    names = [n for n in args.datasets.split(",") if n] or sorted(
        (p.name for p in root.iterdir() if (p / "truth.csv").exists()),
        key=lambda n: (root / n / "labels.csv").stat().st_size)
    work = [(str(root / n), r, args.seed) for n in names for r in range(args.runs)]
    cells: dict[tuple[str, int], list[tuple[float, float]]] = {}
    with multiprocessing.Pool(args.jobs) as pool:
        for name, run, out in pool.imap(unit, work):
            for b, post, exp in out:
                cells.setdefault((name, b), []).append((post, exp))
            print(name, run, [(b, round(p, 4), round(e, 4)) for b, p, e in out], flush=True)
            if run == args.runs - 1:
                report(cells, args)


def report(cells: dict[tuple[str, int], list[tuple[float, float]]], args) -> None:
    lines = ["## The export against `auto`'s own posterior (`bench/export_vs_policy.py`)", "",
             f"Command: `{command_line()}`", "", f"Machine: {machine()}.", "",
             "`labelq simulate --data DIR --policy auto --aggregate auto --shuffle`: the "
             "policy's posterior and the default export of the labels it collected (the "
             "`auto` aggregation with the policy's worker model `shrunk`, guarded by "
             f"majority vote), means over {args.runs} runs.", "",
             "| data set | labels/task | posterior | export | export − posterior |",
             "|---|---|---|---|---|"]
    diffs = []
    for (name, b) in sorted(cells):
        v = np.array(cells[(name, b)])
        post, exp = v[:, 0].mean(), v[:, 1].mean()
        diffs.append(exp - post)
        lines.append(f"| {name} | {b} | {post:.3f} | {exp:.3f} | {exp - post:+.3f} |")
    d = np.array(diffs)
    lines += ["", f"Cells with the export ≥ the posterior − 0.005: {int((d >= -0.005).sum())} "
              f"of {d.size} ({(d >= -0.005).mean():.0%}); lowest {d.min():+.3f}.", ""]
    write_section(args.section, "\n".join(lines))


if __name__ == "__main__":
    main()
