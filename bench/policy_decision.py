"""Per-decision cost of optkg, optkg-workers and auto with a PriorityIndex, at 10k and 1M tasks.

One decision = a worker asks: ``index.top(k)`` candidates that pass the eligibility check
(label cap), the policy's ``select_task`` among them (worker-specific score for
optkg-workers), the simulated answer, ``update``, and re-filing the touched tasks with their
new ``priority``. Reported: the median over many decisions after a warm-up, the ratio
1M / 10k (target: within 3x), and for contrast one full-scan decision (scoring every task).

    nice -n 10 python bench/policy_decision.py [--decisions 3000] [--sizes 10000,1000000]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._report import command_line, machine, write_section  # noqa: E402
from labelq.policies import Observation, Problem, build  # noqa: E402
from labelq.policies.index import PriorityIndex  # noqa: E402


def run(spec: str, n_tasks: int, decisions: int, k: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    n_workers, cap = 20, 10
    policy = build(spec)
    problem = Problem(n_tasks=n_tasks, n_workers=n_workers, max_labels_per_task=cap)
    theta = rng.random(n_tasks)
    rho = rng.beta(4, 1, n_workers)
    t0 = time.perf_counter()
    state = policy.init_state(problem)
    index = PriorityIndex(policy.priority(state, np.arange(n_tasks)))
    build_s = time.perf_counter() - t0
    labels = np.zeros(n_tasks, dtype=np.int64)
    eligible = lambda t: labels[t] < cap  # noqa: E731
    ones = np.ones(k, dtype=bool)
    times = []
    warmup = min(300, decisions // 5)
    for step in range(decisions + warmup):
        worker = int(rng.integers(n_workers))
        correct = rng.random()
        coin = rng.random()
        t0 = time.perf_counter_ns()
        cand = index.top(k, eligible)
        task = policy.select_task(state, worker, cand, ones[: len(cand)], rng)
        truth = coin < theta[task]
        label = int(truth if correct < rho[worker] else not truth)
        labels[task] += 1
        touched = policy.update(state, Observation(task=task, worker=worker, label=label))
        index.update(touched, policy.priority(state, touched))
        if step >= warmup:
            times.append(time.perf_counter_ns() - t0)
    t0 = time.perf_counter()
    policy.select_task(state, 0, np.arange(n_tasks), labels < cap, rng)
    scan_s = time.perf_counter() - t0
    return {"median_us": float(np.median(times)) / 1e3, "p90_us": float(np.percentile(times, 90)) / 1e3,
            "build_s": build_s, "scan_ms": scan_s * 1e3, "buckets": index.n_buckets}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--decisions", type=int, default=3000)
    ap.add_argument("--sizes", default="10000,1000000")
    ap.add_argument("-k", type=int, default=8, help="candidates taken from the index")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    rows, ratios = [], []
    for spec in ("optkg", "optkg-workers", "auto"):
        res = {}
        for n in sizes:
            res[n] = r = run(spec, n, args.decisions, args.k)
            print(spec, n, r, flush=True)
            rows.append(f"| {spec} | {n:,} | {r['median_us']:.0f} | {r['p90_us']:.0f} | "
                        f"{r['buckets']:,} | {r['build_s']:.2f} | {r['scan_ms']:.1f} |")
        ratio = res[sizes[-1]]["median_us"] / res[sizes[0]]["median_us"]
        ratios.append(f"- {spec}: median decision at {sizes[-1]:,} tasks / at {sizes[0]:,} tasks "
                      f"= **{ratio:.2f}x** (target: within 3x)")
    md = "\n".join([
        "## Policy decision cost (`policy-decision`)",
        "",
        f"Command: `nice -n 10 {command_line()}`  ",
        f"Machine: {machine()} (shared with other jobs)",
        "",
        f"One decision = `PriorityIndex.top({args.k})` with the label-cap check, `select_task` "
        "among those candidates, `update`, re-filing the touched task. Median and 90th "
        f"percentile over {args.decisions} decisions after a warm-up; 20 workers, cap 10 labels "
        "per task. *Build* is the initial priority of every task plus the index; *full scan* "
        "is one `select_task` over all tasks without the index, for contrast.",
        "",
        "| policy | tasks | median µs | p90 µs | buckets at end | build s | full scan ms |",
        "|---|---|---|---|---|---|---|",
        *rows,
        "",
        *ratios,
    ])
    print(md)
    if not args.no_write:
        write_section("policy-decision", md)


if __name__ == "__main__":
    main()
