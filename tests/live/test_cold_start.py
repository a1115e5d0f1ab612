"""A process's first decision after a start (issue 36): its state and view come from the
binary snapshot in Redis, with no fold of the labels the snapshot holds and no read of the
project's task rows; and the binary snapshot gives every policy back the state the JSON
one gives."""

from __future__ import annotations

import numpy as np
import orjson
import pytest
from sqlmodel import select

from labelq.live import hotstate, snapshot
from labelq.live.applier import Applier
from labelq.live.hotstate import StateCache, decode_snapshot, encode_snapshot, fold_from_sql
from labelq.live.rebuild import rebuild_project
from labelq.live.redis.keys import Keys
from labelq.policies import build, names
from labelq.policies.base import Observation, Problem
from labelq.record.db import database_id, session_scope
from labelq.record.models import Label, Project
from labelq.record.settings import Settings
from labelq.service import Service

from .conftest import label_some, make_project


def _problem(n_classes: int) -> Problem:
    T, W = 24, 5
    is_gold = np.zeros(T, dtype=bool)
    is_gold[-3:] = True
    return Problem(n_tasks=T, n_workers=W, n_classes=n_classes,
                   task_category=np.arange(T) % 2, n_categories=2,
                   worker_cost=np.linspace(1.0, 2.0, W), budget=60.0, max_labels_per_task=4,
                   is_gold=is_gold, gold_answer=np.where(is_gold, 1, -1))


def _same(a: object, b: object) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and \
            a.shape == b.shape and np.array_equal(a, b, equal_nan=True)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, float) and np.isnan(a) and np.isnan(b):
        return True
    return a == b


@pytest.mark.parametrize("name", names())
def test_every_policy_reads_its_binary_snapshot_as_its_json_one(name):
    # Given a policy's state after some labels (gold among them)
    policy = build(name)
    problem = _problem(3 if name in ("optkg_multi",) else 2)
    state = policy.init_state(problem)
    rng = np.random.default_rng(7)
    for i in range(40):
        t, w = int(rng.integers(problem.n_tasks)), int(rng.integers(problem.n_workers))
        gold = bool(problem.is_gold[t])
        policy.update(state, Observation(task=t, worker=w, label=int(rng.integers(2)),
                                         gold=gold, truth=1 if gold else -1))
    # When it goes through the binary snapshot and through the JSON one
    via_json = policy.state_from_dict(orjson.loads(orjson.dumps(
        policy.state_to_dict(state), option=orjson.OPT_SERIALIZE_NUMPY)))
    blob = snapshot.encode({"state": hotstate._state_tree(policy, state)})
    assert snapshot.is_binary(blob)
    via_binary = policy.state_from_dict(snapshot.decode(blob)["state"])
    # Then both give the same state back, which decides and learns alike
    assert type(via_binary) is type(via_json)
    assert _same(policy.state_to_dict(via_binary), policy.state_to_dict(via_json))
    tasks = np.arange(problem.n_tasks)
    np.testing.assert_array_equal(policy.priority(via_binary, tasks),
                                  policy.priority(via_json, tasks))
    mask = ~problem.is_gold
    for w in range(problem.n_workers):
        assert policy.select_task(via_binary, w, tasks, mask, np.random.default_rng(w)) == \
            policy.select_task(via_json, w, tasks, mask, np.random.default_rng(w))
    obs = Observation(task=0, worker=1, label=1)
    policy.update(via_binary, obs)
    policy.update(via_json, obs)
    assert _same(policy.state_to_dict(via_binary), policy.state_to_dict(via_json))


def test_binary_snapshot_keeps_nan_infinity_none_and_dtypes():
    tree = {"a": np.array([1.5, np.nan, -np.inf]), "b": np.arange(6, dtype=np.int32)
            .reshape(2, 3), "c": np.zeros(0), "flag": np.array([True, False]),
            "x": float("nan"), "y": None, "z": [1, 2, 3], "nested": {"e": np.ones(3)},
            "big": np.array([-1, 2**40, 7]), "small": np.array([-3, 100, 2]),
            "u": np.array([0, 2**63 + 5], dtype=np.uint64), "ids": np.arange(70_000)}
    blob = snapshot.encode(tree)
    back = snapshot.decode(blob)
    assert _same(back, tree)
    assert back["b"].dtype == np.int32 and back["flag"].dtype == bool
    assert back["big"].dtype == back["small"].dtype == back["ids"].dtype == np.int64
    assert back["u"].dtype == np.uint64
    assert len(blob) < 70_000 * 4 + 2_000  # the small integers narrowed (ids: int32)
    back["a"][0] = 2.0  # writable: states are updated in place
    with pytest.raises(snapshot.NotBinary):
        snapshot.encode({"o": np.array([object()], dtype=object)})


@pytest.mark.parametrize("policy", ["auto", "optkg"])
def test_first_next_after_restart_loads_the_snapshot_not_the_fold(r, db_url, monkeypatch,
                                                                   policy):
    rng = np.random.default_rng(3)
    eng, pid = make_project(db_url, n_tasks=30, n_gold=3, workers=5, max_labels=2,
                            policy=policy, categories=("x", "y"))
    settings = Settings(database_url=db_url)
    k = Keys(pid, database_id(eng))
    s = Service(eng, r, settings=settings)
    # Given labels applied and snapshotted by the applier, and then 5 more applied in SQL
    # only (the applier died before its next snapshot)
    first = label_some(s, 24, 4, rng)
    cache = StateCache()
    Applier(eng, r, cache=cache).apply_pending(pid, snapshot_every_s=0)
    assert snapshot.is_binary(r.get(k.state)) and int(r.get(k.state_seq)) == first
    more = label_some(s, 5, 4, rng)
    Applier(eng, r, cache=cache).apply_pending(pid, snapshot_every_s=1e9)
    assert int(r.get(k.state_seq)) == first and more == 5
    # When a new process (a fresh service: nothing cached) serves a worker's first next,
    # its state load counted (labels folded, task rows read from SQL)
    folded, views = [], []
    real_update = type(build(policy)).update

    def counting_update(self, state, obs):
        folded.append(obs)
        return real_update(self, state, obs)
    monkeypatch.setattr(type(build(policy)), "update", counting_update)
    monkeypatch.setattr(hotstate, "load_view", lambda *a, **kw: views.append(1) or
                        pytest.fail("the task rows were read from SQL"))
    fresh = Service(eng, r, settings=settings)
    issued = fresh.next_assignment("p-w4")  # (asked nothing yet: no inbox to pop)
    # Then it folded only the 5 labels the snapshot lacks, read no task rows, and handed
    # out a task the worker has not seen and that is below the cap (or a gold question)
    assert len(folded) == more and not views
    assert issued is not None
    monkeypatch.undo()
    with session_scope(eng) as sess:
        n_labels = len(sess.exec(select(Label.id).where(Label.project_id == pid)).all())
        counts = {t: n for t, n in ((int(t), int(n)) for t, n in r.hgetall(k.nlabels).items())}
        hot = fresh.cache.peek(pid)
        assert hot is not None
        assert issued.task_seq not in {int(t) for t in r.smembers(k.seen(4))} - \
            {issued.task_seq}  # (it is in seen now: issued)
        assert hot.view.is_gold[issued.task_seq] or counts.get(issued.task_seq, 0) < 2
        # and the loaded state and view equal a fresh fold of SQL
        ref = fold_from_sql(sess, sess.get(Project, pid))
    assert n_labels == first + more
    assert hot.seq == ref.seq == first + more
    for name in ("task_category", "is_gold", "gold_answer", "task_id", "worker_cost",
                 "worker_capacity"):
        np.testing.assert_array_equal(getattr(hot.view, name), getattr(ref.view, name))
    assert hot.view.categories == ref.view.categories
    np.testing.assert_allclose(hot.policy.predict_proba(hot.state),
                               ref.policy.predict_proba(ref.state))


def test_a_snapshot_view_is_not_used_across_an_epoch_or_more_tasks(r, db_url, monkeypatch):
    eng, pid = make_project(db_url, n_tasks=12, n_gold=2, workers=2, policy="auto")
    rebuild_project(eng, r, pid)
    k = Keys(pid, database_id(eng))
    snap = decode_snapshot(r.get(k.state))
    assert snap["view"]["is_gold"].sum() == 2
    views = []
    real = hotstate.load_view

    def counting(*a, **kw):
        views.append(1)
        return real(*a, **kw)
    monkeypatch.setattr(hotstate, "load_view", counting)
    StateCache().get(eng, r, pid)
    assert views == []  # the snapshot's view
    # a gold answer marked or corrected: new epoch, the tasks are read from SQL again
    r.hincrby(k.meta, "epoch", 1)
    StateCache().get(eng, r, pid)
    assert views == [1]
    r.hincrby(k.meta, "epoch", -1)
    # tasks loaded since the snapshot: read from SQL, and the view has them
    from labelq.record.models import Task
    with session_scope(eng) as sess:
        sess.add(Task(project_id=pid, seq=14, external_id="late", category="x"))
    hot = StateCache().get(eng, r, pid)
    assert views == [1, 1] and hot.view.n_tasks == 15


def test_the_snapshot_round_trips_through_encode(r, sqlite_url):
    eng, pid = make_project(sqlite_url, n_tasks=10, workers=2, policy="auto", budget=50.0)
    rebuild_project(eng, r, pid)
    hot = StateCache().get(eng, r, pid)
    blob = encode_snapshot(hot)
    back = decode_snapshot(blob)
    assert back["seq"] == hot.seq and back["limits"] == [50.0, None]
    assert back["labels"] == ["a", "b"]
    np.testing.assert_array_equal(back["view"]["task_id"], hot.view.task_id)


@pytest.mark.parametrize("damage", [b"LQS2o\x05\x00\x00\x00{}", b"LQS2", b"not a snapshot"])
def test_an_unreadable_snapshot_is_ignored_and_the_state_folded_from_sql(r, sqlite_url, damage):
    rng = np.random.default_rng(5)
    eng, pid = make_project(sqlite_url, n_tasks=12, workers=3, policy="auto")
    s = Service(eng, r, settings=Settings(database_url=sqlite_url))
    n = label_some(s, 9, 3, rng)
    Applier(eng, r, cache=StateCache()).apply_pending(pid, snapshot_every_s=0)
    k = Keys(pid, database_id(eng))
    r.set(k.state, damage)
    hot = StateCache().get(eng, r, pid)
    with session_scope(eng) as sess:
        ref = fold_from_sql(sess, sess.get(Project, pid))
    assert hot.seq == ref.seq == n
    np.testing.assert_allclose(hot.policy.predict_proba(hot.state),
                               ref.policy.predict_proba(ref.state))


def test_a_deleted_projects_snapshot_is_not_read_as_its_successors(r, sqlite_url, monkeypatch):
    eng, pid = make_project(sqlite_url, n_tasks=8, workers=2, policy="auto")
    rebuild_project(eng, r, pid)
    k = Keys(pid, database_id(eng))
    snap = decode_snapshot(r.get(k.state))
    assert snap["project"][0] == "p"
    # the same id, another project (as SQLite reuses a deleted project's id)
    with session_scope(eng) as sess:
        p = sess.get(Project, pid)
        p.name = "renamed"
    views = []
    real = hotstate.load_view

    def counting(*a, **kw):
        views.append(1)
        return real(*a, **kw)
    monkeypatch.setattr(hotstate, "load_view", counting)
    hot = StateCache().get(eng, r, pid)
    assert views == [1] and hot.seq == 0
