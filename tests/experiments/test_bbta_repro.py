"""Reduced BBTA reproduction (Zhang, Ma & Sugiyama 2015, Section 5): the orderings of the
full tables in docs/reproductions/bbta.md, checked on the full-size ionosphere-shaped set
with 3 runs at a budget of 5 labels per task (the sweeps are capped there), and on the
athlete replay with 3 runs. Seeds are fixed (``compare(seed=0)``), so the numbers are
deterministic; the margins are the ones the 10-run tables support."""

from __future__ import annotations

import numpy as np
import pytest

from labelq.experiments import bbta as exp

METHODS = ["bbta:explore=1", "bbta:explore=0", "optkg-multi", "random", "crowdsense",
           "iethresh"]


def test_benchmarks_have_the_papers_shapes():
    for name, (n, s, k, _) in exp.BENCHMARKS.items():
        b = exp.make_bench(name)
        assert (b.truth.size, b.n_categories, b.n_workers) == (n, s, k)
        assert set(np.unique(b.category)) == set(range(s))


def test_answers_follow_the_worker_model():
    b = exp.make_bench("ionosphere")
    ans = exp.simulate_answers(b, "spammer-hammer", np.random.default_rng(0))
    hammer = b.category[:, None] == (np.arange(b.n_workers) % b.n_categories)[None, :]
    right = ans == b.truth[:, None]
    assert right[hammer].all()  # hammers always answer the truth, as in the paper
    assert abs(right[~hammer].mean() - 0.5) < 0.03


def test_compare_takes_a_bench_and_sweep_grids():
    b = exp.synthetic_bench("tiny", 30, 3, 6, 0.5)
    res = exp.compare(b, "one-coin", runs=1, budgets=[1.0, 2.0],
                      methods=["random", "iethresh"], sweeps={"iethresh": [0.99]})
    assert res["dataset"] == "tiny" and list(res["sweeps"]["iethresh"]) == [0.99]
    assert res["mean"]["random"].shape == (2,)


@pytest.mark.slow
@pytest.mark.parametrize("model", ["spammer-hammer", "malicious"])
def test_orderings_on_adversarial_workers(model):
    res = exp.compare("ionosphere", model, runs=3, budgets=[5.0], methods=METHODS, seed=0)
    acc = {m: float(v[0]) for m, v in res["mean"].items()}
    assert not np.isnan(acc["iethresh"]) and not np.isnan(acc["crowdsense"]), acc
    # exploration does not hurt at 5 labels per task (the paper's N'=1 vs N'=0); measured
    # (these seeds) +0.2 points under spammer-hammer, +4.4 under malicious
    assert acc["bbta:explore=1"] >= acc["bbta:explore=0"] - 0.01, acc
    if model == "malicious":
        assert acc["bbta:explore=1"] > acc["bbta:explore=0"] + 0.02, acc
    # BBTA beats the naive and the category-blind baselines
    for base in ("random", "crowdsense", "iethresh"):
        assert acc["bbta:explore=1"] > acc[base] + 0.03, (base, acc)
    # IEThresh is last
    assert acc["iethresh"] == min(acc.values()), acc
    # against per-category Opt-KG the full tables are mixed (a tie under spammer-hammer on
    # this set at 5 labels per task): only require BBTA to be within 3 points
    assert acc["bbta:explore=1"] > acc["optkg-multi"] - 0.03, acc


@pytest.mark.slow
@pytest.mark.shared
def test_athlete_replay(shared_datasets):
    bench = exp.make_bench("athlete", datasets_dir=str(shared_datasets))
    assert bench.n_categories == 4  # task_types.csv flows into the categories
    res = exp.compare(bench, "replay", runs=3, budgets=[5.0],
                      methods=["bbta:explore=1", "random", "optkg"], seed=0)
    acc = {m: float(v[0]) for m, v in res["mean"].items()}
    assert abs(acc["random"] - 0.706) < 0.03, acc  # 10 runs: 0.706 +- 0.005
    # 10 runs: BBTA(N'=1) 0.763 +- 0.008, +5.7 points over random (the issue's +10 is missed)
    assert acc["bbta:explore=1"] > acc["random"] + 0.03, acc
    assert acc["bbta:explore=1"] > acc["optkg"] + 0.01, acc  # category-blind Opt-KG: 0.728
