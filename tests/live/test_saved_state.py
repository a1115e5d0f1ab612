"""The folded state outlives Redis (issue 44): the applier keeps its snapshot in SQL
(``saved_state``), a rebuild after a ``FLUSHDB`` starts from it and folds only the labels
applied after it, and a saved state that no longer matches what it was folded from (a label
deleted, a gold answer corrected or marked, another labelq version or format, another
project, more tasks, damaged bytes, a model's predictions loaded) is never used: the state is folded from the labels."""

from __future__ import annotations

import time

import numpy as np
import pytest
from sqlalchemy import delete, inspect, text
from sqlmodel import select

from labelq.live import hotstate, saved
from labelq.live.applier import Applier
from labelq.live.hotstate import StateCache, fold_from_sql
from labelq.live.rebuild import rebuild_project
from labelq.live.tuning import Tuning
from labelq.record.db import engine_for, init_schema, session_scope
from labelq.record.models import Label, Project, SavedState, Task
from labelq.record.projects import GoldMark, correct_gold, delete_project, mark_gold
from labelq.record.settings import Settings
from labelq.service import Service

from .conftest import label_some, make_project


def _labelled(url: str, r, policy: str = "auto", tuning: Tuning | None = None):
    """A project with ``first`` labels applied and saved in SQL by the applier, then
    ``more`` applied with no snapshot since (the applier stopped before its next one)."""
    rng = np.random.default_rng(11)
    eng, pid = make_project(url, n_tasks=30, n_gold=3, workers=4, max_labels=3,
                            policy=policy, categories=("x", "y"))
    s = Service(eng, r, settings=Settings(database_url=url))
    first = label_some(s, 30, 4, rng)
    applier = Applier(eng, r, cache=StateCache(), tuning=tuning or Tuning())
    applier.apply_pending(pid, snapshot_every_s=0)
    more = label_some(s, 9, 4, rng)
    applier.apply_pending(pid, snapshot_every_s=1e9)
    return eng, pid, first, more


def _row(eng, pid: int) -> SavedState | None:
    with session_scope(eng) as sess:
        row = sess.get(SavedState, pid)
        if row is not None:
            sess.expunge(row)
        return row


def _same_as_full_fold(eng, r, pid: int) -> None:
    with session_scope(eng) as sess:
        ref = fold_from_sql(sess, sess.get(Project, pid))
    hot = StateCache().get(eng, r, pid)
    assert hot.seq == ref.seq
    np.testing.assert_allclose(hot.policy.predict_proba(hot.state),
                               ref.policy.predict_proba(ref.state))
    np.testing.assert_allclose(hot.policy.priority(hot.state, np.arange(hot.view.n_tasks)),
                               ref.policy.priority(ref.state, np.arange(ref.view.n_tasks)))


@pytest.mark.parametrize("policy", ["auto", "optkg"])
def test_after_a_flush_the_rebuild_folds_only_the_labels_after_the_saved_state(r, db_url,
                                                                              policy):
    # Given labels applied and saved in SQL, then more applied after the last snapshot
    eng, pid, first, more = _labelled(db_url, r, policy)
    row = _row(eng, pid)
    assert row is not None and row.applied_seq == first and row.n_applied == first
    assert first > 0 and more > 0
    # When Redis is lost and the project rebuilt
    r.flushdb()
    done = rebuild_project(eng, r, pid)
    # Then the rebuild started from the saved state and folded only the later labels
    assert done["saved_seq"] == first and done["folded"] == more
    assert done["state_seq"] == first + more
    # giving the posterior (and priorities) of a fold of every label
    _same_as_full_fold(eng, r, pid)
    # and the saved state moved up to what it folded
    assert _row(eng, pid).applied_seq == first + more


def test_the_first_next_after_a_flush_uses_the_saved_state(r, sqlite_url):
    eng, pid, first, more = _labelled(sqlite_url, r)
    r.flushdb()
    issued = Service(eng, r, settings=Settings(database_url=sqlite_url)).next_assignment("p-w1")
    assert issued is not None
    # the rebuild's state, from the saved one, is saved again by the thread that writes its
    # snapshot after the first request (labelq.live.rebuild.ensure_hot): soon, not at once
    deadline = time.monotonic() + 30
    while _row(eng, pid).applied_seq != first + more and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _row(eng, pid).applied_seq == first + more
    _same_as_full_fold(eng, r, pid)


def _delete_a_label(eng, pid, monkeypatch):
    with session_scope(eng) as sess:
        sess.exec(delete(Label).where(Label.project_id == pid, Label.applied_seq == 2))


def _correct_gold(eng, pid, monkeypatch):
    with session_scope(eng) as sess:
        correct_gold(sess, sess.get(Project, pid), "g0", "b")


def _mark_gold(eng, pid, monkeypatch):
    with session_scope(eng) as sess:
        labelled = sess.exec(select(Task.external_id).join(Label, Label.task_id == Task.id)
                             .where(Task.project_id == pid, Task.is_gold == False)  # noqa: E712
                             ).first()
        mark_gold(sess, sess.get(Project, pid), [GoldMark(task=labelled, answer="b")])


def _new_version(eng, pid, monkeypatch):
    # (a new labelq: the version states are written under, and read under in
    # labelq.live.hotstate)
    monkeypatch.setattr(saved, "__version__", "99.0.0")
    monkeypatch.setattr(hotstate, "SAVED_VERSION", "99.0.0")


def _old_format(eng, pid, monkeypatch):
    with session_scope(eng) as sess:
        row = sess.get(SavedState, pid)
        row.format = "LQS1"


def _another_project(eng, pid, monkeypatch):
    with session_scope(eng) as sess:  # the same id, another project (SQLite reuses ids)
        sess.get(Project, pid).name = "renamed"


def _more_tasks(eng, pid, monkeypatch):
    with session_scope(eng) as sess:
        sess.add(Task(project_id=pid, seq=33, external_id="late", category="x"))


def _damaged(eng, pid, monkeypatch):
    with session_scope(eng) as sess:
        row = sess.get(SavedState, pid)
        body = bytearray(row.body)
        body[len(body) // 2] ^= 0xFF
        row.body = bytes(body)


def _damaged_under_its_digest(eng, pid, monkeypatch):
    import hashlib
    with session_scope(eng) as sess:  # unreadable bytes, written as they are
        row = sess.get(SavedState, pid)
        row.body = row.body[:40]
        row.digest = hashlib.sha256(row.body).hexdigest()


def _new_predictions(eng, pid, monkeypatch):
    import tempfile
    from pathlib import Path

    from labelq.record.predictions import load_predictions
    with session_scope(eng) as sess:  # a model's predictions loaded since (issue 42)
        project = sess.get(Project, pid)
        tasks = sess.exec(select(Task.external_id).where(Task.project_id == pid)).all()
        classes = list(project.labels)
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "p.csv"
            share = 1.0 / len(classes)
            path.write_text("id," + ",".join(f"p_{c}" for c in classes) + "\n" + "".join(
                f"{t}," + ",".join(f"{share:.6f}" for _ in classes) + "\n" for t in tasks))
            load_predictions(sess, project, path, model="m", normalise=True)


def _old_state_layout(eng, pid, monkeypatch):
    import hashlib

    from labelq.live import snapshot as binary
    with session_scope(eng) as sess:  # written before auto's state carried the marks
        row = sess.get(SavedState, pid)  # (issue 42): no layout, no log_suggested
        snap = binary.decode(bytes(row.body))
        snap.pop("state_version")
        snap["state"].pop("log_suggested")
        row.body = binary.encode(snap)
        row.digest = hashlib.sha256(row.body).hexdigest()


@pytest.mark.parametrize("change", [_delete_a_label, _correct_gold, _mark_gold, _new_version,
                                    _old_format, _another_project, _more_tasks, _damaged,
                                    _damaged_under_its_digest, _new_predictions,
                                    _old_state_layout])
def test_a_saved_state_that_no_longer_matches_is_rebuilt_from_the_labels(r, db_url, change,
                                                                         monkeypatch):
    # Given a saved state, and then something it was folded from changed
    eng, pid, first, more = _labelled(db_url, r)
    assert _row(eng, pid).applied_seq == first
    change(eng, pid, monkeypatch)
    # When Redis is lost and the project rebuilt
    r.flushdb()
    done = rebuild_project(eng, r, pid)
    # Then the saved state was not used: every applied label was folded
    with session_scope(eng) as sess:
        n = len(sess.exec(select(Label.id).where(Label.project_id == pid,
                                                 Label.applied_seq != None)).all())  # noqa: E711
    assert done["saved_seq"] is None and done["folded"] == n
    _same_as_full_fold(eng, r, pid)
    # and the rebuild saved the state it folded, which the next rebuild uses
    r.flushdb()
    again = rebuild_project(eng, r, pid)
    assert again["saved_seq"] == done["state_seq"] and again["folded"] == 0


def test_the_applier_saves_at_a_bounded_rate(r, sqlite_url):
    # Given an applier that keeps the state in SQL at most every hour
    eng, pid, first, more = _labelled(sqlite_url, r, tuning=Tuning(saved_every_s=3600))
    assert _row(eng, pid).applied_seq == first
    # When it applies more labels and writes Redis snapshots meanwhile
    s = Service(eng, r, settings=Settings(database_url=sqlite_url))
    assert label_some(s, 6, 4, np.random.default_rng(2)) > 0
    applier = Applier(eng, r, cache=StateCache(), tuning=Tuning(saved_every_s=3600))
    applier.apply_pending(pid, snapshot_every_s=0)
    applier.maybe_snapshot(pid, 0)
    # Then each snapshot went to Redis, the SQL one only once (its first)
    assert int(r.get(applier.keys(pid).state_seq)) > first
    assert len(applier.last_saved) == 1
    assert _row(eng, pid).applied_seq == int(r.get(applier.keys(pid).state_seq))
    applier.maybe_snapshot(pid, 0)
    assert len(applier.saved_took) == 1 and _row(eng, pid).applied_seq > first


def test_project_delete_removes_the_saved_state(r, db_url):
    eng, pid, _first, _more = _labelled(db_url, r)
    assert _row(eng, pid) is not None
    with session_scope(eng) as sess:
        delete_project(sess, sess.get(Project, pid))
    assert _row(eng, pid) is None


def test_init_creates_the_table_on_an_old_database(tmp_path):
    eng = engine_for(f"sqlite:///{tmp_path / 'old.db'}")
    init_schema(eng)
    with eng.begin() as conn:  # a database of the labelq before the table
        conn.execute(text("DROP TABLE saved_state"))
    assert "saved_state" not in inspect(eng).get_table_names()
    init_schema(eng)
    assert "saved_state" in inspect(eng).get_table_names()
