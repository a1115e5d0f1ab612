"""Issue 33: the majority-vote guard, auto's own worker model as a method, the accuracy
interval, and the bar on every shared data set."""

import numpy as np
import pytest

from labelq.aggregation import AutoAggregator, MajorityVote, ShrunkOneCoin, aggregate
from labelq.aggregation.guard import accuracy_interval, credible_guard
from labelq.datasets import load_dataset
from labelq.policies import _shrunk_em as em


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
    labels (one implementation: labelq.policies._shrunk_em)."""
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


def test_accuracy_interval_with_gold_is_corrected_by_the_held_out_residuals():
    conf = np.full(1000, 0.95)
    # held-out gold says answers at 0.95 confidence are right 80 % of the time
    right = np.r_[np.ones(80), np.zeros(20)]
    est = accuracy_interval(conf, held_right=right, held_conf=np.full(100, 0.95))
    assert est.basis == "gold" and est.n_gold == 100
    assert est.estimate == pytest.approx(0.80)
    assert est.low < 0.80 < est.high and est.high - est.low == pytest.approx(
        2 * 1.96 * np.sqrt(0.16 * 100 / 99 / 100), rel=1e-3)


def test_accuracy_interval_without_gold_spans_the_models_beliefs():
    conf = np.full(500, 0.9)
    est = accuracy_interval(conf, model_beliefs=[np.full(500, 0.7), np.full(500, 0.95)])
    assert est.basis == "models"
    assert est.low == pytest.approx(0.7) and est.high == pytest.approx(0.95)
    assert est.estimate == pytest.approx(0.9)


def test_auto_reports_its_accuracy_interval_and_the_disagreement():
    rng = np.random.default_rng(7)
    T = 400
    task, worker, label, truth, _ = binary_crowd(rng, T, 20, 4)
    res = aggregate(task, worker, label, "auto", n_classes=2)
    true_acc = float(np.mean(res.labels_ == truth))
    assert res.accuracy_.basis == "models"
    assert res.accuracy_.low <= true_acc <= res.accuracy_.high
    gold = np.full(T, -1)
    pick = rng.choice(T, 60, replace=False)
    gold[pick] = truth[pick]
    with_gold = aggregate(task, worker, label, "auto", n_classes=2, gold=gold)
    rest = gold < 0
    true_acc = float(np.mean(with_gold.labels_[rest] == truth[rest]))
    assert with_gold.accuracy_.basis == "gold" and with_gold.accuracy_.n_gold == 60
    assert with_gold.accuracy_.low <= true_acc <= with_gold.accuracy_.high
    d = with_gold.disagreement_
    assert d["tasks"] == T and 0 <= d["overruled"] <= d["differ"] <= T


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
    """Tasks marked gold because they looked doubtful choose the method; only a sample of
    gold like the other tasks calibrates the confidences and the accuracy estimate."""
    rng = np.random.default_rng(11)
    T = 600
    task, worker, label, truth, acc = binary_crowd(rng, T, 25, 3)
    gold = np.full(T, -1)
    pick = rng.choice(T, 40, replace=False)
    gold[pick] = truth[pick]
    sample = aggregate(task, worker, label, "auto", n_classes=2, gold=gold)
    chosen = aggregate(task, worker, label, "auto", n_classes=2, gold=gold,
                       calibration=np.zeros(T, dtype=bool))
    assert sample.scores_ and chosen.scores_  # both chose on the gold
    assert sample.accuracy_.basis == "gold" and sample.temperature_ != 1.0
    assert chosen.accuracy_.basis == "models" and chosen.temperature_ == 1.0
    # the interval without a calibration sample reaches down to what one label is worth
    assert chosen.accuracy_.low <= float(np.mean(acc[worker]))


def test_gold_estimate_is_stratified_by_confidence():
    """Gold answers spread low while most answers sit above 0.99 (an adaptive policy stops
    once labels agree): each stratum is corrected by its own gold, not by the average."""
    rng = np.random.default_rng(5)
    conf = np.r_[np.full(800, 0.995), np.full(200, 0.7)]
    # gold: 30 answers at 0.7 right 70 % of the time, 10 at 0.995 right 90 % of the time
    held_conf = np.r_[np.full(30, 0.7), np.full(10, 0.995)]
    held_right = np.r_[rng.random(30) < 0.7, np.r_[np.ones(9), np.zeros(1)]].astype(float)
    est = accuracy_interval(conf, held_right=held_right, held_conf=held_conf)
    expected = 0.8 * (0.995 + (held_right[30:] - 0.995).mean()) + \
        0.2 * (0.7 + (held_right[:30] - 0.7).mean())
    assert est.estimate == pytest.approx(expected)
    assert est.low < 0.8 * 0.9 + 0.2 * 0.7 < est.high
    # a stratum with fewer than 5 gold answers is estimated from them alone, widely
    few = accuracy_interval(conf, held_right=np.r_[held_right[:30], 1.0, 1.0, 0.0],
                            held_conf=np.r_[held_conf[:30], 0.995, 0.995, 0.995])
    a, b = 2.5, 1.5  # Jeffreys posterior of 2 right of 3
    assert few.estimate == pytest.approx(0.8 * a / (a + b) + 0.2 * (
        0.7 + (held_right[:30] - 0.7).mean()))
    assert few.high - few.low > est.high - est.low
