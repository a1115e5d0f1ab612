"""Gold labels thinned to look like the tasks' (issue 41): as many labels as a task has, and
drawn to match who labels the tasks (``AutoAggregator._thin_gold``, ``rank_within_task``'s
weighted draw)."""

import numpy as np

from labelq.aggregation.auto import AutoAggregator
from labelq.aggregation.base import LabelArrays, rank_within_task


def test_a_weighted_rank_puts_weight_zero_last_and_draws_by_weight():
    rng = np.random.default_rng(0)
    task = np.repeat(np.arange(2000), 3)
    weight = np.tile([0.0, 1.0, 4.0], 2000)
    rank = rank_within_task(task, rng, weight)
    assert sorted(rank[:3]) == [0, 1, 2]
    assert (rank[weight == 0] == 2).all()  # after every other label of its task
    first = rank.reshape(-1, 3)[:, 2] == 0
    # the weight-4 label is drawn first with probability 4/5
    assert abs(first.mean() - 0.8) < 0.03


def test_gold_keeps_the_labels_of_the_annotators_who_label_the_tasks():
    # Given tasks labelled twice each, by annotators 0 and 1, and gold questions labelled by
    # both and by annotator 3 (a suspect served gold and little else)
    t = np.r_[np.repeat(np.arange(300), 2), np.repeat(np.arange(300, 400), 3)]
    w = np.r_[np.tile([0, 1], 300), np.tile([3, 0, 1], 100)]
    d = LabelArrays(t, w, np.zeros(t.size, dtype=np.int64), 400, 4, 2)
    g = np.full(400, -1)
    g[300:] = 0
    # When the gold is thinned to the tasks' two labels
    keep = AutoAggregator._thin_gold(d, g, np.arange(300, 400), np.bincount(t, minlength=400),
                                     np.random.default_rng(1))
    # Then every task label stays, each gold question keeps two labels, and they are those
    # of the annotators who label the tasks (by label count alone, a third would be 3's)
    assert keep[t < 300].all()
    on_gold = (t >= 300) & keep
    assert (np.bincount(t[on_gold], minlength=400)[300:] == 2).all()
    assert (w[on_gold] != 3).all()
