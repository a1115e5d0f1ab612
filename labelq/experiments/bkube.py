"""The experiment of Rangi & Franceschetti (2018), §6, with our B-KUBE and its baselines.

Setting (paper §6): K = 20 workers, binary equally likely labels, accuracies
``p_k ~ U(0.5, 1)``, value ``v_k = 2 p_k - 1``, cost ``c_k ~ U(v_k, 1 + v_k)``, capacity
``M_k = 0.6 T`` for T in {50, 100} tasks, budget B from 100 to 300. Set A is those 20
workers; set B replaces 5 of them (the first five) by spammers ``p = 0.5`` (cost drawn the
same way, i.e. ``U(0, 1)``). Each run draws a fresh worker set and truth; every policy and
budget sees the same workers and truth (common random numbers).

The paper's worker model lets a worker label the same task again, each answer independent
(§2); that is the default here. ``--no-repeat`` forbids asking a pair twice, as the live
pipeline does.

Each policy picks (task, worker) pairs while the caller's mask allows (capacity left, cost
within the remaining budget); the run stops when the policy returns ``None``. Reported per
(T, set, budget, policy), averaged over runs:

* ``completed`` — tasks completed by the moving-on rule (see :mod:`labelq.policies.bkube`);
* ``error`` — classification error over the completed tasks (majority vote; a tie counts
  1/2); runs that complete no task are left out of this mean (their share is ``n_err``);
* ``spent`` — budget used.

Command line::

    python -m labelq.experiments.bkube --runs 100
"""

from __future__ import annotations

import argparse
import sys
import time
import zlib
from dataclasses import dataclass

import numpy as np

from ..policies import Observation, Problem, build
from ..policies.bkube import completed_tasks

__all__ = ["Instance", "make_instance", "run_policy", "run_grid", "format_table", "main",
           "format_detail", "compare", "format_compare", "DEFAULT_POLICIES",
           "DEFAULT_BUDGETS"]

DEFAULT_POLICIES = ["bkube", "bounded-eps-first:eps=0.1", "eps-first:eps=0.1",
                    "trailsourcing"]
DEFAULT_BUDGETS = [100, 150, 200, 250, 300]


@dataclass
class Instance:
    """One draw of workers and truth."""

    p: np.ndarray  # (K,) accuracy
    cost: np.ndarray  # (K,)
    capacity: np.ndarray  # (K,)
    truth: np.ndarray  # (T,)


def make_instance(n_tasks: int, worker_set: str, rng: np.random.Generator,
                  n_workers: int = 20, n_spammers: int = 5) -> Instance:
    """Draw the paper's workers (set ``"A"`` or ``"B"``) and a truth vector."""
    if worker_set not in ("A", "B"):
        raise ValueError(f"worker_set must be 'A' or 'B', got {worker_set!r}")
    p = rng.uniform(0.5, 1.0, size=n_workers)
    if worker_set == "B":
        p[:n_spammers] = 0.5
    v = 2.0 * p - 1.0
    cost = rng.uniform(v, 1.0 + v)
    capacity = np.full(n_workers, int(round(0.6 * n_tasks)), dtype=np.int64)
    truth = rng.integers(0, 2, size=n_tasks)
    return Instance(p, cost, capacity, truth)


def run_policy(spec: str, inst: Instance, budget: float, rng: np.random.Generator,
               repeat: bool = True) -> dict[str, float]:
    """Run one policy to the end of its budget; returns completed, error, spent, labels."""
    policy = build(spec)
    n_tasks, n_workers = inst.truth.size, inst.p.size
    problem = Problem(n_tasks=n_tasks, n_workers=n_workers, n_classes=2,
                      worker_cost=inst.cost.copy(), worker_capacity=inst.capacity.copy(),
                      budget=float(budget))
    state = policy.init_state(problem)
    used = np.zeros(n_workers, dtype=np.int64)
    asked = np.zeros((n_tasks, n_workers), dtype=bool)
    spent = 0.0
    labels = 0
    acc_sum = 0.0
    while True:
        workers_ok = (used < inst.capacity) & (inst.cost <= budget - spent + 1e-9)
        if not workers_ok.any():
            break
        mask = np.broadcast_to(workers_ok, (n_tasks, n_workers))
        if not repeat:
            mask = mask & ~asked
        pair = policy.select_pair(state, mask, rng)
        if pair is None:
            break
        task, worker = pair
        if not mask[task, worker]:
            raise AssertionError(f"{spec} picked an ineligible pair {pair}")
        correct = rng.random() < inst.p[worker]
        label = int(inst.truth[task]) if correct else 1 - int(inst.truth[task])
        used[worker] += 1
        asked[task, worker] = True
        spent += float(inst.cost[worker])
        labels += 1
        acc_sum += float(inst.p[worker])
        policy.update(state, Observation(task=task, worker=worker, label=label))
    done = np.asarray(state.done, dtype=bool)
    proba = policy.predict_proba(state)
    top = proba >= proba.max(axis=1, keepdims=True) - 1e-12
    err = 1.0 - top[np.arange(n_tasks), inst.truth] / top.sum(axis=1)  # tie -> 1/m
    n_done = completed_tasks(state)
    return {"completed": float(n_done),
            "error": float(err[done].mean()) if n_done else float("nan"),
            "spent": spent, "labels": float(labels),
            "accuracy": acc_sum / labels if labels else float("nan")}


def run_grid(n_tasks: int, worker_set: str, budgets: list[float], policies: list[str],
             runs: int, seed: int = 0, repeat: bool = True) -> dict:
    """Mean metrics per (budget, policy): ``{(budget, spec): {metric: mean, ...}}``."""
    acc: dict = {}
    for r in range(runs):
        inst = make_instance(n_tasks, worker_set,
                             np.random.default_rng([seed, n_tasks, ord(worker_set), r]))
        for budget in budgets:
            for spec in policies:
                rng = np.random.default_rng([seed, n_tasks, ord(worker_set), r,
                                             int(round(budget * 100)),
                                             zlib.crc32(spec.encode())])
                out = run_policy(spec, inst, budget, rng, repeat=repeat)
                acc.setdefault((budget, spec), []).append(out)
    result = {}
    for key, rows in acc.items():
        errs = np.array([o["error"] for o in rows])
        result[key] = {
            "completed": float(np.mean([o["completed"] for o in rows])),
            "error": float(np.nanmean(errs)) if np.isfinite(errs).any() else float("nan"),
            "error_se": float(np.nanstd(errs) / np.sqrt(max(np.isfinite(errs).sum(), 1))),
            "n_err": int(np.isfinite(errs).sum()),
            "spent": float(np.mean([o["spent"] for o in rows])),
            "labels": float(np.mean([o["labels"] for o in rows])),
            "accuracy": float(np.nanmean([o["accuracy"] for o in rows])),
            "per_run": {m: np.array([o[m] for o in rows]) for m in ("error", "completed")},
        }
    return result


def compare(result: dict, budgets: list[float], a: str, b: str) -> list[dict]:
    """Per budget, paired differences ``a - b`` over the runs (same workers and truth):
    mean and standard error of the error difference (runs where both completed a task) and
    of the completed-tasks difference; ``error_ok``/``done_ok`` say whether ``a``'s mean error
    is <= ``b``'s and its mean completed >= ``b``'s (the means of the table)."""
    out = []
    for bud in budgets:
        ra, rb = result[(bud, a)], result[(bud, b)]
        de = ra["per_run"]["error"] - rb["per_run"]["error"]
        de = de[np.isfinite(de)]
        dc = ra["per_run"]["completed"] - rb["per_run"]["completed"]
        out.append({
            "budget": bud,
            "d_error": float(de.mean()) if de.size else float("nan"),
            "d_error_se": float(de.std(ddof=1) / np.sqrt(de.size)) if de.size > 1 else float("nan"),
            "d_completed": float(dc.mean()),
            "d_completed_se": float(dc.std(ddof=1) / np.sqrt(dc.size)) if dc.size > 1 else float("nan"),
            "error_ok": bool(ra["error"] <= rb["error"]),
            "done_ok": bool(ra["completed"] >= rb["completed"]),
        })
    return out


def format_compare(rows: list[dict], a: str, b: str) -> str:
    """Markdown table of :func:`compare`."""
    lines = [f"| B | error {a} − {b} (± s.e.) | error ≤ | done {a} − {b} (± s.e.) | done ≥ |",
             "|---:|---:|:---:|---:|:---:|"]
    for r in rows:
        lines.append(f"| {r['budget']:g} | {r['d_error']:+.3f} ± {r['d_error_se']:.3f} | "
                     f"{'yes' if r['error_ok'] else 'no'} | {r['d_completed']:+.1f} ± "
                     f"{r['d_completed_se']:.1f} | {'yes' if r['done_ok'] else 'no'} |")
    return "\n".join(lines)


def format_table(result: dict, budgets: list[float], policies: list[str]) -> str:
    """Markdown: one row per budget; error (± s.e.) and completed tasks per policy."""
    head = "| B | " + " | ".join(f"{p} error | {p} done" for p in policies) + " |"
    sep = "|---:|" + "---:|---:|" * len(policies)
    lines = [head, sep]
    for b in budgets:
        cells = []
        for p in policies:
            m = result[(b, p)]
            cells.append(f"{m['error']:.3f} ± {m['error_se']:.3f} | {m['completed']:.1f}")
        lines.append(f"| {b:g} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def format_detail(result: dict, budgets: list[float], policies: list[str]) -> str:
    """Markdown: mean accuracy ``p`` of the workers asked (per label) and labels issued."""
    head = "| B | " + " | ".join(f"{p} p of labels | {p} labels" for p in policies) + " |"
    lines = [head, "|---:|" + "---:|---:|" * len(policies)]
    for b in budgets:
        cells = [f"{result[(b, p)]['accuracy']:.3f} | {result[(b, p)]['labels']:.1f}"
                 for p in policies]
        lines.append(f"| {b:g} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m labelq.experiments.bkube",
                                 description="Rangi & Franceschetti (2018) §6 reproduction")
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--tasks", type=int, nargs="+", default=[50, 100])
    ap.add_argument("--sets", nargs="+", default=["A", "B"], choices=["A", "B"])
    ap.add_argument("--budgets", type=float, nargs="+", default=DEFAULT_BUDGETS)
    ap.add_argument("--policies", nargs="+", default=DEFAULT_POLICIES)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-repeat", action="store_true",
                    help="never ask the same (task, worker) pair twice")
    ap.add_argument("--compare", nargs=2, metavar=("A", "B"), action="append", default=[],
                    help="also print paired per-budget differences A - B (error, completed) "
                         "with standard errors; A and B must be among --policies; may be "
                         "given several times")
    ap.add_argument("--detail", action="store_true",
                    help="also print the accuracy of the workers asked and labels issued")
    args = ap.parse_args(argv)
    for pair in args.compare:
        if not set(pair) <= set(args.policies):
            ap.error("--compare: both policies must be among --policies")
    tally = {tuple(pair): [0, 0, 0, 0] for pair in args.compare}  # cells, err, done, both
    for n_tasks in args.tasks:
        for wset in args.sets:
            t0 = time.perf_counter()
            res = run_grid(n_tasks, wset, args.budgets, args.policies, args.runs,
                           seed=args.seed, repeat=not args.no_repeat)
            print(f"\n### T = {n_tasks}, set {wset} ({args.runs} runs, "
                  f"{'no repeats' if args.no_repeat else 'repeats allowed'}, "
                  f"{time.perf_counter() - t0:.0f} s)\n")
            print(format_table(res, args.budgets, args.policies))
            if args.detail:
                print()
                print(format_detail(res, args.budgets, args.policies))
            for a, b in args.compare:
                rows = compare(res, args.budgets, a, b)
                t = tally[(a, b)]
                t[0] += len(rows)
                t[1] += sum(r["error_ok"] for r in rows)
                t[2] += sum(r["done_ok"] for r in rows)
                t[3] += sum(r["error_ok"] and r["done_ok"] for r in rows)
                print()
                print(format_compare(rows, a, b))
            spent = ", ".join(f"{p}: {np.mean([res[(b, p)]['spent'] for b in args.budgets]):.1f}"
                              for p in args.policies)
            print(f"\nmean budget spent over the budgets — {spent}")
            sys.stdout.flush()
    for (a, b), (cells, ok_err, ok_done, ok_both) in tally.items():
        print(f"\n{a} vs {b}: error <= in {ok_err} of {cells} cells, completed >= in "
              f"{ok_done} of {cells}, both in {ok_both} of {cells}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
