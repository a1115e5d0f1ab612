"""Agreement metrics against hand computations and textbook examples."""

import numpy as np
import pytest

from labelq.aggregation import (
    fleiss_kappa,
    fleiss_kappa_counts,
    krippendorff_alpha,
    krippendorff_alpha_counts,
    worker_accuracy,
)
from labelq.errors import InputError


def test_krippendorff_hand_example():
    # units (a,a), (a,b), (b,b): o_aa = 2, o_ab = o_ba = 1, o_bb = 2; n_a = n_b = 3, n = 6
    # alpha = 1 - (n-1) * 2 / (2 * 3 * 3) = 1 - 10/18 = 4/9
    assert krippendorff_alpha([0, 0, 1, 1, 2, 2], [0, 0, 0, 1, 1, 1]) == pytest.approx(4 / 9)


def test_krippendorff_textbook_example_with_missing_values():
    # Krippendorff (2011) "Computing Krippendorff's alpha-reliability", 4 observers x 12
    # units, values 1..5, missing data; nominal alpha = 0.743
    rows = {"A": [1, 2, 3, 3, 2, 1, 4, 1, 2, None, None, None],
            "B": [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, None, 3],
            "C": [None, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, None],
            "D": [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, None]}
    task, label = [], []
    for values in rows.values():
        for unit, v in enumerate(values):
            if v is not None:
                task.append(unit)
                label.append(v - 1)
    assert krippendorff_alpha(task, label) == pytest.approx(0.743, abs=5e-4)


def test_krippendorff_edge_cases():
    assert krippendorff_alpha_counts([[3, 0], [0, 2], [1, 0]]) == pytest.approx(1.0)
    assert np.isnan(krippendorff_alpha_counts([[1, 0], [0, 1]]))  # nothing pairable
    assert np.isnan(krippendorff_alpha_counts([[2, 0], [3, 0]]))  # one value only


FLEISS_WIKI = np.array([[0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0],
                        [2, 2, 8, 1, 1], [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2],
                        [6, 5, 2, 1, 0], [0, 2, 2, 3, 7]])


def test_fleiss_textbook_example():
    # the worked example in Fleiss' kappa literature (10 subjects, 14 raters): kappa = 0.210
    assert fleiss_kappa_counts(FLEISS_WIKI) == pytest.approx(0.2099, abs=1e-4)
    # the same data in long format
    task = np.repeat(np.repeat(np.arange(10), 5), FLEISS_WIKI.ravel())
    label = np.repeat(np.tile(np.arange(5), 10), FLEISS_WIKI.ravel())
    assert fleiss_kappa(task, label) == pytest.approx(fleiss_kappa_counts(FLEISS_WIKI))


def test_fleiss_hand_example_and_unequal_counts():
    # 2 subjects x 2 raters: (a,a) and (a,b): P = (1 + 0)/2; p = (3/4, 1/4); Pe = 10/16
    assert fleiss_kappa_counts([[2, 0], [1, 1]]) == pytest.approx((0.5 - 10 / 16) / (6 / 16))
    # unequal: the 1-rating subject is dropped, the others use their own n_i
    unequal = [[3, 0], [1, 1], [0, 1]]
    assert fleiss_kappa_counts(unequal) == pytest.approx(
        fleiss_kappa_counts([[3, 0], [1, 1]]))
    with pytest.raises(InputError, match="equal ratings"):
        fleiss_kappa_counts(unequal, strict=True)


def test_worker_accuracy_against_gold_and_aggregate():
    task = np.array([0, 1, 2, 0, 1, 2, 2])
    worker = np.array([0, 0, 0, 1, 1, 1, 2])
    label = np.array([1, 0, 1, 1, 1, 0, 1])
    gold = np.array([1, 0, -1])  # task 2 has no gold answer
    acc = worker_accuracy(task, worker, label, gold)
    assert acc.n.tolist() == [2, 2, 0]
    assert acc.correct.tolist() == [2, 1, 0]
    assert acc.accuracy[:2].tolist() == [1.0, 0.5] and np.isnan(acc.accuracy[2])
    agg = worker_accuracy(task, worker, label, np.array([1, 0, 1]), n_workers=4)
    assert agg.n.tolist() == [3, 3, 1, 0] and agg.correct.tolist() == [3, 1, 1, 0]
