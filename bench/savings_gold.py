""""Human labels the model saved" (labelq/modelsavings.py) with and without calibrating the
twin's annotator accuracies on random gold, against the simulator's truth.

The synthetic project of tests/foundation/test_model_savings.py (300 tasks, 12 annotators
of accuracy 0.60-0.85, a model right on 85 % of the tasks or the same predictions shuffled,
``auto``, 1 label per task), with a share of the tasks random gold served at that rate
(``--gold``). The truth: the real runner (labelq.simulate.runner.run_policy) with and
without the model over ``--truth-seeds`` seeds, the budget the run without it needs to
reach the accuracy with it (labels on data tasks). The estimates: ``labels_saved`` on
each of ``--runs`` runs' labels (each its own project: truth, model and answers drawn
anew), with ``gold_calibration`` on and off; mean, its standard error over the runs, and
the root mean square error against the truth.

    python bench/savings_gold.py --runs 8 --gold 0.1,0.2
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from labelq.modelsavings import GRID, crossing, labels_saved
from labelq.policies.base import Observation
from labelq.policies.registry import build
from labelq.simulate.environment import Environment
from labelq.simulate.gold import GoldRules
from labelq.simulate.runner import run_policy
from labelq.simulate.workers import WorkerPool, accuracy_tensor

T, W, C, H = 300, 12, 2, 1.0


def env_for(seed: int, informative: bool, gold: float) -> Environment:
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, C, T)
    is_gold = rng.random(T) < gold
    pool = WorkerPool(accuracy_tensor(np.linspace(0.6, 0.85, W)[:, None], C))
    right = rng.random(T) < 0.85
    pred = np.where(right, truth, 1 - truth)
    conf = np.where(right, rng.uniform(0.55, 1.0, T), rng.uniform(0.5, 0.75, T))
    if not informative:
        perm = rng.permutation(T)
        pred, conf = pred[perm], conf[perm]
    p = np.zeros((T, C))
    p[np.arange(T), pred] = conf
    p[np.arange(T), 1 - pred] = 1.0 - conf
    return Environment(truth=truth, n_workers=W, n_classes=C, task_category=np.zeros(T, int),
                       pool=pool, predictions={"m": p}, is_gold=is_gold)


def one_run(env: Environment, rules: GoldRules | None, seed: int
            ) -> tuple[float, list[float], list[tuple[int, int, int]]]:
    policy = build("auto")
    log: list[tuple[int, int, int]] = []
    update = policy.update

    def recording(state, obs: Observation):  # type: ignore[no-untyped-def]
        log.append((obs.task, obs.worker, obs.label))
        return update(state, obs)

    policy.update = recording  # type: ignore[method-assign]
    with_m = run_policy(policy, env, [H * T], np.random.default_rng(seed), gold=rules)[0]
    without = run_policy(build("auto"), env.with_predictions(None), [g * H * T for g in GRID],
                         np.random.default_rng(seed), gold=rules)
    return with_m.accuracy, [c.accuracy for c in without], log


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=8)
    ap.add_argument("--truth-seeds", type=int, default=5)
    ap.add_argument("--gold", default="0.1,0.2")
    args = ap.parse_args()
    t0 = time.monotonic()
    print("| model | gold | true saving | estimate, calibrated on gold | rmse | "
          "estimate, fitted accuracies | rmse | gold answers (mean) |")
    print("|---|---|---|---|---|---|---|---|")
    for informative in (True, False):
        for share in (float(x) for x in args.gold.split(",")):
            rules = GoldRules.parse(f"fixed:rate={share}", None) if share > 0 else None
            withs, withouts, data_labels = [], [], []
            logs = []
            for s in range(max(args.truth_seeds, args.runs)):
                env = env_for(100 + s, informative, share)
                w, wo, log = one_run(env, rules, s)
                if s < args.truth_seeds:
                    withs.append(w)
                    withouts.append(wo)
                    assert env.is_gold is not None
                    data_labels.append(sum(not env.is_gold[t] for t, _w, _l in log))
                if s < args.runs:
                    logs.append((env, log))
            b, _ = crossing(withs, withouts)
            true = (b - 1.0) * float(np.mean(data_labels))
            est: dict[bool, list[float]] = {True: [], False: []}
            n_gold = []
            for env, log in logs:
                t, w, lab = (np.array(x) for x in zip(*log, strict=True))
                assert env.is_gold is not None
                known = np.where(env.is_gold, env.truth, -1)
                for cal in (True, False):
                    sv = labels_saved(t, w, lab, n_tasks=T, n_workers=W, n_classes=C,
                                      predictions=env.predictions or {}, gold=known,
                                      gold_calibration=cal)
                    assert sv is not None
                    est[cal].append(sv.saved)
                    if cal:
                        n_gold.append(sv.calibrated_on)
            cells = []
            for cal in (True, False):
                x = np.asarray(est[cal])
                cells += [f"{x.mean():.0f} ± {x.std(ddof=1) / np.sqrt(x.size):.0f}",
                          f"{np.sqrt(np.mean((x - true) ** 2)):.0f}"]
            print(f"| {'85 % right' if informative else 'shuffled'} | {share:.0%} | "
                  f"{true:.0f} | {' | '.join(cells)} | {np.mean(n_gold):.0f} |", flush=True)
    print(f"\n({args.runs} runs per row, truth over {args.truth_seeds} seeds; "
          f"{time.monotonic() - t0:.0f} s)")


if __name__ == "__main__":
    main()
