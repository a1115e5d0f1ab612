"""bench/aggregation_variants.py: the seventh-pass readings docs/aggregation.md reports."""

import numpy as np

from bench.aggregation_variants import bound_with, cv_prefers_common, rho_multi
from bench.one_label import bound
from labelq.datasets import LabelData

from .test_one_label_bench import _one_label_crowd


def _crowd(accuracies, n_tasks=600, per_task=3, seed=0) -> LabelData:
    """Binary tasks, ``per_task`` labels each from distinct random workers of the given
    accuracies."""
    rng = np.random.default_rng(seed)
    acc = np.asarray(accuracies)
    truth = rng.integers(0, 2, n_tasks)
    task = np.repeat(np.arange(n_tasks), per_task)
    worker = np.concatenate([rng.choice(acc.size, per_task, replace=False)
                             for _ in range(n_tasks)])
    right = rng.random(task.size) < acc[worker]
    label = np.where(right, truth[task], 1 - truth[task])
    return LabelData(name="crowd", task=task, worker=worker, label=label, truth=truth,
                     classes=["0", "1"], tasks=[str(i) for i in range(n_tasks)],
                     workers=[str(j) for j in range(acc.size)])


def test_bound_with_the_label_shares_is_bench_one_labels_bound():
    d = _one_label_crowd()
    share = np.bincount(d.label, minlength=2) / d.label.size
    assert np.array_equal(bound_with(d, share)[0], bound(d))


def test_the_robust_prior_leaves_out_workers_who_gave_one_answer_only():
    d = _one_label_crowd()  # workers 8-48 answer "1" only; 0-7 give both
    several = d.worker < 8
    expected = (np.bincount(d.label[several], minlength=2) + 1) / (several.sum() + 2)
    assert np.allclose(rho_multi(d), expected)


def test_cv_keeps_per_worker_weights_only_where_workers_differ():
    assert not cv_prefers_common(_crowd([0.95] * 10 + [0.55] * 10))
    assert cv_prefers_common(_crowd([0.8] * 20))
