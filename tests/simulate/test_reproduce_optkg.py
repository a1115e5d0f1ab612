"""Reduced reproductions of the Opt-KG paper (docs/reproductions/optkg.md has the full ones)."""

import numpy as np
import pytest

from labelq.simulate.experiment import EnvSource, run_experiment

# identical perfect workers over noisy tasks; 500 workers so that no task ever runs out of
# fresh workers (the paper draws labels i.i.d. from theta_i, without a per-pair limit)
SIMULATED = "tasks=50,workers=500,model=one-coin,p=1,theta=uniform"


def _acc(exp, spec):
    return np.array([[a for a in p.accuracy] for p in exp.points[spec]])  # (budgets, runs)


@pytest.mark.slow
def test_optkg_beats_uniform_on_the_papers_simulated_setting():
    """Figure 2(a): at 4-6 labels per task Opt-KG is ahead of uniform sampling."""
    exp = run_experiment(EnvSource("synthetic", SIMULATED), ["optkg", "uniform"], [4, 5, 6],
                         runs=30, seed=2013)
    diff = _acc(exp, "optkg") - _acc(exp, "uniform")  # paired: same theta per run
    mean = diff.mean(axis=1)
    se = diff.std(axis=1, ddof=1) / np.sqrt(diff.shape[1])
    assert np.all(mean > 0), mean
    assert np.all(mean - 2 * se > 0), (mean, se)  # well clear of noise


@pytest.mark.slow
def test_rte_replay_with_worker_reliability_beats_uniform(shared_datasets):
    """Figure 3(b), reduced to 3 runs at 4 labels per task, pull mode (push is far slower
    with the current optkg-workers). The paper reports 92.25%; we measure about 0.919 in
    pull mode and 0.910 in push mode (docs/reproductions/optkg.md), so this asserts what we
    reach — clearly above uniform sampling (0.89) — not the paper's figure."""
    exp = run_experiment(EnvSource("data", str(shared_datasets / "rte")),
                         ["optkg-workers", "uniform"], [4], runs=3, seed=0, mode="pull")
    ours, uniform = _acc(exp, "optkg-workers")[0], _acc(exp, "uniform")[0]
    assert ours.mean() >= 0.905, ours
    assert ours.mean() >= uniform.mean() + 0.01, (ours, uniform)
