"""Reproduce Ho, Jabbari & Vaughan (ICML 2013) §6: primal-dual vs random regular + KOS.

``python -m labelq.reproductions.primal_dual --runs 10`` prints markdown tables: for each worker
setting and each ε, the labels per task primal-dual used (gold and the γm sample workers'
gold counted) and its error, next to random regular assignment aggregated by an aggregator
(KOS message passing by default) with ``ceil(labels per task)`` labels per task — at least
as many labels as primal-dual used, so ties favour the baseline.

Setup (paper §6): n non-gold tasks (type i mod k), W = m + round(γm) workers arriving in a
random order, capacity M non-gold labels each (plus s·k gold), ``s`` gold tasks per type, each
worker answers all of them. Both methods see the same workers in a run (paired comparison).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TypedDict

import numpy as np

from ..policies import Observation, build
from ..policies.base import FloatArray, IntArray
from ..policies.primal_dual import MAIN, PrimalDual, PrimalDualState
from ..simulate.environment import Environment
from ..simulate.workers import ModelParam, make_pool

__all__ = ["Setting", "SETTINGS", "make_environment", "run_primal_dual", "random_regular",
           "run_baseline", "kos_aggregator", "compare", "main"]

#: (task, worker, label, n_tasks, n_workers, n_classes) -> (n_tasks, n_classes) probabilities
Aggregator = Callable[[IntArray, IntArray, IntArray, int, int, int], FloatArray]


class PrimalDualRun(TypedDict):
    """:func:`run_primal_dual`'s result."""

    labels: int
    gold_labels: int
    error: float
    labels_per_task: float
    state: PrimalDualState


class BaselineRun(TypedDict):
    """:func:`run_baseline`'s result."""

    labels: int
    labels_per_task: float
    error: float
    mv_error: float


class CompareRow(TypedDict):
    """One ε of :func:`compare`."""

    setting: str
    eps: float
    runs: int
    pd_labels: float
    pd_error: float
    pd_error_sd: float
    base_labels: float
    base_error: float
    base_error_sd: float
    mv_error: float
    wins: int


@dataclass(frozen=True)
class Setting:
    """A worker population: ``k`` task types, a worker model of :func:`make_pool`, gold ``s``."""

    name: str
    k: int
    model: str
    params: dict[str, ModelParam] = field(default_factory=dict)
    s: int = 20


SETTINGS = {
    "uniform": Setting("uniform", 1, "one-coin", {"p": 0.6414}, s=20),
    "spammer-hammer": Setting("spammer-hammer", 1, "spammer-hammer",
                              {"share": 0.5, "hammer": 0.7, "spammer": 0.5}, s=20),
    "k=1": Setting("k=1", 1, "one-coin", {"good": 0.7, "other": 0.5}, s=10),
    "k=2": Setting("k=2", 2, "one-coin", {"good": 0.7, "other": 0.5}, s=10),
    "k=3": Setting("k=3", 3, "one-coin", {"good": 0.7, "other": 0.5}, s=10),
}


def make_environment(setting: Setting, n: int, m: int, gamma: float, capacity: int,
                     rng: np.random.Generator) -> Environment:
    """n non-gold tasks then s gold tasks per type; W = m + round(γm) workers."""
    k, s = setting.k, setting.s
    category = np.concatenate([np.arange(n) % k, np.repeat(np.arange(k), s)])
    is_gold = np.arange(n + k * s) >= n
    truth = rng.integers(0, 2, size=n + k * s)
    n_workers = m + int(round(gamma * m))
    pool = make_pool(setting.model, n_workers, k, 2, rng, **setting.params)
    return Environment(truth=truth, n_workers=n_workers, n_classes=2, task_category=category,
                       n_categories=k, is_gold=is_gold, pool=pool,
                       worker_capacity=np.full(n_workers, capacity + k * s, dtype=np.int64),
                       name=setting.name)


def _error(proba: FloatArray, truth: IntArray) -> float:
    """Error rate; an exact tie (no evidence) counts as half an error (a coin flip)."""
    tie = np.isclose(proba[:, 0], proba[:, 1])
    wrong = np.argmax(proba, axis=1) != truth
    return float(np.mean(np.where(tie, 0.5, wrong)))


def run_primal_dual(env: Environment, policy: PrimalDual, rng: np.random.Generator,
                    exact: bool = False) -> PrimalDualRun:
    """Workers arrive in a random order; each asks until the policy says ``None``.

    Every decision goes through ``select_task``, except — unless ``exact`` — a main-phase
    worker's non-gold tasks, which are taken in one batch from ``policy.plan`` (the list
    ``select_task`` would serve one by one when every task is eligible; a test checks both
    paths agree). Returns labels (all, incl. gold), gold labels and error on non-gold tasks.
    """
    problem = env.problem()
    state = policy.init_state(problem)
    n_all = env.n_tasks
    all_tasks = np.arange(n_all)
    labels = gold_labels = 0
    cat, truth, pool, is_gold = env.task_category, env.truth, env.pool, env.is_gold
    assert pool is not None and is_gold is not None  # a synthetic environment
    for w in rng.permutation(env.n_workers):
        w = int(w)
        done = np.zeros(n_all, dtype=bool)
        while True:
            if not exact and state.role[w] == MAIN:
                plan = policy.plan(state, w)
                plan = plan[~done[plan]]
                answers = pool.answer(w, cat[plan], truth[plan], rng)
                for t, a in zip(plan.tolist(), answers.tolist(), strict=True):
                    policy.update(state, Observation(t, w, a))
                labels += plan.size
                break
            task = policy.select_task(state, w, all_tasks, ~done, rng)
            if task is None:
                break
            done[task] = True
            answer = int(pool.answer(w, cat[task], truth[task], rng))
            gold = bool(is_gold[task])
            policy.update(state, Observation(task, w, answer, gold=gold,
                                             truth=int(truth[task]) if gold else -1))
            labels += 1
            gold_labels += int(gold)
    real = ~is_gold
    error = _error(policy.predict_proba(state)[real], truth[real])
    return {"labels": labels, "gold_labels": gold_labels, "error": error,
            "labels_per_task": labels / int(real.sum()), "state": state}


def random_regular(n: int, n_workers: int, per_task: int,
                   rng: np.random.Generator) -> tuple[IntArray, IntArray]:
    """Random (per_task, ~n·per_task/W)-regular bipartite assignment (Karger et al.).

    Slots are filled by consecutive random permutations of the workers, so worker degrees
    differ by at most one; the rare repeated (task, worker) pair at a permutation boundary is
    dropped. Returns (task, worker) arrays.
    """
    per_task = min(per_task, n_workers)
    total = n * per_task
    reps = -(-total // n_workers)
    workers = np.concatenate([rng.permutation(n_workers) for _ in range(reps)])[:total]
    tasks = np.repeat(np.arange(n), per_task)
    _, first = np.unique(tasks * n_workers + workers, return_index=True)
    keep = np.sort(first)
    return tasks[keep], workers[keep]


def kos_aggregator(task: IntArray, worker: IntArray, label: IntArray, n_tasks: int,
                   n_workers: int, n_classes: int) -> FloatArray:
    """KOS message passing from :mod:`labelq.aggregation` (``probas_``)."""
    from ..aggregation import aggregate

    return aggregate(task, worker, label, method="kos", n_tasks=n_tasks,
                     n_workers=n_workers, n_classes=n_classes).probas_


def run_baseline(env: Environment, per_task: int, rng: np.random.Generator,
                 aggregator: Aggregator = kos_aggregator) -> BaselineRun:
    """Random regular assignment over the non-gold tasks, aggregated by ``aggregator``."""
    assert env.pool is not None and env.is_gold is not None  # a synthetic environment
    real = np.flatnonzero(~env.is_gold)
    t, w = random_regular(real.size, env.n_workers, per_task, rng)
    answers = env.pool.answer(w, env.task_category[real][t], env.truth[real][t], rng)
    proba = aggregator(t, w, answers, real.size, env.n_workers, 2)
    votes = np.zeros((real.size, 2))
    np.add.at(votes, (t, answers), 1.0)  # plain majority vote on the same labels, for context
    return {"labels": int(t.size), "labels_per_task": t.size / real.size,
            "error": _error(proba, env.truth[real]),
            "mv_error": _error(votes, env.truth[real])}


def compare(setting: Setting, eps_values: Iterable[float], runs: int, seed: int = 0, n: int = 1000,
            m: int = 300, capacity: int = 200, gamma: float = 0.3, exact: bool = False,
            aggregator: Aggregator = kos_aggregator) -> list[CompareRow]:
    """For each ε: mean labels/task and error of primal-dual and of the baseline at
    ``ceil`` of each run's labels/task, over ``runs`` paired runs (seeds ``default_rng([seed, r])``)."""
    rows: list[CompareRow] = []
    for eps in eps_values:
        policy = build(f"primal-dual:eps={eps},gamma={gamma},s={setting.s}")
        assert isinstance(policy, PrimalDual)
        pd_l: list[float] = []
        pd_e: list[float] = []
        base_l: list[float] = []
        base_e: list[float] = []
        mv_e: list[float] = []
        for r in range(runs):
            rng = np.random.default_rng([seed, r])
            env = make_environment(setting, n, m, gamma, capacity, rng)
            res = run_primal_dual(env, policy, rng, exact=exact)
            base = run_baseline(env, math.ceil(res["labels_per_task"]), rng, aggregator)
            pd_l.append(res["labels_per_task"])
            pd_e.append(res["error"])
            base_l.append(base["labels_per_task"])
            base_e.append(base["error"])
            mv_e.append(base["mv_error"])
        rows.append({"setting": setting.name, "eps": eps, "runs": runs,
                     "pd_labels": float(np.mean(pd_l)), "pd_error": float(np.mean(pd_e)),
                     "pd_error_sd": float(np.std(pd_e)),
                     "base_labels": float(np.mean(base_l)),
                     "base_error": float(np.mean(base_e)),
                     "base_error_sd": float(np.std(base_e)),
                     "mv_error": float(np.mean(mv_e)),
                     "wins": int(np.sum(np.array(pd_e) < np.array(base_e)))})
    return rows


def format_table(rows: list[CompareRow]) -> str:
    out = ["| ε | PD labels/task | PD error | random labels/task | random+KOS error "
           "| random+MV error | PD better than KOS in |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['eps']:g} | {r['pd_labels']:.1f} | {r['pd_error']:.4f} "
                   f"± {r['pd_error_sd']:.4f} | {r['base_labels']:.1f} | "
                   f"{r['base_error']:.4f} ± {r['base_error_sd']:.4f} | "
                   f"{r['mv_error']:.4f} | {r['wins']}/{r['runs']} |")
    return "\n".join(out)


DEFAULT_EPS = {"uniform": [0.4, 0.3, 0.2, 0.1, 0.05],
               "spammer-hammer": [0.4, 0.3, 0.2, 0.1, 0.01],
               "k=1": [0.4, 0.2, 0.05, 0.001], "k=2": [0.4, 0.2, 0.1, 0.03, 0.01, 0.001],
               "k=3": [0.4, 0.2, 0.1, 0.03, 0.01, 0.001]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m labelq.reproductions.primal_dual",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--settings", default=",".join(SETTINGS),
                    help=f"comma-separated, from {', '.join(SETTINGS)}")
    ap.add_argument("--eps", default=None, help="comma-separated ε (default per setting)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--m", type=int, default=300)
    ap.add_argument("--capacity", type=int, default=200)
    ap.add_argument("--gamma", type=float, default=0.3)
    ap.add_argument("--exact", action="store_true",
                    help="drive every decision through select_task (slower)")
    args = ap.parse_args(argv)
    for name in args.settings.split(","):
        setting = SETTINGS[name.strip()]
        eps = ([float(e) for e in args.eps.split(",")] if args.eps
               else DEFAULT_EPS[setting.name])
        start = time.perf_counter()
        rows = compare(setting, eps, args.runs, args.seed, args.n, args.m, args.capacity,
                       args.gamma, args.exact)
        print(f"\n### {setting.name} (k={setting.k}, s={setting.s}, {args.runs} runs, "
              f"{time.perf_counter() - start:.0f} s)\n")
        print(format_table(rows))
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
