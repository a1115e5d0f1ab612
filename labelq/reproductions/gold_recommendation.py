"""Reproduce Kang & Tay's simulations (Section 5): regret of GR, UR(γ) and ε-first.

All trials run at once: the recommendation logic is :mod:`labelq.policies._recommend`, the same
code the registered policies ``gr``, ``ur`` and ``eps-first-gold`` call, with one row per
trial instead of one row per worker. Per step every trial is recommended a (category, gold)
pair, the simulated worker accepts with q_k and answers correctly with p_k, and the expected
reward of a non-gold task, q_k (p_k − β σ²_k / g_k)+ with g_k the gold tasks completed so
far (eq. 4), is accumulated. Regret R(n) = n q* p* − r(n), averaged over trials.

ε-first needs the horizon n in advance, so its R(n) at each checkpoint n comes from a run
planned for exactly n steps (H = ⌊√n⌋), as in the paper's Theorem 4.

Command line::

    python -m labelq.reproductions.gold_recommendation --setting 1 --trials 2000 --steps 1000
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

import numpy as np

from ..policies._recommend import RecommenderParams, init_state, observe, recommend, reward

__all__ = ["SETTINGS", "STRATEGY_SPECS", "GR_READINGS", "spec_named", "setting", "RegretCurve", "simulate_regret",
           "regret_at", "run", "main"]

#: Table I, (p_k, q_k) per category. Setting 2 (varied (x, y)) is not reproduced.
SETTINGS: dict[int, list[tuple[float, float]]] = {
    1: [(0.7, 0.7), (0.9, 0.3), (0.3, 0.9)] + [(0.4, 0.4)] * 7,
    3: [(0.8, 0.8)] + [(0.4, 0.4)] * 9,
    4: [(0.8, 0.8)] + [(0.4, 0.4)] * 14,
    5: [(0.8, 0.8)] + [(0.4, 0.4)] * 24,
}

#: Strategies compared in Figs. 1-3, with the paper's parameters (c, d, α of Section 5).
STRATEGY_SPECS: dict[str, RecommenderParams] = {
    "GR": RecommenderParams("gr", alpha=0.1, gamma=2.0, c=0.05, d=0.1),
    "UR": RecommenderParams("ur", alpha=0.1, gamma=2.0),
    "UR(1.5)": RecommenderParams("ur", alpha=0.1, gamma=1.5),
    "UR(10)": RecommenderParams("ur", alpha=0.1, gamma=10.0),
    "eps-first": RecommenderParams("eps-first"),
}

#: Readings of GR's ε_r = min(1, cK/(d² r)) tried against the paper's "GR outperforms UR"
#: (Fig. 3). Only "GR" above is the text; the others are what a slip in the text or the
#: authors' code could have been. Two are the printed formula with c rescaled.
GR_READINGS: dict[str, RecommenderParams] = {
    "GR(d not squared)": RecommenderParams("gr", alpha=0.1, gamma=2.0, c=0.05 * 0.1, d=0.1),
    "GR(without K)": RecommenderParams("gr", alpha=0.1, gamma=2.0, c=0.05 / 10, d=0.1),
    "GR(step clock)": RecommenderParams("gr", alpha=0.1, gamma=2.0, c=0.05, d=0.1,
                                        clock="step"),
}

BETA = 10.0


def spec_named(name: str, n_categories: int) -> RecommenderParams:
    """A strategy of :data:`STRATEGY_SPECS` or :data:`GR_READINGS` (``GR(without K)``
    divides c by this setting's K)."""
    if name == "GR(without K)":
        base = GR_READINGS[name]
        return RecommenderParams("gr", alpha=base.alpha, gamma=base.gamma,
                                 c=0.05 / n_categories, d=base.d)
    return {**STRATEGY_SPECS, **GR_READINGS}[name]


def setting(number: int) -> tuple[np.ndarray, np.ndarray]:
    """(p, q) arrays of a Table I setting."""
    if number not in SETTINGS:
        raise ValueError(f"setting must be one of {sorted(SETTINGS)}, got {number!r}")
    pq = np.array(SETTINGS[number])
    return pq[:, 0], pq[:, 1]


@dataclass(frozen=True)
class RegretCurve:
    """Mean regret over trials after each step n = 1..steps, and its standard error."""

    mean: np.ndarray  # float (steps,)
    sem: np.ndarray  # float (steps,)


def simulate_regret(params: RecommenderParams, p: np.ndarray, q: np.ndarray, *, trials: int,
                    steps: int, rng: np.random.Generator, beta: float = BETA) -> RegretCurve:
    """Run ``trials`` independent workers for ``steps`` recommendations each."""
    p, q = np.asarray(p, float), np.asarray(q, float)
    state = init_state(params, trials, p.size)
    best = float(np.max(p * q))
    regret = np.empty((trials, steps))
    earned = np.zeros(trials)
    rows = np.arange(trials)
    for t in range(steps):
        category, gold = recommend(params, state, rng)
        g = state.gold_done[rows, category]
        earned += np.where(gold, 0.0, reward(p[category], q[category], g, beta))
        regret[:, t] = (t + 1) * best - earned
        accepted = rng.random(trials) < q[category]
        correct = rng.random(trials) < p[category]
        observe(params, state, category, gold, accepted, correct)
    return RegretCurve(regret.mean(axis=0), regret.std(axis=0, ddof=1) / np.sqrt(trials))


def regret_at(params: RecommenderParams, p: np.ndarray, q: np.ndarray, checkpoints: list[int],
              *, trials: int, rng: np.random.Generator,
              beta: float = BETA) -> tuple[np.ndarray, np.ndarray]:
    """(mean, sem) of R(n) at each checkpoint n. ε-first is planned for each n separately."""
    if params.strategy != "eps-first":
        curve = simulate_regret(params, p, q, trials=trials, steps=max(checkpoints), rng=rng,
                                beta=beta)
        idx = np.asarray(checkpoints) - 1
        return curve.mean[idx], curve.sem[idx]
    means, sems = [], []
    for n in checkpoints:
        planned = RecommenderParams("eps-first", horizon=int(n))
        curve = simulate_regret(planned, p, q, trials=trials, steps=int(n), rng=rng, beta=beta)
        means.append(curve.mean[-1])
        sems.append(curve.sem[-1])
    return np.array(means), np.array(sems)


def run(setting_no: int, *, trials: int, steps: int, seed: int = 0,
        strategies: list[str] | None = None,
        checkpoints: list[int] | None = None) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Regret at checkpoints for each named strategy (fresh generator per strategy)."""
    p, q = setting(setting_no)
    names = strategies or list(STRATEGY_SPECS)
    points = checkpoints or [int(x) for x in np.linspace(steps / 10, steps, 10)]
    out = {}
    for i, name in enumerate(names):
        rng = np.random.default_rng([seed, setting_no, i])
        out[name] = regret_at(spec_named(name, p.size), p, q, points, trials=trials, rng=rng)
    return out


def _table(result: dict[str, tuple[np.ndarray, np.ndarray]], points: list[int]) -> str:
    names = list(result)
    lines = ["| n | " + " | ".join(f"{n} R(n) ± se | {n} R/√n" for n in names) + " |",
             "|---:|" + "---:|---:|" * len(names)]
    for j, n in enumerate(points):
        cells = []
        for name in names:
            mean, sem = result[name]
            cells.append(f"{mean[j]:.1f} ± {sem[j]:.1f} | {mean[j] / np.sqrt(n):.2f}")
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--setting", type=int, required=True, choices=sorted(SETTINGS))
    parser.add_argument("--trials", type=int, default=2000)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--strategies", default=",".join(STRATEGY_SPECS),
                        help=f"comma-separated subset of {', '.join(STRATEGY_SPECS)}, "
                             f"or of the alternative readings {', '.join(GR_READINGS)}")
    args = parser.parse_args(argv)
    names = [s.strip() for s in args.strategies.split(",") if s.strip()]
    known = {**STRATEGY_SPECS, **GR_READINGS}
    unknown = [s for s in names if s not in known]
    if unknown:
        parser.error(f"unknown strategies {unknown}; known: {', '.join(known)}")
    points = [int(x) for x in np.linspace(args.steps / 10, args.steps, 10)]
    result = run(args.setting, trials=args.trials, steps=args.steps, seed=args.seed,
                 strategies=names, checkpoints=points)
    p, q = setting(args.setting)
    print(f"setting {args.setting}: K={p.size}, q*p*={np.max(p * q):.2f}, "
          f"{args.trials} trials, seed {args.seed}")
    print(_table(result, points))
    return 0


if __name__ == "__main__":
    sys.exit(main())
