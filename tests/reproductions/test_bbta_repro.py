"""Reduced BBTA reproduction (Zhang, Ma & Sugiyama 2015, Section 5): the orderings of the
full tables in docs/reproductions/bbta.md, checked on the full-size ionosphere-shaped set
with 3 runs at a budget of 5 labels per task (the sweeps are capped there), and on the
athlete replay with 10 runs. Seeds are fixed (``compare(seed=0)``), so the numbers are
deterministic; the margins are the ones the 30-run tables support."""

from __future__ import annotations

import numpy as np
import pytest

from labelq.reproductions import bbta as exp

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


def test_replay_relabelling_keeps_the_data_and_changes_the_order():
    rec = np.array([[0, 1, -1], [1, -1, 0], [-1, 0, 0], [1, 1, 1]])
    b = exp.Bench("toy", np.array([0, 1, 0, 1]), np.array([0, 0, 1, 1]), 2, 3, 2, rec)
    seen = set()
    for r in range(20):
        p, ans = exp.run_data(b, "replay", 0, r)
        assert ans is p.recorded
        # each task keeps its truth, category and multiset of labels; each worker its labels
        rows = sorted((int(t), int(c), tuple(sorted(x))) for t, c, x in
                      zip(p.truth, p.category, p.recorded, strict=True))
        assert rows == sorted((int(t), int(c), tuple(sorted(x))) for t, c, x in
                              zip(b.truth, b.category, b.recorded, strict=True))
        assert sorted(sorted(col) for col in p.recorded.T.tolist()) == \
            sorted(sorted(col) for col in rec.T.tolist())
        seen.add(p.recorded.tobytes())
    assert len(seen) > 5  # the order changes from run to run
    same, _ = exp.run_data(b, "replay", 0, 0, permute=False)
    assert same is b
    with pytest.raises(ValueError):
        exp.permute_bench(exp.synthetic_bench("tiny", 30, 3, 6, 0.5), np.random.default_rng(0))


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
@pytest.mark.xfail(strict=True, reason="the paper's 'BBTA(N'=1) >= every baseline under "
                   "spammer-hammer at >= 5 labels per task' fails against optkg-multi on the "
                   "pima-shaped set (30 runs: 0.755 vs 0.806 at 5 labels per task)")
def test_bbta_beats_optkg_multi_on_pima_spammer_hammer():
    res = exp.compare("pima", "spammer-hammer", runs=3, budgets=[5.0],
                      methods=["bbta:explore=1", "optkg-multi"], seed=0)
    acc = {m: float(v[0]) for m, v in res["mean"].items()}
    assert acc["bbta:explore=1"] >= acc["optkg-multi"], acc


@pytest.fixture(scope="module")
def athlete_at_5(shared_datasets):
    """athlete replay, 10 runs (tasks and workers relabelled at random in each run), 5 labels
    per task. 30-run values (docs/reproductions/bbta.md): BBTA(N'=1) 0.764 +- 0.004, random
    0.699 +- 0.004, category-blind optkg 0.750 +- 0.003."""
    bench = exp.make_bench("athlete", datasets_dir=str(shared_datasets))
    assert bench.n_categories == 4  # task_types.csv flows into the categories
    res = exp.compare(bench, "replay", runs=10, budgets=[5.0],
                      methods=["bbta:explore=1", "random", "optkg"], seed=0)
    return {m: float(v[0]) for m, v in res["mean"].items()}


@pytest.mark.slow
@pytest.mark.shared
def test_athlete_replay(athlete_at_5):
    acc = athlete_at_5
    assert abs(acc["random"] - 0.70) < 0.03, acc  # the issue: "about 0.70"
    # 30 runs: +6.5 points over random, +1.4 over category-blind Opt-KG
    assert acc["bbta:explore=1"] > acc["random"] + 0.04, acc
    assert acc["bbta:explore=1"] > acc["optkg"], acc


@pytest.mark.slow
@pytest.mark.shared
@pytest.mark.xfail(strict=True, reason="issue 4's target (BBTA >= random + 10 points at 5 "
                   "labels per task on athlete) is not met: +6.5 over 30 runs")
def test_athlete_replay_bbta_ten_points_over_random(athlete_at_5):
    acc = athlete_at_5
    assert acc["bbta:explore=1"] >= acc["random"] + 0.10, acc


def _bbta_state(spec, k=3, n=2):
    from labelq.policies import Problem

    pol = exp.diagnostic_policy(spec)
    problem = Problem(n_tasks=n, n_workers=k, n_classes=2, task_category=np.zeros(n, int),
                      n_categories=1)
    return pol, pol.init_state(problem)


def test_diagnostic_variants_change_only_what_they_name():
    from labelq.policies import Observation

    # tie1: two disagreeing equal-weight labels cost 1 (the default charges 1/2)
    for spec, charged in (("bbta:explore=0", 0.5), ("diag:tie1", 1.0)):
        pol, st = _bbta_state(spec)
        st.steps[0] = 1  # skip exploration (diag variants use N'=1)
        pol.update(st, Observation(0, 0, 1))
        pol.update(st, Observation(0, 1, 0))
        # p_1 = 1/2 among the two workers who had not labelled task 0
        assert st.loss[0, 1] == pytest.approx(charged * 2), spec
    # drawn: the mask allowed only worker 1 for task 0, so p = 1 and the charge is the loss
    pol, st = _bbta_state("diag:drawn")
    st.steps[0] = 1
    pol.update(st, Observation(0, 0, 1))
    mask = np.zeros((2, 3), bool)
    mask[0, 1] = True
    assert pol.select_pair(st, mask, np.random.default_rng(0)) == (0, 1)
    pol.update(st, Observation(0, 1, 0))
    assert st.loss[0, 1] == pytest.approx(0.5)
    # impute: a worker missing from the exploration task gets its mean disagreement, not 0
    for spec, missing in (("bbta:explore=1", 0.0), ("diag:impute", 1 / 3)):
        pol, st = _bbta_state(spec, k=4)
        for j, y in ((0, 1), (1, 1), (2, 0)):  # worker 3 cannot label task 0 (replay)
            pol.update(st, Observation(0, j, y))
        assert st.explore_loss[0].tolist() == pytest.approx([0, 0, 1, missing]), spec
    # rescore: a zero-loss step re-scores the whole context, not only its task
    for spec, touched in (("bbta:explore=0", [1]), ("diag:rescore", [0, 1])):
        pol, st = _bbta_state(spec)
        st.steps[0] = 1
        assert sorted(pol.update(st, Observation(1, 0, 1)).tolist()) == touched, spec
    with pytest.raises(ValueError, match="unknown diagnostic variant"):
        exp.diagnostic_policy("diag:nope")


def test_orderings_checker_reads_a_table_and_lists_the_failures():
    md = exp.to_markdown({
        "budgets": [2.0, 5.0, 10.0], "sweeps": {},
        "mean": {"bbta:explore=1": np.array([0.6, 0.8, 0.9]),
                 "bbta:explore=0": np.array([0.7, 0.7, 0.9]),
                 "optkg-multi": np.array([0.5, 0.85, 0.8]),
                 "random": np.array([0.55, 0.6, 0.7]),
                 "iethresh": np.array([0.58, np.nan, 0.65])},
        "se": {m: np.full(3, 0.01) for m in ("bbta:explore=1", "bbta:explore=0",
                                             "optkg-multi", "random")} | {
            "iethresh": np.full(3, np.nan)}})
    ((name, model, budgets, mean),) = exp.parse_tables(
        "#### toy, malicious, 3 runs (accuracy at labels per task)\n\n" + md)
    assert (name, model, budgets) == ("toy", "malicious", [2.0, 5.0, 10.0])
    assert np.isnan(mean["iethresh"][1]) and mean["optkg-multi"][1] == 0.85
    assert exp.check_orderings(name, model, budgets, mean) == (
        "toy_malicious: N'=1>=N'=0: fails at 2 | BBTA(1)>=baselines@>=5: fails: "
        "optkg-multi@5 | IEThresh last: fails @2 above optkg-multi,random")
    # one-coin: the paper makes no claim against the baselines
    assert "baselines" not in exp.check_orderings(name, "one-coin", budgets, mean)


def test_complete_labels_recovers_a_low_rank_matrix_and_keeps_observed_labels():
    rng = np.random.default_rng(3)
    truth = rng.integers(0, 2, 40)
    full = np.column_stack([truth] * 4 + [1 - truth] * 2)  # rank 1 in +-1 form
    rec = full.copy()
    hidden = rng.random(full.shape) < 0.2
    hidden[:, 0] = False  # every task keeps some labels
    rec[hidden] = -1
    out = exp.complete_labels(rec, rank=1)
    assert (out >= 0).all()
    assert (out[~hidden] == rec[~hidden]).all()
    assert (out[hidden] == full[hidden]).all()
    with pytest.raises(ValueError, match="binary"):
        exp.complete_labels(np.array([[0, 2], [1, -1]]), rank=1)


@pytest.mark.shared
def test_athlete_completed_fills_every_pair(shared_datasets):
    b = exp.make_bench("athlete", datasets_dir=str(shared_datasets))
    c = exp.make_bench("athlete-completed", datasets_dir=str(shared_datasets))
    assert (c.recorded >= 0).all()
    obs = b.recorded >= 0
    assert (c.recorded[obs] == b.recorded[obs]).all() and (~obs).sum() > 0
