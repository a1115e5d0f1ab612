"""B-KUBE, its baselines and the bounded-knapsack greedy (Rangi & Franceschetti 2018)."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest

from labelq.errors import PolicyError
from labelq.policies import Observation, Problem, build
from labelq.policies._knapsack import density_greedy, density_order
from labelq.policies.bkube import BKube, completed_tasks

SPECS = ["bkube", "bounded-eps-first:eps=0.2", "eps-first:eps=0.2", "trailsourcing"]


# --- knapsack -------------------------------------------------------------------------------
def test_greedy_takes_units_in_density_order_and_floors():
    # densities: 0.5, 1.0, 0.25 -> order 1, 0, 2
    m = density_greedy(np.array([1.0, 1.0, 0.5]), np.array([2.0, 1.0, 2.0]),
                       np.array([3, 2, 5]), budget=7.5)
    # worker 1: min(2, 7) = 2 (cost 2); worker 0: min(3, floor(5.5/2)=2) = 2 (cost 4);
    # worker 2: floor(1.5/2) = 0
    assert m.tolist() == [2.0, 2.0, 0.0]


def test_greedy_skips_an_item_that_does_not_fit_and_goes_on_to_cheaper_ones():
    m = density_greedy(np.array([3.0, 0.1]), np.array([3.0, 1.0]), np.array([1, 5]),
                       budget=2.0)
    assert m.tolist() == [0.0, 2.0]


def test_density_ties_go_to_the_lower_index():
    assert density_order(np.array([1.0, 2.0, 1.0]), np.array([1.0, 2.0, 1.0])).tolist() \
        == [0, 1, 2]
    m = density_greedy(np.ones(3), np.ones(3), np.full(3, 2), budget=3)
    assert m.tolist() == [2.0, 1.0, 0.0]


def test_greedy_infinite_budget():
    assert density_greedy(np.ones(2), np.ones(2), np.array([2, 3]), math.inf).tolist() \
        == [2.0, 3.0]
    m = density_greedy(np.array([1.0, 2.0]), np.ones(2), np.array([np.inf, np.inf]), math.inf)
    assert np.isinf(m[1]) and m[0] == 0


def _brute_force(values, costs, units, budget):
    best = 0.0
    for x in itertools.product(*[range(int(u) + 1) for u in units]):
        x = np.array(x)
        if x @ costs <= budget + 1e-9:
            best = max(best, float(x @ values))
    return best


@pytest.mark.parametrize("seed", range(25))
def test_greedy_is_within_one_item_of_the_integer_optimum(seed):
    """Lemma 4.1 / eq. (6): v' <= v*_BKP <= v' + v_s <= v' + max v."""
    rng = np.random.default_rng(seed)
    values, costs = rng.uniform(0, 1, 4), rng.uniform(0.2, 1.5, 4)
    units, budget = rng.integers(0, 4, 4), rng.uniform(0.5, 6)
    m = density_greedy(values, costs, units, budget)
    assert m @ costs <= budget + 1e-9 and np.all(m <= units)
    opt = _brute_force(values, costs, units, budget)
    assert m @ values <= opt + 1e-9
    assert opt <= m @ values + values.max() + 1e-9


# --- helpers ---------------------------------------------------------------------------------
def _problem(n_tasks=8, n_workers=4, budget=20.0, capacity=5, cost=None):
    cost = np.linspace(0.5, 1.4, n_workers) if cost is None else np.asarray(cost, float)
    return Problem(n_tasks=n_tasks, n_workers=n_workers, worker_cost=cost,
                   worker_capacity=np.full(n_workers, capacity), budget=budget)


def _run(spec, problem, p, truth, seed=0, repeat=True, steps=10_000):
    """Drive a policy like the simulator: mask = capacity and budget (and no repeats)."""
    policy = build(spec)
    state = policy.init_state(problem)
    rng = np.random.default_rng(seed)
    used = np.zeros(problem.n_workers, int)
    asked = np.zeros((problem.n_tasks, problem.n_workers), bool)
    spent, picks = 0.0, []
    for _ in range(steps):
        ok = (used < problem.worker_capacity) & (problem.worker_cost <= problem.budget - spent)
        mask = np.broadcast_to(ok, asked.shape) & (True if repeat else ~asked)
        pair = policy.select_pair(state, mask, rng)
        if pair is None:
            break
        t, w = pair
        assert mask[t, w], f"{spec} picked ineligible {pair}"
        label = truth[t] if rng.random() < p[w] else 1 - truth[t]
        used[w] += 1
        asked[t, w] = True
        spent += problem.worker_cost[w]
        picks.append((t, w))
        policy.update(state, Observation(t, w, int(label)))
    return policy, state, picks, spent


# --- budget, capacity, mask --------------------------------------------------------------
@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("repeat", [True, False])
def test_never_exceeds_budget_or_capacity(spec, repeat):
    rng = np.random.default_rng(3)
    problem = _problem(n_tasks=12, n_workers=6, budget=17.3, capacity=4,
                       cost=rng.uniform(0.3, 2.0, 6))
    _, state, picks, spent = _run(spec, problem, rng.uniform(0.5, 1, 6),
                                  rng.integers(0, 2, 12), repeat=repeat)
    assert spent <= problem.budget + 1e-9
    assert abs(state.spent - spent) < 1e-9
    assert np.all(state.pulls <= problem.worker_capacity)
    assert len(picks) > 0


@pytest.mark.parametrize("spec", SPECS)
def test_policy_spends_within_budget_even_when_the_caller_does_not_check(spec):
    problem = _problem(budget=6.0)
    policy = build(spec)
    state = policy.init_state(problem)
    rng = np.random.default_rng(0)
    mask = np.ones((problem.n_tasks, problem.n_workers), bool)  # caller checks nothing
    for _ in range(100):
        pair = policy.select_pair(state, mask, rng)
        if pair is None:
            break
        policy.update(state, Observation(pair[0], pair[1], 0))
    assert state.spent <= 6.0 + 1e-9
    assert np.all(state.pulls <= 5)


@pytest.mark.parametrize("spec", SPECS)
def test_respects_mask_and_returns_none_when_nothing_eligible(spec):
    problem = _problem()
    policy = build(spec)
    state = policy.init_state(problem)
    rng = np.random.default_rng(1)
    assert policy.select_pair(state, np.zeros((8, 4), bool), rng) is None
    mask = np.zeros((8, 4), bool)
    mask[5, 2] = True
    assert policy.select_pair(state, mask, rng) == (5, 2)


@pytest.mark.parametrize("spec", SPECS)
def test_budget_aware_and_push(spec):
    policy = build(spec)
    assert policy.budget_aware is True and policy.mode == "push"


@pytest.mark.parametrize("spec", SPECS)
def test_state_round_trips_through_json(spec):
    rng = np.random.default_rng(2)
    problem = _problem()
    policy, state, _, _ = _run(spec, problem, rng.uniform(0.5, 1, 4), rng.integers(0, 2, 8))
    data = json.loads(json.dumps(policy.state_to_dict(state)))
    back = policy.state_from_dict(data)
    assert policy.state_to_dict(back) == data
    mask = np.ones((8, 4), bool)
    a = policy.select_pair(state, mask, np.random.default_rng(9))
    b = policy.select_pair(back, mask, np.random.default_rng(9))
    assert a == b


def test_state_round_trip_with_infinite_budget_and_capacity():
    policy = build("bkube")
    state = policy.init_state(Problem(n_tasks=3, n_workers=2))
    data = json.loads(json.dumps(policy.state_to_dict(state), allow_nan=False))
    assert data["budget"] is None
    assert policy.select_pair(policy.state_from_dict(data), np.ones((3, 2), bool),
                              np.random.default_rng(0)) == (0, 0)


# --- B-KUBE ------------------------------------------------------------------------------
def test_bkube_first_k_iterations_take_each_worker_once():
    rng = np.random.default_rng(4)
    problem = _problem(n_tasks=30, n_workers=6, budget=40.0, capacity=10)
    _, _, picks, _ = _run("bkube", problem, rng.uniform(0.5, 1, 6), rng.integers(0, 2, 30))
    assert [w for _, w in picks[:6]] == list(range(6))


def test_bkube_draws_workers_in_proportion_to_the_knapsack():
    policy = build("bkube")
    problem = _problem(n_tasks=5, n_workers=3, budget=30.0, capacity=10,
                       cost=[1.0, 0.5, 2.0])
    state = policy.init_state(problem)
    for w, label in [(0, 0), (1, 0), (2, 1)]:  # initialisation, all on task 0
        policy.update(state, Observation(0, w, label))
    eligible = np.ones(3, bool)
    m_star = policy.knapsack(state, eligible)
    # by hand: n = 4, one label each; task 0 votes 2-1 for class 0 -> p = (1, 1, 0)
    w_hat = np.array([1.0, 1.0, -1.0]) + np.sqrt(2 * np.log(4))
    expected = density_greedy(w_hat, problem.worker_cost, np.full(3, 9.0),
                              30.0 - state.spent)
    np.testing.assert_array_equal(m_star, expected)
    mask = np.ones((5, 3), bool)
    draws = np.array([policy.select_pair(state, mask, np.random.default_rng(s))[1]
                      for s in range(3000)])
    freq = np.bincount(draws, minlength=3) / draws.size
    np.testing.assert_allclose(freq, m_star / m_star.sum(), atol=0.03)


def test_bkube_prefers_an_efficient_worker_after_learning():
    """Same cost; worker 0 always right, worker 1 a spammer: B-KUBE asks 0 more."""
    rng = np.random.default_rng(5)
    problem = _problem(n_tasks=200, n_workers=2, budget=400.0, capacity=400, cost=[1, 1])
    _, state, _, _ = _run("bkube", problem, np.array([1.0, 0.5]), rng.integers(0, 2, 200))
    assert state.pulls[0] > 1.5 * state.pulls[1]
    v = build("bkube").value_estimates(state)
    assert v[0] > v[1]


def test_value_estimate_scores_each_label_once_against_the_majority_right_after_it():
    """Paper §5 (default ``agreement=at-label``): never re-scored."""
    policy = build("bkube")
    state = policy.init_state(_problem(n_tasks=2, n_workers=3))
    policy.update(state, Observation(0, 0, 1))
    assert state.agree[0] == 1.0  # alone: agrees with the majority right after it
    policy.update(state, Observation(0, 1, 0))
    np.testing.assert_allclose(state.agree[:2], [1.0, 0.5])  # 1-1 tie: half credit
    policy.update(state, Observation(0, 2, 0))
    np.testing.assert_allclose(state.agree, [1.0, 0.5, 1.0])  # worker 0 keeps its credit
    policy.update(state, Observation(1, 2, 1))
    policy.update(state, Observation(1, 1, 1))
    policy.update(state, Observation(1, 0, 0))  # 2-1 against: no credit
    np.testing.assert_allclose(state.agree, [1.0, 1.5, 2.0])
    np.testing.assert_allclose(policy.value_estimates(state), [0.0, 0.5, 1.0])


def test_value_estimate_is_agreement_with_the_current_majority():
    policy = build("bkube:agreement=current")
    state = policy.init_state(_problem(n_tasks=2, n_workers=3))
    policy.update(state, Observation(0, 0, 1))
    assert state.agree[0] == 1.0  # alone: agrees with itself
    policy.update(state, Observation(0, 1, 0))
    np.testing.assert_allclose(state.agree[:2], [0.5, 0.5])  # tied: half credit each
    policy.update(state, Observation(0, 2, 0))
    np.testing.assert_allclose(state.agree, [0.0, 1.0, 1.0])  # worker 0 now disagrees
    np.testing.assert_allclose(policy.value_estimates(state), [-1.0, 1.0, 1.0])


def test_moving_on_rule():
    policy = build("bkube:c_stop=1.5,max_labels=6")
    state = policy.init_state(_problem(n_tasks=3, n_workers=8, capacity=10))
    for w in range(2):
        policy.update(state, Observation(0, w, 1))
    assert not state.done[0]  # 2-0: gap 2 < 1.5*sqrt(2)
    policy.update(state, Observation(0, 2, 1))
    assert state.done[0]  # 3-0: gap 3 >= 1.5*sqrt(3)
    for w, lab in enumerate([1, 0, 1]):
        policy.update(state, Observation(1, w, lab))
    assert not state.done[1]  # 2-1
    for w, lab in [(3, 1), (4, 0), (5, 0)]:
        policy.update(state, Observation(1, w, lab))
    assert state.done[1]  # 6 labels, 3-3: the cap
    assert completed_tasks(state) == 2


def test_bkube_stays_on_the_current_task_until_confident_then_moves_on():
    rng = np.random.default_rng(6)
    problem = _problem(n_tasks=10, n_workers=5, budget=25.0, capacity=20)
    policy, state, picks, _ = _run("bkube", problem, np.full(5, 0.9), rng.integers(0, 2, 10))
    tasks = [t for t, _ in picks]
    # tasks are worked one at a time, in index order: the sequence never goes back
    assert tasks == sorted(tasks)
    for t in set(tasks[:-1]) - {tasks[-1]}:
        assert state.done[t]  # every task left behind was completed
    assert completed_tasks(state) >= len(set(tasks)) - 1


def test_bkube_moves_on_when_no_eligible_worker_is_left_on_the_task():
    problem = _problem(n_tasks=3, n_workers=2, budget=10.0, capacity=10, cost=[1, 1])
    policy = build("bkube")
    state = policy.init_state(problem)
    policy.update(state, Observation(0, 0, 1))
    policy.update(state, Observation(0, 1, 0))
    mask = np.ones((3, 2), bool)
    mask[0] = False  # both workers already asked task 0 (no repeats)
    assert policy.select_pair(state, mask, np.random.default_rng(0))[0] == 1


def test_predict_proba_is_majority_vote():
    policy = build("bkube")
    state = policy.init_state(_problem(n_tasks=2, n_workers=3))
    for w, lab in enumerate([1, 1, 0]):
        policy.update(state, Observation(0, w, lab))
    proba = policy.predict_proba(state)
    np.testing.assert_allclose(proba[0], [1 / 3, 2 / 3], atol=1e-9)
    np.testing.assert_allclose(proba[1], [0.5, 0.5])


# --- baselines ---------------------------------------------------------------------------
def test_bounded_eps_first_explores_round_robin_within_eps_budget_then_plans_once():
    rng = np.random.default_rng(7)
    problem = _problem(n_tasks=40, n_workers=5, budget=40.0, capacity=30,
                       cost=[1.0, 1.0, 1.0, 1.0, 1.0])
    policy = build("bounded-eps-first:eps=0.25")
    state = policy.init_state(problem)
    mask = np.ones((40, 5), bool)
    p, truth = np.array([0.95, 0.9, 0.6, 0.55, 0.5]), rng.integers(0, 2, 40)
    seen = []
    while state.plan is None:
        t, w = policy.select_pair(state, mask, rng)
        seen.append(w)
        policy.update(state, Observation(t, w, int(truth[t] if rng.random() < p[w]
                                                   else 1 - truth[t])))
    assert seen == [0, 1, 2, 3, 4, 0, 1, 2, 3, 4]  # eps*B = 10 labels, round-robin
    assert state.spent == 10.0
    expected = density_greedy(policy.value_estimates(state), problem.worker_cost,
                              policy.units_left(state), 30.0)
    np.testing.assert_array_equal(state.plan, expected)
    plan0 = state.plan.copy()
    picks = []
    while (pair := policy.select_pair(state, mask, rng)) is not None:
        picks.append(pair[1])
        policy.update(state, Observation(pair[0], pair[1], 0))
    assert np.array_equal(np.bincount(picks, minlength=5), plan0)  # plan followed exactly


def test_eps_first_exploits_one_worker_and_stops_at_its_capacity():
    rng = np.random.default_rng(8)
    problem = _problem(n_tasks=40, n_workers=4, budget=100.0, capacity=8, cost=[1, 1, 1, 1])
    _, state, picks, spent = _run("eps-first:eps=0.1", problem,
                                  np.array([0.55, 1.0, 0.6, 0.5]), rng.integers(0, 2, 40))
    exploit = [w for _, w in picks[10:]]
    assert len(set(exploit)) == 1
    assert state.pulls[exploit[0]] == 8  # capacity reached, budget left over
    assert spent < 50


def test_trailsourcing_explores_each_worker_once():
    rng = np.random.default_rng(9)
    problem = _problem(n_tasks=20, n_workers=5, budget=30.0, capacity=10)
    _, state, picks, _ = _run("trailsourcing", problem, rng.uniform(0.5, 1, 5),
                              rng.integers(0, 2, 20))
    assert [w for _, w in picks[:5]] == list(range(5))
    assert state.plan is not None


@pytest.mark.parametrize("text, message", [
    ("bkube:c_stop=0", "c_stop must be a finite number > 0, got 0"),
    ("bkube:max_labels=0", "max_labels must be an integer >= 1, got 0"),
    ("bkube:bonus=-1", "bonus must be a finite number >= 0, got -1"),
    ("bkube:agreement=later", "agreement must be one of at-label, current, got 'later'"),
    ("bounded-eps-first:eps=1.2", "eps must be in (0, 1), got 1.2"),
    ("eps-first:eps=0", "eps must be in (0, 1), got 0"),
])
def test_params_are_validated_with_precise_messages(text, message):
    with pytest.raises(PolicyError, match=message.replace("(", r"\(").replace(")", r"\)")):
        build(text)


def test_determinism_for_a_seed():
    rng = np.random.default_rng(10)
    problem = _problem(n_tasks=15, n_workers=5, budget=25.0)
    p, truth = rng.uniform(0.5, 1, 5), rng.integers(0, 2, 15)
    assert _run("bkube", problem, p, truth, seed=3)[2] == _run("bkube", problem, p, truth,
                                                               seed=3)[2]
    assert isinstance(build("bkube"), BKube)


@pytest.mark.parametrize("spec", ["bounded-eps-first:eps=0.2,allocation=single-step",
                                  "eps-first:eps=0.2,allocation=single-step",
                                  "trailsourcing:allocation=single-step"])
def test_single_step_allocation_spreads_labels_evenly_without_moving_on(spec):
    """Paper §6 literal reading: labels spread over all tasks, a task performed once labelled."""
    rng = np.random.default_rng(12)
    problem = _problem(n_tasks=10, n_workers=5, budget=23.0, capacity=8,
                       cost=[1.0, 0.8, 1.2, 0.9, 1.1])
    policy, state, picks, spent = _run(spec, problem, rng.uniform(0.5, 1, 5),
                                       rng.integers(0, 2, 10))
    per_task = state.counts.sum(axis=1)
    assert per_task.max() - per_task.min() <= 1  # balanced over the tasks
    assert spent <= 23.0 + 1e-9
    np.testing.assert_array_equal(state.done, per_task >= 1)
    # the labels go round the tasks in order: the first ten picks cover all ten tasks
    assert sorted(t for t, _ in picks[:10]) == list(range(10))


def test_allocation_is_validated():
    with pytest.raises(PolicyError, match="allocation must be one of sequential, single-step"):
        build("bounded-eps-first:allocation=batch")
