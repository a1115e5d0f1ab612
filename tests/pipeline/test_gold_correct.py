"""Correcting a wrong gold answer (``labelq gold correct``): scores, the policy state of
running processes, and the annotators it wrongly paused."""

from __future__ import annotations

import numpy as np
from click.testing import CliRunner
from sqlmodel import select

from cli.main import cli
from labelq.live.applier import Applier
from labelq.live.hotstate import StateCache, bump_epoch, fold_from_sql
from labelq.live.redis.keys import Keys
from labelq.record.db import database_id, session_scope
from labelq.record.models import Project, Task
from labelq.record.projects import correct_gold, get_project, set_worker_status
from labelq.record.settings import Settings
from labelq.service import Service

from .conftest import make_project


def answer_golds_then_a_task(s: Service, handle: str, value: str) -> int:
    """Answer ``value`` to every gold question given first, then to one task."""
    n = 0
    while (a := s.next_assignment(handle)) is not None:
        s.submit(handle, a.assignment_id, value)
        if not a.task.startswith("g"):
            return n
        n += 1
    return n


def test_a_corrected_gold_answer_reaches_the_running_state_and_names_who_to_resume(
        r, redis_url, sqlite_url):
    # Given three gold questions loaded with the wrong answer 'a', which a careful
    # annotator answered 'b' (right) and was paused for, and a running applier's state
    eng, pid = make_project(sqlite_url, n_tasks=4, n_gold=3, workers=2,
                            policy="optkg-workers", gold_schedule="fixed:rate=1")
    s = Service(eng, r, settings=Settings(database_url=sqlite_url), worker_max_age=0,
                state_max_age=0)
    assert answer_golds_then_a_task(s, "p-w0", "b") == 3
    cache = StateCache()
    Applier(eng, r, cache=cache).apply_pending(pid, refill=False)
    with session_scope(eng) as db:
        db.get(Project, pid).quality = {"threshold": 0.8, "min_gold": 3}
        set_worker_status(db, "p-w0", "paused")
    before = cache.peek(pid).policy.predict_proba(cache.peek(pid).state).copy()
    epoch = int(r.hget(Keys(pid, database_id(eng)).meta, "epoch") or 0)  # (the first request's build: 1)
    # When the operator corrects each answer to 'b'
    env = {"LABELQ_DATABASE_URL": sqlite_url, "LABELQ_REDIS_URL": redis_url}
    outs = [CliRunner().invoke(cli, ["gold", "correct", "p", f"g{i}", "b"], env=env)
            for i in range(3)]
    # Then each says what changed, and the last names the annotator to resume
    assert all(o.exit_code == 0 for o in outs), [o.output for o in outs]
    assert "g0: answer a -> b (1 gold answer re-scored)" in outs[0].output
    assert "no longer flags" not in outs[0].output  # (1 of 3 right: still flagged)
    assert "no longer flags: p-w0" in outs[1].output  # (2 of 3: no longer)
    # and the running state folds again from SQL under the corrected truths
    hot = cache.get(eng, r, pid)
    assert hot.epoch == epoch + 3
    gold_seq = [t for t in range(hot.view.n_tasks) if hot.view.is_gold[t]]
    assert [int(hot.view.gold_answer[t]) for t in gold_seq] == [1, 1, 1]
    with session_scope(eng) as db:
        fresh = fold_from_sql(db, db.get(Project, pid))
    after = hot.policy.predict_proba(hot.state)
    np.testing.assert_allclose(after, fresh.policy.predict_proba(fresh.state))
    assert not np.allclose(after, before)  # the task's one label, from a worker now
    # trusted: it counts for 'b' more than when their gold said they were always wrong
    labelled = int(np.flatnonzero(np.abs(after[:, 1] - 0.5) > 1e-9)[0])
    assert after[labelled, 1] > before[labelled, 1]


def test_correct_gold_refuses_what_is_not_a_gold_question(r, sqlite_url):
    eng, pid = make_project(sqlite_url, n_tasks=2, n_gold=1, workers=0)
    import pytest

    from labelq.errors import InputError, NotFound
    with session_scope(eng) as db:
        p = get_project(db, "p")
        with pytest.raises(InputError, match="not a gold question"):
            correct_gold(db, p, "t0", "b")
        with pytest.raises(InputError, match="label set"):
            correct_gold(db, p, "g0", "c")
        with pytest.raises(NotFound):
            correct_gold(db, p, "nope", "b")
        assert db.exec(select(Task.gold_answer).where(Task.external_id == "g0")).one() == "a"
    k = Keys(pid, database_id(eng))
    assert bump_epoch(r, k) == 1 and bump_epoch(r, k) == 2
