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
    """Figure 3(b), reduced to 10 runs at 4 labels per task, pull mode (a random arriving
    worker). The paper reports 92.25%; over 20 runs we measure 0.9139 +- 0.0014 with the
    policy's own posterior and 0.9140 +- 0.0012 with Dawid-Skene on the same labels
    (docs/reproductions/optkg.md), so this asserts what is robustly reached -- about 3
    standard errors of a 10-run mean below those, and clearly above uniform sampling
    (0.8905 own, 0.8994 with Dawid-Skene) -- not the paper's figure."""
    exp = run_experiment(EnvSource("data", str(shared_datasets / "rte")),
                         ["optkg-workers", "uniform"], [4], runs=10, seed=0, mode="pull",
                         aggregate="ds")
    ours, uniform = _acc(exp, "optkg-workers")[0], _acc(exp, "uniform")[0]
    ours_ds = np.array(exp.points["optkg-workers"][0].accuracy_aggregate)
    uniform_ds = np.array(exp.points["uniform"][0].accuracy_aggregate)
    assert ours.mean() >= 0.908, ours
    assert ours_ds.mean() >= 0.908, ours_ds
    assert ours.mean() >= uniform.mean() + 0.01, (ours, uniform)
    assert ours_ds.mean() >= uniform_ds.mean() + 0.01, (ours_ds, uniform_ds)


@pytest.mark.slow
def test_rte_replay_push_mode(shared_datasets):
    """Push mode (the policy picks the pair) is deterministic on the replay: one run. With
    the incremental reward cache it runs to 4 labels per task in a few seconds; it reaches
    0.9100 (0.9137 with Dawid-Skene), below pull mode and below the paper's 92.25%."""
    exp = run_experiment(EnvSource("data", str(shared_datasets / "rte")), ["optkg-workers"],
                         [4], runs=1, seed=0, mode="push", aggregate="ds")
    point = exp.points["optkg-workers"][0]
    assert point.spent == [3200.0]
    assert point.accuracy[0] >= 0.905, point.accuracy
    assert point.accuracy_aggregate[0] >= 0.905, point.accuracy_aggregate


def _random_subset_majority(data, k):
    """Exact expected accuracy of the majority of k labels drawn without replacement from
    each task's recorded labels (ties count half), from the hypergeometric law."""
    from math import comb

    total = 0.0
    for i in range(data.n_tasks):
        on_task = data.task == i
        n = int(on_task.sum())
        good = int((data.label[on_task] == data.truth[i]).sum())
        for m in range(k + 1):
            weight = comb(good, m) * comb(n - good, k - m) / comb(n, k)
            total += weight * (1.0 if 2 * m > k else 0.5 if 2 * m == k else 0.0)
    return total / data.n_tasks


@pytest.mark.slow
def test_rte_task_mode_the_papers_figure_3a_protocol(shared_datasets):
    """--mode task (Section 7.2: the policy picks the task, a random worker who labelled it in
    the data answers). Uniform sampling then gives every task 4 random labels of its 10, so
    its accuracy is the exact hypergeometric expectation computed from the data (0.8051 on
    RTE) -- far below pull mode's 0.89, where every worker is equally likely to arrive and the
    four prolific near-random RTE workers are rarely drawn. Opt-KG with identical workers
    must beat that clearly (20 runs: see docs/reproductions/optkg.md)."""
    from labelq.datasets import load_dataset

    data = load_dataset(shared_datasets / "rte")
    expected = _random_subset_majority(data, 4)
    assert 0.79 < expected < 0.82  # the RTE data set itself (0.8051)
    exp = run_experiment(EnvSource("data", str(shared_datasets / "rte")), ["uniform", "optkg"],
                         [4], runs=4, seed=0, mode="task")
    uniform, optkg = _acc(exp, "uniform")[0], _acc(exp, "optkg")[0]
    assert abs(uniform.mean() - expected) < 0.012, (uniform, expected)  # sd of a run ~0.0064
    assert optkg.mean() >= expected + 0.04, (optkg, expected)
