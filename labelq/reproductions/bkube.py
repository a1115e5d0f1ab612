"""The experiment of Rangi & Franceschetti (2018), §6, with our B-KUBE and its baselines.

Setting (paper §6): K = 20 workers, binary equally likely labels, accuracies
``p_k ~ U(0.5, 1)``, value ``v_k = 2 p_k - 1``, cost ``c_k ~ U(v_k, 1 + v_k)``, capacity
``M_k = 0.6 T`` for T in {50, 100} tasks, budget B from 100 to 300. Set A is those 20
workers; set B "contains 15 workers from set A and 5 spammers, i.e. p_k = 0.5" (§6): five
workers at *random* positions (the paper gives no order, and the index matters: the first K
picks, round-robin exploration and knapsack ties all go to the lower index) become spammers,
their cost drawn the same way, i.e. ``U(0, 1)``. ``spammers="first"`` puts them at indices
0-4 instead (a sensitivity check only). Each run draws a fresh worker set and truth; every
policy and budget sees the same workers and truth (common random numbers).

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

``--estimates`` adds a diagnosis of the value estimates (:func:`estimate_report`): each
policy's labels are replayed under both agreement rules and ``v̂`` is compared with the true
``v = 2p − 1``.

Command line::

    python -m labelq.reproductions.bkube --runs 100
"""

from __future__ import annotations

import argparse
import sys
import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypedDict

import numpy as np

from ..policies import Observation, Problem, build
from ..policies.base import FloatArray, IntArray
from ..policies.bkube import AGREEMENT_RULES, agreement_credit, completed_tasks

__all__ = ["Instance", "make_instance", "agreement_estimates", "estimate_report",
           "format_estimates", "run_policy", "run_grid", "format_table", "main",
           "format_detail", "compare", "format_compare", "DEFAULT_POLICIES",
           "DEFAULT_BUDGETS"]

DEFAULT_POLICIES = ["bkube", "bounded-eps-first:eps=0.1", "eps-first:eps=0.1",
                    "trailsourcing"]
DEFAULT_BUDGETS = [100, 150, 200, 250, 300]


@dataclass
class Instance:
    """One draw of workers and truth."""

    p: FloatArray  # (K,) accuracy
    cost: FloatArray  # (K,)
    capacity: IntArray  # (K,)
    truth: IntArray  # (T,)


class _GridCell(TypedDict):
    completed: float
    error: float
    error_se: float
    n_err: int
    spent: float
    labels: float
    accuracy: float
    per_run: dict[str, FloatArray]  # "error", "completed": one entry per run


class GridCell(_GridCell, total=False):
    """The means of one (budget, policy) of :func:`run_grid` over the runs."""

    estimates: dict[str, tuple[float, float]]  # with ``estimates``: (mean, s.e.) per key


#: :func:`run_grid`'s result, by (budget, policy spec)
Grid = dict[tuple[float, str], GridCell]


class CompareRow(TypedDict):
    """One budget of :func:`compare`."""

    budget: float
    d_error: float
    d_error_se: float
    d_completed: float
    d_completed_se: float
    error_ok: bool
    done_ok: bool


SPAMMER_POSITIONS = ("random", "first")


def make_instance(n_tasks: int, worker_set: str, rng: np.random.Generator,
                  n_workers: int = 20, n_spammers: int = 5,
                  spammers: str = "random") -> Instance:
    """Draw the paper's workers (set ``"A"`` or ``"B"``) and a truth vector.

    In set B, ``n_spammers`` workers get ``p = 0.5``: at positions drawn uniformly without
    replacement (``spammers="random"``, default) or at indices ``0 .. n_spammers - 1``
    (``"first"``)."""
    if worker_set not in ("A", "B"):
        raise ValueError(f"worker_set must be 'A' or 'B', got {worker_set!r}")
    if spammers not in SPAMMER_POSITIONS:
        raise ValueError(f"spammers must be one of {SPAMMER_POSITIONS}, got {spammers!r}")
    p = rng.uniform(0.5, 1.0, size=n_workers)
    if worker_set == "B":
        if spammers == "random":
            p[rng.choice(n_workers, size=n_spammers, replace=False)] = 0.5
        else:
            p[:n_spammers] = 0.5
    v = 2.0 * p - 1.0
    cost = rng.uniform(v, 1.0 + v)
    capacity = np.full(n_workers, int(round(0.6 * n_tasks)), dtype=np.int64)
    truth = rng.integers(0, 2, size=n_tasks)
    return Instance(p, cost, capacity, truth)


def agreement_estimates(task_labels: Sequence[Sequence[Sequence[int]]], n_workers: int,
                        n_classes: int, rule: str) -> tuple[FloatArray, IntArray]:
    """Replay a run's labels (``task_labels[i]`` = ``[worker, label]`` pairs of task i in
    arrival order) and return ``(agree, pulls)`` per worker under the agreement ``rule`` of
    :mod:`labelq.policies.bkube`: ``at-label`` scores each label once against the majority
    right after it, ``current`` against the task's final majority. Both estimators can so be
    judged on the *same* stream of labels."""
    if rule not in AGREEMENT_RULES:
        raise ValueError(f"rule must be one of {AGREEMENT_RULES}, got {rule!r}")
    agree = np.zeros(n_workers)
    pulls = np.zeros(n_workers, dtype=np.int64)
    for rows in task_labels:
        if not rows:
            continue
        arr = np.asarray(rows, dtype=np.int64)
        counts = np.zeros(n_classes)
        for w, lab in arr:
            counts[lab] += 1
            if rule == "at-label":
                agree[w] += float(agreement_credit(np.array([lab]), counts)[0])
        if rule == "current":
            np.add.at(agree, arr[:, 0], agreement_credit(arr[:, 1], counts))
        np.add.at(pulls, arr[:, 0], 1)
    return agree, pulls


TOP = 5  # workers in the "top by density" summaries of estimate_report


def estimate_report(task_labels: Sequence[Sequence[Sequence[int]]],
                    inst: Instance) -> dict[str, float]:
    """How good the value estimates ``v̂ = 2p̂ − 1`` are at the end of a run, for each agreement
    rule, against the true ``v = 2p − 1`` (binary), over the workers with at least one label:

    * ``bias[rule]`` mean ``v̂ − v``; ``bias_spam[rule]`` the same over the spammers
      (``p = 0.5``; NaN without spammers); ``rmse[rule]``;
    * ``top_ucb[rule]`` mean true ``v`` of the ``TOP`` workers with the largest
      ``(v̂ + sqrt(2 ln n / pulls)) / c`` (B-KUBE's knapsack order), ``top_plain[rule]`` by
      ``v̂ / c`` (no bonus), ``top_oracle`` by ``v / c``, ``cost_ucb[rule]`` and
      ``cost_oracle`` their mean costs;
    * ``radius`` mean bonus ``sqrt(2 ln n / pulls)``, ``n`` = labels + 1;
      ``pulls`` mean labels per worker.
    """
    k = inst.p.size
    v = 2.0 * inst.p - 1.0
    out: dict[str, float] = {}
    seen = None
    for rule in AGREEMENT_RULES:
        agree, pulls = agreement_estimates(task_labels, k, 2, rule)
        seen = pulls > 0
        if not seen.any():
            return {}
        v_hat = 2.0 * agree[seen] / pulls[seen] - 1.0
        err = v_hat - v[seen]
        spam = inst.p[seen] == 0.5
        radius = np.sqrt(2.0 * np.log(pulls.sum() + 1.0) / pulls[seen])
        c, vs = inst.cost[seen], v[seen]
        top = min(TOP, int(seen.sum()))
        ucb = np.argsort(-(v_hat + radius) / c, kind="stable")[:top]
        plain = np.argsort(-v_hat / c, kind="stable")[:top]
        oracle = np.argsort(-vs / c, kind="stable")[:top]
        out[f"bias[{rule}]"] = float(err.mean())
        out[f"bias_spam[{rule}]"] = float(err[spam].mean()) if spam.any() else float("nan")
        out[f"rmse[{rule}]"] = float(np.sqrt(np.mean(err ** 2)))
        out[f"top_ucb[{rule}]"] = float(vs[ucb].mean())
        out[f"top_plain[{rule}]"] = float(vs[plain].mean())
        out[f"cost_ucb[{rule}]"] = float(c[ucb].mean())
        out["top_oracle"] = float(vs[oracle].mean())
        out["cost_oracle"] = float(c[oracle].mean())
        out["radius"] = float(radius.mean())
        out["pulls"] = float(pulls[seen].mean())
    return out


def run_policy(spec: str, inst: Instance, budget: float, rng: np.random.Generator,
               repeat: bool = True, estimates: bool = False) -> dict[str, float]:
    """Run one policy to the end of its budget; returns completed, error, spent, labels
    (and, with ``estimates``, the keys of :func:`estimate_report`)."""
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
    out = {"completed": float(n_done),
           "error": float(err[done].mean()) if n_done else float("nan"),
           "spent": spent, "labels": float(labels),
           "accuracy": acc_sum / labels if labels else float("nan")}
    if estimates:
        out.update(estimate_report(state.task_labels, inst))
    return out


def run_grid(n_tasks: int, worker_set: str, budgets: list[float], policies: list[str],
             runs: int, seed: int = 0, repeat: bool = True, spammers: str = "random",
             estimates: bool = False) -> Grid:
    """Mean metrics per (budget, policy): ``{(budget, spec): {metric: mean, ...}}``; with
    ``estimates`` also ``result[key]["estimates"]`` = ``{name: (mean, s.e.)}`` of the
    :func:`estimate_report` keys over the runs."""
    acc: dict[tuple[float, str], list[dict[str, float]]] = {}
    for r in range(runs):
        inst = make_instance(n_tasks, worker_set,
                             np.random.default_rng([seed, n_tasks, ord(worker_set), r]),
                             spammers=spammers)
        for budget in budgets:
            for spec in policies:
                rng = np.random.default_rng([seed, n_tasks, ord(worker_set), r,
                                             int(round(budget * 100)),
                                             zlib.crc32(spec.encode())])
                out = run_policy(spec, inst, budget, rng, repeat=repeat,
                                 estimates=estimates)
                acc.setdefault((budget, spec), []).append(out)
    result: Grid = {}
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
        if estimates:
            est: dict[str, tuple[float, float]] = {}
            for name in sorted({n for o in rows for n in o if "[" in n or n in _EST_PLAIN}):
                x = np.array([o.get(name, np.nan) for o in rows])
                x = x[np.isfinite(x)]
                est[name] = (float(x.mean()) if x.size else float("nan"),
                             float(x.std(ddof=1) / np.sqrt(x.size)) if x.size > 1
                             else float("nan"))
            result[key]["estimates"] = est
    return result


_EST_PLAIN = ("top_oracle", "cost_oracle", "radius", "pulls")


def compare(result: Grid, budgets: list[float], a: str, b: str) -> list[CompareRow]:
    """Per budget, paired differences ``a - b`` over the runs (same workers and truth):
    mean and standard error of the error difference (runs where both completed a task) and
    of the completed-tasks difference; ``error_ok``/``done_ok`` say whether ``a``'s mean error
    is <= ``b``'s and its mean completed >= ``b``'s (the means of the table)."""
    out: list[CompareRow] = []
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


def format_compare(rows: list[CompareRow], a: str, b: str) -> str:
    """Markdown table of :func:`compare`."""
    lines = [f"| B | error {a} − {b} (± s.e.) | error ≤ | done {a} − {b} (± s.e.) | done ≥ |",
             "|---:|---:|:---:|---:|:---:|"]
    for r in rows:
        lines.append(f"| {r['budget']:g} | {r['d_error']:+.3f} ± {r['d_error_se']:.3f} | "
                     f"{'yes' if r['error_ok'] else 'no'} | {r['d_completed']:+.1f} ± "
                     f"{r['d_completed_se']:.1f} | {'yes' if r['done_ok'] else 'no'} |")
    return "\n".join(lines)


def format_table(result: Grid, budgets: list[float], policies: list[str]) -> str:
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


def format_estimates(result: Grid, budgets: list[float], policies: list[str]) -> str:
    """Markdown: per (budget, policy whose labels are replayed) and agreement rule, the bias
    of ``v̂`` (± s.e. over runs), over the spammers, the RMSE, and the mean true ``v`` and cost
    of the top-5 workers by ``(v̂ + radius)/c``, by ``v̂/c`` and by ``v/c``."""
    lines = ["| B | labels of | labels/worker | radius | rule | bias v̂ − v | bias, spammers | "
             "RMSE | v of top-5 by (v̂+r)/c | their cost | v of top-5 by v̂/c | "
             "v of top-5 by v/c | their cost |",
             "|---:|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for b in budgets:
        for p in policies:
            e = result[(b, p)]["estimates"]
            for rule in AGREEMENT_RULES:
                bias, se = e[f"bias[{rule}]"]
                lines.append(
                    f"| {b:g} | {p} | {e['pulls'][0]:.1f} | {e['radius'][0]:.2f} | {rule} | "
                    f"{bias:+.3f} ± {se:.3f} | {e[f'bias_spam[{rule}]'][0]:+.3f} | "
                    f"{e[f'rmse[{rule}]'][0]:.3f} | {e[f'top_ucb[{rule}]'][0]:.3f} | "
                    f"{e[f'cost_ucb[{rule}]'][0]:.3f} | {e[f'top_plain[{rule}]'][0]:.3f} | "
                    f"{e['top_oracle'][0]:.3f} | {e['cost_oracle'][0]:.3f} |")
    return "\n".join(lines)


def format_detail(result: Grid, budgets: list[float], policies: list[str]) -> str:
    """Markdown: mean accuracy ``p`` of the workers asked (per label) and labels issued."""
    head = "| B | " + " | ".join(f"{p} p of labels | {p} labels" for p in policies) + " |"
    lines = [head, "|---:|" + "---:|---:|" * len(policies)]
    for b in budgets:
        cells = [f"{result[(b, p)]['accuracy']:.3f} | {result[(b, p)]['labels']:.1f}"
                 for p in policies]
        lines.append(f"| {b:g} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m labelq.reproductions.bkube",
                                 description="Rangi & Franceschetti (2018) §6 reproduction")
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--tasks", type=int, nargs="+", default=[50, 100])
    ap.add_argument("--sets", nargs="+", default=["A", "B"], choices=["A", "B"])
    ap.add_argument("--budgets", type=float, nargs="+", default=DEFAULT_BUDGETS)
    ap.add_argument("--policies", nargs="+", default=DEFAULT_POLICIES)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-repeat", action="store_true",
                    help="never ask the same (task, worker) pair twice")
    ap.add_argument("--spammers", choices=SPAMMER_POSITIONS, default="random",
                    help="set B: spammers at random positions (default, paper §6 gives no "
                         "order) or at the first five indices (sensitivity check)")
    ap.add_argument("--compare", nargs=2, metavar=("A", "B"), action="append", default=[],
                    help="also print paired per-budget differences A - B (error, completed) "
                         "with standard errors; A and B must be among --policies; may be "
                         "given several times")
    ap.add_argument("--estimates", action="store_true",
                    help="also print, per policy's label stream, the bias of the value "
                         "estimates v̂ against the true v = 2p − 1 under both agreement rules "
                         "(at-label, current), the confidence radius, and the true v of the "
                         "workers the knapsack would rank first")
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
                           seed=args.seed, repeat=not args.no_repeat,
                           spammers=args.spammers, estimates=args.estimates)
            print(f"\n### T = {n_tasks}, set {wset} ({args.runs} runs, "
                  f"{'no repeats' if args.no_repeat else 'repeats allowed'}, "
                  f"{'spammers at ' + args.spammers + ' positions, ' if wset == 'B' else ''}"
                  f"{time.perf_counter() - t0:.0f} s)\n")
            print(format_table(res, args.budgets, args.policies))
            if args.detail:
                print()
                print(format_detail(res, args.budgets, args.policies))
            if args.estimates:
                print()
                print(format_estimates(res, args.budgets, args.policies))
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
