"""Behaviour of the aggregators on small synthetic crowds with known ground truth."""

import numpy as np
import pytest

from labelq.aggregation import (
    AGGREGATORS,
    GLAD,
    KOS,
    CategoryDawidSkene,
    DawidSkene,
    MajorityVote,
    OneCoinDawidSkene,
    PosteriorAggregator,
    WeightedMajorityVote,
    aggregate,
    get_aggregator,
)
from labelq.errors import InputError

from ._synth import confusion_crowd


def test_ds_recovers_known_confusion_matrices():
    rng = np.random.default_rng(1)
    task, worker, label, truth, conf = confusion_crowd(rng, n_tasks=4000, n_workers=15)
    ds = DawidSkene().fit(task, worker, label)
    assert ds.converged_
    # each worker gave ~1300 labels: rates are estimable to a few points
    assert np.abs(ds.errors_ - conf).max() < 0.06
    mv = MajorityVote().fit(task, worker, label)
    acc_ds, acc_mv = np.mean(ds.labels_ == truth), np.mean(mv.labels_ == truth)
    assert acc_ds > acc_mv + 0.01
    np.testing.assert_allclose(ds.probas_.sum(axis=1), 1.0)
    np.testing.assert_allclose(ds.priors_, np.bincount(truth) / truth.size, atol=0.03)


def test_ds_gold_is_clamped_and_helps():
    rng = np.random.default_rng(2)
    task, worker, label, truth, _ = confusion_crowd(rng, n_tasks=600, per_task=3,
                                                    diag=(0.4, 0.7))
    gold = np.full(truth.size, -1)
    gold[:200] = truth[:200]
    with_gold = DawidSkene().fit(task, worker, label, gold=gold)
    assert np.array_equal(with_gold.labels_[:200], truth[:200])
    assert np.all(with_gold.confidence_[:200] == 1.0)
    plain = DawidSkene().fit(task, worker, label)
    rest = slice(200, None)
    assert np.mean(with_gold.labels_[rest] == truth[rest]) >= \
        np.mean(plain.labels_[rest] == truth[rest]) - 0.01


@pytest.mark.parametrize("name", sorted(AGGREGATORS))
def test_single_label_is_not_certain_and_unlabelled_task_is_uniform(name):
    # task 0: many agreeing labels; task 1: one label; task 2: no label at all
    task = np.array([0, 0, 0, 0, 1, 3, 3, 3, 3])
    worker = np.array([0, 1, 2, 3, 0, 0, 1, 2, 3])
    label = np.array([1, 1, 1, 1, 1, 0, 0, 0, 0])
    res = get_aggregator(name).fit(task, worker, label, n_tasks=4, n_classes=2)
    assert res.probas_.shape == (4, 2) and res.labels_.shape == (4,)
    assert 0.5 <= res.confidence_[1] < 1.0
    np.testing.assert_allclose(res.probas_[2], [0.5, 0.5])
    assert res.labels_[0] == 1 and res.labels_[3] == 0
    np.testing.assert_allclose(res.confidence_, res.probas_[np.arange(4), res.labels_])


def test_majority_vote_ties_first_and_random():
    task, worker, label = np.array([0, 0, 1, 1]), np.array([0, 1, 0, 1]), np.array([2, 1, 0, 0])
    mv = MajorityVote().fit(task, worker, label)
    assert mv.labels_.tolist() == [1, 0]  # tie between 1 and 2 -> lowest index
    picks = {int(MajorityVote(tie_break="random", rng=s).fit(task, worker, label).labels_[0])
             for s in range(30)}
    assert picks == {1, 2}  # only the tied classes, both reachable
    np.testing.assert_allclose(mv.probas_[1], [3 / 5, 1 / 5, 1 / 5])  # Laplace (2+1)/(2+3)


def test_weighted_vote_per_worker_and_per_category():
    task = np.array([0, 0, 0, 1, 1, 1])
    worker = np.array([0, 1, 2, 0, 1, 2])
    label = np.array([1, 0, 0, 1, 0, 0])
    # one expert outweighs two weak workers
    w = WeightedMajorityVote().fit(task, worker, label, weights=[3.0, 1.0, 1.0])
    assert w.labels_.tolist() == [1, 1]
    # the expert is trusted only in category 0 (task 0), not in category 1 (task 1)
    wc = np.array([[3.0, 0.1], [1.0, 1.0], [1.0, 1.0]])
    res = aggregate(task, worker, label, "wmv", 2, 2, categories=[0, 1], weights=wc)
    assert res.labels_.tolist() == [1, 0]
    with pytest.raises(InputError, match="weights"):
        WeightedMajorityVote().fit(task, worker, label, weights=[1.0, -1.0, 1.0])


def test_weighted_vote_default_weights_downweight_a_spammer():
    rng = np.random.default_rng(3)
    task, worker, label, truth, conf = confusion_crowd(rng, n_tasks=500, n_workers=6,
                                                       n_classes=2, per_task=5, diag=(0.8, 0.9))
    spam = worker == 0
    label = label.copy()
    label[spam] = rng.integers(0, 2, spam.sum())
    res = WeightedMajorityVote().fit(task, worker, label)
    from labelq.aggregation.base import check_labels
    from labelq.aggregation.majority import agreement_weights
    weights = agreement_weights(check_labels(task, worker, label))
    assert weights[0] < 0.5 * weights[1:].min()
    assert np.mean(res.labels_ == truth) >= np.mean(MajorityVote().fit(task, worker, label)
                                                    .labels_ == truth)


def _binary_crowd(rng, n_tasks=1000, n_workers=100, per_task=10):
    truth = rng.integers(0, 2, n_tasks)
    # spammer-hammer: a third answer at random, the rest are right 90% of the time
    p = np.where(rng.random(n_workers) < 1 / 3, 0.5, 0.9)
    task = np.repeat(np.arange(n_tasks), per_task)
    worker = np.concatenate([rng.choice(n_workers, per_task, replace=False)
                             for _ in range(n_tasks)])
    right = rng.random(task.size) < p[worker]
    return task, worker, np.where(right, truth[task], 1 - truth[task]), truth


def test_kos_recovers_signs_and_is_label_flip_equivariant():
    rng = np.random.default_rng(4)
    task, worker, label, truth = _binary_crowd(rng)
    kos = KOS().fit(task, worker, label)
    acc = np.mean(kos.labels_ == truth)
    assert acc > 0.95
    assert acc >= np.mean(MajorityVote().fit(task, worker, label).labels_ == truth)
    flipped = KOS().fit(task, worker, 1 - label)
    nonzero = kos.scores_ != 0
    assert np.array_equal(flipped.labels_[nonzero], 1 - kos.labels_[nonzero])
    with pytest.raises(InputError, match="binary"):
        KOS().fit([0, 1], [0, 0], [0, 2])


def test_glad_and_onecoin_find_the_spammers():
    rng = np.random.default_rng(5)
    task, worker, label, truth = _binary_crowd(rng, n_tasks=600)
    p_true = np.zeros(100)
    for j in range(100):
        m = worker == j
        p_true[j] = np.mean(label[m] == truth[task[m]]) if m.any() else np.nan
    spammer = p_true < 0.7
    glad = GLAD().fit(task, worker, label)
    assert np.mean(glad.labels_ == truth) > 0.95
    assert glad.alphas_[spammer].mean() < glad.alphas_[~spammer].mean() - 0.5
    oc = OneCoinDawidSkene().fit(task, worker, label)
    ok = ~np.isnan(p_true)
    assert np.abs(oc.skills_[ok] - p_true[ok]).max() < 0.15


def test_category_ds_learns_per_category_skill():
    rng = np.random.default_rng(6)
    n_tasks, n_workers, per_task = 2000, 20, 7
    truth, cat = rng.integers(0, 2, n_tasks), rng.integers(0, 2, n_tasks)
    # half the workers are experts on category 0 and guess on category 1, half the reverse
    expert_on = np.arange(n_workers) % 2
    task = np.repeat(np.arange(n_tasks), per_task)
    worker = np.concatenate([rng.choice(n_workers, per_task, replace=False)
                             for _ in range(n_tasks)])
    p = np.where(expert_on[worker] == cat[task], 0.95, 0.55)
    label = np.where(rng.random(task.size) < p, truth[task], 1 - truth[task])
    blind = DawidSkene().fit(task, worker, label)
    aware = CategoryDawidSkene().fit(task, worker, label, categories=cat)
    acc_blind, acc_aware = np.mean(blind.labels_ == truth), np.mean(aware.labels_ == truth)
    assert acc_aware > acc_blind + 0.03
    diag = aware.errors_[:, :, [0, 1], [0, 1]].mean(axis=2)  # (worker, category) accuracy
    own = diag[np.arange(n_workers), expert_on]
    other = diag[np.arange(n_workers), 1 - expert_on]
    assert np.all(own > 0.85) and np.all(other < 0.7)


def test_category_ds_with_one_category_equals_ds():
    rng = np.random.default_rng(7)
    task, worker, label, _, _ = confusion_crowd(rng, n_tasks=300)
    a = DawidSkene().fit(task, worker, label)
    b = CategoryDawidSkene().fit(task, worker, label, categories=np.zeros(300, dtype=int))
    np.testing.assert_allclose(a.probas_, b.probas_, atol=1e-9)


def test_posterior_adapter_wraps_policy_posterior():
    class FakePolicy:
        def predict_proba(self, state):
            return np.asarray(state, dtype=float)

    res = PosteriorAggregator.from_policy(FakePolicy(), [[3, 1], [0, 0], [1, 1]])
    np.testing.assert_allclose(res.probas_, [[0.75, 0.25], [0.5, 0.5], [0.5, 0.5]])
    assert res.labels_.tolist() == [0, 0, 0]
    np.testing.assert_allclose(res.confidence_, [0.75, 0.5, 0.5])
    with pytest.raises(InputError, match="finite"):
        PosteriorAggregator([[np.nan, 1.0]])


def test_bad_inputs_raise_input_errors():
    with pytest.raises(InputError, match="unknown aggregation method 'nope'"):
        get_aggregator("nope")
    with pytest.raises(InputError, match="equal length"):
        DawidSkene().fit([0, 1], [0], [0, 1])
    with pytest.raises(InputError, match=r"label\[1\] = 3 is out of range"):
        DawidSkene().fit([0, 1], [0, 0], [0, 3], n_classes=2)
    with pytest.raises(InputError, match="negative"):
        MajorityVote().fit([0, -1], [0, 0], [0, 1])
    with pytest.raises(InputError, match="gold"):
        DawidSkene().fit([0, 1], [0, 0], [0, 1], gold=[0, 5])
    with pytest.raises(InputError, match="smoothing"):
        DawidSkene(smoothing=-1)
