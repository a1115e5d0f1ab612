"""A model in the loop (issue 42): ``auto`` with a model's predictions against ``auto``
without them and against the model alone: docs/benchmarks.md (section models) and the
table of docs/models.md ("## Benchmark").

Scenarios (each a data set and a predictions array per run):

* ``moviereviews_bin``: the data set's ``predictions.csv`` (TF-IDF + logistic regression
  trained on 3,506 disjoint reviews; accuracy 0.809);
* ``moviereviews_bin shuffled``: the same rows permuted across tasks each run (no signal,
  the same marginals and confidences);
* ``moviereviews_bin wrong 30 %``: on a random 30 % of the tasks (each run) the model's own
  confidence put on a wrong class (the rest spread over the other classes): as sure of
  itself as the real model, wrong on 30 % more of the tasks;
* ``rte sim`` and ``temp sim``: a simulated model of known per-class accuracy (0.85 on the
  first class, 0.70 on the second) that is calibrated by construction: per task a
  confidence c ~ 1/C + (1 - 1/C) Beta, with the Beta's mean set so that E[c] is the class's
  accuracy, the true class predicted with probability c (else a wrong one at random), c
  on the predicted class and the rest spread evenly.

Every unit is one run of ``labelq simulate --shuffle`` (same seeds: the environment's
order and the policy's generator are those of run r), with and without the predictions;
``--gold 0.05`` also runs each scenario with 5 % gold served by the default schedule.
After the runs, the model's measured accuracy per class (``aggregate(..., method="shrunk",
predictions=...)`` on 1, 2 and 3 random labels per task, without and with 5 % gold clamped)
is set against its true accuracy per class: the interval's coverage.

    nice -n 10 python bench/models.py --runs 5 --jobs 2 --gold 0.05
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._report import command_line, machine, write_section  # noqa: E402
from labelq.aggregation import aggregate  # noqa: E402
from labelq.aggregation.agreement import expected_accuracy  # noqa: E402
from labelq.aggregation.base import rank_within_task  # noqa: E402
from labelq.datasets import LabelData, load_dataset, shared_datasets_dir  # noqa: E402
from labelq.policies import build  # noqa: E402
from labelq.policies.base import FloatArray, IntArray  # noqa: E402
from labelq.simulate.experiment import run_rngs  # noqa: E402
from labelq.simulate.gold import GoldRules, with_gold  # noqa: E402
from labelq.simulate.predictions import read_predictions_csv  # noqa: E402
from labelq.simulate.replay import replay_environment  # noqa: E402
from labelq.simulate.runner import run_policy  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
MODELS_DOC = ROOT / "docs" / "models.md"
RESULTS = ROOT / "bench" / "results" / "models.json"
BUDGETS = (1.0, 1.5, 2.0, 3.0)
SPEC = "auto"
WRONG_SHARE = 0.3
SIM_ACCURACY = (0.85, 0.70)  # per class of the simulated models
SIM_STRENGTH = 4.0  # a + b of the simulated confidences' Beta


@dataclass(frozen=True)
class Scenario:
    name: str
    dataset: str
    kind: str  # real, shuffled, wrong, sim


SCENARIOS = (Scenario("moviereviews_bin", "moviereviews_bin", "real"),
             Scenario("moviereviews_bin shuffled", "moviereviews_bin", "shuffled"),
             Scenario("moviereviews_bin wrong 30 %", "moviereviews_bin", "wrong"),
             Scenario("rte sim", "rte", "sim"),
             Scenario("temp sim", "temp", "sim"))


def simulated_model(truth: IntArray, n_classes: int, accuracy: tuple[float, ...],
                    rng: np.random.Generator) -> FloatArray:
    """A calibrated model of per-class ``accuracy`` (module doc)."""
    C, T = n_classes, truth.size
    acc = np.asarray([accuracy[k % len(accuracy)] for k in range(C)])[truth]
    mean = (acc - 1.0 / C) / (1.0 - 1.0 / C)  # the Beta's mean giving E[c] = accuracy
    c = 1.0 / C + (1.0 - 1.0 / C) * rng.beta(mean * SIM_STRENGTH, (1 - mean) * SIM_STRENGTH)
    right = rng.random(T) < c
    other = (truth + rng.integers(1, C, T)) % C
    pred = np.where(right, truth, other)
    out = np.repeat(((1.0 - c) / (C - 1))[:, None], C, axis=1)
    out[np.arange(T), pred] = c
    return out


def confidently_wrong(p: FloatArray, truth: IntArray, share: float,
                      rng: np.random.Generator) -> FloatArray:
    """``p`` with, on a random ``share`` of the tasks, its top probability put on a wrong
    class (the rest spread evenly over the other classes)."""
    T, C = p.shape
    out = p.copy()
    sel = rng.random(T) < share
    wrong = (truth + rng.integers(1, C, T)) % C
    conf = p.max(axis=1)
    out[sel] = ((1.0 - conf[sel]) / (C - 1))[:, None]
    out[np.flatnonzero(sel), wrong[sel]] = conf[sel]
    return out


_DATA: dict[str, LabelData] = {}


def dataset(datasets: Path, name: str) -> LabelData:
    if name not in _DATA:
        _DATA[name] = load_dataset(datasets / name)
    return _DATA[name]


def predictions_for(datasets: Path, sc: Scenario, run: int) -> FloatArray:
    """The scenario's predictions in the data set's task order, for run ``run`` (its own
    seed, the same with and without gold)."""
    d = dataset(datasets, sc.dataset)
    rng = np.random.default_rng(np.random.SeedSequence(42, spawn_key=(run, len(sc.name))))
    if sc.kind == "sim":
        return simulated_model(d.truth, d.n_classes, SIM_ACCURACY, rng)
    p = read_predictions_csv(datasets / sc.dataset / "predictions.csv", d.tasks, d.classes)
    if sc.kind == "shuffled":
        return p[rng.permutation(p.shape[0])]
    if sc.kind == "wrong":
        return confidently_wrong(p, d.truth, WRONG_SHARE, rng)
    return p


@dataclass(frozen=True)
class Unit:
    datasets: str
    scenario: Scenario
    run: int
    gold: float | None
    model: bool


def run_unit(u: Unit) -> dict:
    datasets = Path(u.datasets)
    d = dataset(datasets, u.scenario.dataset)
    p = predictions_for(datasets, u.scenario, u.run)
    env_rng, rng = run_rngs(0, u.run, SPEC)
    env = replay_environment(d).with_predictions({"model": p}).shuffled(env_rng)
    rules = None
    if u.gold is not None:
        env = with_gold(env, u.gold, env_rng)
        rules = GoldRules.parse(None, None)
    eval_truth = np.where(np.asarray(env.is_gold, bool), -1, env.truth)
    alone = expected_accuracy(env.predictions["model"] if env.predictions else p, eval_truth)
    if not u.model:
        env = env.with_predictions(None)
    t0 = time.process_time()
    cps = run_policy(build(SPEC), env, [b * env.n_tasks for b in BUDGETS], rng, gold=rules)
    return {"scenario": u.scenario.name, "run": u.run, "gold": u.gold, "model": u.model,
            "accuracy": [c.accuracy for c in cps], "alone": alone,
            "cpu": time.process_time() - t0}


def coverage(datasets: Path, sc: Scenario, runs: int) -> list[dict]:
    """The measured per-class accuracy (``shrunk`` with predictions) against the truth."""
    d = dataset(datasets, sc.dataset)
    out = []
    for r in range(runs):
        p = predictions_for(datasets, sc, r)
        have = ~np.isnan(p).any(axis=1)
        true = [float((p[have & (d.truth == k)].argmax(axis=1) == k).mean())
                for k in range(d.n_classes)]
        for k_labels in (1, 2, 3):
            for gold in (None, 0.05):
                rng = np.random.default_rng(np.random.SeedSequence(7, spawn_key=(r, k_labels)))
                keep = rank_within_task(d.task, rng) < k_labels
                g = None
                if gold is not None:
                    g = np.full(d.n_tasks, -1)
                    pick = rng.choice(d.n_tasks, int(round(gold * d.n_tasks)), replace=False)
                    g[pick] = d.truth[pick]
                res = aggregate(d.task[keep], d.worker[keep], d.label[keep], "shrunk",
                                n_tasks=d.n_tasks, n_classes=d.n_classes,
                                n_workers=d.n_workers, gold=g, predictions={"model": p})
                ma = res.model_accuracy_["model"]
                row = {"scenario": sc.name, "run": r, "labels": k_labels,
                       "gold": gold, "true": true, "est": ma.accuracy.tolist(),
                       "low": ma.low.tolist(), "high": ma.high.tolist()}
                if gold is not None and ma.gold_accuracy is not None:
                    row.update(gold_est=ma.gold_accuracy.tolist(),
                               gold_low=np.asarray(ma.gold_low).tolist(),
                               gold_high=np.asarray(ma.gold_high).tolist())
                out.append(row)
    return out


def gold_cells(sel: list[dict], true: np.ndarray) -> str:
    """The gold-only estimate's mean, mean interval and coverage (or "–" without gold)."""
    if not sel or "gold_est" not in sel[0]:
        return "–"
    est, lo, hi = (np.array([c[f] for c in sel]) for f in ("gold_est", "gold_low", "gold_high"))
    inside = float(((lo <= true) & (true <= hi)).mean())
    fmt = " / ".join
    return (f"{fmt(f'{x:.3f}' for x in est.mean(0))}, "
            f"{fmt(f'{a:.3f}–{b:.3f}' for a, b in zip(lo.mean(0), hi.mean(0), strict=True))}, "
            f"{inside:.2f}")


def mean_se(values: list[float]) -> tuple[float, float]:
    a = np.asarray(values, float)
    return float(a.mean()), float(a.std(ddof=1) / np.sqrt(a.size)) if a.size > 1 else 0.0


def report(rows: list[dict], cover: list[dict], gold: float | None, runs: int,
           took: float) -> tuple[str, str]:
    """(the docs/benchmarks.md section, the docs/models.md table)."""
    def cell(sc: str, g: float | None, model: bool, k: int) -> tuple[float, float]:
        return mean_se([r["accuracy"][k] for r in rows if r["scenario"] == sc
                        and r["gold"] == g and r["model"] == model])

    head = ("| scenario | gold | model alone | " + " | ".join(
        f"{b:g} label{'s' if b != 1 else ''}/task: without / with the model" for b in BUDGETS)
        + " |\n|" + "---|" * (3 + len(BUDGETS)) + "\n")
    table = head
    for sc in SCENARIOS:
        for g in (None, gold) if gold is not None else (None,):
            alone = [r["alone"] for r in rows if r["scenario"] == sc.name and r["gold"] == g]
            if not alone:
                continue
            cells = []
            for k in range(len(BUDGETS)):
                a, sa = cell(sc.name, g, False, k)
                b, sb = cell(sc.name, g, True, k)
                cells.append(f"{a:.3f} ± {sa:.3f} / **{b:.3f}** ± {sb:.3f} ({b - a:+.3f})")
            table += (f"| {sc.name} | {'%g %%' % (100 * g) if g else 'none'} | "
                      f"{np.mean(alone):.3f} | " + " | ".join(cells) + " |\n")
    cov = ("\nThe model's measured accuracy per class (`aggregate(..., method=\"shrunk\", "
           "predictions=...)` on 1, 2, 3 random labels per task), against its true accuracy "
           "per class: mean estimate, mean 95 % interval and the share of intervals that "
           f"hold the truth, over {runs} runs x classes:\n\n"
           "| scenario | labels/task | gold | true | estimated | interval | covered | on gold "
           "alone (`gold_accuracy`): estimate, interval, covered |\n"
           "|---|---|---|---|---|---|---|---|\n")
    for sc in SCENARIOS:
        for k in (1, 2, 3):
            for g in (None, 0.05):
                sel = [c for c in cover if c["scenario"] == sc.name and c["labels"] == k
                       and c["gold"] == g]
                if not sel:
                    continue
                true = np.array([c["true"] for c in sel])
                est, lo, hi = (np.array([c[f] for c in sel]) for f in ("est", "low", "high"))
                inside = float(((lo <= true) & (true <= hi)).mean())
                fmt = " / ".join
                cov += (f"| {sc.name} | {k} | {'5 %' if g else 'none'} | "
                        f"{fmt(f'{x:.3f}' for x in true.mean(0))} | "
                        f"{fmt(f'{x:.3f}' for x in est.mean(0))} | "
                        f"{fmt(f'{a:.3f}–{b:.3f}' for a, b in zip(lo.mean(0), hi.mean(0), strict=True))}"
                        f" | {inside:.2f} | {gold_cells(sel, true)} |\n")
    intro = (f"Command: `nice -n 10 {command_line()}` ({machine()}; {took / 60:.1f} min). "
             f"`auto` (policy defaults, `min_human_labels=1`) replaying each data set in a "
             f"new order per run (`--shuffle`'s seeds), {runs} runs, accuracy of the policy's "
             f"own posterior (mean ± s.e.), budgets in human labels per task; the model's "
             f"predictions are free. Scenarios: `bench/models.py`'s docstring.\n\n")
    section = "## Models in the loop (`bench/models.py`)\n\n" + intro + table + cov
    return section, intro + table + cov


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--datasets", type=Path, default=shared_datasets_dir())
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--gold", type=float, default=None)
    ap.add_argument("--only", default=None, help="comma-separated scenario names")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    if args.datasets is None:
        sys.exit("no shared data sets (--datasets DIR)")
    scen = [s for s in SCENARIOS if args.only is None or s.name in args.only.split(",")]
    units = [Unit(str(args.datasets), sc, r, g, m) for sc in scen for r in range(args.runs)
             for g in ((None, args.gold) if args.gold is not None else (None,))
             for m in (False, True)]
    t0 = time.monotonic()
    rows: list[dict] = []
    with multiprocessing.get_context("spawn").Pool(args.jobs) as pool:
        for k, res in enumerate(pool.imap_unordered(run_unit, units), start=1):
            rows.append(res)
            print(f"{k}/{len(units)} {res['scenario']} run {res['run']} gold {res['gold']} "
                  f"model {res['model']}: {np.round(res['accuracy'], 3).tolist()} "
                  f"({time.monotonic() - t0:.0f} s)", flush=True)
    cover = [c for sc in scen for c in coverage(args.datasets, sc, args.runs)]
    took = time.monotonic() - t0
    section, table = report(rows, cover, args.gold, args.runs, took)
    print(section)
    if not args.no_write:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps({"rows": rows, "coverage": cover}, indent=1))
        write_section("models", section)
        write_section("models-table", table, doc=MODELS_DOC)


if __name__ == "__main__":
    main()
