"""bench/one_label.py: the one-label-per-task readings docs/aggregation.md ("Sixth pass")
reports -- crowd-kit's rule, and what a worker's label shares against the class prior say."""

import numpy as np

from bench.one_label import bound, ck_rule, dirichlet, mixture
from labelq.datasets import LabelData


def _one_label_crowd(seed=0):
    """400 one-label tasks, 12% class 1. Workers 0-7 (40 tasks each) answer right with
    probability 0.9; worker 8 answers "1" on all of its 40 tasks; workers 9-48 give one
    label each, "1" when right or not (so a single "1" there is usually a true "0")."""
    rng = np.random.default_rng(seed)
    n_tasks = 400
    truth = (rng.random(n_tasks) < 0.12).astype(np.int64)
    worker = np.r_[np.repeat(np.arange(9), 40), 9 + np.arange(40)]
    label = np.where(rng.random(n_tasks) < 0.9, truth, 1 - truth)
    label[worker == 8] = 1
    label[worker >= 9] = 1
    return LabelData(name="one-label", task=np.arange(n_tasks), worker=worker, label=label,
                     truth=truth, classes=["0", "1"], tasks=[str(i) for i in range(n_tasks)],
                     workers=[str(j) for j in range(49)])


def test_ck_rule_sends_a_one_answer_workers_tasks_to_the_frequent_label():
    d = _one_label_crowd()
    out = np.argmax(ck_rule(d), axis=1)
    one_answer = np.isin(d.worker, np.arange(8, 49))
    assert np.all(out[d.task[one_answer]] == 0)
    assert np.array_equal(out[d.task[~one_answer]], d.label[~one_answer])


def test_dirichlet_is_majority_vote_with_a_uniform_class_prior():
    d = _one_label_crowd()
    out = np.argmax(dirichlet(d, np.full(2, 0.5)), axis=1)
    assert np.array_equal(out[d.task], d.label)


def test_label_shares_against_the_class_prior_discount_an_over_user():
    d = _one_label_crowd()
    share = np.bincount(d.label, minlength=2) / d.label.size
    spammer = d.worker == 8
    busy = d.worker < 8
    mv = np.mean(d.label == d.truth)
    for name, P in (("dirichlet", dirichlet(d, share)), ("bound", bound(d)),
                    ("mixture", mixture(d))):
        out = np.argmax(P, axis=1)
        assert np.all(out[d.task[spammer]] == 0), name  # "1" on 40 of 40 where 1 is rare
        assert np.mean(out == d.truth) > mv + 0.05, name
        if name != "mixture":  # the mixture also doubts some accurate busy workers
            assert np.array_equal(out[d.task[busy]], d.label[busy]), name
