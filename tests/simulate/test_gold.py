"""Gold questions in simulations (``labelq simulate --gold``): served as live projects serve
them, charged like labels, judged by the quality rule, left out of the accuracy."""

from dataclasses import replace

import numpy as np
import pytest
from click.testing import CliRunner

from cli.main import cli
from labelq.datasets import load_dataset
from labelq.errors import InputError
from labelq.gold.quality import QualityRule
from labelq.gold.schedules import schedule_from_spec
from labelq.record.withheld import withheld
from labelq.simulate import experiment
from labelq.simulate.experiment import EnvSource, run_experiment
from labelq.simulate.gold import GoldRules, parse_gold_amount, with_gold
from labelq.simulate.replay import replay_environment
from labelq.simulate.runner import run_policy
from labelq.simulate.synthetic import make_synthetic
from labelq.simulate.workers import WorkerPool, accuracy_tensor

from ._policies import RandomPull, RandomPush

SPEC = "tasks=60,workers=8,model=one-coin,p=0.8"


def _logged(policy):
    log = []
    orig_update = policy.update
    policy.update = lambda s, o: (log.append(o), orig_update(s, o))[1]
    return policy, log


def _gold_env(spec=SPEC, amount=0.2, seed=0):
    rng = np.random.default_rng(seed)
    return with_gold(make_synthetic(spec, rng), amount, rng)


def rules(schedule="fixed:rate=0.3", quality=None):
    return GoldRules(schedule_from_spec(schedule), quality)


def test_parse_gold_amount():
    assert parse_gold_amount("0.05") == 0.05 and parse_gold_amount("12") == 12
    assert parse_gold_amount("1") == 1 and isinstance(parse_gold_amount("1"), int)
    for bad in ("0", "1.5", "-3", "0.0", "1.0", "x", "nan"):
        with pytest.raises(InputError, match="--gold"):
            parse_gold_amount(bad)


def test_the_gold_sample_is_seeded_and_the_same_for_every_policy_of_a_run(monkeypatch):
    real = experiment.run_policy
    golds: dict = {}

    def capture(policy, env, budgets, rng, **kw):
        assert kw["gold"] is not None
        golds.setdefault(policy.name, []).append(np.flatnonzero(env.is_gold))
        return real(policy, env, budgets, rng, **kw)

    monkeypatch.setattr(experiment, "run_policy", capture)
    source = EnvSource("synthetic", "tasks=50,workers=6,model=one-coin,p=0.8")
    run_experiment(source, ["uniform", "optkg"], [1, 2], runs=3, seed=4, gold="0.1")
    first = golds
    assert set(first) == {"uniform", "optkg"}
    for a, b in zip(first["uniform"], first["optkg"], strict=True):
        assert a.size == 5 and np.array_equal(a, b)  # round(0.1 x 50), the same gold
    assert not np.array_equal(first["uniform"][0], first["uniform"][1])  # new in each run
    golds = {}
    run_experiment(source, ["uniform"], [1, 2], runs=3, seed=4, gold=0.1)
    assert all(np.array_equal(a, b) for a, b in zip(golds["uniform"], first["uniform"], strict=True))


def test_gold_is_drawn_among_tasks_with_a_truth_only():
    env = make_synthetic(SPEC, np.random.default_rng(1))
    env = replace(env, truth=np.where(np.arange(60) % 2 == 0, env.truth, -1))
    g = with_gold(env, 10, np.random.default_rng(2)).is_gold
    assert g.sum() == 10 and (env.truth[g] >= 0).all()


@pytest.mark.parametrize("policy_cls", [RandomPull, RandomPush])
def test_gold_answers_cost_budget_and_reach_update_with_their_truth(policy_cls):
    env = _gold_env("tasks=60,workers=8,model=one-coin,p=0.8,cost=0.5:2")
    policy, log = _logged(policy_cls())
    cps = run_policy(policy, env, [50, 150], np.random.default_rng(3), gold=rules(),
                     max_labels_per_task=2)
    w = np.array([o.worker for o in log])
    gold = [o for o in log if o.gold]
    assert gold and all(env.is_gold[o.task] and o.truth == env.truth[o.task] for o in gold)
    assert all(not env.is_gold[o.task] and o.truth == -1 for o in log if not o.gold)
    assert cps[-1].spent == pytest.approx(env.worker_cost[w].sum())  # gold paid like a label
    assert cps[-1].spent <= 150 + 1e-9 and cps[-1].labels == len(log)
    assert cps[-1].gold_labels == len(gold)
    assert 0.15 < len(gold) / len(log) < 0.45  # fixed:rate=0.3
    pairs = [(o.task, o.worker) for o in log]
    assert len(set(pairs)) == len(pairs)  # each gold question once per worker


def test_accuracy_and_aggregation_leave_gold_out_and_aggregators_get_the_gold():
    env = _gold_env(amount=0.25)

    class WrongOnGold(RandomPull):
        def predict_proba(self, state):
            p = np.eye(2)[env.truth].astype(float)
            p[env.is_gold] = np.eye(2)[1 - env.truth[env.is_gold]]
            return p

    got = []

    def agg(task, worker, label, n_tasks, n_classes, gold=None):
        got.append(gold)
        return WrongOnGold().predict_proba(None)

    cps = run_policy(WrongOnGold(), env, [60, 120], np.random.default_rng(0), aggregate=agg,
                     gold=rules())
    assert [cp.accuracy for cp in cps] == [1.0, 1.0]
    assert [cp.accuracy_aggregate for cp in cps] == [1.0, 1.0]
    assert len(got) == 2
    for g in got:
        assert np.array_equal(g, np.where(env.is_gold, env.truth, -1))


def test_without_a_schedule_gold_is_held_out_but_never_served():
    env = _gold_env()
    policy, log = _logged(RandomPull())
    run_policy(policy, env, [200], np.random.default_rng(0), gold=GoldRules(None))
    assert len(log) == 200 and not any(o.gold or env.is_gold[o.task] for o in log)


def test_the_schedule_is_the_projects_one_onboarding_gives_each_worker_gold_first():
    env = _gold_env("tasks=80,workers=6,model=one-coin,p=0.8", amount=10)
    policy, log = _logged(RandomPull())
    run_policy(policy, env, [300], np.random.default_rng(0),
               gold=rules("onboarding:n=3,rate=0,floor=0"))
    for j in range(6):
        mine = [o.gold for o in log if o.worker == j]
        assert mine[:3] == [True] * 3 and not any(mine[3:])


def test_a_paused_worker_gets_nothing_more():
    env = _gold_env("tasks=80,workers=5,model=one-coin,p=1", amount=20)
    acc = np.ones((5, 1))
    acc[0] = 0.0  # worker 0 is always wrong
    env = replace(env, pool=WorkerPool(accuracy_tensor(acc, 2)))
    rule = QualityRule(threshold=0.7, min_gold=3)
    policy, log = _logged(RandomPull())
    cps = run_policy(policy, env, [100, 300], np.random.default_rng(0),
                     gold=rules("fixed:rate=0.5", rule))
    mine = [o for o in log if o.worker == 0]
    # paused at its third gold answer (3 of 3 wrong: P(a < 0.7) = 0.99), nothing after it
    assert sum(o.gold for o in mine) == 3 and mine[-1].gold
    assert cps[-1].paused == 1
    assert len(mine) < len(log) / 10
    good = [o for o in log if o.worker != 0 and o.gold]
    assert good and all(o.label == o.truth for o in good)


def test_with_suggestions_shown_only_the_gold_answered_without_one_scores():
    """Issue 42, as live: with the page showing a model's suggestions, a quarter of the
    (worker, task) pairs show none (labelq.record.withheld); the gold answered with one
    shown is marked and scores no one, so the quality rule pauses on the rest only."""
    env = _gold_env("tasks=80,workers=5,model=one-coin,p=1", amount=20)
    acc = np.ones((5, 1))
    acc[0] = 0.0  # worker 0 is always wrong
    env = replace(env, pool=WorkerPool(accuracy_tensor(acc, 2)),
                  predictions={"m": np.full((80, 2), 0.5)}, show_suggestions=True)
    rule = QualityRule(threshold=0.7, min_gold=3)
    policy, log = _logged(RandomPull())
    run_policy(policy, env, [100, 300], np.random.default_rng(0),
               gold=rules("fixed:rate=0.5", rule))
    mine = [o for o in log if o.worker == 0]
    # each label is marked but on the withheld pairs
    assert [o.suggested for o in log] == [not withheld(o.worker, o.task) for o in log]
    # worker 0 is paused at its third gold answer given without a suggestion shown, after
    # more gold answers than that (those with one shown did not count)
    alone = [o for o in mine if o.gold and not o.suggested]
    assert len(alone) == 3 and mine[-1].gold and not mine[-1].suggested
    assert sum(o.gold for o in mine) > 3


@pytest.mark.parametrize("policy_cls", [RandomPull, RandomPush])
def test_a_replay_serves_gold_only_from_recorded_labels(policy_cls, shared_datasets):
    data = load_dataset(shared_datasets / "bluebirds")
    recorded = {(int(t), int(w)): int(l) for t, w, l in zip(data.task, data.worker, data.label, strict=True)}
    env = with_gold(replay_environment(data), 0.2, np.random.default_rng(0))
    policy, log = _logged(policy_cls())
    run_policy(policy, env, [data.n_labels], np.random.default_rng(1),
               gold=rules("fixed:rate=0.5"))
    gold = [o for o in log if o.gold]
    assert len(gold) > 100
    pairs = [(o.task, o.worker) for o in log]
    assert len(set(pairs)) == len(pairs)  # each recorded label at most once
    assert all(recorded[(o.task, o.worker)] == o.label for o in log)


def test_cli_gold_errors_name_the_option():
    base = ["simulate", "--synthetic", SPEC, "--policy", "uniform", "--runs", "1"]
    for args, option in ((["--gold", "0"], "--gold"), (["--gold", "1.5"], "--gold"),
                         (["--gold", "0.1", "--gold-schedule", "fixed:rate=2"],
                          "--gold-schedule"),
                         (["--gold", "0.1", "--gold-schedule", "weekly"], "--gold-schedule"),
                         (["--gold", "0.1", "--quality", "threshold=3"], "--quality"),
                         (["--gold-schedule", "fixed:rate=0.1"], "--gold-schedule"),
                         (["--gold", "60"], "--gold 60")):
        result = CliRunner().invoke(cli, [*base, *args])
        assert result.exit_code == 3, (args, result.output)
        assert f"Error: {option}" in result.output, (args, result.output)


def test_cli_gold_run_reports_the_gold_answers():
    result = CliRunner().invoke(cli, [
        "simulate", "--synthetic", SPEC, "--policy", "uniform", "--budget-per-task", "2",
        "--runs", "2", "--gold", "6", "--quality", "threshold=0.6,min_gold=4", "--json"])
    assert result.exit_code == 0, result.output
    import json
    [pt] = json.loads(result.stdout)["policies"][0]["points"]
    assert 0 < pt["gold_labels_mean"] < pt["spent_mean"] and "paused_mean" in pt
    assert "gold 6 served by fixed:rate=0.1" in result.stderr
