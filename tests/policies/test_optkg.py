"""The Opt-KG family as policies: specs, selection rules, the paper's propositions."""

from __future__ import annotations

import json

import numpy as np
import pytest

from labelq.errors import PolicyError
from labelq.policies import Observation, Problem, build
from labelq.policies._beta import label_rewards


def run(policy, problem, labels, steps, seed=0):
    """Pull loop with every task eligible; ``labels(task, rng)`` answers."""
    rng = np.random.default_rng(seed)
    state = policy.init_state(problem)
    tasks = np.arange(problem.n_tasks)
    chosen = []
    for _ in range(steps):
        t = policy.select_task(state, 0, tasks, np.ones(problem.n_tasks, bool), rng)
        chosen.append(t)
        policy.update(state, Observation(task=t, worker=0, label=labels(t, rng)))
    return state, chosen


@pytest.mark.parametrize("spec,error", [
    ("cvar:alpha=1.2", "alpha must be in (0, 1], got 1.2"),
    ("cvar:alpha=0", "alpha must be in (0, 1], got 0"),
    ("optkg:prior=-1", "prior must be > 0, got -1.0"),
    ("optkg-workers:c0=0", "c0 must be > 0, got 0.0"),
    ("optkg-workers:max_strength=3", "max_strength must be > c0 + d0 = 5.0, got 3.0"),
    ("optkg:beta=2", "has no parameter 'beta'"),
])
def test_params_are_validated(spec, error):
    with pytest.raises(PolicyError) as exc:
        build(spec)
    assert error in str(exc.value)


def test_first_choices_go_round_robin_by_lowest_index():
    _, chosen = run(build("optkg"), Problem(n_tasks=6, n_workers=1), lambda t, r: 1, 6)
    assert chosen == list(range(6))


def test_optkg_picks_the_largest_optimistic_reward():
    policy = build("optkg")
    state = policy.init_state(Problem(n_tasks=4, n_workers=1))
    state.alpha[:] = [[1, 3], [3, 3], [1, 1], [10, 2]]  # columns: b, a
    expected = np.maximum(*label_rewards(state.alpha[:, 1], state.alpha[:, 0]))
    np.testing.assert_allclose(policy.priority(state, np.arange(4)), expected)
    assert policy.select_task(state, 0, np.arange(4), np.ones(4, bool), None) == 2


def test_deterministic_kg_gets_stuck_as_in_proposition_3_1():
    # after one label per task every state has |a - b| = 1 and KG reward exactly 0, so KG
    # labels task 0 for ever, whatever the answers are
    _, chosen = run(build("kg"), Problem(n_tasks=5, n_workers=1),
                    lambda t, r: int(r.integers(2)), 60, seed=4)
    assert chosen[:5] == [0, 1, 2, 3, 4]
    assert set(chosen[5:]) == {0}


def test_optkg_is_consistent_where_kg_is_not():
    theta = np.array([0.9, 0.2, 0.65, 0.4, 0.55])
    labels = lambda t, r: int(r.random() < theta[t])  # noqa: E731
    state, chosen = run(build("optkg"), Problem(n_tasks=5, n_workers=1), labels, 400, seed=1)
    counts = np.bincount(chosen, minlength=5)
    assert counts.min() >= 5  # every task keeps being asked
    assert counts[4] > counts[0] and counts[3] > counts[1]  # ambiguous tasks get more labels
    _, kg_random = run(build("kg-random"), Problem(n_tasks=5, n_workers=1), labels, 100, seed=1)
    assert len(set(kg_random[5:])) > 1


def test_cvar_interpolates_between_kg_and_optkg():
    rng = np.random.default_rng(0)
    problem = Problem(n_tasks=200, n_workers=1, n_classes=2)
    for c in (2, 3):
        problem = Problem(n_tasks=60, n_workers=1, n_classes=c)
        kg, opt = build("kg"), build("optkg")
        state = kg.init_state(problem)
        state.alpha[:] = rng.integers(1, 12, state.alpha.shape)
        tasks = np.arange(problem.n_tasks)
        np.testing.assert_allclose(build("cvar:alpha=1").priority(state, tasks),
                                   kg.priority(state, tasks), atol=1e-12)
        np.testing.assert_allclose(build("cvar:alpha=1e-12").priority(state, tasks),
                                   opt.priority(state, tasks), atol=1e-12)
        mid = build("cvar:alpha=0.3").priority(state, tasks)
        assert np.all(mid <= opt.priority(state, tasks) + 1e-12)
        assert np.all(mid >= kg.priority(state, tasks) - 1e-12)


def test_multiclass_uses_dirichlet_and_binary_equals_beta():
    policy = build("optkg")
    s3 = policy.init_state(Problem(n_tasks=2, n_workers=1, n_classes=3))
    s3.alpha[:] = [[1, 1, 1], [2, 3, 1]]
    np.testing.assert_allclose(policy.priority(s3, np.arange(2))[0], 5 / 18, atol=1e-10)
    proba = policy.predict_proba(s3)
    assert proba.shape == (2, 3) and proba[1].argmax() == 1
    # binary state through the Dirichlet code = Beta closed form
    from labelq.policies import _dirichlet
    s2 = policy.init_state(Problem(n_tasks=3, n_workers=1))
    s2.alpha[:] = [[1, 1], [3, 5], [7, 2]]
    np.testing.assert_allclose(policy.priority(s2, np.arange(3)),
                               _dirichlet.label_rewards(s2.alpha).max(axis=1), rtol=1e-9)


def test_update_predict_and_positive_set():
    policy = build("optkg")
    state = policy.init_state(Problem(n_tasks=3, n_workers=2))
    assert list(policy.update(state, Observation(0, 0, 1))) == [0]
    policy.update(state, Observation(1, 0, 0))
    assert len(policy.update(state, Observation(2, 1, -1, declined=True))) == 0
    assert len(policy.update(state, Observation(2, 1, 1, gold=True, truth=1))) == 0
    np.testing.assert_array_equal(state.alpha, [[1, 2], [2, 1], [1, 1]])
    proba = policy.predict_proba(state)
    np.testing.assert_allclose(proba, [[0.25, 0.75], [0.75, 0.25], [0.5, 0.5]])
    np.testing.assert_array_equal(policy.predict(state), [1, 0, 1])  # ties go to +1


def test_late_budget_selection_is_decided_by_reward_not_ties():
    policy = build("optkg")
    state = policy.init_state(Problem(n_tasks=2, n_workers=1))
    state.alpha[:] = [[4000, 5000], [4400, 5000]]  # task 1 is less certain
    p = policy.priority(state, np.arange(2))
    assert p[0] > 0 and p[1] > p[0]
    assert policy.select_task(state, 0, np.arange(2), np.ones(2, bool), None) == 1


def test_push_mode_picks_best_task_and_an_eligible_worker():
    policy = build("optkg")
    state = policy.init_state(Problem(n_tasks=3, n_workers=3))
    state.alpha[:] = [[1, 5], [2, 2], [1, 1]]
    mask = np.zeros((3, 3), bool)
    mask[0, 0] = mask[1, 2] = mask[1, 1] = True
    assert policy.select_pair(state, mask, np.random.default_rng(0)) == (1, 1)
    assert json.dumps(policy.state_to_dict(state))
