"""A model's predictions in the live pipeline (issue 42): the policy state folded from SQL
routes with the latest version of each model, a load or remove while running reaches every
holder (a new epoch, or the catch-up's check of the versions), and with
``auto:min_human_labels=0`` the model may settle a task alone."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli.main import cli
from labelq.live.applier import Applier
from labelq.live.hotstate import StateCache, write_snapshot
from labelq.live.rebuild import rebuild_project
from labelq.live.redis.keys import Keys
from labelq.record.db import database_id, session_scope
from labelq.record.predictions import load_predictions, remove_predictions
from labelq.record.projects import get_project
from labelq.record.settings import Settings
from labelq.service import Service

from .conftest import make_project

AUTO = "auto:min_human_labels=0,refit_min=5,explore=0"


def truth(task: str) -> str:
    """The true label of ``t{i}``: ``a`` on even i, ``b`` on odd."""
    return "ab"[int(task[1:]) % 2]


def write_preds(path: Path, n: int, *, right: float = 0.97) -> Path:
    """Confident, right predictions for ``t0 .. t{n-1}``."""
    rows = ["id,p_a,p_b"]
    for i in range(n):
        p = right if truth(f"t{i}") == "a" else 1.0 - right
        rows.append(f"t{i},{p:.2f},{1.0 - p:.2f}")
    path.write_text("\n".join(rows) + "\n")
    return path


def load(eng, path: Path, model: str = "m") -> None:
    with session_scope(eng) as db:
        load_predictions(db, get_project(db, "p"), path, model=model)


def test_a_rebuild_folds_the_state_with_the_latest_predictions(r, sqlite_url, tmp_path):
    # Given a project of auto with two versions of a model loaded (v2 the latest)
    eng, pid = make_project(sqlite_url, n_tasks=20, workers=2, policy=AUTO)
    load(eng, write_preds(tmp_path / "v1.csv", 10))
    load(eng, write_preds(tmp_path / "v2.csv", 20))
    # When the hot state is rebuilt and a process loads it (from the snapshot)
    rebuild_project(eng, r, pid)
    hot = StateCache().get(eng, r, pid)
    # Then its policy state has the latest version's answers, not v1's (10 tasks)
    assert hot.state.model_names == ["m@v2"]
    assert int((hot.state.model_cell[0] >= 0).sum()) == 20
    # and the predictions are not labels: no task counts a label toward its cap
    assert int(hot.state.n_labels.sum()) == 0


def test_a_load_or_remove_while_running_reaches_every_holder(r, redis_url, sqlite_url,
                                                             tmp_path):
    # Given a running project of auto without predictions, its state held by an applier
    eng, pid = make_project(sqlite_url, n_tasks=20, workers=2, policy=AUTO)
    s = Service(eng, r, settings=Settings(database_url=sqlite_url), worker_max_age=0,
                state_max_age=0)
    a = s.next_assignment("p-w0")
    assert a is not None
    s.submit("p-w0", a.assignment_id, truth(a.task))
    cache = StateCache()
    Applier(eng, r, cache=cache).apply_pending(pid, refill=False)
    assert cache.get(eng, r, pid).state.model_names == []
    k = Keys(pid, database_id(eng))
    epoch = int(r.hget(k.meta, "epoch") or 0)
    env = {"LABELQ_DATABASE_URL": sqlite_url, "LABELQ_REDIS_URL": redis_url}
    # When the operator loads a model's predictions with the CLI
    out = CliRunner().invoke(cli, ["predictions", "load", "p",
                                   str(write_preds(tmp_path / "p.csv", 12)), "--model", "m"],
                             env=env)
    assert out.exit_code == 0, out.output
    # Then the epoch moved, and the applier's state is folded again with them, its label
    assert int(r.hget(k.meta, "epoch")) == epoch + 1
    hot = cache.get(eng, r, pid)
    assert hot.epoch == epoch + 1
    assert hot.state.model_names == ["m@v1"]
    assert int((hot.state.model_cell[0] >= 0).sum()) == 12
    assert int(hot.state.n_labels.sum()) == 1
    # and the service's own state too
    assert s.live.database and s.next_assignment("p-w1") is not None
    # When the model is removed, every holder drops it
    out = CliRunner().invoke(cli, ["predictions", "remove", "p", "--model", "m"], env=env)
    assert out.exit_code == 0, out.output
    assert int(r.hget(k.meta, "epoch")) == epoch + 2
    assert cache.get(eng, r, pid).state.model_names == []


def test_a_load_without_redis_is_seen_at_the_next_catch_up_and_voids_the_snapshot(
        r, sqlite_url, tmp_path):
    # Given a built project whose snapshot was written with model v1
    eng, pid = make_project(sqlite_url, n_tasks=20, workers=2, policy=AUTO)
    load(eng, write_preds(tmp_path / "v1.csv", 10))
    rebuild_project(eng, r, pid)
    cache = StateCache()
    hot = cache.get(eng, r, pid)
    write_snapshot(r, hot)
    # When v2 is loaded in SQL alone (no Redis: no new epoch)
    load(eng, write_preds(tmp_path / "v2.csv", 20))
    # Then a running holder folds again at its next catch-up
    assert cache.get(eng, r, pid).state.model_names == ["m@v2"]
    # and a new process does not take the v1 snapshot's state
    fresh = StateCache().get(eng, r, pid)
    assert fresh.state.model_names == ["m@v2"]
    assert int((fresh.state.model_cell[0] >= 0).sum()) == 20
    # and a removal in SQL alone is seen the same way
    with session_scope(eng) as db:
        remove_predictions(db, get_project(db, "p"), "m", None)
    assert cache.get(eng, r, pid).state.model_names == []


def test_min_human_labels_0_lets_the_model_settle_tasks(r, sqlite_url, tmp_path):
    # Given auto:min_human_labels=0 with right, confident predictions for t0..t119 (of
    # 140): one confidence bin, so the model's table has 2 cells a class, and about 40
    # labelled tasks of a class make its likelihood ratio (40 + 1) / 1 > 19, i.e. 0.95
    eng, pid = make_project(sqlite_url, n_tasks=140, workers=3, policy=AUTO)
    load(eng, write_preds(tmp_path / "p.csv", 120))
    s = Service(eng, r, settings=Settings(database_url=sqlite_url), worker_max_age=0,
                state_max_age=0)
    cache = StateCache()
    applier = Applier(eng, r, cache=cache)
    # When careful annotators label what they are given, 100 labels in all
    given: list[str] = []
    for i in range(100):
        handle = f"p-w{i % 3}"
        a = s.next_assignment(handle)
        assert a is not None
        given.append(a.task)
        s.submit(handle, a.assignment_id, truth(a.task))
        applier.apply_pending(pid, refill=False)
    hot = cache.get(eng, r, pid)
    k = Keys(pid, database_id(eng))
    # Then tasks the model predicted and no one labelled are settled by the model alone:
    # their posterior reached auto's confidence, their priority in `pending` is below 0
    # (asked again only when no unsettled task is left), and their answers are right
    post = hot.policy.predict_proba(hot.state)
    alone = [i for i in range(120) if hot.state.n_labels[i] == 0]
    assert alone, given
    settled = [i for i in alone if post[i].max() >= 0.95]
    assert len(settled) >= 0.9 * len(alone), (len(settled), len(alone))
    assert all(int(post[i].argmax()) == "ab".index(truth(f"t{i}")) for i in settled)
    # and they left `pending` (labelq/live/modelsettled.py): no human label is spent on
    # what the operator let the model settle; they are kept in `settled`
    pri = {int(t): p for t, p in r.zrange(k.pending, 0, -1, withscores=True)}
    assert not set(settled) & set(pri), sorted(set(settled) & set(pri))
    assert set(settled) <= {int(x) for x in r.smembers(k.settled)}
    # while the tasks without a prediction were asked: every one of them has a label
    # before any model-settled task got one more
    assert all(hot.state.n_labels[i] >= 1 for i in range(120, 140)), given
    # and no task counts the model as a label: 100 labels in all
    assert int(hot.state.n_labels.sum()) == 100


def test_tasks_the_model_settled_come_back_when_its_version_changes(r, sqlite_url,
                                                                   tmp_path):
    # Given auto:min_human_labels=0 whose model settled tasks alone (out of `pending`)
    eng, pid = make_project(sqlite_url, n_tasks=140, workers=3, policy=AUTO)
    load(eng, write_preds(tmp_path / "p.csv", 120))
    s = Service(eng, r, settings=Settings(database_url=sqlite_url), worker_max_age=0,
                state_max_age=0)
    cache = StateCache()
    applier = Applier(eng, r, cache=cache)
    for i in range(100):
        handle = f"p-w{i % 3}"
        a = s.next_assignment(handle)
        assert a is not None
        s.submit(handle, a.assignment_id, truth(a.task))
        applier.apply_pending(pid, refill=False)
    k = Keys(pid, database_id(eng))
    out = {int(x) for x in r.smembers(k.settled)}
    assert len(out) >= 20 and not out & {int(t) for t in r.zrange(k.pending, 0, -1)}
    # and a rebuild keeps them out (it puts every open task in `pending`, then syncs)
    rebuild_project(eng, r, pid)
    assert not out & {int(t) for t in r.zrange(k.pending, 0, -1)}
    assert {int(x) for x in r.smembers(k.settled)} >= out - {0}
    # When a new version of the model is loaded, one that says nothing (0.5 / 0.5 on
    # every task: measured again from the labels at the fold, it carries no evidence),
    # the epoch bumped, and the applier runs with no new label
    load(eng, write_preds(tmp_path / "p2.csv", 120, right=0.5))
    from labelq.live.hotstate import bump_epoch
    bump_epoch(r, k)
    applier.apply_pending(pid, refill=False)
    # Then the tasks are back in `pending`, open, and the `settled` set is empty
    back = {int(t): p for t, p in r.zrange(k.pending, 0, -1, withscores=True)}
    assert out <= set(back), sorted(out - set(back))
    assert r.scard(k.settled) == 0
    hot = cache.get(eng, r, pid)
    assert hot.state.model_names == ["m@v2"]


def _fold_upto(eng, pid: int, seq: int, *, marks: bool = True):
    """A fresh fold of the project's labels applied up to ``seq``, from SQL, with their
    ``suggested`` marks (``marks=False``: as if none was given with a suggestion shown);
    returns the policy, the state and the marks in applied order."""
    from dataclasses import replace

    from labelq.policies import build
    from labelq.record.models import Project
    from labelq.record.problem import label_rows, load_view, to_observation
    with session_scope(eng) as db:
        project = db.get(Project, pid)
        view = load_view(db, project)
        idx = {v: i for i, v in enumerate(project.labels)}
        rows = [row for row in label_rows(db, pid, applied_after=0) if row[1] <= seq]
        policy = build(project.policy)
        state = policy.init_state(view.problem())
    shown = []
    for row in rows:
        obs = to_observation(row, idx)
        shown.append(obs.suggested)
        policy.update(state, obs if marks else replace(obs, suggested=False))
    return policy, state, shown


def _withheld_in_order(eng, pid: int, seq: int | None = None) -> list[bool]:
    """Per label applied (up to ``seq``), in applied order: whether its assignment was one
    that shows no suggestion (labelq.record.withheld), so is not marked ``suggested``."""
    from sqlmodel import col, select

    from labelq.record.models import Label
    from labelq.record.withheld import withheld
    with session_scope(eng) as db:
        q = select(Label.worker_id, Label.task_id).where(
            Label.project_id == pid, col(Label.applied_seq).is_not(None))
        if seq is not None:
            q = q.where(col(Label.applied_seq) <= seq)
        rows = db.exec(q.order_by(col(Label.applied_seq))).all()
    return [withheld(w, t) for w, t in rows]


@pytest.mark.timeout(240)
def test_labels_given_with_the_suggestion_shown_are_folded_by_the_rule(
        r, redis_url, sqlite_url, tmp_path, celery_env, celery_worker):
    """Issue 42, independence, live: labels submitted while the project shows the model's
    answer are stored marked, read back marked by the applier (a real Celery worker), and
    the routing state it folds weighs them as the export does (worker_model's rule)."""
    import copy

    import numpy as np

    from labelq.live.hotstate import decode_snapshot
    from labelq.policies import build
    from labelq.record.models import Project
    from workers.main import create_app

    from .test_celery import wait_applied
    # Given auto (a refit every few labels) and a model wrong on every third task
    eng, pid = make_project(sqlite_url, n_tasks=16, workers=2, max_labels=2,
                            policy="auto:refit_min=5,explore=0")
    rows = ["id,p_a,p_b"]
    model_says = {}
    for i in range(16):
        says = truth(f"t{i}") if i % 3 else "ba"["ab".index(truth(f"t{i}"))]
        model_says[f"t{i}"] = says
        rows.append(f"t{i},{0.9 if says == 'a' else 0.1:.2f},{0.1 if says == 'a' else 0.9:.2f}")
    (tmp_path / "m.csv").write_text("\n".join(rows) + "\n")
    load(eng, tmp_path / "m.csv")
    app = create_app(redis_url)
    celery_worker(celery_env(sqlite_url))

    def service():
        return Service(eng, r, settings=Settings(database_url=sqlite_url), worker_max_age=0,
                       notify=lambda p: app.send_task("labelq.apply_labels", args=[p],
                                                      queue="labelq"))

    def label(s, n: int) -> int:
        """Up to ``n`` labels: p-w0 answers right, p-w1 gives what the model says."""
        done = 0
        for i in range(n):
            h = f"p-w{i % 2}"
            a = s.next_assignment(h)
            if a is None:
                continue
            s.submit(h, a.assignment_id, truth(a.task) if h == "p-w0" else model_says[a.task])
            done += 1
        return done

    # When each task gets its first label with suggestions off, then (the operator turns
    # them on) its second; the last few 2.5 s later, so that the applier (which snapshots
    # at most every 2 s) snapshots its fold of at least the first 28
    n = label(service(), 16)
    wait_applied(eng, pid, n)
    with session_scope(eng) as db:
        db.get(Project, pid).show_suggestions = True
    n += label(service(), 12)
    wait_applied(eng, pid, n)
    time.sleep(2.5)
    n += label(service(), 8)
    assert n == 32
    wait_applied(eng, pid, n)
    # Then the applier's snapshot (its fold, in the Celery worker) carries the marks of
    # the labels given with the suggestion shown, read back from SQL
    k = Keys(pid, database_id(eng))
    deadline = time.monotonic() + 30
    while int(r.get(k.state_seq) or 0) <= 28 and time.monotonic() < deadline:
        time.sleep(0.2)
    snap = decode_snapshot(r.get(k.state))
    seq = int(snap["seq"])
    assert seq > 28, seq
    policy = build("auto:refit_min=5,explore=0")
    live = policy.state_from_dict(snap["state"])
    ref_policy, ref, shown = _fold_upto(eng, pid, seq)
    assert live.log_suggested == [i for i, m in enumerate(shown) if m]
    # (marked: the labels given after the operator turned suggestions on, but for the
    # assignments withheld, which showed none)
    held_back = _withheld_in_order(eng, pid, seq)
    assert shown == [False] * 16 + [not w for w in held_back[16:]]
    assert len(live.log_suggested) == seq - 16 - sum(held_back[16:]) > 0
    # and it is the fold of the rule: the same soft counts and posterior as a fresh fold
    # of the marked labels, not those of the labels taken as independent
    np.testing.assert_allclose(live.correct, ref.correct)
    np.testing.assert_allclose(live.total, ref.total)
    np.testing.assert_allclose(policy.predict_proba(live), ref_policy.predict_proba(ref))
    _, blind, _ = _fold_upto(eng, pid, seq, marks=False)
    # p-w1's copies of the model are no agreement evidence: it has less than unmarked
    assert live.total[1].sum() < blind.total[1].sum() - 1.0
    # and a fresh fit over every label (the refit) gives the same posterior from the live
    # state as from the fresh fold, and another one without the marks
    refit_live, refit_ref, refit_blind = (copy.deepcopy(s) for s in (live, ref, blind))
    for s in (refit_live, refit_ref, refit_blind):
        policy.refit(s)
    np.testing.assert_allclose(policy.predict_proba(refit_live),
                               policy.predict_proba(refit_ref))
    assert np.abs(policy.predict_proba(refit_live)
                  - policy.predict_proba(refit_blind)).max() > 0.01


def test_a_snapshot_of_the_state_layout_before_the_marks_is_folded_again(r, sqlite_url,
                                                                        tmp_path):
    """A Redis snapshot written before ``auto``'s state carried the marks (no
    ``state_version``, no ``log_suggested``), or under another layout, is never read as
    this one: the state is folded again from SQL, marks included."""
    import numpy as np

    from labelq.live import snapshot as binary
    from labelq.live.hotstate import decode_snapshot, encode_snapshot
    from labelq.record.models import Project
    # Given a project showing suggestions, 8 labels applied by an applier
    eng, pid = make_project(sqlite_url, n_tasks=12, workers=2, policy=AUTO)
    load(eng, write_preds(tmp_path / "p.csv", 12))
    with session_scope(eng) as db:
        db.get(Project, pid).show_suggestions = True
    s = Service(eng, r, settings=Settings(database_url=sqlite_url), worker_max_age=0,
                state_max_age=0)
    for i in range(8):
        a = s.next_assignment(f"p-w{i % 2}")
        assert a is not None
        s.submit(f"p-w{i % 2}", a.assignment_id, truth(a.task))
    cache = StateCache()
    Applier(eng, r, cache=cache).apply_pending(pid, refill=False)
    hot = cache.get(eng, r, pid)
    assert hot.state.log_suggested == [i for i, w in enumerate(_withheld_in_order(eng, pid))
                                       if not w]
    assert hot.state.log_suggested  # (some are marked)
    k = Keys(pid, database_id(eng))
    # When the snapshot in Redis is one an older labelq wrote (no marks, no layout)
    old = decode_snapshot(encode_snapshot(hot))
    old.pop("state_version")
    old["state"].pop("log_suggested")
    r.set(k.state, binary.encode(old))
    # Then a new process folds the state again, with the marks
    fresh = StateCache().get(eng, r, pid)
    assert fresh.state.log_suggested == hot.state.log_suggested
    np.testing.assert_allclose(fresh.state.correct, hot.state.correct)
    # and a snapshot of another layout is not read even where its fields would fit
    other = decode_snapshot(encode_snapshot(hot))
    other["state_version"] = 1
    other["state"]["correct"] = other["state"]["correct"] + 5.0
    r.set(k.state, binary.encode(other))
    again = StateCache().get(eng, r, pid)
    np.testing.assert_allclose(again.state.correct, hot.state.correct)
    # while the current layout's snapshot is used as it is
    mine = decode_snapshot(encode_snapshot(hot))
    assert mine["state_version"] == 2
    mine["state"]["correct"] = mine["state"]["correct"] + 5.0
    r.set(k.state, binary.encode(mine))
    np.testing.assert_allclose(StateCache().get(eng, r, pid).state.correct,
                               hot.state.correct + 5.0)
