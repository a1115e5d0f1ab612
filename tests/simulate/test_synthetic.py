import numpy as np
import pytest

from labelq.errors import InputError
from labelq.simulate.synthetic import SyntheticSpec, make_synthetic


def test_parse_full_spec():
    s = SyntheticSpec.parse("tasks=500,categories=4,workers=40,model=spammer-hammer,classes=2")
    assert (s.tasks, s.categories, s.workers, s.model, s.classes) == (500, 4, 40,
                                                                      "spammer-hammer", 2)
    assert SyntheticSpec.parse(str(s)) == s


def test_parse_model_params_and_pairs():
    s = SyntheticSpec.parse("model=one-coin,beta=4:1,theta=uniform,cost=1:3,capacity=7")
    assert s.model_params == {"beta": (4.0, 1.0)}
    assert s.cost == (1.0, 3.0) and s.capacity == 7 and s.theta == "uniform"


@pytest.mark.parametrize("text, message", [
    ("tasks=0", "tasks must be an integer >= 1, got '0'"),
    ("classes=1", "classes must be an integer >= 2"),
    ("workers=abc", "workers must be an integer >= 1, got 'abc'"),
    ("foo=1", "unknown key 'foo'"),
    ("model=one-coin,hammer=0.9", "model one-coin takes: good, other, p, beta"),
    ("model=robots", "unknown model 'robots'"),
    ("tasks", "expected key=value, got 'tasks'"),
    ("tasks=5,tasks=6", "tasks given twice"),
    ("theta=beta", "theta must be 'uniform' or 'none'"),
    ("cost=0", "cost must be > 0"),
    ("cost=3:1", "cost must be > 0"),
    ("capacity=0", "capacity must be a positive integer or -1"),
    ("gold=1.5", "gold must be a share in [0, 1)"),
    ("p=x", "p must be a number or a pair a:b, got 'x'"),
])
def test_parse_errors_are_precise(text, message):
    with pytest.raises(InputError) as info:
        SyntheticSpec.parse(text)
    assert str(info.value).startswith("synthetic spec: ")
    assert message in str(info.value)


def test_make_synthetic_shapes_and_categories():
    env = make_synthetic("tasks=300,categories=3,workers=12,model=spammer-hammer,classes=3,"
                         "cost=1:2,gold=0.1", np.random.default_rng(1))
    assert env.n_tasks == 300 and env.n_workers == 12 and env.n_classes == 3
    assert set(np.unique(env.task_category)) == {0, 1, 2}
    assert env.truth.min() >= 0 and env.truth.max() == 2
    assert np.all((env.worker_cost >= 1) & (env.worker_cost <= 2))
    assert env.is_gold.sum() == 30
    assert env.available.all()


def test_theta_setting_matches_the_papers_label_model():
    """With θ and a one-coin worker of accuracy ρ, P(+1) = θρ + (1-θ)(1-ρ)."""
    env = make_synthetic("tasks=2,workers=1,model=one-coin,p=0.8,theta=uniform",
                         np.random.default_rng(3))
    rng = np.random.default_rng(4)
    for task in range(2):
        theta = env.theta[task, 1]
        assert env.truth[task] == int(theta >= 0.5)
        freq = np.mean([env.answer(task, 0, rng) for _ in range(20000)])
        expected = theta * 0.8 + (1 - theta) * 0.2
        assert abs(freq - expected) < 0.015, (theta, freq, expected)


def test_same_seed_same_environment():
    a = make_synthetic("tasks=40,model=uniform-accuracy,theta=uniform", np.random.default_rng(7))
    b = make_synthetic("tasks=40,model=uniform-accuracy,theta=uniform", np.random.default_rng(7))
    assert np.array_equal(a.theta, b.theta) and np.array_equal(a.pool.conf, b.pool.conf)
