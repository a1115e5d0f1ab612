"""The baselines users would pick instead: ``overlap`` (fixed overlap + majority vote) and
``dynamic-overlap`` (Toloka's incremental relabeling with its skill-weighted posterior)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from labelq.errors import PolicyError
from labelq.policies import Observation, Problem, build
from labelq.simulate.runner import run_policy
from labelq.simulate.synthetic import make_synthetic

# --- overlap -------------------------------------------------------------------------------

def test_overlap_gives_every_task_exactly_n_labels_then_stops():
    env = make_synthetic("tasks=60,workers=12,classes=3,model=uniform-accuracy",
                         np.random.default_rng(1))
    policy = build("overlap:n=3")
    # a budget of 10 labels per task: the policy must stop at 3 per task all the same
    points = run_policy(policy, env, [60 * 2, 60 * 10], np.random.default_rng(2))
    assert points[0].labels == 120 and points[1].labels == 180
    assert points[1].tasks_completed == 60


def test_overlap_spreads_round_robin_and_predicts_majority_shares():
    policy = build("overlap:n=2")
    state = policy.init_state(Problem(n_tasks=3, n_workers=4, n_classes=3))
    rng = np.random.default_rng(0)
    mask = np.ones(3, dtype=bool)
    order = []
    for worker, label in zip([0, 1, 2, 3, 0, 1], [2, 2, 0, 1, 1, 1], strict=True):
        task = policy.select_task(state, worker, np.arange(3), mask, rng)
        order.append(task)
        policy.update(state, Observation(task=task, worker=worker, label=label))
    assert order == [0, 1, 2, 0, 1, 2]
    assert policy.select_task(state, 2, np.arange(3), mask, rng) is None
    assert policy.select_pair(state, np.ones((3, 4), dtype=bool), rng) is None
    np.testing.assert_allclose(policy.predict_proba(state),
                               [[0, 0.5, 0.5], [0, 0.5, 0.5], [0.5, 0.5, 0]], atol=1e-9)


@pytest.mark.parametrize("spec, message", [
    ("overlap:n=0", "n must be an integer >= 1, got 0"),
    ("overlap:n=2.5", "n must be an integer >= 1, got 2.5"),
    ("overlap:m=2", "has no parameter 'm'"),
])
def test_overlap_params_are_validated(spec, message):
    with pytest.raises(PolicyError, match=message):
        build(spec)


# --- dynamic-overlap -----------------------------------------------------------------------

def brute_posterior(answers, q, n_classes):
    """P(c) by the documented formula, one product per class, plain floats."""
    weights = []
    for c in range(n_classes):
        p = 1.0 / n_classes
        for label, qj in zip(answers, q, strict=True):
            p *= qj if label == c else (1.0 - qj) / (n_classes - 1)
        weights.append(p)
    return np.array(weights) / sum(weights)


def test_posterior_is_tolokas_formula():
    from labelq.policies.dynamic_overlap import skill_posterior
    rng = np.random.default_rng(3)
    for C, W in itertools.product((2, 3, 5), (1, 4, 9)):
        labels = rng.integers(-1, C, size=(6, W))
        q = rng.uniform(0.05, 0.99, size=W)
        got = skill_posterior(labels, q, C)
        for row, p in zip(labels, got, strict=True):
            who = row >= 0
            np.testing.assert_allclose(p, brute_posterior(row[who], q[who], C), rtol=1e-12)


def test_gold_sets_the_smoothed_skill():
    policy = build("dynamic-overlap:min=1,max=3,confidence=0.9,agreement=false")
    problem = Problem(n_tasks=4, n_workers=2, n_classes=2, is_gold=np.array([1, 1, 1, 0], bool),
                      gold_answer=np.array([1, 0, 1, -1]))
    state = policy.init_state(problem)
    for task, label in [(0, 1), (1, 0), (2, 0)]:  # two right, one wrong
        policy.update(state, Observation(task=task, worker=0, label=label, gold=True,
                                         truth=int(problem.gold_answer[task])))
    # q = (K + correct) / (2K + total), K = 0.5
    np.testing.assert_allclose(policy.skill(state), [(0.5 + 2) / (1 + 3), 0.5])


def test_a_confident_task_stops_at_min_and_a_disputed_one_goes_to_max():
    policy = build("dynamic-overlap:min=2,max=4,confidence=0.9")
    state = policy.init_state(Problem(n_tasks=2, n_workers=6, n_classes=3))
    state.correct[:] = 9.0  # six reliable workers: q = 9.5 / 11
    state.total[:] = 10.0
    rng = np.random.default_rng(0)
    for j, label in enumerate([1, 1]):
        policy.update(state, Observation(task=0, worker=j, label=label))
    assert state.done[0]  # two agreeing labels of q = 0.86 on 3 classes: P > 0.97
    for j, label in enumerate([0, 1, 2, 0]):
        assert not state.done[1]
        policy.update(state, Observation(task=1, worker=j, label=label))
    assert state.done[1]  # disputed: stopped by max, not by confidence
    assert state.confidence[1] < 0.9
    assert policy.select_task(state, 5, np.arange(2), np.ones(2, bool), rng) is None


def test_confidence_is_that_of_the_largest_sum_of_skills():
    """Toloka's confidence is the posterior of the answer with the largest sum of q: one
    worker of q = 0.95 against two of q = 0.55 (3 classes) — the two win the sum (1.1 > 0.95)
    though the posterior favours the one, so the task stays open at confidence 0.8."""
    policy = build("dynamic-overlap:min=1,max=5,confidence=0.8,agreement=false")
    state = policy.init_state(Problem(n_tasks=1, n_workers=3, n_classes=3))
    state.correct[:] = [18.5, 5.0, 5.0]  # q = (0.5 + correct) / (1 + total)
    state.total[:] = [19.0, 9.0, 9.0]
    np.testing.assert_allclose(policy.skill(state), [0.95, 0.55, 0.55])
    for j, label in enumerate([0, 1, 1]):
        policy.update(state, Observation(task=0, worker=j, label=label))
    post = brute_posterior([0, 1, 1], [0.95, 0.55, 0.55], 3)
    assert post.argmax() == 0 and post[0] > 0.8
    assert state.confidence[0] == pytest.approx(post[1], rel=1e-12)
    assert not state.done[0]


def test_agreement_with_the_majority_counts_as_skill():
    policy = build("dynamic-overlap:min=3,max=5,confidence=0.99")
    state = policy.init_state(Problem(n_tasks=1, n_workers=5, n_classes=2))
    for j, label in enumerate([1, 1, 0]):
        policy.update(state, Observation(task=0, worker=j, label=label))
    # at min = 3 labels each is compared with the majority of the two others:
    # worker 0 vs {1, 0} tie (not counted), worker 1 vs {1, 0} tie, worker 2 vs {1, 1} wrong
    np.testing.assert_array_equal(state.total, [0, 0, 1, 0, 0])
    np.testing.assert_array_equal(state.correct, [0, 0, 0, 0, 0])
    policy.update(state, Observation(task=0, worker=3, label=1))  # vs {1, 1, 0}: right
    np.testing.assert_array_equal(state.total, [0, 0, 1, 1, 0])
    np.testing.assert_array_equal(state.correct, [0, 0, 0, 1, 0])


def test_dynamic_overlap_beats_fixed_overlap_at_equal_spend():
    """Reliable workers agree early: the policy stops most tasks before max, spends about
    what overlap:n=3 spends, and is more accurate than it — as accurate as overlap:n=4."""
    spec = "tasks=300,workers=30,classes=4,model=uniform-accuracy,low=0.6,high=0.95"
    env = make_synthetic(spec, np.random.default_rng(5))
    dyn = run_policy(build("dynamic-overlap:min=2,max=5,confidence=0.9"), env, [1500],
                     np.random.default_rng(6))[-1]
    fixed = {n: run_policy(build(f"overlap:n={n}"), env, [1500], np.random.default_rng(6))[-1]
             for n in (3, 4)}
    assert fixed[3].labels == 900 and fixed[4].labels == 1200
    assert dyn.labels <= 1.1 * fixed[3].labels
    assert dyn.accuracy > fixed[3].accuracy + 0.02
    assert dyn.accuracy >= fixed[4].accuracy - 0.01


@pytest.mark.parametrize("spec, message", [
    ("dynamic-overlap:min=0", "min must be an integer >= 1, got 0"),
    ("dynamic-overlap:min=4,max=3", "max must be >= min = 4, got 3"),
    ("dynamic-overlap:confidence=1", r"confidence must be a number in \(0, 1\), got 1"),
    ("dynamic-overlap:confidence=95", r"confidence must be a number in \(0, 1\), got 95"),
    ("dynamic-overlap:smoothing=0", "smoothing must be a number > 0, got 0"),
    ("dynamic-overlap:agreement=2", "agreement must be true or false, got 2"),
])
def test_dynamic_overlap_params_are_validated(spec, message):
    with pytest.raises(PolicyError, match=message):
        build(spec)


def test_posterior_stays_finite_for_extreme_skills():
    from labelq.policies.dynamic_overlap import skill_posterior
    labels = np.full((1, 400), 1)
    p = skill_posterior(labels, np.full(400, 1 - 1e-9), 3)
    assert np.isfinite(p).all() and math.isclose(p[0, 1], 1.0)
