"""The schools-of-thought pool: a majority bloc answers one consistent wrong class on the
decoy tasks, so the majority vote of many labels is wrong there and right elsewhere."""

import numpy as np
import pytest

from labelq.aggregation import aggregate
from labelq.errors import InputError
from labelq.simulate.synthetic import SyntheticSpec, make_synthetic
from labelq.simulate.workers import SchoolsPool, make_pool

SPEC = "tasks=240,workers=53,classes=2,model=schools,bloc=0.6,decoys=0.3"


def _all_labels(env, seed=0):
    """Every worker's label on every task (a dense pool)."""
    t, w = np.divmod(np.arange(env.n_tasks * env.n_workers), env.n_workers)
    rng = np.random.default_rng(seed)
    return t, w, np.array([env.answer(int(i), int(j), rng) for i, j in zip(t, w, strict=True)])


def test_the_spec_parses_and_bad_parameters_name_the_model():
    spec = SyntheticSpec.parse(SPEC + ",p=0.85")
    assert spec.model == "schools"
    assert spec.model_params == {"bloc": 0.6, "decoys": 0.3, "p": 0.85}
    with pytest.raises(InputError, match="model schools: bloc must be"):
        make_synthetic("model=schools,bloc=1.5", np.random.default_rng(0))
    with pytest.raises(InputError, match="model schools takes: p, bloc, decoys"):
        SyntheticSpec.parse("model=schools,hammer=0.9")


def test_the_decoys_are_drawn_with_the_task_set():
    a = make_synthetic(SPEC, np.random.default_rng(0)).pool
    b = make_synthetic(SPEC, np.random.default_rng(0)).pool
    c = make_synthetic(SPEC, np.random.default_rng(1)).pool
    assert isinstance(a, SchoolsPool) and isinstance(c, SchoolsPool)
    assert a.is_decoy().sum() == 72 and a.bloc.sum() == 32  # round(0.3·240), round(0.6·53)
    assert np.array_equal(a.decoy_class, b.decoy_class)
    assert not np.array_equal(a.is_decoy(), c.is_decoy())
    env = make_synthetic(SPEC, np.random.default_rng(0))
    dec = env.pool.is_decoy()
    assert (env.pool.decoy_class[dec] != env.truth[dec]).all()
    unbound = make_pool("schools", 5, 1, 2, np.random.default_rng(0))
    with pytest.raises(ValueError, match="for_tasks"):
        unbound.answer(0, 0, 1, np.random.default_rng(0), tasks=0)


def test_other_models_draw_nothing_for_their_tasks():
    rng = np.random.default_rng(3)
    pool = make_pool("one-coin", 4, 1, 2, rng, p=0.8)
    state = rng.bit_generator.state
    assert pool.for_tasks(np.zeros(10, dtype=np.int64), rng) is pool
    assert rng.bit_generator.state == state


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_majority_vote_of_all_labels_is_wrong_on_most_decoys_and_right_elsewhere(seed):
    env = make_synthetic(SPEC, np.random.default_rng(seed))
    t, w, labels = _all_labels(env, seed)
    dec = env.pool.is_decoy()
    mv = np.asarray(aggregate(t, w, labels, "mv", env.n_tasks, 2).labels_)
    right = mv == env.truth
    assert right[dec].mean() < 0.3  # a decoy's label is wrong with probability 0.56
    assert right[~dec].mean() > 0.97
    # the bloc is consistent: on a decoy its members mostly give the decoy's wrong class
    on_decoy = dec[t] & env.pool.bloc[w]
    assert np.mean(labels[on_decoy] == env.pool.decoy_class[t[on_decoy]]) == pytest.approx(
        0.8, abs=0.03)
    minority = dec[t] & ~env.pool.bloc[w]
    assert np.mean(labels[minority] == env.truth[t[minority]]) == pytest.approx(0.8, abs=0.03)


def test_three_classes_bloc_errs_one_way():
    env = make_synthetic("tasks=60,workers=30,classes=3,model=schools,bloc=0.7,decoys=0.5,p=0.9",
                         np.random.default_rng(5))
    t, w, labels = _all_labels(env)
    dec = env.pool.is_decoy()
    sel = dec[t] & env.pool.bloc[w]
    assert np.mean(labels[sel] == env.pool.decoy_class[t[sel]]) == pytest.approx(0.9, abs=0.04)
    mv = np.asarray(aggregate(t, w, labels, "mv", env.n_tasks, 3).labels_)
    assert (mv[dec] == env.pool.decoy_class[dec]).mean() > 0.9
