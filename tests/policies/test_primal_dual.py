"""primal-dual (Ho, Jabbari & Vaughan 2013): LP duals, phases, primal approximation, vote."""

from __future__ import annotations

import json

import numpy as np
import pytest

from labelq.errors import PolicyError
from labelq.policies import Observation, Problem, build
from labelq.policies._lp import solve_sampled_lp
from labelq.policies.primal_dual import MAIN, SAMPLE


# --- the sampled LP ------------------------------------------------------------------------
def test_lp_dual_is_marginal_cost_of_coverage():
    # one task, workers q = (0.5, 0.25), capacity 1 each, cover 0.6: y = (1, 0.4), cost 1.4;
    # one more unit of cover costs 1/0.25 = 4 more labels, so x = 4.
    x, u = solve_sampled_lp(np.array([[0.5, 0.25]]), np.array([1, 1]), 0.6, 1e4)
    assert x[0] == pytest.approx(4.0, rel=1e-6)
    assert u[0] == pytest.approx(0.0, abs=1e-9)


def test_lp_capacity_binds_and_prices_the_scarce_worker():
    # two tasks, a strong worker (q=1, capacity 1) and a weak one (q=0.25, capacity 2),
    # cover 0.6: the strong worker's capacity binds (1 label covers 1 of the 1.2 needed), the
    # rest comes from the weak worker at 1/0.25 = 4 labels per unit of cover: x = (4, 4).
    x, u = solve_sampled_lp(np.array([[1.0, 0.25], [1.0, 0.25]]), np.array([1, 2]), 0.6, 50.0)
    assert x == pytest.approx([4.0, 4.0], rel=1e-6)
    assert u == pytest.approx([0.0, 0.0], abs=1e-9)


def test_lp_infeasible_task_gets_the_penalty_weight():
    x, u = solve_sampled_lp(np.array([[0.1], [0.0]]), np.array([5]), 1.0, 123.0)
    assert x == pytest.approx([123.0, 123.0])
    assert u == pytest.approx([0.9, 1.0])


# --- parameters --------------------------------------------------------------------------
def test_built_from_spec_text():
    policy = build("primal-dual:eps=0.05,gamma=0.3,s=20")
    assert policy.params.eps == 0.05 and policy.params.s == 20
    assert policy.params.c_eps == pytest.approx(2 * np.log(20))


@pytest.mark.parametrize("spec, message", [
    ("primal-dual:eps=1.2", "eps must be in (0, 1), got 1.2"),
    ("primal-dual:gamma=0", "gamma must be in (0, 1], got 0"),
    ("primal-dual:s=0", "s must be an integer >= 1, got 0"),
    ("primal-dual:s=2.5", "s must be an integer >= 1, got 2.5"),
])
def test_invalid_params_are_rejected_precisely(spec, message):
    with pytest.raises(PolicyError, match=message.replace("(", r"\(").replace(")", r"\)")
                       .replace("[", r"\[").replace("]", r"\]").replace("+", r"\+")):
        build(spec)


# --- a small world -----------------------------------------------------------------------
N, K, S = 30, 2, 4  # non-gold tasks, categories, gold per category


def _problem(n_workers=13, capacity=10):
    cat = np.concatenate([np.arange(N) % K, np.repeat(np.arange(K), S)])
    gold = np.arange(N + K * S) >= N
    answer = np.where(gold, 1, -1)
    return Problem(n_tasks=N + K * S, n_workers=n_workers, task_category=cat, n_categories=K,
                   worker_capacity=np.full(n_workers, capacity + K * S), is_gold=gold,
                   gold_answer=answer)


def _do_gold(policy, state, worker, correct_by_cat, rng):
    """Serve a worker's gold through select_task; answer right on category c when
    ``correct_by_cat[c]`` says so. Returns the gold tasks served."""
    done = np.zeros(state.x.size, dtype=bool)
    served = []
    while True:
        task = policy.select_task(state, worker, np.arange(state.x.size), ~done, rng)
        if task is None or not state.is_gold[task]:
            return served, task
        done[task] = True
        served.append(task)
        c = state.task_category[task]
        policy.update(state, Observation(task, worker, 1 if correct_by_cat[c] else 0,
                                         gold=True, truth=1))


def test_gold_first_then_sample_workers_stop_then_lp_is_solved():
    policy = build("primal-dual:eps=0.1,gamma=0.3,s=4")
    state = policy.init_state(_problem())
    rng = np.random.default_rng(0)
    assert state.n_sample == 3  # round(13 * 0.3 / 1.3)
    for w in range(3):
        served, nxt = _do_gold(policy, state, w, [True, True], rng)
        assert sorted(np.bincount(state.task_category[served], minlength=K)) == [S, S]
        assert nxt is None  # a sample worker only answers gold
        assert state.role[w] == SAMPLE
    assert state.solved and np.all(state.x[:N] > 0) and np.all(state.x[N:] == 0)


def _solved_state(policy, rng, good=(True, True)):
    state = policy.init_state(_problem())
    for w in range(state.n_sample):
        _do_gold(policy, state, w, list(good), rng)
    assert state.solved
    return state


def test_main_worker_follows_the_primal_approximation():
    policy = build("primal-dual:eps=0.1,gamma=0.3,s=4")
    rng = np.random.default_rng(1)
    state = _solved_state(policy, rng)
    w = 5
    _, first = _do_gold(policy, state, w, [True, True], rng)
    assert state.role[w] == MAIN
    plan = policy.plan(state, w)
    assert 0 < plan.size <= 10  # capacity 10 non-gold
    v = policy.task_values(state, w, plan)
    assert np.all(v >= 0) and np.all(np.diff(v) <= 0)
    # select_task, asked repeatedly with every task eligible, serves exactly the plan
    got, done = [], np.zeros(state.x.size, dtype=bool)
    done[state.is_gold] = True
    task = first
    while task is not None:
        got.append(task)
        done[task] = True
        policy.update(state, Observation(task, w, 1))
        task = policy.select_task(state, w, np.arange(state.x.size), ~done, rng)
    assert got == plan.tolist()
    assert state.served[w] == len(got) <= 10


def test_spammer_gets_no_task_beyond_gold():
    """A worker whose gold shows p̂ = 1/2 has q̂ ≈ 0, so v = q̂x − 1 < 0 everywhere."""
    policy = build("primal-dual:eps=0.1,gamma=0.3,s=4")
    rng = np.random.default_rng(2)
    state = _solved_state(policy, rng)
    w = 7
    done = np.zeros(state.x.size, dtype=bool)
    flip = 0
    while True:
        task = policy.select_task(state, w, np.arange(state.x.size), ~done, rng)
        if task is None:
            break
        assert state.is_gold[task]
        done[task] = True
        flip ^= 1
        policy.update(state, Observation(task, w, flip, gold=True, truth=1))
    assert np.allclose(policy.p_hat(state, w), 0.5)
    assert policy.plan(state, w).size == 0


def test_specialist_is_sent_to_her_category():
    policy = build("primal-dual:eps=0.1,gamma=0.3,s=4")
    rng = np.random.default_rng(3)
    state = policy.init_state(_problem())
    for w in range(state.n_sample):  # sample: specialists of both categories
        _do_gold(policy, state, w, [w % 2 == 0, w % 2 == 1], rng)
    w = 9
    _do_gold(policy, state, w, [False, True], rng)  # wrong-and-right -> p̂=(0, 1)... q̂ both 1
    # make category 0 exactly chance for this worker: p̂ = 1/2 -> q̂ = 0
    state.gold_correct[w, 0] = S // 2
    plan = policy.plan(state, w)
    assert plan.size > 0 and np.all(state.task_category[plan] == 1)


def test_mask_is_respected_and_empty_mask_gives_none():
    policy = build("primal-dual:eps=0.1,gamma=0.3,s=4")
    rng = np.random.default_rng(4)
    state = _solved_state(policy, rng)
    w = 6
    _do_gold(policy, state, w, [True, True], rng)
    best = policy.plan(state, w)[0]
    mask = np.ones(state.x.size, dtype=bool)
    mask[best] = False
    pick = policy.select_task(state, w, np.arange(state.x.size), mask, rng)
    assert pick is not None and pick != best and mask[pick]
    assert policy.select_task(state, w, np.arange(state.x.size),
                              np.zeros(state.x.size, dtype=bool), rng) is None
    # candidates that are a subset (the live path's top of the priority index)
    cand = np.array([N - 1, N - 2])
    pick = policy.select_task(state, w, cand, np.array([True, False]), rng)
    assert pick in (N - 1, None)


def test_weighted_vote_uses_gold_accuracy_as_weight():
    policy = build("primal-dual:eps=0.1,gamma=0.3,s=4")
    rng = np.random.default_rng(5)
    state = _solved_state(policy, rng)
    good, fair, adverse = 6, 7, 8
    for w in (good, fair, adverse):
        _do_gold(policy, state, w, [True, True], rng)
    state.gold_correct[fair, 0] = 3  # p̂ = 3/4 on category 0: weight 1/2
    state.gold_correct[adverse, 0] = 1  # p̂ = 1/4: weight -1/2, her answers count reversed
    policy.update(state, Observation(0, good, 1))  # +1 for class 1
    policy.update(state, Observation(0, fair, 0))  # +1/2 for class 0 (majority: a tie)
    policy.update(state, Observation(2, adverse, 0))  # -1/2 for class 0
    proba = policy.predict_proba(state)
    sigma1 = 1.0 / (1.0 + np.exp(-1.0))  # softmax(2 * vote), vote margin 1/2
    assert proba[0, 1] == pytest.approx(sigma1)
    assert proba[2, 1] == pytest.approx(sigma1)
    assert proba[4] == pytest.approx([0.5, 0.5])  # no label
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert np.all(proba[N:, 1] == 1.0)  # gold tasks report their answer


def test_state_round_trips_through_json_mid_run():
    policy = build("primal-dual:eps=0.1,gamma=0.3,s=4")
    rng = np.random.default_rng(6)
    state = _solved_state(policy, rng)
    _do_gold(policy, state, 6, [True, False], rng)
    policy.update(state, Observation(3, 6, 1))
    data = json.loads(json.dumps(policy.state_to_dict(state)))
    again = policy.state_from_dict(data)
    assert policy.state_to_dict(again) == policy.state_to_dict(state)
    mask = np.ones(state.x.size, dtype=bool)
    assert policy.select_task(again, 6, np.arange(state.x.size), mask,
                              np.random.default_rng(9)) == \
        policy.select_task(state, 6, np.arange(state.x.size), mask, np.random.default_rng(9))
    np.testing.assert_allclose(policy.predict_proba(again), policy.predict_proba(state))


def test_without_gold_tasks_it_still_assigns():
    policy = build("primal-dual")
    state = policy.init_state(Problem(n_tasks=5, n_workers=4))
    rng = np.random.default_rng(0)
    task = policy.select_task(state, 0, np.arange(5), np.ones(5, dtype=bool), rng)
    assert task is not None
    policy.update(state, Observation(task, 0, 1))
    nxt = policy.select_task(state, 1, np.arange(5), np.ones(5, dtype=bool), rng)
    assert nxt != task  # least evidence first before task weights exist


def test_grouped_lp_matches_the_per_task_lp():
    """Tasks of a category are interchangeable: solving over groups gives the same duals."""
    rng = np.random.default_rng(0)
    q_cat = rng.choice([0.0, 0.04, 0.16, 0.36], size=(3, 12))  # 3 categories x 12 workers
    sizes = np.array([5, 3, 4])
    cat = np.repeat(np.arange(3), sizes)
    cap = rng.integers(2, 6, size=12)
    for cover in (0.3, 0.8, 5.0):  # the last is infeasible for some category
        x_task, u_task = solve_sampled_lp(q_cat[cat], cap, cover, 40.0)
        x_grp, u_grp = solve_sampled_lp(q_cat, cap, cover, 40.0, sizes=sizes)
        # the total slack (λ x uncovered units) is part of the unique optimum
        assert u_task.sum() == pytest.approx((u_grp * sizes).sum(), abs=1e-6)
        if cover < 1:  # feasible: the duals agree task by task
            np.testing.assert_allclose(x_grp[cat], x_task, rtol=1e-6, atol=1e-6)
            assert u_task.sum() == pytest.approx(0.0, abs=1e-9)
