"""The live ``auto`` policy applies the independence rule (issue 42, docs/models.md
"Independence"): a label given with the model's answer shown (``Observation.suggested``)
that agrees with the model counts half in its task's posterior, is no agreement evidence
for its annotator and does not teach the model's table — in ``update`` between refits and
in the refit, by worker_model's ``copied_labels``, as the export's ``shrunk`` does. The
mark lives in the state (``log_suggested``); a state of the layout before it is refused."""

from __future__ import annotations

import json

import numpy as np
import pytest

from labelq.live import snapshot
from labelq.policies import build
from labelq.policies import worker_model as em
from labelq.policies.base import Observation, Problem
from labelq.record.withheld import withheld
from labelq.simulate.environment import Environment
from labelq.simulate.runner import run_policy


def _model(truth: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Binary predictions at confidence 0.8, the true class where ``right``."""
    pred = np.where(right, truth, 1 - truth)
    p = np.zeros((truth.size, 2))
    p[np.arange(truth.size), pred] = 0.8
    p[np.arange(truth.size), 1 - pred] = 0.2
    return p


def _twins(marked: bool, label: int) -> tuple[object, object]:
    """auto (no refit in the way) on 4 tasks with a model predicting class 0 everywhere;
    worker 0 labels task 0 with 0, then worker 1 labels it ``label`` (``marked``:
    given with the suggestion shown)."""
    policy = build("auto:refit_min=1000")
    p = np.tile([0.9, 0.1], (4, 1))
    state = policy.init_state(Problem(n_tasks=4, n_workers=2, n_classes=2),
                              predictions={"m": p})
    policy.update(state, Observation(task=0, worker=0, label=0))
    policy.update(state, Observation(task=0, worker=1, label=label, suggested=marked))
    return policy, state


def test_a_copied_label_moves_the_posterior_half_and_is_no_agreement_evidence():
    # Given the same two labels, the second given once with the suggestion shown
    _, plain = _twins(False, 0)
    policy, copy = _twins(True, 0)
    # Then the copy counts half in the task's log-likelihood
    first = build("auto:refit_min=1000")
    one = first.init_state(Problem(n_tasks=4, n_workers=2, n_classes=2),
                           predictions={"m": np.tile([0.9, 0.1], (4, 1))})
    first.update(one, Observation(task=0, worker=0, label=0))
    step_plain = plain.loglik[0] - one.loglik[0]
    step_copy = copy.loglik[0] - one.loglik[0]
    np.testing.assert_allclose(step_copy, em.SUGGESTED_WEIGHT * step_plain)
    assert abs(step_copy[0] - step_copy[1]) < abs(step_plain[0] - step_plain[1])
    assert policy.predict_proba(copy)[0, 0] < policy.predict_proba(plain)[0, 0]
    # and it raises its annotator's agreement evidence not at all (the plain one does)
    assert copy.total[1].sum() == 0.0 and copy.correct[1].sum() == 0.0
    assert plain.total[1].sum() == 1.0 and plain.correct[1].sum() > 0.5
    # and the mark is in the state, by position in the label log
    assert copy.log_suggested == [1] and plain.log_suggested == []


def test_a_marked_label_that_overrules_the_suggestion_counts_in_full():
    _, plain = _twins(False, 1)
    _, overruled = _twins(True, 1)
    np.testing.assert_allclose(overruled.loglik, plain.loglik)
    np.testing.assert_allclose(overruled.total, plain.total)
    np.testing.assert_allclose(overruled.correct, plain.correct)


def test_without_predictions_the_mark_changes_nothing():
    policy = build("auto:refit_min=1000")
    states = []
    for marked in (False, True):
        s = policy.init_state(Problem(n_tasks=3, n_workers=2, n_classes=2))
        policy.update(s, Observation(task=0, worker=0, label=0))
        policy.update(s, Observation(task=0, worker=1, label=0, suggested=marked))
        states.append(s)
    np.testing.assert_allclose(states[0].loglik, states[1].loglik)
    np.testing.assert_allclose(states[0].total, states[1].total)


def _copier_run(marked: bool, refit_min: int = 10):
    """1,500 tasks, a 70 % model; annotator 0 answers alone at 0.8, annotator 1 copies the
    model's answer (shown to it: ``marked``)."""
    rng = np.random.default_rng(5)
    T = 1500
    truth = rng.integers(0, 2, T)
    p = _model(truth, rng.random(T) < 0.7)
    own = np.where(rng.random(T) < 0.8, truth, 1 - truth)
    policy = build(f"auto:refit_min={refit_min}")
    state = policy.init_state(Problem(n_tasks=T, n_workers=2, n_classes=2),
                              predictions={"m": p})
    for i in range(T):
        policy.update(state, Observation(task=i, worker=0, label=int(own[i])))
        policy.update(state, Observation(task=i, worker=1, label=int(p[i].argmax()),
                                         suggested=marked))
    return policy, state, truth


def test_the_refit_weighs_the_copies_as_the_aggregator_does():
    """The copier of test_model_source's aggregation test, through the live policy's fold:
    unmarked the copier and the model read too good; marked, the copier stays at the prior
    and the model is measured against the independent annotator alone."""
    blind_policy, blind, truth = _copier_run(False)
    policy, aware, _ = _copier_run(True)
    policy.refit(blind)
    policy.refit(aware)
    acc_blind, _ = blind_policy.accuracies(blind)
    acc_aware, _ = policy.accuracies(aware)
    assert acc_blind[1, 0] > 0.85
    assert abs(acc_aware[1, 0] - 0.7) < 0.05, acc_aware[1, 0]
    model = {False: blind.sources(), True: aware.sources()}
    assert model[False] is not None and model[True] is not None
    assert model[False].accuracy()["m"].overall > 0.8
    assert abs(model[True].accuracy()["m"].overall - 0.7) < 0.05
    # the agreement evidence of the copier: none from its copies
    assert aware.total[1].sum() == 0.0 and blind.total[1].sum() > 1000
    # and the refit's log-likelihood halves the copies: the same as a fresh fit_em's
    task = np.asarray(aware.log_task)
    label = np.asarray(aware.log_label)
    copied = em.copied_labels(aware.sources(), task, label, policy.suggested(aware))
    assert copied.sum() == 1500
    acc, _ = policy.accuracies(aware)
    want = em.task_loglik(task, acc[np.asarray(aware.log_worker), 0], label, 1500, 2,
                          em.label_weights(copied))
    np.testing.assert_allclose(aware.loglik, want)
    post = [(p.predict_proba(s).argmax(axis=1) == truth).mean()
            for p, s in ((blind_policy, blind), (policy, aware))]
    assert post[1] >= post[0], post


def test_the_mark_survives_json_and_the_binary_snapshot():
    policy, state, _ = _copier_run(True, refit_min=100000)
    data = json.loads(json.dumps(policy.state_to_dict(state)))
    back = build("auto").state_from_dict(data)
    assert back.log_suggested == state.log_suggested and len(back.log_suggested) == 1500
    blob = snapshot.encode({"state": dict(vars(state))})
    again = build("auto").state_from_dict(snapshot.decode(blob)["state"])
    assert list(again.log_suggested) == state.log_suggested
    # and the next label and refit go on the same from either
    for s in (state, back, again):
        policy.update(s, Observation(task=3, worker=0, label=1, suggested=True))
        policy.refit(s)
    np.testing.assert_allclose(back.correct, state.correct)
    np.testing.assert_allclose(again.loglik, state.loglik)


def test_a_state_of_the_layout_before_the_mark_is_refused():
    policy, state, _ = _copier_run(True, refit_min=100000)
    data = json.loads(json.dumps(policy.state_to_dict(state)))
    del data["log_suggested"]
    with pytest.raises(ValueError, match="log_suggested"):
        build("auto").state_from_dict(data)
    assert build("auto").state_version == 2 > build("uniform").state_version


def test_the_simulator_marks_labels_when_the_environment_shows_suggestions():
    rng = np.random.default_rng(3)
    T, W = 60, 4
    truth = rng.integers(0, 2, T)
    recorded = np.where(rng.random((T, W)) < 0.8, truth[:, None], 1 - truth[:, None])
    env = Environment(truth=truth, n_workers=W, n_classes=2,
                      task_category=np.zeros(T, np.int64), recorded=recorded,
                      predictions={"m": _model(truth, rng.random(T) < 0.9)})
    seen: dict[bool, list] = {}
    for shown in (False, True):
        policy = build("auto")
        got: list = []
        update = policy.update

        def spy(state, obs, update=update, got=got):  # type: ignore[no-untyped-def]
            got.append((obs.suggested, obs.worker, obs.task))
            return update(state, obs)
        policy.update = spy  # type: ignore[method-assign]
        e = Environment(**{**vars(env), "show_suggestions": shown})
        run_policy(policy, e, [120], np.random.default_rng(0))
        seen[shown] = got
    # (marked but on the quarter of the (worker, task) pairs that show no suggestion, as
    # live: labelq.record.withheld)
    assert len(seen[True]) == 120
    assert [m for m, _w, _t in seen[True]] == [not withheld(w, t) for _m, w, t in seen[True]]
    assert 60 < sum(m for m, _w, _t in seen[True]) < 120
    assert not any(m for m, _w, _t in seen[False])
