"""A model's predictions in the live pipeline (issue 42): the policy state folded from SQL
routes with the latest version of each model, a load or remove while running reaches every
holder (a new epoch, or the catch-up's check of the versions), and with
``auto:min_human_labels=0`` the model may settle a task alone."""

from __future__ import annotations

from pathlib import Path

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
