"""The experimental protocol of Zhang, Ma & Sugiyama (2015), Section 5, with our policies.

Benchmarks (Section 5.1): ``breast-cancer`` (scikit-learn's copy of UCI breast cancer,
N=569, standardised features clustered by k-means into S=4 contexts, K=40 workers), and
two synthetic sets shaped like the UCI sets we do not ship: ``ionosphere`` (N=351, S=3,
K=30, 64% positive) and ``pima`` (N=768, S=5, K=50, 35% positive), whose contexts come from
k-means on Gaussian blobs. The task set is fixed (seed 0); each run draws fresh answers.
Worker models (``labelq.simulate.workers``): ``spammer-hammer`` (hammer = always right, as
in the paper, on one context; random elsewhere), ``one-coin`` (0.9 on one context, 0.6
elsewhere), ``malicious`` (0.9 / 0.3 / 0.6). Real data: ``athlete`` is replayed — a pair can
be asked only if that worker labelled that task in the data, and each label once;
``athlete-completed`` is the paper's protocol for real data instead: the missing entries of
the label matrix are filled by low-rank completion (``complete_labels``, rank = number of
categories), so every pair can be asked. Each run of
a replay relabels the tasks and the workers by a random permutation (drawn from the run's
answer seed), so that a policy breaking ties by lowest index (``optkg``, ``optkg-multi``, BBTA's
first-index task choice) does not profit from, or suffer by, the order of the data's files;
``permute=False`` (``--data-order``) keeps the data's order.

Each run lets a push policy pick (task, worker) pairs until ``max(budgets) * N`` labels are
spent, and scores the policy's own estimate at each budget (labels per task) on the way.
Accuracy is the expected accuracy under a uniform tie break (a tied task counts 1/m).
IEThresh and CrowdSense have no budget (Section 4.4): as in the paper, each threshold eps
gives one (labels used, accuracy) point; we run a grid of eps and interpolate linearly
between points of the mean curve (no extrapolation: "-" in the table).

Command line::

    python -m labelq.reproductions.bbta --dataset breast-cancer --model spammer-hammer --runs 30
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypedDict

import numpy as np

from ..policies import Observation, Policy, Problem, build, names
from ..policies.base import BoolArray, FloatArray, IntArray
from ..simulate.workers import ModelParam, make_pool

if TYPE_CHECKING:
    from ..policies.bbta import BBTAState

__all__ = [
    "Bench", "make_bench", "complete_labels", "permute_bench", "run_data", "synthetic_bench",
    "diagnose", "good_workers", "diagnostic_policy", "DIAGNOSTIC_VARIANTS", "check_orderings",
    "parse_tables", "simulate_answers", "run_policy", "run_sweep", "expected_accuracy",
    "compare", "main", "BENCHMARKS", "DEFAULT_METHODS"]

# name -> (N, S, K, share of the positive class) ; breast-cancer's N and share are the data's
BENCHMARKS: dict[str, tuple[int, int, int, float | None]] = {
    "ionosphere": (351, 3, 30, 225 / 351), "breast-cancer": (569, 4, 40, None),
    "pima": (768, 5, 50, 268 / 768)}
MODEL_PARAMS: dict[str, dict[str, ModelParam]] = {
    "spammer-hammer": {"hammer": 1.0}, "one-coin": {"good": 0.9, "other": 0.6},
    "malicious": {"good": 0.9, "bad": 0.3, "other": 0.6}}
DEFAULT_METHODS = ["bbta:explore=1", "bbta:explore=0", "optkg-multi", "optkg", "random",
                   "crowdsense", "iethresh"]
SWEEPS = {"iethresh": [0.99, 0.95, 0.9],
          "crowdsense": [0.01, 0.05, 0.1, 0.2]}


@dataclass
class Bench:
    """A task set: truth and category per task, the worker count, optional recorded labels."""

    name: str
    truth: IntArray
    category: IntArray
    n_categories: int
    n_workers: int
    n_classes: int = 2
    recorded: IntArray | None = None  # (N, K) class index or -1, for a replay


class CompareResult(TypedDict):
    """:func:`compare`'s result: accuracy per method and budget (mean and s.e. over the
    runs), and the budget-free methods' (labels per task, accuracy) per eps."""

    dataset: str
    model: str
    runs: int
    budgets: list[float]
    mean: dict[str, FloatArray]
    se: dict[str, FloatArray]
    sweeps: dict[str, dict[float, tuple[float, float]]]


def _kmeans(x: FloatArray, k: int) -> IntArray:
    from sklearn.cluster import KMeans

    out: IntArray = KMeans(n_clusters=k, n_init=10, random_state=0).fit_predict(x).astype(
        np.int64)
    return out


@functools.lru_cache(maxsize=8)
def make_bench(name: str, *, datasets_dir: str | None = None) -> Bench:
    """Build the named benchmark (fixed task set; see the module docstring). Cached: treat
    the returned arrays as read-only."""
    if name == "athlete-completed":
        b = make_bench("athlete", datasets_dir=datasets_dir)
        assert b.recorded is not None  # a replay
        return Bench(name, b.truth, b.category, b.n_categories, b.n_workers, b.n_classes,
                     complete_labels(b.recorded, rank=b.n_categories))
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
        raise ValueError(f"unknown dataset {name!r}; known: athlete, athlete-completed, "
                         f"{', '.join(BENCHMARKS)}")
    n, s, k, share = BENCHMARKS[name]
    if share is None:  # breast-cancer: the data's own truth
        from sklearn.datasets import load_breast_cancer

        x, y = load_breast_cancer(return_X_y=True)
        x = (x - x.mean(axis=0)) / x.std(axis=0)
        return Bench(name, y.astype(np.int64), _kmeans(x, s), s, k)
    return synthetic_bench(name, n, s, k, share)


def complete_labels(recorded: IntArray, rank: int, lam: float = 1.0,
                    iters: int = 50) -> IntArray:
    """Fill the missing entries (-1) of a binary (N, K) label matrix, as the paper does for its
    real data sets (Section 5.2; it used GROUSE): a rank-``rank`` factorisation U V^T of the
    +-1 matrix fitted to the observed entries by ridge-regularised alternating least squares
    (``lam``, ``iters`` sweeps, started from the SVD of the zero-filled matrix, so it is
    deterministic); a missing entry becomes the class of sign(u_i . v_j). Observed entries
    are kept."""
    obs = recorded >= 0
    if recorded.max(initial=0) > 1:
        raise ValueError("complete_labels is for binary labels (0/1)")
    m = np.where(obs, 2.0 * recorded - 1.0, 0.0)
    u, sv, vt = np.linalg.svd(m, full_matrices=False)
    uu, vv = u[:, :rank] * np.sqrt(sv[:rank]), vt[:rank].T * np.sqrt(sv[:rank])
    ridge = lam * np.eye(rank)
    for _ in range(iters):
        for i in range(m.shape[0]):
            a = vv[obs[i]]
            uu[i] = np.linalg.solve(a.T @ a + ridge, a.T @ m[i, obs[i]])
        for j in range(m.shape[1]):
            a = uu[obs[:, j]]
            vv[j] = np.linalg.solve(a.T @ a + ridge, a.T @ m[obs[:, j], j])
    out: IntArray = recorded.copy()
    out[~obs] = ((uu @ vv.T)[~obs] > 0).astype(recorded.dtype)
    return out


def synthetic_bench(name: str, n: int, s: int, k: int, share: float) -> Bench:
    """N tasks in S k-means contexts of 8-d Gaussian blobs, K workers, P(class 1) = share
    (seed 0: the same arguments give the same task set)."""
    from sklearn.datasets import make_blobs

    rng = np.random.default_rng(0)
    x, _ = make_blobs(n_samples=n, centers=s, n_features=8, cluster_std=3.0, random_state=0)
    truth = (rng.random(n) < share).astype(np.int64)
    return Bench(name, truth, _kmeans(x, s), s, k)


def simulate_answers(bench: Bench, model: str, rng: np.random.Generator) -> IntArray:
    """(N, K) answer of every worker on every task (recorded labels for a replay)."""
    if bench.recorded is not None:
        return bench.recorded
    pool = make_pool(model, bench.n_workers, bench.n_categories, bench.n_classes, rng,
                     **MODEL_PARAMS.get(model, {}))
    n, k = bench.truth.size, bench.n_workers
    w = np.broadcast_to(np.arange(k), (n, k))
    return pool.answer(w, bench.category[:, None], bench.truth[:, None], rng)


def permute_bench(bench: Bench, rng: np.random.Generator) -> Bench:
    """The same replay with tasks and workers relabelled by random permutations (truth,
    categories and recorded labels move with them). Only for a replay (``recorded``)."""
    if bench.recorded is None:
        raise ValueError("permute_bench needs a replayed data set")
    tp = rng.permutation(bench.truth.size)
    wp = rng.permutation(bench.n_workers)
    return Bench(bench.name, bench.truth[tp].copy(), bench.category[tp].copy(),
                 bench.n_categories, bench.n_workers, bench.n_classes,
                 bench.recorded[np.ix_(tp, wp)].copy())


def run_data(bench: Bench, model: str, seed: int, r: int,
             permute: bool = True) -> tuple[Bench, IntArray]:
    """Run r's task set and answers: fresh answers from the worker model, or for a replay the
    recorded labels (tasks and workers randomly relabelled unless ``permute`` is False)."""
    rng = np.random.default_rng([seed, r, 1])
    if bench.recorded is not None and permute:
        bench = permute_bench(bench, rng)
    return bench, simulate_answers(bench, model, rng)


def expected_accuracy(proba: FloatArray, truth: IntArray) -> float:
    """Accuracy of the argmax with ties broken uniformly at random, in expectation."""
    known = truth >= 0
    top = proba[known] == proba[known].max(axis=1, keepdims=True)
    return float(np.mean(top[np.arange(known.sum()), truth[known]] / top.sum(axis=1)))


def _problem(bench: Bench) -> Problem:
    return Problem(n_tasks=bench.truth.size, n_workers=bench.n_workers,
                   n_classes=bench.n_classes, task_category=bench.category.copy(),
                   n_categories=bench.n_categories)


def run_policy(spec: str, bench: Bench, answers: IntArray, budgets: list[float],
               rng: np.random.Generator) -> tuple[FloatArray, float]:
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


def run_sweep(name: str, eps: float, bench: Bench, answers: IntArray, cap: float,
              rng: np.random.Generator) -> tuple[float, float]:
    """One budget-free run (IEThresh, CrowdSense) to its end or ``cap`` labels per task:
    (labels per task used, accuracy)."""
    acc, used = run_policy(f"{name}:eps={eps}", bench, answers, [cap], rng)
    return used, float(acc[0])


def _interp(points: list[tuple[float, float]], budgets: list[float]) -> FloatArray:
    pts = sorted(points)
    xs = np.array([p[0] for p in pts])
    ys = np.array([p[1] for p in pts])
    out: FloatArray = np.interp(budgets, xs, ys)
    out[(np.asarray(budgets) < xs.min()) | (np.asarray(budgets) > xs.max())] = np.nan
    return out


def compare(dataset: str | Bench, model: str, runs: int, budgets: list[float],
            methods: list[str] | None = None, seed: int = 0,
            progress: Callable[[int], object] | None = None,
            sweeps: dict[str, list[float]] | None = None,
            permute: bool = True) -> CompareResult:
    """Mean and standard error of accuracy per method and budget over ``runs`` runs.

    ``dataset`` is a benchmark name or a ``Bench``; ``sweeps`` overrides the eps grids of
    the budget-free methods (default ``SWEEPS``); ``permute`` (replays only): relabel tasks
    and workers at random in each run (``run_data``)."""
    bench = dataset if isinstance(dataset, Bench) else make_bench(dataset)
    dataset = bench.name
    grids = {**SWEEPS, **(sweeps or {})}
    known = set(names())
    methods = [m for m in (methods or DEFAULT_METHODS) if m.split(":")[0] in known]
    cap = max(budgets)
    curves: dict[str, list[FloatArray]] = {m: [] for m in methods if m not in grids}
    sweep_pts: dict[str, dict[float, list[tuple[float, float]]]] = {
        m: {e: [] for e in grids[m]} for m in methods if m in grids}
    for r in range(runs):
        bench_r, answers = run_data(bench, model, seed, r, permute)
        for k, m in enumerate(methods):
            rng = np.random.default_rng([seed, r, 2, k])
            if m in grids:
                for e in grids[m]:
                    sweep_pts[m][e].append(run_sweep(m, e, bench_r, answers, cap, rng))
            else:
                curves[m].append(run_policy(m, bench_r, answers, budgets, rng)[0])
        if progress:
            progress(r)
    out = CompareResult(dataset=dataset, model=model, runs=runs, budgets=budgets, mean={},
                        se={}, sweeps={})
    for m, cs in curves.items():
        a = np.array(cs)
        out["mean"][m] = a.mean(axis=0)
        out["se"][m] = a.std(axis=0, ddof=1) / np.sqrt(len(a)) if len(a) > 1 else a[0] * 0
    for m, by_eps in sweep_pts.items():
        pts = [(float(np.mean([p[0] for p in v])), float(np.mean([p[1] for p in v])))
               for v in by_eps.values()]
        out["sweeps"][m] = dict(zip(by_eps, pts, strict=True))
        out["mean"][m] = _interp(pts, budgets)
        out["se"][m] = np.full(len(budgets), np.nan)
    return out


def good_workers(bench: Bench, answers: IntArray, threshold: float = 0.85) -> BoolArray:
    """bool (S, K): worker j's accuracy on context s, over all its answers there, is at least
    ``threshold`` (an oracle view used only by ``diagnose``)."""
    good = np.zeros((bench.n_categories, bench.n_workers), dtype=bool)
    for s in range(bench.n_categories):
        lab = answers[bench.category == s]
        said = lab >= 0
        right = (lab == bench.truth[bench.category == s][:, None]) & said
        good[s] = right.sum(axis=0) >= threshold * np.maximum(said.sum(axis=0), 1)
    return good


DIAGNOSTIC_VARIANTS = {
    "drawn": "importance weight 1/p with p the probability of the actual draw (in a replay "
             "over the workers the mask allows, not over all who have not labelled the task)",
    "tie1": "an exact tie of the vote after adding the label costs 1 (sign(0) = 0, the "
            "literal Algorithm 1) instead of the expected 1/2",
    "impute": "pure exploration: a worker who could not label an exploration task (replay) is "
              "charged that task's mean disagreement instead of 0",
    "rescore": "re-score every task of the context after every step (eta changes each step), "
               "not only when a loss was charged",
}


def diagnostic_policy(spec: str) -> Policy:
    """Unregistered BBTA(N'=1) variants for ``diagnose`` only (not the paper's defaults):
    ``eta*X`` (eta multiplied by X) or ``diag:NAME`` with NAME in ``DIAGNOSTIC_VARIANTS``;
    any other spec is built from the registry."""
    from ..policies.bbta import BBTA, expected_zero_one_loss, vote_scores

    if spec.startswith("eta*"):
        scale = float(spec[4:])

        class _Scaled(BBTA):
            @staticmethod
            def _eta(steps: int, n_workers: int) -> float:
                return scale * BBTA._eta(steps, n_workers)

        return _Scaled(BBTA.Params(explore=1))
    if not spec.startswith("diag:"):
        return build(spec)
    name = spec[5:]
    if name not in DIAGNOSTIC_VARIANTS:
        raise ValueError(f"unknown diagnostic variant {name!r}; known: "
                         f"{', '.join(DIAGNOSTIC_VARIANTS)}")

    class _Variant(BBTA):
        _drawn: tuple[int, BoolArray] | None = None

        def select_pair(self, state: BBTAState, mask: BoolArray,
                        rng: np.random.Generator) -> tuple[int, int] | None:
            pair = super().select_pair(state, mask, rng)
            if pair is not None:
                self._drawn = (pair[0], mask[pair[0]].copy())
            return pair

        def _draw_probability(self, state: BBTAState, i: int, j: int, eta: float,
                              loss_s: FloatArray, open_: BoolArray) -> float:
            if name == "drawn" and self._drawn is not None and self._drawn[0] == i:
                allowed = self._drawn[1] & open_
                w = self._exp_weights(eta, loss_s[allowed])
                return max(float(w[np.flatnonzero(allowed) == j][0] / w.sum()), 1e-12)
            return super()._draw_probability(state, i, j, eta, loss_s, open_)

        @staticmethod
        def _vote_loss(scores: FloatArray, label: int) -> float:
            if name == "tie1":
                top = scores == scores.max()
                return 0.0 if top[label] and top.sum() == 1 else 1.0
            return BBTA._vote_loss(scores, label)

        @staticmethod
        def _explore_loss(state: BBTAState, s: int) -> FloatArray:
            if name != "impute":
                return BBTA._explore_loss(state, s)
            tasks = np.flatnonzero(state.explore & (state.category == s))
            total = np.zeros(state.labels.shape[1])
            for i in tasks:
                lab = state.labels[i]
                who = np.flatnonzero(lab >= 0)
                if not who.size:
                    continue
                sc = vote_scores(lab[None, :], 1.0, state.n_classes)
                loss = expected_zero_one_loss(np.repeat(sc, who.size, axis=0), lab[who])
                total[who] += loss
                total[lab < 0] += loss.mean()
            return total

        def update(self, state: BBTAState, obs: Observation) -> IntArray:
            touched = super().update(state, obs)
            if name == "rescore" and touched.size:
                touched = np.flatnonzero(state.category == state.category[obs.task])
                self._rescore(state, touched)
            return touched

    return _Variant(BBTA.Params(explore=1))


def diagnose(dataset: str, model: str, runs: int, budget: float, specs: list[str],
             seed: int = 0, permute: bool = True) -> list[str]:
    """Where do BBTA's labels go? For each spec (a registered policy, or a diagnostic BBTA
    variant of ``diagnostic_policy``: ``eta*X``, ``diag:NAME``): accuracy at ``budget`` labels per
    task and, per successive block of one label per task, the share of labels given by
    workers who are good on the task's context (``good_workers``), mean over runs."""
    lines = []
    for k, spec in enumerate(specs):
        accs, shares = [], []
        for r in range(runs):
            bench, answers = run_data(make_bench(dataset), model, seed, r, permute)
            good = good_workers(bench, answers)
            policy = diagnostic_policy(spec)
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


ADVERSARIAL = ("spammer-hammer", "malicious")


def check_orderings(name: str, model: str, budgets: list[float],
                    mean: dict[str, np.ndarray]) -> str:
    """The paper's Section 5.2 orderings on one table of means (NaN = not defined), as one
    line: BBTA(N'=1) >= BBTA(N'=0) at every budget; under spammer-hammer and malicious,
    BBTA(N'=1) >= every other method at budgets >= 5; IEThresh below every other method
    wherever its curve is defined. Lists where each fails (strict comparisons of the means)."""
    b1, b0 = mean.get("bbta:explore=1"), mean.get("bbta:explore=0")
    parts = []
    if b1 is not None and b0 is not None:
        bad = [f"{x:g}" for x, u, v in zip(budgets, b1, b0, strict=True) if u < v]
        parts.append("N'=1>=N'=0: " + ("fails at " + ",".join(bad) if bad else "holds"))
    if b1 is not None and model in ADVERSARIAL:
        bad = [f"{m}@{x:g}" for m, v in mean.items() if not m.startswith("bbta")
               for x, u, w in zip(budgets, b1, v, strict=True) if x >= 5 and not np.isnan(w) and w > u]
        parts.append("BBTA(1)>=baselines@>=5: " + ("fails: " + ",".join(bad) if bad
                                                  else "holds"))
    ie = mean.get("iethresh")
    if ie is not None:
        bad = []
        for k, x in enumerate(budgets):
            if np.isnan(ie[k]):
                continue
            below = [m for m, v in mean.items() if m != "iethresh" and not np.isnan(v[k])
                     and v[k] < ie[k]]
            if below:
                bad.append(f"@{x:g} above {','.join(below)}")
        parts.append("IEThresh last: " + ("fails " + "; ".join(bad) if bad
                                          else "holds where defined"))
    return f"{name}_{model}: " + " | ".join(parts)


def parse_tables(markdown: str) -> list[tuple[str, str, list[float], dict[str, np.ndarray]]]:
    """The accuracy tables of a markdown file written by this module: (dataset, model,
    budgets, {method: means}) per ``#### dataset, model, N runs (accuracy ...)`` heading."""
    out = []
    lines = markdown.splitlines()
    for k, line in enumerate(lines):
        if not (line.startswith("#### ") and "(accuracy at labels per task)" in line):
            continue
        dataset, model = (x.strip() for x in line[5:].split(",")[:2])
        rows: list[list[str]] = []
        for row in lines[k + 2:]:
            if not row.startswith("|"):
                if rows:
                    break
                continue
            rows.append([c.strip() for c in row.strip("|").split("|")])
        budgets = [float(x) for x in rows[0][1:]]
        mean = {r[0]: np.array([np.nan if c == "-" else float(c.split("±")[0])
                                for c in r[1:]]) for r in rows[2:]}
        out.append((dataset, model, budgets, mean))
    return out


def to_markdown(res: CompareResult) -> str:
    b = res["budgets"]
    head = "| method | " + " | ".join(f"{x:g}" for x in b) + " |"
    lines = [head, "|---|" + "---|" * len(b)]
    for m, mean in res["mean"].items():
        se = res["se"][m]
        cells = ["-" if np.isnan(v) else (f"{v:.3f}" if np.isnan(e) else f"{v:.3f}±{e:.3f}")
                 for v, e in zip(mean, se, strict=True)]
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    for m, pts in res["sweeps"].items():
        txt = ", ".join(f"eps={e:g}: {u:.2f} labels/task -> {a:.3f}" for e, (u, a) in pts.items())
        lines.append(f"\n{m} points (mean over runs): {txt}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m labelq.reproductions.bbta",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--dataset", default="breast-cancer",
                    choices=[*BENCHMARKS, "athlete", "athlete-completed"])
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
                         "(methods: policy specs, eta*X, or diag:NAME with NAME in "
                         f"{', '.join(DIAGNOSTIC_VARIANTS)}; see diagnostic_policy)")
    ap.add_argument("--data-order", action="store_true",
                    help="replay: keep the data's task and worker order in every run (default: "
                         "a random relabelling per run)")
    ap.add_argument("--check", metavar="MARKDOWN",
                    help="instead of running: check the paper's orderings on every accuracy "
                         "table of MARKDOWN (e.g. docs/reproductions/bbta.md), one line each")
    args = ap.parse_args(argv)
    if args.check:
        with open(args.check, encoding="utf-8") as f:
            for dataset, model, budgets, mean in parse_tables(f.read()):
                if model != "replay":
                    print(check_orderings(dataset, model, budgets, mean))
        return 0
    budgets = [float(x) for x in args.budgets.split(",")]
    methods = [m for m in args.methods.split(",") if m]
    t0 = time.time()
    if args.diagnose:
        model = "replay" if args.dataset.startswith("athlete") else args.model
        print(f"### {args.dataset}, {model}, {args.runs} runs: accuracy at {max(budgets):g} "
              "labels/task; share of labels from good workers per labels/task block\n")
        print("| method | accuracy | share per block |\n|---|---|---|")
        print("\n".join(diagnose(args.dataset, args.model, args.runs, max(budgets), methods,
                                args.seed, not args.data_order)))
        print(f"\n({time.time() - t0:.0f} s)")
        return 0
    res = compare(args.dataset, args.model, args.runs, budgets, methods, args.seed,
                  permute=not args.data_order, progress=lambda r: print(f"run {r + 1}/{args.runs} "
                                           f"({time.time() - t0:.0f} s)", file=sys.stderr))
    model = "replay" if args.dataset.startswith("athlete") else args.model
    print(f"### {args.dataset}, {model}, {args.runs} runs (accuracy at labels per task)\n")
    print(to_markdown(res))
    print(f"\n({time.time() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
