"""Injection schedules: decisions, the GR epoch structure, and the spec parser's errors."""

import numpy as np
import pytest

from labelq.errors import PolicyError
from labelq.gold.schedules import (
    Epochs,
    FixedRate,
    NoGold,
    OnboardingDecay,
    PerCategory,
    WorkerHistory,
    schedule_from_spec,
    suspected,
)
from labelq.policies._recommend import epoch_end


def run(schedule, n, rng):
    """Kinds given to a worker who answers every task."""
    done = gold = 0
    kinds = []
    for _ in range(n):
        g = schedule.should_inject(WorkerHistory(done, gold), rng)
        kinds.append(g)
        done += 1
        gold += g
    return np.array(kinds)


def test_fixed_rate_extremes_and_frequency():
    rng = np.random.default_rng(0)
    assert not run(FixedRate(0.0), 200, rng).any()
    assert run(FixedRate(1.0), 200, rng).all()
    share = run(FixedRate(0.1), 20000, rng).mean()
    assert abs(share - 0.1) < 0.01
    assert not run(NoGold(), 100, rng).any()


def test_onboarding_block_then_decay_to_floor():
    s = OnboardingDecay(n=5, rate=0.4, half_life=100, floor=0.05)
    kinds = run(s, 5, np.random.default_rng(1))
    assert kinds.all()
    assert s.rate_at(5) == pytest.approx(0.4)
    assert s.rate_at(105) == pytest.approx(0.2)
    assert s.rate_at(10_000) == pytest.approx(0.05)
    late = run(s, 3000, np.random.default_rng(2))[1000:]
    assert abs(late.mean() - 0.05) < 0.02


def test_epochs_one_gold_at_each_epoch_start():
    s = Epochs(alpha=0.1, gamma=2)
    kinds = run(s, 1000, np.random.default_rng(0))
    gold_at = np.flatnonzero(kinds)
    # epoch r starts at r - 1 + τ(r - 1): r - 1 earlier golds and τ(r - 1) non-gold tasks
    r = np.arange(1, gold_at.size + 1)
    assert np.array_equal(gold_at, r - 1 + epoch_end(r - 1, 0.1, 2))
    assert gold_at.size == pytest.approx(np.sqrt(1000 / 0.1), rel=0.1)


def test_per_category_owes_s_of_each_category():
    s = PerCategory(s=2)
    h = WorkerHistory(n_done=3, n_gold_done=3, gold_by_category=(2, 1, 0))
    assert s.should_inject(h, np.random.default_rng(0))
    assert s.gold_categories(h).tolist() == [False, True, True]
    full = WorkerHistory(n_done=9, n_gold_done=6, gold_by_category=(2, 2, 2))
    assert s.next_kind(full, np.random.default_rng(0)) == "task"
    with pytest.raises(ValueError, match="gold_by_category"):
        s.should_inject(WorkerHistory(), np.random.default_rng(0))


def test_history_validation():
    with pytest.raises(ValueError, match="cannot exceed"):
        WorkerHistory(n_done=1, n_gold_done=2)
    with pytest.raises(ValueError, match="gold_correct .3. cannot exceed gold_answered .2."):
        WorkerHistory(gold_answered=2, gold_correct=3)
    with pytest.raises(ValueError, match="n_done must be an integer >= 0, got -1"):
        WorkerHistory(n_done=-1)


@pytest.mark.parametrize("text, expected", [
    ("fixed:rate=0.25", FixedRate(0.25)),
    ("none", NoGold()),
    ("onboarding:n=3,rate=0.5", OnboardingDecay(n=3, rate=0.5)),
    ("onboarding:n=3,rate=0.1,floor=0.05,suspect=0.5,suspect_below=0.6",
     OnboardingDecay(n=3, rate=0.1, floor=0.05, suspect=0.5, suspect_below=0.6)),
    ("epochs:alpha=0.2,gamma=2", Epochs(0.2, 2)),
    (" per-category : s=4 ", PerCategory(4)),
])
def test_spec_parses(text, expected):
    assert schedule_from_spec(text) == expected


@pytest.mark.parametrize("text, message", [
    ("weekly:rate=1", "unknown gold schedule 'weekly'"),
    ("fixed:ratio=0.1", "gold schedule 'fixed' has no parameter 'ratio'; it takes: rate, "
                        "suspect, suspect_below"),
    ("fixed:suspect=2", "suspect must be in [0, 1], got 2"),
    ("onboarding:suspect=0.5,suspect_below=0", "suspect_below must be in (0, 1], got 0"),
    ("fixed:rate=1.5", "rate must be in [0, 1], got 1.5"),
    ("fixed:rate", "expected key=value, got 'rate'"),
    ("epochs:gamma=0.5", "gamma must be in [1, 20], got 0.5"),
    ("onboarding:rate=0.1,floor=0.2", "floor (0.2) must not exceed rate (0.1)"),
    ("per-category:s=1.5", "s must be an integer >= 0, got 1.5"),
])
def test_spec_errors_are_precise(text, message):
    with pytest.raises(PolicyError) as info:
        schedule_from_spec(text)
    assert message in str(info.value)


def test_suspicion_is_the_posterior_mean_of_the_gold_record_below_the_bar():
    # (c + 1) / (n + 2) under a uniform prior; no record is not suspect
    assert not suspected(WorkerHistory(), 0.7)
    assert suspected(WorkerHistory(gold_answered=1, gold_correct=0), 0.7)  # 1/3
    assert suspected(WorkerHistory(gold_answered=4, gold_correct=3), 0.7)  # 4/6
    assert not suspected(WorkerHistory(gold_answered=3, gold_correct=3), 0.7)  # 4/5
    assert not suspected(WorkerHistory(gold_answered=8, gold_correct=5), 0.6)  # 0.6


@pytest.mark.parametrize("schedule", [
    FixedRate(0.05, suspect=0.5, suspect_below=0.6),
    OnboardingDecay(n=2, rate=0.1, half_life=50, floor=0.05, suspect=0.5, suspect_below=0.6),
])
def test_a_suspect_worker_gets_gold_at_the_suspect_rate_until_the_record_clears(schedule):
    # Given the same worker history, once with a clean gold record and once suspect
    rng = np.random.default_rng(0)
    clean = WorkerHistory(n_done=200, n_gold_done=10, gold_answered=10, gold_correct=9)
    suspect = WorkerHistory(n_done=200, n_gold_done=10, gold_answered=10, gold_correct=5)
    # Then the suspect one gets gold about half the time, the other at the usual rate
    assert np.mean([schedule.should_inject(suspect, rng) for _ in range(4000)]) \
        == pytest.approx(0.5, abs=0.03)
    assert np.mean([schedule.should_inject(clean, rng) for _ in range(4000)]) < 0.1


def test_suspicion_off_draws_the_same_decisions_as_before():
    # suspect=0 (the default) must not change a schedule's decisions or its use of rng
    for base, off in [(FixedRate(0.2), FixedRate(0.2, suspect=0.0)),
                      (OnboardingDecay(), OnboardingDecay(suspect=0.0, suspect_below=0.9))]:
        bad = WorkerHistory(n_done=50, n_gold_done=5, gold_answered=5, gold_correct=0)
        a, b = np.random.default_rng(3), np.random.default_rng(3)
        assert [base.should_inject(WorkerHistory(50, 5), a) for _ in range(300)] == \
            [off.should_inject(bad, b) for _ in range(300)]


def test_agreement_makes_a_suspect_too_and_is_validated():
    # Given a clean gold record (or none), once with a poor agreement record (issue 41)
    schedule = FixedRate(0.05, suspect=0.9, suspect_below=0.6)
    rng = np.random.default_rng(0)
    poor = WorkerHistory(n_done=60, n_gold_done=2, gold_answered=2, gold_correct=2,
                         agree_answered=40.0, agree_correct=14.5)
    fine = WorkerHistory(n_done=60, n_gold_done=2, gold_answered=2, gold_correct=2,
                         agree_answered=40.0, agree_correct=33.0)
    unchecked = WorkerHistory(n_done=60, agree_answered=0.0, agree_correct=0.0)
    # Then the poor agreement alone raises the gold rate to the suspect rate
    assert suspected(poor, 0.6) and not suspected(fine, 0.6) and not suspected(unchecked, 0.6)
    assert np.mean([schedule.should_inject(poor, rng) for _ in range(4000)]) \
        == pytest.approx(0.9, abs=0.02)
    assert np.mean([schedule.should_inject(fine, rng) for _ in range(4000)]) < 0.08
    # and a record that cannot be is refused with the field named
    with pytest.raises(ValueError, match="agree_correct .* cannot exceed agree_answered"):
        WorkerHistory(agree_answered=2.0, agree_correct=3.0)
    with pytest.raises(ValueError, match="agree_answered must be a finite number >= 0"):
        WorkerHistory(agree_answered=float("nan"))
