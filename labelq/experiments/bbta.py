"""The experimental protocol of Zhang, Ma & Sugiyama (2015), Section 5, with our policies.

Benchmarks (Section 5.1): ``breast-cancer`` (scikit-learn's copy of UCI breast cancer,
N=569, standardised features clustered by k-means into S=4 contexts, K=40 workers), and
two synthetic sets shaped like the UCI sets we do not ship: ``ionosphere`` (N=351, S=3,
K=30, 64% positive) and ``pima`` (N=768, S=5, K=50, 35% positive), whose contexts come from
k-means on Gaussian blobs. The task set is fixed (seed 0); each run draws fresh answers.
Worker models (``labelq.simulate.workers``): ``spammer-hammer`` (hammer = always right, as
in the paper, on one context; random elsewhere), ``one-coin`` (0.9 on one context, 0.6
elsewhere), ``malicious`` (0.9 / 0.3 / 0.6). Real data: ``athlete`` is replayed — a pair can
be asked only if that worker labelled that task in the data, and each label once.

Each run lets a push policy pick (task, worker) pairs until ``max(budgets) * N`` labels are
spent, and scores the policy's own estimate at each budget (labels per task) on the way.
Accuracy is the expected accuracy under a uniform tie break (a tied task counts 1/m).
IEThresh and CrowdSense have no budget (Section 4.4): as in the paper, each threshold eps
gives one (labels used, accuracy) point; we run a grid of eps and interpolate linearly
between points of the mean curve (no extrapolation: "-" in the table).

Command line::

    python -m labelq.experiments.bbta --dataset breast-cancer --model spammer-hammer --runs 30
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from dataclasses import dataclass

import numpy as np

from ..policies import Observation, Problem, build, names
from ..simulate.workers import make_pool

__all__ = ["Bench", "make_bench", "synthetic_bench", "diagnose", "good_workers", "simulate_answers", "run_policy", "run_sweep",
           "expected_accuracy", "compare", "main", "BENCHMARKS", "DEFAULT_METHODS"]

# name -> (N, S, K, share of the positive class) ; breast-cancer's N and share are the data's
BENCHMARKS = {"ionosphere": (351, 3, 30, 225 / 351), "breast-cancer": (569, 4, 40, None),
              "pima": (768, 5, 50, 268 / 768)}
MODEL_PARAMS = {"spammer-hammer": {"hammer": 1.0}, "one-coin": {"good": 0.9, "other": 0.6},
                "malicious": {"good": 0.9, "bad": 0.3, "other": 0.6}}
DEFAULT_METHODS = ["bbta:explore=1", "bbta:explore=0", "optkg-multi", "optkg", "random",
                   "crowdsense", "iethresh"]
SWEEPS = {"iethresh": [0.99, 0.95, 0.9],
          "crowdsense": [0.01, 0.05, 0.1, 0.2]}


@dataclass
class Bench:
    """A task set: truth and category per task, the worker count, optional recorded labels."""

    name: str
    truth: np.ndarray
    category: np.ndarray
    n_categories: int
    n_workers: int
    n_classes: int = 2
    recorded: np.ndarray | None = None  # (N, K) class index or -1, for a replay


def _kmeans(x: np.ndarray, k: int) -> np.ndarray:
    from sklearn.cluster import KMeans

    return KMeans(n_clusters=k, n_init=10, random_state=0).fit_predict(x).astype(np.int64)


@functools.lru_cache(maxsize=8)
def make_bench(name: str, *, datasets_dir: str | None = None) -> Bench:
    """Build the named benchmark (fixed task set; see the module docstring). Cached: treat
    the returned arrays as read-only."""
    if name == "athlete":
        from ..datasets import load_dataset, shared_datasets_dir

        d = datasets_dir or shared_datasets_dir()
        if d is None:
            raise FileNotFoundError("shared datasets folder not found (set LABELQ_SHARED)")
        data = load_dataset(f"{d}/athlete")
        rec = np.full((data.n_tasks, data.n_workers), -1, dtype=np.int64)
        rec[data.task, data.worker] = data.label
        return Bench(name, data.truth, data.category, len(data.categories), data.n_workers,
                     data.n_classes, rec)
    if name not in BENCHMARKS:
        raise ValueError(f"unknown dataset {name!r}; known: athlete, {', '.join(BENCHMARKS)}")
    n, s, k, share = BENCHMARKS[name]
    if name == "breast-cancer":
        from sklearn.datasets import load_breast_cancer

        x, y = load_breast_cancer(return_X_y=True)
        x = (x - x.mean(axis=0)) / x.std(axis=0)
        return Bench(name, y.astype(np.int64), _kmeans(x, s), s, k)
    return synthetic_bench(name, n, s, k, share)


def synthetic_bench(name: str, n: int, s: int, k: int, share: float) -> Bench:
    """N tasks in S k-means contexts of 8-d Gaussian blobs, K workers, P(class 1) = share
    (seed 0: the same arguments give the same task set)."""
    from sklearn.datasets import make_blobs

    rng = np.random.default_rng(0)
    x, _ = make_blobs(n_samples=n, centers=s, n_features=8, cluster_std=3.0, random_state=0)
    truth = (rng.random(n) < share).astype(np.int64)
    return Bench(name, truth, _kmeans(x, s), s, k)


def simulate_answers(bench: Bench, model: str, rng: np.random.Generator) -> np.ndarray:
    """(N, K) answer of every worker on every task (recorded labels for a replay)."""
    if bench.recorded is not None:
        return bench.recorded
    pool = make_pool(model, bench.n_workers, bench.n_categories, bench.n_classes, rng,
                     **MODEL_PARAMS.get(model, {}))
    n, k = bench.truth.size, bench.n_workers
    w = np.broadcast_to(np.arange(k), (n, k))
    return pool.answer(w, bench.category[:, None], bench.truth[:, None], rng)


def expected_accuracy(proba: np.ndarray, truth: np.ndarray) -> float:
    """Accuracy of the argmax with ties broken uniformly at random, in expectation."""
    known = truth >= 0
    top = proba[known] == proba[known].max(axis=1, keepdims=True)
    return float(np.mean(top[np.arange(known.sum()), truth[known]] / top.sum(axis=1)))


def _problem(bench: Bench) -> Problem:
    return Problem(n_tasks=bench.truth.size, n_workers=bench.n_workers,
                   n_classes=bench.n_classes, task_category=bench.category.copy(),
                   n_categories=bench.n_categories)


def run_policy(spec: str, bench: Bench, answers: np.ndarray, budgets: list[float],
               rng: np.random.Generator) -> tuple[np.ndarray, float]:
    """Run one push policy; accuracy at each budget (labels per task) and labels used/N.

    A policy that stops early (returns None) keeps its last accuracy for larger budgets."""
    policy = build(spec)
    n = bench.truth.size
    state = policy.init_state(_problem(bench))
    mask = answers >= 0
    marks = [int(round(b * n)) for b in budgets]
    acc = np.full(len(budgets), np.nan)
    used, nxt = 0, 0
    while nxt < len(marks):
        while nxt < len(marks) and used >= marks[nxt]:
            acc[nxt] = expected_accuracy(policy.predict_proba(state), bench.truth)
            nxt += 1
        if nxt == len(marks):
            break
        pair = policy.select_pair(state, mask, rng)
        if pair is None:
            final = expected_accuracy(policy.predict_proba(state), bench.truth)
            acc[nxt:] = final
            break
        i, j = pair
        if not mask[i, j]:
            raise AssertionError(f"{spec} picked an ineligible pair ({i}, {j})")
        mask[i, j] = False
        policy.update(state, Observation(i, j, int(answers[i, j])))
        used += 1
    return acc, used / n


def run_sweep(name: str, eps: float, bench: Bench, answers: np.ndarray, cap: float,
              rng: np.random.Generator) -> tuple[float, float]:
    """One budget-free run (IEThresh, CrowdSense) to its end or ``cap`` labels per task:
    (labels per task used, accuracy)."""
    acc, used = run_policy(f"{name}:eps={eps}", bench, answers, [cap], rng)
    return used, float(acc[0])


def _interp(points: list[tuple[float, float]], budgets: list[float]) -> np.ndarray:
    pts = sorted(points)
    xs = np.array([p[0] for p in pts])
    ys = np.array([p[1] for p in pts])
    out = np.interp(budgets, xs, ys)
    out[(np.asarray(budgets) < xs.min()) | (np.asarray(budgets) > xs.max())] = np.nan
    return out


def compare(dataset: str | Bench, model: str, runs: int, budgets: list[float],
            methods: list[str] | None = None, seed: int = 0, progress=None,
            sweeps: dict[str, list[float]] | None = None) -> dict:
    """Mean and standard error of accuracy per method and budget over ``runs`` runs.

    ``dataset`` is a benchmark name or a ``Bench``; ``sweeps`` overrides the eps grids of
    the budget-free methods (default ``SWEEPS``)."""
    bench = dataset if isinstance(dataset, Bench) else make_bench(dataset)
    dataset = bench.name
    grids = {**SWEEPS, **(sweeps or {})}
    known = set(names())
    methods = [m for m in (methods or DEFAULT_METHODS) if m.split(":")[0] in known]
    cap = max(budgets)
    curves: dict[str, list[np.ndarray]] = {m: [] for m in methods if m not in grids}
    sweep_pts: dict[str, dict[float, list[tuple[float, float]]]] = {
        m: {e: [] for e in grids[m]} for m in methods if m in grids}
    for r in range(runs):
        answers = simulate_answers(bench, model, np.random.default_rng([seed, r, 1]))
        for k, m in enumerate(methods):
            rng = np.random.default_rng([seed, r, 2, k])
            if m in grids:
                for e in grids[m]:
                    sweep_pts[m][e].append(run_sweep(m, e, bench, answers, cap, rng))
            else:
                curves[m].append(run_policy(m, bench, answers, budgets, rng)[0])
        if progress:
            progress(r)
    out: dict = {"dataset": dataset, "model": model, "runs": runs, "budgets": budgets,
                 "mean": {}, "se": {}, "sweeps": {}}
    for m, cs in curves.items():
        a = np.array(cs)
        out["mean"][m] = a.mean(axis=0)
        out["se"][m] = a.std(axis=0, ddof=1) / np.sqrt(len(a)) if len(a) > 1 else a[0] * 0
    for m, by_eps in sweep_pts.items():
        pts = [(float(np.mean([p[0] for p in v])), float(np.mean([p[1] for p in v])))
               for v in by_eps.values()]
        out["sweeps"][m] = dict(zip(by_eps, pts))
        out["mean"][m] = _interp(pts, budgets)
        out["se"][m] = np.full(len(budgets), np.nan)
    return out


def good_workers(bench: Bench, answers: np.ndarray, threshold: float = 0.85) -> np.ndarray:
    """bool (S, K): worker j's accuracy on context s, over all its answers there, is at least
    ``threshold`` (an oracle view used only by ``diagnose``)."""
    good = np.zeros((bench.n_categories, bench.n_workers), dtype=bool)
    for s in range(bench.n_categories):
        lab = answers[bench.category == s]
        said = lab >= 0
        right = (lab == bench.truth[bench.category == s][:, None]) & said
        good[s] = right.sum(axis=0) >= threshold * np.maximum(said.sum(axis=0), 1)
    return good


def _bbta_eta_scaled(scale: float):
    """A diagnostic, unregistered BBTA whose eta is multiplied by ``scale`` (not the paper)."""
    from ..policies.bbta import BBTA

    class _Scaled(BBTA):
        def _eta(self, steps, n_workers):  # noqa: ANN001, ANN202
            return scale * BBTA._eta(steps, n_workers)

    return _Scaled(BBTA.Params(explore=1))


def diagnose(dataset: str, model: str, runs: int, budget: float, specs: list[str],
             seed: int = 0) -> list[str]:
    """Where do BBTA's labels go? For each spec (``bbta:...``, ``random``, or ``eta*X`` =
    BBTA(N'=1) with eta scaled by X, a diagnostic only): accuracy at ``budget`` labels per
    task and, per successive block of one label per task, the share of labels given by
    workers who are good on the task's context (``good_workers``), mean over runs."""
    bench = make_bench(dataset)
    lines = []
    for k, spec in enumerate(specs):
        accs, shares = [], []
        for r in range(runs):
            answers = simulate_answers(bench, model, np.random.default_rng([seed, r, 1]))
            good = good_workers(bench, answers)
            policy = (_bbta_eta_scaled(float(spec[4:])) if spec.startswith("eta*")
                      else build(spec))
            state = policy.init_state(_problem(bench))
            mask = answers >= 0
            rng = np.random.default_rng([seed, r, 3, k])
            hit = []
            for _ in range(int(round(budget * bench.truth.size))):
                pair = policy.select_pair(state, mask, rng)
                if pair is None:
                    break
                i, j = pair
                mask[i, j] = False
                hit.append(good[bench.category[i], j])
                policy.update(state, Observation(i, j, int(answers[i, j])))
            n = bench.truth.size
            shares.append([np.mean(hit[b * n:(b + 1) * n]) for b in range(int(budget))])
            accs.append(expected_accuracy(policy.predict_proba(state), bench.truth))
        sh = " ".join(f"{v:.3f}" for v in np.mean(shares, axis=0))
        lines.append(f"| {spec} | {np.mean(accs):.3f}±{np.std(accs, ddof=1) / np.sqrt(runs):.3f}"
                     f" | {sh} |")
    return lines


def to_markdown(res: dict) -> str:
    b = res["budgets"]
    head = "| method | " + " | ".join(f"{x:g}" for x in b) + " |"
    lines = [head, "|---|" + "---|" * len(b)]
    for m, mean in res["mean"].items():
        se = res["se"][m]
        cells = ["-" if np.isnan(v) else (f"{v:.3f}" if np.isnan(e) else f"{v:.3f}±{e:.3f}")
                 for v, e in zip(mean, se)]
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    for m, pts in res["sweeps"].items():
        txt = ", ".join(f"eps={e:g}: {u:.2f} labels/task -> {a:.3f}" for e, (u, a) in pts.items())
        lines.append(f"\n{m} points (mean over runs): {txt}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m labelq.experiments.bbta",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--dataset", default="breast-cancer",
                    choices=[*BENCHMARKS, "athlete"])
    ap.add_argument("--model", default="spammer-hammer", choices=list(MODEL_PARAMS))
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--budgets", default="1,2,3,5,10,15",
                    help="labels per task at which accuracy is reported")
    ap.add_argument("--methods", default=",".join(DEFAULT_METHODS),
                    help="policy specs separated by ','")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--diagnose", action="store_true",
                    help="instead of the table: accuracy at the largest budget and the share "
                         "of labels from context-good workers per block of one label per task "
                         "(methods: bbta specs, random, or eta*X)")
    args = ap.parse_args(argv)
    budgets = [float(x) for x in args.budgets.split(",")]
    methods = [m for m in args.methods.split(",") if m]
    t0 = time.time()
    if args.diagnose:
        model = "replay" if args.dataset == "athlete" else args.model
        print(f"### {args.dataset}, {model}, {args.runs} runs: accuracy at {max(budgets):g} "
              "labels/task; share of labels from good workers per labels/task block\n")
        print("| method | accuracy | share per block |\n|---|---|---|")
        print("\n".join(diagnose(args.dataset, args.model, args.runs, max(budgets), methods,
                                args.seed)))
        print(f"\n({time.time() - t0:.0f} s)")
        return 0
    res = compare(args.dataset, args.model, args.runs, budgets, methods, args.seed,
                  progress=lambda r: print(f"run {r + 1}/{args.runs} "
                                           f"({time.time() - t0:.0f} s)", file=sys.stderr))
    model = "replay" if args.dataset == "athlete" else args.model
    print(f"### {args.dataset}, {model}, {args.runs} runs (accuracy at labels per task)\n")
    print(to_markdown(res))
    print(f"\n({time.time() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
