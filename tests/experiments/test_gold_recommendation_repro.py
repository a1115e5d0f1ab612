"""Kang & Tay Section 5 orderings, with fewer trials than the 2000 of the paper and the docs
(docs/reproductions/gold-recommendation.md has the full tables)."""

import numpy as np
import pytest

from labelq.experiments.gold_recommendation import (STRATEGY_SPECS, regret_at, run, setting,
                                                    simulate_regret)
from labelq.gold.recommend import RecommenderParams


def test_ur_gamma_2_beats_1_5_and_10_and_eps_first_is_best_setting_1():
    res = run(1, trials=200, steps=1000, seed=3, checkpoints=[1000])
    final = {name: mean[-1] for name, (mean, _) in res.items()}
    # full run: UR 332.7, UR(1.5) 453.4, UR(10) 476.3, eps-first 208.9, GR 418.4
    assert final["UR"] < final["UR(1.5)"] - 60
    assert final["UR"] < final["UR(10)"] - 60
    assert final["eps-first"] < min(v for k, v in final.items() if k != "eps-first") - 60
    assert final["GR"] < min(final["UR(1.5)"], final["UR(10)"])


@pytest.mark.slow
def test_regret_over_sqrt_n_flattens_for_gamma_2_only():
    """Up to n = 1000 every strategy's R/√n still grows (gold dominates early); by
    n = 5000-20000 it is nearly flat for GR and UR and keeps growing for UR(1.5), UR(10)."""
    p, q = setting(1)
    growth = {}
    for name in ("GR", "UR", "UR(1.5)", "UR(10)"):
        curve = simulate_regret(STRATEGY_SPECS[name], p, q, trials=30, steps=20000,
                                rng=np.random.default_rng(7))
        growth[name] = (curve.mean[19999] / np.sqrt(20000)) / (curve.mean[4999] / np.sqrt(5000))
    assert growth["GR"] < 1.2 and growth["UR"] < 1.2, growth
    assert growth["UR(1.5)"] > 1.5 and growth["UR(10)"] > 1.5, growth


@pytest.mark.xfail(strict=True, reason="paper: GR below UR at K = 25; with c = 0.05, d = 0.1 "
                   "GR's ε_r = min(1, 125/r) is 1 for all ~95 epochs of n = 1000, so GR "
                   "recommends uniformly at random (see the reproduction doc)")
def test_gr_below_ur_at_k25_with_paper_parameters():
    p, q = setting(5)
    gr, _ = regret_at(STRATEGY_SPECS["GR"], p, q, [1000], trials=200,
                      rng=np.random.default_rng(0))
    ur, _ = regret_at(STRATEGY_SPECS["UR"], p, q, [1000], trials=200,
                      rng=np.random.default_rng(0))
    assert gr[0] < ur[0]


def test_gr_below_ur_at_k25_once_exploration_decays_within_the_horizon():
    """With c = 0.001 (ε_r < 1 from epoch 3) GR's ordering against UR is the paper's."""
    p, q = setting(5)
    gr, _ = regret_at(RecommenderParams("gr", c=0.001), p, q, [1000], trials=200,
                      rng=np.random.default_rng(0))
    ur, _ = regret_at(STRATEGY_SPECS["UR"], p, q, [1000], trials=200,
                      rng=np.random.default_rng(0))
    assert gr[0] < ur[0] - 100  # measured with 300 trials: 320 vs 573
