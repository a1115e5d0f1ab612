import numpy as np
import pytest

from labelq.datasets import load_dataset
from labelq.errors import PolicyError
from labelq.policies import build
from labelq.simulate.replay import replay_environment
from labelq.simulate.runner import expected_accuracy, run_policy
from labelq.simulate.synthetic import make_synthetic

from ._policies import Cheater, FirstPair, RandomPull, RandomPush


def _env(spec="tasks=60,workers=8,model=one-coin,p=0.8", seed=0):
    return make_synthetic(spec, np.random.default_rng(seed))


def _logged(policy):
    """Wrap ``policy.update`` to keep every observation it receives."""
    log = []
    orig_update = policy.update
    policy.update = lambda s, o: (log.append(o), orig_update(s, o))[1]
    return policy, log


@pytest.mark.parametrize("policy_cls", [RandomPull, RandomPush])
def test_budget_capacity_and_cap_are_never_exceeded(policy_cls):
    env = _env("tasks=50,workers=10,model=one-coin,p=0.8,cost=0.5:2,capacity=30,gold=0.1")
    policy, log = _logged(policy_cls())
    cap = 3
    checkpoints = run_policy(policy, env, [40, 100, 400], np.random.default_rng(1),
                             max_labels_per_task=cap)
    t = np.array([o.task for o in log])
    w = np.array([o.worker for o in log])
    assert len(set(zip(t, w, strict=True))) == len(t), "a pair was asked twice"
    assert np.bincount(w, minlength=10).max() <= 30, "capacity exceeded"
    assert np.bincount(t, minlength=50)[~env.is_gold].max() <= cap, "label cap exceeded"
    assert env.worker_cost[w].sum() <= 400 + 1e-9
    assert [cp.budget for cp in checkpoints] == [40, 100, 400]
    for cp in checkpoints:
        assert cp.spent <= cp.budget + 1e-9
        assert cp.spent == pytest.approx(env.worker_cost[w[:cp.labels]].sum())
    assert all(a.labels <= b.labels for a, b in zip(checkpoints, checkpoints[1:], strict=False))


def test_gold_tasks_are_exempt_from_the_cap_and_carry_their_truth():
    env = _env("tasks=10,workers=12,model=one-coin,p=0.9,gold=0.3")
    policy, seen_obs = _logged(RandomPush())
    run_policy(policy, env, [1000], np.random.default_rng(0), max_labels_per_task=2)
    per_task = np.bincount([o.task for o in seen_obs], minlength=10)
    assert per_task[env.is_gold].min() == 12  # every worker on every gold task
    assert per_task[~env.is_gold].max() == 2
    for o in seen_obs:
        assert o.gold == bool(env.is_gold[o.task])
        assert o.truth == (env.truth[o.task] if o.gold else -1)


@pytest.mark.parametrize("policy_cls", [RandomPull, RandomPush])
def test_replay_asks_only_recorded_pairs_each_once(policy_cls, shared_datasets):
    data = load_dataset(shared_datasets / "bluebirds")
    env = replay_environment(data)
    recorded = {(int(t), int(w)): int(l) for t, w, l in zip(data.task, data.worker, data.label, strict=True)}
    policy, log = _logged(policy_cls())
    budgets = [data.n_tasks * 10, data.n_labels + 500]  # more than the data holds
    cps = run_policy(policy, env, budgets, np.random.default_rng(5))
    pairs = [(o.task, o.worker) for o in log]
    assert len(set(pairs)) == len(pairs) == data.n_labels  # all used, none twice
    assert all(recorded[(o.task, o.worker)] == o.label for o in log)
    assert cps[-1].labels == data.n_labels and cps[-1].spent == data.n_labels
    assert cps[-1].tasks_completed == data.n_tasks
    # with every label used, the majority vote is the data set's one
    assert cps[-1].accuracy == pytest.approx(0.759, abs=0.002)


def test_runs_are_deterministic_for_a_seed():
    env = _env("tasks=40,workers=6,model=one-coin,p=0.7,theta=uniform")
    a = run_policy(RandomPull(), env, [20, 80, 160], np.random.default_rng(42))
    b = run_policy(RandomPull(), env, [20, 80, 160], np.random.default_rng(42))
    c = run_policy(RandomPull(), env, [20, 80, 160], np.random.default_rng(43))
    assert [x.to_dict() for x in a] == [x.to_dict() for x in b]
    assert [x.to_dict() for x in a] != [x.to_dict() for x in c]


def test_unit_costs_checkpoint_after_exactly_b_labels_and_count_completed_tasks():
    env = _env("tasks=30,workers=5,model=one-coin,p=1")
    cps = run_policy(build("uniform"), env, [10, 30, 60], np.random.default_rng(0))
    assert [cp.labels for cp in cps] == [10, 30, 60]
    assert [cp.tasks_completed for cp in cps] == [10, 30, 30]
    assert cps[-1].accuracy == 1.0  # perfect workers, two labels per task agree


def test_policy_choosing_an_ineligible_pair_is_stopped():
    env = _env()
    with pytest.raises(PolicyError, match="not eligible"):
        run_policy(Cheater(), env, [10], np.random.default_rng(0))


def test_run_stops_when_nothing_is_eligible():
    env = _env("tasks=5,workers=2,model=one-coin,p=0.9")
    cps = run_policy(RandomPull(), env, [3, 100], np.random.default_rng(0))
    assert cps[0].labels == 3 and cps[1].labels == 10 and cps[1].spent == 10


def test_expected_accuracy_counts_ties_as_random_break():
    proba = np.array([[0.5, 0.5], [0.9, 0.1], [0.2, 0.8], [1 / 3, 1 / 3]])
    truth = np.array([1, 0, 0, -1])
    assert expected_accuracy(proba, truth) == pytest.approx((0.5 + 1 + 0) / 3)
    assert expected_accuracy(np.array([1, 0, 1]), np.array([1, 1, -1])) == 0.5


def test_tasks_completed_follows_the_policys_moving_on_rule():
    """B-KUBE keeps `state.done` (its moving-on rule); the simulator reports that, not the
    number of labelled tasks, while label-count policies report labelled tasks."""
    import numpy as np

    from labelq.policies import build
    from labelq.simulate.runner import completed

    class S:
        done = np.array([True, False, False])

    assert completed(S(), np.array([3, 1, 0])) == 1
    assert completed(object(), np.array([3, 1, 0])) == 2
    policy = build("bkube")
    from labelq.policies.base import Problem
    state = policy.init_state(Problem(n_tasks=5, n_workers=3, budget=10.0))
    assert completed(state, np.ones(5)) == 0


def test_task_mode_keeps_the_policys_task_and_draws_a_random_eligible_worker():
    """--mode task (Opt-KG paper, Section 7.2): the policy picks the task, the worker is
    drawn uniformly among those still eligible for it; the policy's own worker is ignored."""
    env = _env("tasks=40,workers=8,model=one-coin,p=0.8")
    runs = {}
    for mode in ("push", "task"):
        policy, log = _logged(FirstPair())
        run_policy(policy, env, [80], np.random.default_rng(3), max_labels_per_task=2,
                   mode=mode)
        runs[mode] = log
    push, task = runs["push"], runs["task"]
    # same task sequence: task 0 twice, task 1 twice, ... (the policy's choices)
    assert [o.task for o in task] == [o.task for o in push] == list(np.repeat(np.arange(40), 2))
    assert {o.worker for o in push} == {0, 1}  # push: always the lowest workers
    w = np.array([o.worker for o in task])
    assert len(set(zip((o.task for o in task), w, strict=True))) == 80  # no pair twice
    counts = np.bincount(w, minlength=8)
    assert counts.min() >= 3 and counts.max() <= 20, counts  # spread over all 8 (mean 10)
    # the first label of a task: uniform over the 8 workers, the second over the 7 others
    first = w[0::2]
    assert 0.3 <= np.mean(first < 4) <= 0.7


def test_task_mode_on_a_replay_asks_only_recorded_pairs(shared_datasets):
    data = load_dataset(shared_datasets / "rte")
    env = replay_environment(data)
    policy, log = _logged(build("uniform"))
    cps = run_policy(policy, env, [2 * data.n_tasks], np.random.default_rng(0), mode="task")
    recorded = {(int(t), int(w)): int(l) for t, w, l in zip(data.task, data.worker, data.label, strict=True)}
    assert cps[0].labels == 2 * data.n_tasks
    assert all(recorded[(o.task, o.worker)] == o.label for o in log)
    assert len({(o.task, o.worker) for o in log}) == len(log)
    assert np.bincount([o.task for o in log], minlength=data.n_tasks).max() == 2  # uniform
    assert len({o.worker for o in log}) > 100  # random workers, not the lowest index


def test_task_mode_still_stops_an_ineligible_choice():
    with pytest.raises(PolicyError, match="not eligible"):
        run_policy(Cheater(), _env(), [10], np.random.default_rng(0), mode="task")
    with pytest.raises(ValueError, match="mode must be one of"):
        run_policy(RandomPull(), _env(), [10], np.random.default_rng(0), mode="sideways")


def test_a_shuffled_replay_is_the_same_data_in_another_order(shared_datasets):
    """``Environment.shuffled`` relabels tasks and workers: every recorded label stays with
    its task's truth and category, and a policy that asks the lowest index first no longer
    gets the file's first worker."""
    data = load_dataset(shared_datasets / "athlete")
    env = replay_environment(data)
    rng = np.random.default_rng(11)
    mixed = env.shuffled(rng)
    assert mixed.recorded.shape == env.recorded.shape
    assert (mixed.recorded >= 0).sum() == (env.recorded >= 0).sum()
    # each task's (truth, category, sorted labels) survives, in another order
    def rows(e):
        return sorted((int(e.truth[i]), int(e.task_category[i]),
                       tuple(sorted(e.recorded[i][e.recorded[i] >= 0].tolist())))
                      for i in range(e.n_tasks))
    assert rows(mixed) == rows(env)
    assert not np.array_equal(mixed.truth, env.truth)
    # each worker's labels against the truth: the same multiset of accuracies
    def accs(e):
        r, t = e.recorded, e.truth[:, None]
        return sorted((((r == t) & (r >= 0)).sum(0) / np.maximum((r >= 0).sum(0), 1)).round(6))
    assert accs(mixed) == accs(env)
    # a synthetic environment is returned as it is (its workers are drawn at random)
    syn = make_synthetic("tasks=20,workers=4", np.random.default_rng(0))
    assert syn.shuffled(rng) is syn
