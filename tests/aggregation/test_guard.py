"""Issue 33: the majority-vote guard, auto's own worker model as a method, and the bar on
every shared data set; issue 41: the exact accuracy interval from random gold answers (none
without them) and the calibration of the confidences."""

import numpy as np
import pytest

from labelq.aggregation import AutoAggregator, MajorityVote, ShrunkOneCoin, aggregate
from labelq.aggregation.calibration import fit_binned_map, recalibrate
from labelq.aggregation.guard import (
    accuracy_interval,
    audit_answers,
    credible_guard,
    exact_interval,
)
from labelq.datasets import load_dataset
from labelq.policies import worker_model as em


def binary_crowd(rng, n_tasks, n_workers, per_task):
    """Two classes, ``per_task`` distinct workers per task, one-coin accuracies
    U(0.55, 0.9): (task, worker, label, truth, accuracy) arrays."""
    truth = rng.integers(0, 2, n_tasks)
    acc = rng.uniform(0.55, 0.9, n_workers)
    task = np.repeat(np.arange(n_tasks), per_task)
    worker = np.concatenate([rng.choice(n_workers, per_task, replace=False)
                             for _ in range(n_tasks)])
    label = np.where(rng.random(task.size) < acc[worker], truth[task], 1 - truth[task])
    return task, worker, label, truth, acc


def test_guard_lets_the_rich_model_decide_only_inside_the_votes_credible_set():
    vote = np.array([[0.55, 0.45], [0.97, 0.03], [0.2, 0.8], [0.5, 0.5]])
    rich = np.array([[0.1, 0.9], [0.05, 0.95], [0.3, 0.7], [0.9, 0.1]])
    g = credible_guard(rich, vote, alpha=0.1)
    # 1: near a tie the rich model decides; 2: 0.03 < 0.1, the vote's answer stands
    assert g.labels.tolist() == [1, 0, 1, 0]
    assert g.overruled.tolist() == [False, True, False, False]
    assert g.differ.tolist() == [True, True, False, False]  # a tie goes to class 0 in both
    # where the vote's answer is kept, so are its probabilities: the answer is their argmax
    np.testing.assert_allclose(g.probas[1], vote[1])
    np.testing.assert_allclose(g.probas[[0, 2, 3]], rich[[0, 2, 3]])


def test_guard_with_alpha_zero_is_the_rich_model():
    rng = np.random.default_rng(0)
    rich, vote = rng.dirichlet(np.ones(3), 50), rng.dirichlet(np.ones(3), 50)
    g = credible_guard(rich, vote, alpha=0.0)
    np.testing.assert_array_equal(g.labels, rich.argmax(axis=1))
    assert not g.overruled.any()


def test_shrunk_is_the_auto_policys_model():
    """The aggregation ``shrunk`` and the policy's EM give the same posterior on the same
    labels (one implementation: labelq.policies.worker_model)."""
    rng = np.random.default_rng(3)
    T, W, K = 200, 12, 3
    truth = rng.integers(0, K, T)
    acc = rng.uniform(0.4, 0.95, W)
    task = np.repeat(np.arange(T), 3)
    worker = np.concatenate([rng.choice(W, 3, replace=False) for _ in range(T)])
    label = np.where(rng.random(task.size) < acc[worker], truth[task],
                     (truth[task] + rng.integers(1, K, task.size)) % K)
    res = ShrunkOneCoin(iters=3).fit(task, worker, label, n_classes=K)
    cat = np.zeros(T, dtype=np.int64)
    fit = em.fit_em(task, worker, label, cat[task], np.full(task.size, -1), T, W, 1, K,
                    mu0=0.7, m0=10, m=4, iters=3, per_worker=True)
    a, _, _ = em.shrunk_accuracy(fit.correct, fit.total, K, 0.7, 10, 4, True)
    post = em.posterior(em.task_loglik(task, a[worker, 0], label, T, K),
                        np.log(fit.class_prior))
    np.testing.assert_allclose(res.probas_, post)
    assert np.mean(res.labels_ == truth) > np.mean(
        MajorityVote().fit(task, worker, label, n_classes=K).labels_ == truth)


def test_accuracy_interval_from_random_gold_is_exact_and_never_zero_width():
    """Issue 41: every held-out gold answer right is no reason for certainty."""
    conf = np.full(1000, 0.9999)
    est = accuracy_interval(conf, held_right=np.ones(30))
    assert est.basis == "gold" and est.n_gold == 30 and est.n_right == 30
    assert est.high == 1.0 and est.low < 0.9 and est.high - est.low > 0.1
    # the exact (Clopper-Pearson) bound of 30 of 30 right, for many other tasks
    assert est.low == pytest.approx(0.025 ** (1 / 30), abs=0.002)
    assert est.estimate == pytest.approx(30.5 / 31)
    # and a few wrong: an interval around the share right, whatever the confidences say
    est = accuracy_interval(conf, held_right=np.r_[np.ones(80), np.zeros(20)])
    assert est.low < 0.8 < est.high and est.high < 0.9 and est.low > 0.7


def test_exact_interval_is_finite_population_aware():
    # one other task: its accuracy is 0 or 1, and 5 of 5 right cannot rule out 0
    assert exact_interval(5, 5, 1) == (0.0, 1.0)
    # many others: Clopper-Pearson
    lo, hi = exact_interval(18, 20, 10**6)
    assert lo == pytest.approx(0.683, abs=0.002) and hi == pytest.approx(0.988, abs=0.002)
    # few others: wider than for the population (their own draw is uncertain too)
    lo8, hi8 = exact_interval(45, 50, 8)
    lo_inf, hi_inf = exact_interval(45, 50, 10**6)
    assert hi8 - lo8 > hi_inf - lo_inf


def test_exact_interval_covers_on_a_synthetic_setting():
    """200 draws of 30 random answers from a finite population at accuracy 0.93: the
    interval holds the accuracy of the tasks not drawn in at least 90 % of them."""
    rng = np.random.default_rng(3)
    covered = 0
    for _ in range(200):
        right = rng.random(400) < 0.93
        pick = rng.choice(400, 30, replace=False)
        rest = np.ones(400, dtype=bool)
        rest[pick] = False
        lo, hi = exact_interval(int(right[pick].sum()), 30, 370)
        covered += lo <= right[rest].mean() <= hi
        assert hi > lo
    assert covered / 200 >= 0.9


def test_auto_interval_covers_with_gold_labelled_more_than_the_tasks():
    """End to end: 30 random gold questions exempt from the label cap (9 labels each, tasks
    3) among 200 tasks of 12 one-coin workers (accuracy U(0.55, 0.85)); over 100 crowds
    the export's interval holds the accuracy of the other tasks' answers in >= 90 % (200
    crowds measured: 0.975; with gold labelled like the tasks 0.985), never zero-width."""
    covered = 0
    for seed in range(100, 200):
        rng = np.random.default_rng(seed)
        T, W = 200, 12
        truth = rng.integers(0, 2, T)
        acc = rng.uniform(0.55, 0.85, W)
        gold_tasks = rng.choice(T, 30, replace=False)
        k = np.full(T, 3)
        k[gold_tasks] = 9
        task = np.repeat(np.arange(T), k)
        worker = np.concatenate([rng.choice(W, kk, replace=False) for kk in k])
        label = np.where(rng.random(task.size) < acc[worker], truth[task], 1 - truth[task])
        gold = np.full(T, -1)
        gold[gold_tasks] = truth[gold_tasks]
        res = aggregate(task, worker, label, "auto", n_classes=2, n_workers=W, n_tasks=T,
                        gold=gold)
        a = res.accuracy_
        assert a.basis == "gold" and a.low is not None and a.high is not None
        assert a.high - a.low > 0.05
        rest = gold < 0
        covered += a.low <= float(np.mean(res.labels_[rest] == truth[rest])) <= a.high
    assert covered >= 90


def test_without_random_gold_there_is_no_interval_but_an_audit_count():
    conf = np.full(5000, 0.998)
    est = accuracy_interval(conf, floor=0.7)
    assert est.basis == "models" and est.low is None and est.high is None
    assert est.estimate == pytest.approx(0.998)
    # the exact interval at the belief and at one label's accuracy: +-0.03 needs more
    # answers the nearer the accuracy is to 1/2
    assert est.audit_n is not None and est.audit_n_floor is not None
    assert 50 < est.audit_n < est.audit_n_floor
    for p, n in ((0.998, est.audit_n), (0.7, est.audit_n_floor)):
        lo, hi = exact_interval(round(p * n), n, 5000 - n)
        assert (hi - lo) / 2 <= 0.03
        lo, hi = exact_interval(round(p * n * 0.8), int(n * 0.8), 5000)
        assert (hi - lo) / 2 > 0.03  # (the smallest such n, up to the count's rounding)
    assert audit_answers(0.9, 200) is None  # the rest of 200 tasks is itself too uncertain
    assert est.as_dict()["low"] is None


def test_auto_reports_its_accuracy_interval_and_the_disagreement():
    rng = np.random.default_rng(7)
    T = 400
    task, worker, label, truth, _ = binary_crowd(rng, T, 20, 4)
    res = aggregate(task, worker, label, "auto", n_classes=2)
    assert res.accuracy_.basis == "models" and res.accuracy_.low is None
    assert res.calibration_ == {"calibrated": False, "answers": 0, "temperature": 1.0,
                                "spread": None}
    gold = np.full(T, -1)
    pick = rng.choice(T, 60, replace=False)
    gold[pick] = truth[pick]
    with_gold = aggregate(task, worker, label, "auto", n_classes=2, gold=gold)
    rest = gold < 0
    true_acc = float(np.mean(with_gold.labels_[rest] == truth[rest]))
    a = with_gold.accuracy_
    assert a.basis == "gold" and a.n_gold == 60
    assert a.low is not None and a.high is not None and a.low <= true_acc <= a.high
    assert with_gold.calibration_["calibrated"] and with_gold.calibration_["answers"] == 60
    d = with_gold.disagreement_
    assert d["tasks"] == T and 0 <= d["overruled"] <= d["differ"] <= T


def test_the_interval_is_the_held_out_answers_not_the_clamped_gold():
    """The estimate for a gold task is its answer without its gold: with workers at chance
    the gold (clamped, always right) says nothing, and the interval holds the truth."""
    rng = np.random.default_rng(2)
    T = 300
    truth = rng.integers(0, 2, T)
    task = np.repeat(np.arange(T), 3)
    worker = np.tile(np.arange(3), T)
    label = rng.integers(0, 2, task.size)  # coin flips
    gold = np.full(T, -1)
    pick = rng.choice(T, 40, replace=False)
    gold[pick] = truth[pick]
    res = aggregate(task, worker, label, "auto", n_classes=2, gold=gold)
    a = res.accuracy_
    assert a.basis == "gold" and a.high is not None and a.high < 0.85
    assert a.low is not None and a.low <= float(np.mean(res.labels_[gold < 0] ==
                                                        truth[gold < 0])) <= a.high


FULL_SETS = ["adult2", "athlete", "bluebirds", "dog", "possent_zheng", "product", "rte",
             "sp_amt", "temp", "trec2010", "trec2011_crowd", "web", "zencrowd_in"]


@pytest.mark.parametrize("name", FULL_SETS)
def test_default_export_holds_majority_vote_on_every_full_shared_set(shared_datasets, name):
    """Issue 33's bar without gold: auto >= majority vote - 0.005 on every full set."""
    d = load_dataset(shared_datasets / name)
    res = AutoAggregator().fit_data(d)
    mv = MajorityVote().fit_data(d)
    known = d.truth >= 0
    auto_acc = float(np.mean(res.labels_[known] == d.truth[known]))
    mv_acc = float(np.mean(mv.labels_[known] == d.truth[known]))
    assert auto_acc >= mv_acc - 0.005, (res.method_, res.reason_)


def test_chosen_gold_chooses_but_does_not_calibrate():
    """Tasks marked gold because they looked doubtful choose the method; only random gold
    (the calibration mask) calibrates the confidences and bounds the accuracy."""
    rng = np.random.default_rng(11)
    T = 600
    task, worker, label, truth, acc = binary_crowd(rng, T, 25, 3)
    gold = np.full(T, -1)
    pick = rng.choice(T, 60, replace=False)
    gold[pick] = truth[pick]
    sample = aggregate(task, worker, label, "auto", n_classes=2, gold=gold)
    chosen = aggregate(task, worker, label, "auto", n_classes=2, gold=gold,
                       calibration=np.zeros(T, dtype=bool))
    assert sample.scores_ and chosen.scores_  # both chose on the gold
    assert sample.accuracy_.basis == "gold" and sample.temperature_ != 1.0
    assert sample.calibration_["calibrated"]
    assert chosen.accuracy_.basis == "models" and chosen.temperature_ == 1.0
    assert chosen.accuracy_.low is None and not chosen.calibration_["calibrated"]
    # the audit count at one label's accuracy: the crowd's, from how often labels agree
    assert chosen.accuracy_.floor == pytest.approx(float(np.mean(acc[worker])), abs=0.05)


def test_calibration_changes_confidences_only_with_50_random_answers():
    """49 random gold answers leave the models' confidences as they are (and say so); 50
    calibrate them, and the export says on how many."""
    rng = np.random.default_rng(4)
    T = 800
    task, worker, label, truth, _ = binary_crowd(rng, T, 30, 5)
    pick = rng.choice(T, 50, replace=False)
    rest = np.ones(T, dtype=bool)
    rest[pick] = False
    out = {}
    for n in (49, 50):
        gold = np.full(T, -1)
        gold[pick[:n]] = truth[pick[:n]]
        out[n] = aggregate(task, worker, label, "auto", n_classes=2, gold=gold)
    few, enough = out[49], out[50]
    assert not few.calibration_["calibrated"] and few.calibration_["answers"] == 49
    assert few.temperature_ == 1.0
    assert enough.calibration_["calibrated"] and enough.calibration_["answers"] == 50
    # the same method and answers; with 50 the confidences moved
    uncal = AutoAggregator(calibrate_gold=10**6).fit(
        task, worker, label, n_classes=2, gold=np.where(np.isin(np.arange(T), pick),
                                                         truth, -1))
    assert uncal.method_ == enough.method_
    np.testing.assert_array_equal(uncal.labels_[rest], enough.labels_[rest])
    assert np.abs(uncal.confidence_[rest] - enough.confidence_[rest]).max() > 0.01
    # and they are calibrated: on the other tasks mean confidence is near the accuracy
    right = enough.labels_[rest] == truth[rest]
    assert abs(float(enough.confidence_[rest].mean()) - float(right.mean())) < 0.05


def test_binned_map_stays_the_identity_where_answers_match_and_moves_where_they_do_not():
    rng = np.random.default_rng(0)
    conf = rng.uniform(0.6, 1.0, 200)
    honest = fit_binned_map(conf, rng.random(200) < conf)
    assert np.abs(honest(conf) - conf).max() < 0.05
    over = fit_binned_map(np.full(200, 0.999), rng.random(200) < 0.8)
    assert over(np.array([0.999]))[0] == pytest.approx(0.8, abs=0.06)
    probas = np.array([[0.999, 0.001], [1.0, 0.0]])
    p = recalibrate(probas, np.array([0, 0]), over)
    np.testing.assert_allclose(p.sum(axis=1), 1.0)
    assert p[0, 0] < 0.9 and p[1, 0] < 0.9


