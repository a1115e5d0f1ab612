"""``optkg-workers`` and ``optkg-multi`` on more than two classes (issue 20, item 2): the
Dirichlet / one-coin math of ``_dirichlet_workers`` against independent values, its
reduction to the paper's binary model, and runs where the worker model should win."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import integrate

from labelq.policies import Observation, Problem, _beta, build
from labelq.policies import _dirichlet_workers as dw
from labelq.simulate.runner import run_policy
from labelq.simulate.synthetic import make_synthetic

# (a, b, c, d, z) of ALGORITHMS.md 1.2 and a non-integer state
VECTORS = [(1, 1, 4, 1, 1), (1, 1, 4, 1, -1), (2, 1, 4, 1, 1), (2, 1, 4, 1, -1),
           (3, 5, 2, 2, 1), (2.3, 1.7, 3.1, 1.2, -1)]


@pytest.mark.parametrize("a, b, c, d, z", VECTORS)
def test_two_classes_reduce_to_the_papers_beta_update(a, b, c, d, z):
    alpha, c2, d2 = dw.worker_update(np.array([b, a], float), c, d, 1 if z > 0 else 0)
    want = _beta.worker_update(a, b, c, d, z)
    np.testing.assert_allclose([alpha[1], alpha[0], c2, d2], [float(v) for v in want],
                               rtol=1e-12)


def test_two_classes_reward_grid_is_the_binary_r_plus():
    grid = dw.grid_for(2)
    states = np.array([[1.0, 1.0], [1.0, 2.0], [2.0, 3.0], [5.0, 5.0], [1.3, 4.2]])  # [b, a]
    got = dw.reward_grid(states, grid)
    inner = (grid > 0) & (grid < 1)  # Beta(c, d) with c / (c + d) = r, c + d = 5
    want = np.maximum(*_beta.worker_rewards(states[:, 1:2], states[:, 0:1],
                                            5 * grid[None, inner], 5 * (1 - grid[None, inner])))
    np.testing.assert_allclose(got[:, inner], want, rtol=1e-6, atol=1e-12)


def test_three_class_task_update_matches_the_exact_posterior_moments():
    """Means and total variance of the moment-matched Dirichlet equal those of the exact
    posterior Dir(alpha) x P(Z = k | theta, r), estimated by importance sampling."""
    rng = np.random.default_rng(0)
    alpha, r, k = np.array([2.0, 1.0, 1.5]), 0.75, 1
    theta = rng.dirichlet(alpha, size=2_000_000)
    lik = theta[:, k] * r + (1 - theta[:, k]) * (1 - r) / 2
    w = lik / lik.sum()
    mean = w @ theta
    total_var = (w @ theta ** 2 - mean ** 2).sum()
    got = dw.task_update(alpha, r, k)
    s = got.sum()
    np.testing.assert_allclose(got / s, mean, atol=2e-3)
    got_var = ((got / s) * (1 - got / s)).sum() / (s + 1)
    np.testing.assert_allclose(got_var, total_var, rtol=1e-2)


def test_worker_update_matches_the_exact_reliability_posterior():
    """rho's exact posterior is Beta(c, d) x (m_k rho + (1 - m_k)(1 - rho) / (C - 1)) with
    m_k = alpha_k / A; its mean and variance by quadrature against the matched Beta."""
    alpha, c, d, k = np.array([3.0, 1.0, 2.0, 1.0]), 3.0, 2.0, 0
    m = alpha[k] / alpha.sum()

    def post(x, power):
        lik = m * x + (1 - m) * (1 - x) / 3
        return x ** power * x ** (c - 1) * (1 - x) ** (d - 1) * lik
    z = integrate.quad(post, 0, 1, args=(0,))[0]
    mean = integrate.quad(post, 0, 1, args=(1,))[0] / z
    var = integrate.quad(post, 0, 1, args=(2,))[0] / z - mean ** 2
    _, c2, d2 = dw.worker_update(alpha, c, d, k)
    assert c2 / (c2 + d2) == pytest.approx(mean, rel=1e-10)
    assert c2 * d2 / ((c2 + d2) ** 2 * (c2 + d2 + 1)) == pytest.approx(var, rel=1e-8)


def test_limits_of_the_task_update():
    alpha = np.array([2.0, 3.0, 1.5, 0.7])
    # a worker no better than a guess (r = 1/C) teaches nothing about the task
    np.testing.assert_allclose(dw.task_update(alpha, 0.25, 2), alpha, rtol=1e-12)
    # a perfect worker: the plain count update
    np.testing.assert_allclose(dw.task_update(alpha, 1.0, 2), alpha + [0, 0, 1, 0], rtol=1e-12)
    # classes are exchangeable: permuting alpha permutes the update
    perm = np.array([2, 0, 3, 1])
    np.testing.assert_allclose(dw.task_update(alpha[perm], 0.8, 0),
                               dw.task_update(alpha, 0.8, 2)[perm], rtol=1e-12)


def test_rewards_grow_with_reliability_and_vanish_at_a_guess():
    grid = dw.grid_for(4)
    rg = dw.reward_grid(np.array([[1.0, 1.0, 1.0, 1.0], [3.0, 1.0, 1.2, 1.0]]), grid)
    above = grid >= 0.25
    assert (np.diff(rg[:, above], axis=1) > 0).all()
    assert (rg[:, grid == 0.25] == 0).all()


def test_pull_asks_the_reliable_worker_about_the_uncertain_task():
    policy = build("optkg-workers")
    state = policy.init_state(Problem(n_tasks=2, n_workers=2, n_classes=3))
    for _ in range(4):  # task 0 confidently class 0
        policy.update(state, Observation(task=0, worker=1, label=0))
    assert state.alpha[0, 0] > state.alpha[0, 1]
    assert policy.select_task(state, 0, np.arange(2), np.ones(2, bool),
                              np.random.default_rng(0)) == 1
    # gold updates the worker exactly, the task not at all
    before = state.alpha.copy()
    policy.update(state, Observation(task=1, worker=0, label=2, gold=True, truth=2))
    assert (state.c[0], state.d[0]) == (5.0, 1.0)
    np.testing.assert_array_equal(state.alpha, before)


@pytest.mark.parametrize("name, spec", [
    # varied one-coin workers: the reliability model should beat spreading labels evenly
    ("optkg-workers", "tasks=90,workers=15,classes=3,model=uniform-accuracy,low=0.3,high=1.0"),
    # each worker good on one category only: per-category reliability should win
    ("optkg-multi", "tasks=90,workers=15,categories=3,classes=3,model=spammer-hammer"),
    # BBTA's weighted vote and losses on k classes (it always took them; pinned here)
    ("bbta", "tasks=90,workers=15,categories=3,classes=3,model=spammer-hammer"),
])
def test_beats_uniform_and_random_where_the_model_says_it_should(name, spec):
    acc = {}
    for policy in (name, "uniform", "random"):
        runs = []
        for seed in range(3):
            env = make_synthetic(spec, np.random.default_rng(seed))
            runs.append(run_policy(build(policy), env, [270],
                                   np.random.default_rng(100 + seed))[-1].accuracy)
        acc[policy] = float(np.mean(runs))
    assert acc[name] > acc["uniform"] + 0.03, acc
    assert acc[name] > acc["random"] + 0.03, acc


def test_multi_state_round_trips_through_json():
    import json
    policy = build("optkg-multi")
    problem = Problem(n_tasks=5, n_workers=3, n_classes=4, task_category=np.array([0, 1, 0, 1, 1]),
                      n_categories=2)
    state = policy.init_state(problem)
    policy.update(state, Observation(task=1, worker=2, label=3))
    back = policy.state_from_dict(json.loads(json.dumps(policy.state_to_dict(state))))
    np.testing.assert_array_equal(back.alpha, state.alpha)
    np.testing.assert_array_equal(back.c, state.c)
    assert back.c.shape == (2, 3)
    np.testing.assert_array_equal(back.reward, state.reward)
    assert back.spent.tolist() == [0.0, 1.0]


def test_cached_push_decision_equals_the_full_interpolation():
    """select_pair refreshes only the changed rows and columns of its pair matrix; after
    every step the matrix equals the interpolation redone from scratch."""
    policy = build("optkg-workers")
    state = policy.init_state(Problem(n_tasks=40, n_workers=6, n_classes=4))
    rng = np.random.default_rng(3)
    mask = rng.random((40, 6)) < 0.6
    for step in range(60):
        pair = policy.select_pair(state, mask, rng)
        full = state.values(np.arange(40), state.c / (state.c + state.d))
        np.testing.assert_array_equal(state.pair_cache[2], full)
        if pair is None:
            break
        values = np.where(mask, full, -np.inf)
        assert values[pair] == values.max()
        i, j = pair
        policy.update(state, Observation(task=i, worker=j, label=int(rng.integers(4))))
        mask[i, j] = False
