"""``auto`` checks its trust (issue 34): agreement is calibrated against gold, gold is asked
where it tells most."""

from __future__ import annotations

import numpy as np

from labelq.policies import Observation, Problem, build
from labelq.policies import worker_model as em


def _schools(seed: int = 0, gold_per_worker: int = 8):
    """A dense pool: workers 0-5 a bloc that answers a wrong class on the decoys (30 % of
    the tasks), workers 6-9 right there; everyone right at 0.85 elsewhere. The last 40
    tasks are gold; each worker answered ``gold_per_worker`` of them, half decoys."""
    rng = np.random.default_rng(seed)
    T, W, G = 240, 10, 40
    truth = rng.integers(0, 2, T)
    decoy = rng.random(T) < 0.3
    decoy[T - G:T - G // 2], decoy[T - G // 2:] = True, False
    bloc = np.arange(W) < 6
    task, worker, label = [], [], []
    for i in range(T - G):
        for j in range(W):
            right = rng.random() < 0.85
            if decoy[i] and bloc[j]:
                right = not right
            task.append(i), worker.append(j), label.append(truth[i] if right else 1 - truth[i])
    for j in range(W):
        for i in np.r_[rng.choice(np.arange(T - G, T - G // 2), gold_per_worker // 2, False),
                       rng.choice(np.arange(T - G // 2, T), gold_per_worker // 2, False)]:
            right = rng.random() < 0.85
            if decoy[i] and bloc[j]:
                right = not right
            task.append(i), worker.append(j), label.append(truth[i] if right else 1 - truth[i])
    gold = np.where(np.arange(T) >= T - G, truth, -1)
    return (np.array(task), np.array(worker), np.array(label), gold, truth, decoy, bloc)


def _fit(calibrate: bool, **kw):
    task, worker, label, gold, truth, decoy, bloc = _schools(**kw)
    T, W = gold.size, bloc.size
    fit = em.fit_em(task, worker, label, np.zeros_like(task), gold[task], T, W, 1, 2,
                    mu0=0.7, m0=10, m=4, iters=10, per_worker=True, calibrate=calibrate)
    acc, _, _ = em.shrunk_accuracy(fit.correct, fit.total, 2, 0.7, 10, 4, True)
    post = em.posterior(em.task_loglik(task, acc[worker, 0], label, T, 2),
                        np.log(fit.class_prior))
    scored = gold < 0
    return fit, acc[:, 0], (post.argmax(1) == truth)[scored & decoy].mean(), bloc


def test_agreement_alone_trusts_the_bloc_and_gold_calibration_does_not():
    fit0, acc0, decoys0, bloc = _fit(False)
    assert acc0[bloc].mean() > acc0[~bloc].mean()  # agreement: the bloc looks better
    assert decoys0 < 0.3  # and the posterior follows it on the decoys
    fit1, acc1, decoys1, _ = _fit(True)
    assert fit1.bias2 > 0 and fit1.agree_weight is not None
    assert (fit1.agree_weight < 0.5).all()  # each agreement label worth under half a gold one
    assert acc1[~bloc].min() > acc1[bloc].max()  # gold anchors the trust
    assert decoys1 > 0.5  # the posterior follows the anchored trust on most decoys


def test_gold_that_confirms_agreement_changes_nothing():
    """Where agreement is unbiased (no decoys among the answers: a one-coin pool), the
    calibration leaves the fit as it was."""
    rng = np.random.default_rng(5)
    T, W = 200, 8
    truth = rng.integers(0, 2, T)
    acc = np.linspace(0.6, 0.95, W)
    task = np.repeat(np.arange(T), W)
    worker = np.tile(np.arange(W), T)
    label = np.where(rng.random(task.size) < acc[worker], truth[task], 1 - truth[task])
    gold = np.where(np.arange(T) < 30, truth, -1)
    fits = [em.fit_em(task, worker, label, np.zeros_like(task), gold[task], T, W, 1, 2,
                      mu0=0.7, m0=10, m=4, iters=5, per_worker=True, calibrate=c)
            for c in (False, True)]
    assert fits[1].bias2 == 0.0
    np.testing.assert_allclose(fits[0].correct, fits[1].correct)


def test_without_gold_the_fit_is_unchanged():
    task, worker, label, gold, *_ = _schools()
    keep = gold[task] < 0
    args = (task[keep], worker[keep], label[keep], np.zeros(keep.sum(), np.int64),
            np.full(keep.sum(), -1), gold.size, 10, 1, 2)
    a = em.fit_em(*args, mu0=0.7, m0=10, m=4, iters=3, per_worker=True, calibrate=True)
    b = em.fit_em(*args, mu0=0.7, m0=10, m=4, iters=3, per_worker=True, calibrate=False)
    np.testing.assert_allclose(a.correct, b.correct)
    assert a.bias2 == 0.0


def test_gold_goes_where_trusted_workers_were_wrong():
    """Among gold questions, ``select_task`` picks the one that tells most about the asking
    worker's accuracy: one that other workers got wrong before one they all got right."""
    T, W = 6, 6
    gold = np.array([-1, -1, 0, 1, 1, 0])
    policy = build("auto")
    state = policy.init_state(Problem(n_tasks=T, n_workers=W, is_gold=gold >= 0,
                                      gold_answer=gold))
    for j in range(4):  # task 2: everyone right; task 3: everyone wrong; 4, 5: not asked
        policy.update(state, Observation(task=2, worker=j, label=0, gold=True, truth=0))
        policy.update(state, Observation(task=3, worker=j, label=0, gold=True, truth=1))
    state.correct[5, 0], state.total[5, 0] = 40.0, 50.0  # worker 5: trusted at 0.8
    cand = np.arange(T)
    rng = np.random.default_rng(0)
    mask = np.isin(cand, [2, 3])
    assert policy.select_task(state, 5, cand, mask, rng) == 3
    mask = np.isin(cand, [2, 4])  # an unasked question before a confirmed easy one
    assert policy.select_task(state, 5, cand, mask, rng) == 4
    # gold still comes after every ordinary task
    assert policy.select_task(state, 5, cand, np.ones(T, bool), rng) in (0, 1)


def test_the_calibration_survives_a_state_round_trip():
    policy = build("auto:refit_min=5")
    gold = np.array([0, 1, -1, -1, -1, -1])
    state = policy.init_state(Problem(n_tasks=6, n_workers=3, is_gold=gold >= 0,
                                      gold_answer=gold))
    for j in range(3):
        for i in (0, 1):
            policy.update(state, Observation(task=i, worker=j, label=int(gold[i]), gold=True,
                                             truth=int(gold[i])))
        policy.update(state, Observation(task=2 + j, worker=j, label=0))
    assert state.anchored and state.agree_weight is not None
    back = policy.state_from_dict(policy.state_to_dict(state))
    assert back.anchored and np.array_equal(back.agree_weight, state.agree_weight)
    old = policy.state_to_dict(state)  # a state saved before issue 34
    del old["agree_weight"], old["anchored"]
    back = policy.state_from_dict(old)
    assert not back.anchored and (back.agree_weight == 1).all()
