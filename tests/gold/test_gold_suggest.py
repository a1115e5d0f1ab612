"""labelq.gold.suggest: which labelled tasks an expert's answer would teach the most."""

import time

import numpy as np
import pytest

from labelq.errors import InputError
from labelq.gold.suggest import suggest_gold


def contested(seed=0, n_tasks=300):
    """Worker 0 always right, workers 1 and 2 right 60% of the time, everyone on every
    task. Where 1 and 2 agree against 0, majority vote follows them and Dawid-Skene (which
    learns that 0 is right) follows 0: the candidates disagree there, and only there."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 2, n_tasks)
    task, worker, label = [], [], []
    for t in range(n_tasks):
        for w, acc in ((0, 1.0), (1, 0.6), (2, 0.6)):
            task.append(t)
            worker.append(w)
            label.append(truth[t] if rng.random() < acc else 1 - truth[t])
    task, worker, label = map(np.array, (task, worker, label))
    by = label.reshape(n_tasks, 3)
    disagree = np.flatnonzero((by[:, 1] == by[:, 2]) & (by[:, 1] != by[:, 0]))
    return task, worker, label, truth, disagree


def test_finds_the_tasks_where_the_candidates_disagree():
    task, worker, label, truth, disagree = contested()
    assert 20 < disagree.size < 80
    s = suggest_gold(task, worker, label, n_tasks=300, n_workers=3, n_classes=2, n=15,
                     classes=["neg", "pos"])
    assert len(s) == 15
    assert set(s.tasks.tolist()) <= set(disagree.tolist())
    for r in range(len(s)):
        assert len(s.candidates[r]) == 2  # mv's answer and ds's
        assert s.answers[r, s.methods.index("mv")] != s.answers[r, s.methods.index("ds")]
        assert s.reason[r] and "candidates disagree" in s.reason[r]
        assert "neg" in s.reason[r] and "pos" in s.reason[r]
    assert np.all(s.committee > 0.1)
    assert np.all(np.diff(s.gain) <= 1e-12)  # best first
    assert np.allclose(s.posterior.sum(axis=1), 1)


def test_never_gold_excluded_or_unlabelled_tasks():
    task, worker, label, truth, disagree = contested()
    n_tasks = 310  # 300..309 have no label
    gold = np.full(n_tasks, -1)
    gold[disagree[:5]] = truth[disagree[:5]]
    exclude = np.zeros(n_tasks, dtype=bool)
    exclude[disagree[5:10]] = True
    s = suggest_gold(task, worker, label, n_tasks=n_tasks, n_workers=3, n_classes=2,
                     n=n_tasks, gold=gold, exclude=exclude)
    picked = set(s.tasks.tolist())
    assert picked and not picked & set(disagree[:10].tolist())
    assert not picked & set(range(300, 310))
    assert len(picked) == len(s) <= 290
    # the rest of the disagreements still lead
    rest = set(disagree[10:].tolist())
    assert set(s.tasks[:len(rest) // 2].tolist()) <= rest


def test_a_single_label_can_be_suggested():
    task, worker, label, _truth, disagree = contested()
    keep = ~np.isin(task, disagree[:3]) | (worker == 1)  # three contested tasks: one label
    t, w, y = task[keep], worker[keep], label[keep]
    s = suggest_gold(t, w, y, n_tasks=300, n_workers=3, n_classes=2, n=300)
    counts = np.bincount(t, minlength=300)
    singles = [i for i, k in zip(s.tasks, s.committee, strict=True) if counts[i] == 1 and k > 0]
    assert singles  # mv: 2/3 for its label, ds: weighs worker 1's skill -> they differ


def spread_case():
    """Tasks 0..19: workers 0 and 1, who label a lot, disagree; task 20: workers 2 and 3,
    who label a third as much, disagree. Elsewhere everyone agrees. On its score task 20
    comes after all of 0..19 (its labellers weigh less), but it teaches about two other
    workers."""
    task, worker, label = [], [], []

    def add(t, w, y):
        task.append(t)
        worker.append(w)
        label.append(y)
    for t in range(20):
        add(t, 0, 0)
        add(t, 1, 1)
    add(20, 2, 0)
    add(20, 3, 1)
    rng = np.random.default_rng(3)
    for t in range(21, 121):
        y = int(rng.integers(0, 2))
        for w in (0, 1, 4, 5) + ((2, 3) if t % 3 == 0 else ()):
            add(t, w, y)
    return np.array(task), np.array(worker), np.array(label), 121


def test_spreads_the_picks_over_workers():
    task, worker, label, n_tasks = spread_case()
    kw = dict(n_tasks=n_tasks, n_workers=7, n_classes=2)
    s = suggest_gold(task, worker, label, n=5, **kw)
    full = suggest_gold(task, worker, label, n=n_tasks, **kw)
    by_score = full.tasks[np.argsort(-full.score, kind="stable")]
    # on its score alone task 20 is not in the top 5: workers 0/1's tasks fill it
    assert 20 not in by_score[:5].tolist()
    assert set(by_score[:5].tolist()) <= set(range(20))
    # spread: task 20 teaches about workers 2 and 3, and comes in early
    assert 20 in s.tasks.tolist()
    assert s.tasks[0] < 20


def test_deterministic_given_seed_and_validated():
    task, worker, label, _truth, _d = contested(seed=4)
    a = suggest_gold(task, worker, label, n_tasks=300, n_workers=3, n_classes=2, n=40, seed=1)
    b = suggest_gold(task, worker, label, n_tasks=300, n_workers=3, n_classes=2, n=40, seed=1)
    assert a.tasks.tolist() == b.tasks.tolist() and a.reason == b.reason
    with pytest.raises(InputError):
        suggest_gold(task, worker, label, n_tasks=300, n_workers=3, n_classes=2,
                     exclude=np.zeros(5, dtype=bool))
    empty = suggest_gold(task[:0], worker[:0], label[:0], n_tasks=3, n_workers=1,
                         n_classes=2)
    assert len(empty) == 0 and empty.answers.shape == (0, 4)


def test_categories_add_ds_category_to_the_committee():
    task, worker, label, _truth, disagree = contested()
    s = suggest_gold(task, worker, label, n_tasks=300, n_workers=3, n_classes=2, n=5,
                     categories=np.arange(300) % 2)
    assert s.methods[-1] == "ds-category" and s.answers.shape == (5, 5)


@pytest.mark.shared
def test_trec2010_in_a_couple_of_seconds(shared_datasets):
    from labelq.datasets import load_dataset

    d = load_dataset(shared_datasets / "trec2010")  # 88k labels, 19k tasks, 762 workers
    gold = np.where(np.arange(d.n_tasks) % 10 == 0, d.truth, -1)
    t0 = time.perf_counter()
    s = suggest_gold(d.task, d.worker, d.label, n_tasks=d.n_tasks, n_workers=d.n_workers,
                     n_classes=d.n_classes, gold=gold)
    took = time.perf_counter() - t0
    assert len(s) == 30 and not np.any(gold[s.tasks] >= 0)
    assert took < 10, took  # ~0.8 s measured; generous for 2 shared cores
