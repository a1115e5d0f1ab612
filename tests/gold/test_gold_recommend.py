"""Kang & Tay core (labelq.policies._recommend) and the registered gr / ur / eps-first-gold."""

import json

import numpy as np
import pytest

from labelq.errors import PolicyError
from labelq.policies import Observation, Problem, build
from labelq.policies._recommend import (
    RecommenderParams,
    epoch_end,
    init_state,
    observe,
    recommend,
    reward,
    y_bar,
)


def drive(params, k, steps, rng, accept=True, correct=True):
    """Run one row answering everything; return the (category, gold) sequence."""
    state = init_state(params, 1, k)
    seq = []
    for _ in range(steps):
        c, g = recommend(params, state, rng)
        seq.append((int(c[0]), bool(g[0])))
        observe(params, state, c, g, np.array([accept]), np.array([correct]))
    return seq, state


def test_epoch_end_is_exact_on_integer_products():
    assert epoch_end(10, 0.1, 2) == 10  # 0.1 * 100 is 10.000000000000002 in floats
    assert epoch_end(np.arange(5), 0.1, 2).tolist() == [0, 1, 1, 1, 2]


def test_gr_schedule_calibration_then_one_gold_per_epoch_of_one_category():
    k, p = 3, RecommenderParams("gr")
    seq, state = drive(p, k, 200, np.random.default_rng(0))
    assert seq[:k] == [(0, True), (1, True), (2, True)]
    t, r = k, k + 1
    while t < 150:
        n_tasks = int(epoch_end(r, 0.1, 2) - epoch_end(r - 1, 0.1, 2))
        cat, gold = seq[t]
        assert gold
        assert seq[t + 1:t + 1 + n_tasks] == [(cat, False)] * n_tasks
        t, r = t + 1 + n_tasks, r + 1


def test_ur_schedule_all_categories_each_epoch_and_eps_first_block():
    seq, _ = drive(RecommenderParams("ur"), 4, 60, np.random.default_rng(0))
    assert [g for _, g in seq[:8]] == [True] * 8  # epochs 1 and 2 (τ(2) = τ(1))
    assert sorted(c for c, _ in seq[4:8]) == [0, 1, 2, 3]
    seq, state = drive(RecommenderParams("eps-first", horizon=100), 3, 60,
                       np.random.default_rng(0))
    assert all(g for _, g in seq[:30]) and not any(g for _, g in seq[30:])
    assert state.gold_shown.tolist() == [[10, 10, 10]]
    assert len({c for c, _ in seq[30:]}) == 1


def test_declines_count_as_recommended_gold_not_completed():
    p = RecommenderParams("ur")
    state = init_state(p, 2, 2)
    observe(p, state, np.array([0, 0]), np.array([True, True]), np.array([False, True]),
            np.array([True, True]))
    assert state.gold_shown[:, 0].tolist() == [1, 1]
    assert state.gold_done[:, 0].tolist() == [0, 1]
    assert state.gold_correct[:, 0].tolist() == [0, 1]
    assert y_bar(state)[:, 0].tolist() == [0.0, 1.0]


def test_row_view_writes_through():
    p = RecommenderParams("gr")
    state = init_state(p, 3, 2)
    observe(p, state.rows(slice(1, 2)), np.array([1]), np.array([True]), np.array([True]),
            np.array([True]))
    assert state.gold_correct.tolist() == [[0, 0], [0, 1], [0, 0]]


def test_reward_positive_part_and_no_gold():
    assert reward(0.7, 0.5, 0, 10).item() == 0.0
    assert reward(0.7, 0.5, 3, 10).item() == 0.0  # 0.7 - 2.1/3 = 0
    assert reward(0.7, 0.5, 21, 10).item() == pytest.approx(0.5 * (0.7 - 0.1))


@pytest.mark.parametrize("spec", ["gr", "ur", "ur:gamma=1.5", "eps-first-gold:horizon=200"])
def test_policy_learns_the_best_category_of_each_worker(spec):
    """Two workers with opposite preferences; most late non-gold tasks go to each one's
    best category (argmax q p), gold answers drive it, declines included."""
    rng = np.random.default_rng(1)
    k, n_tasks = 3, 600
    cat = np.arange(n_tasks) % k
    is_gold = np.arange(n_tasks) < 300
    problem = Problem(n_tasks=n_tasks, n_workers=2, n_classes=2, task_category=cat,
                      n_categories=k, is_gold=is_gold, gold_answer=np.where(is_gold, 1, -1))
    p = np.array([[0.9, 0.6, 0.5], [0.5, 0.6, 0.9]])
    q = np.array([[0.9, 0.6, 0.5], [0.5, 0.6, 0.9]])
    policy = build(spec)
    state = policy.init_state(problem)
    late = [[], []]
    for t in range(1200):
        w = t % 2
        task = policy.select_task(state, w, np.arange(n_tasks), np.ones(n_tasks, bool), rng)
        c = cat[task]
        declined = rng.random() >= q[w, c]
        right = rng.random() < p[w, c]
        label = -1 if declined else (1 if right else 0)
        policy.update(state, Observation(task, w, label, gold=bool(is_gold[task]),
                                         truth=1 if is_gold[task] else -1, declined=declined))
        if t >= 800 and not is_gold[task]:
            late[w].append(c)
    assert np.mean(np.array(late[0]) == 0) > 0.6
    assert np.mean(np.array(late[1]) == 2) > 0.6


def test_select_respects_mask_and_falls_back_when_wanted_kind_is_missing():
    problem = Problem(n_tasks=6, n_workers=1, task_category=np.array([0, 1, 0, 1, 0, 1]),
                      n_categories=2, is_gold=np.array([False] * 6))
    policy = build("gr")
    state = policy.init_state(problem)
    rng = np.random.default_rng(0)
    mask = np.array([False, False, False, True, True, False])
    # calibration wants a gold of category 0; none exists: a non-gold of category 0 is next
    assert policy.select_task(state, 0, np.arange(6), mask, rng) == 4
    assert policy.select_task(state, 0, np.arange(6), np.zeros(6, bool), rng) is None
    before = json.dumps(policy.state_to_dict(state))
    policy.select_task(state, 0, np.arange(6), mask, rng)
    assert json.dumps(policy.state_to_dict(state)) == before  # selecting changes nothing


@pytest.mark.parametrize("spec, message", [
    ("gr:c=0", "policy 'gr': c must be a finite number > 0, got 0"),
    ("ur:gamma=0.5", "policy 'ur': gamma must be in [1, 20], got 0.5"),
    ("eps-first-gold:horizon=0", "policy 'eps-first-gold': horizon must be an integer >= 1"),
    ("ur:beta=3", "policy 'ur' has no parameter 'beta'"),
])
def test_policy_params_errors(spec, message):
    with pytest.raises(PolicyError) as info:
        build(spec)
    assert message in str(info.value)
