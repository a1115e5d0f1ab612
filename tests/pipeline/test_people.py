"""One person labels in two projects (issue 43), through the service with a real Redis and
a real Celery worker applying the labels: each project's labels land on the person's
enrolment there, each posterior equals a fresh fold from SQL, and the quality rule that
pauses them in one project leaves the other alone."""

from __future__ import annotations

import time

import numpy as np
import pytest
from sqlmodel import select

from labelq.errors import Forbidden
from labelq.live.hotstate import fold_from_sql
from labelq.record.db import session_scope
from labelq.record.models import Label, Project, Worker
from labelq.record.projects import enroll_worker, get_project, get_worker
from labelq.record.settings import Settings
from labelq.service import Service
from workers.main import create_app

from .conftest import make_project
from .test_celery import wait_applied

QUALITY = {"threshold": 0.7, "min_gold": 10, "confidence": 0.95, "rule": "sequential"}


@pytest.mark.timeout(240)
def test_one_person_labels_in_two_projects(r, redis_url, sqlite_url, celery_env,
                                           celery_worker):
    # Given two projects in one database, each with an annotator of its own, and a person
    # "pat" enrolled in both (one token); project a scores gold with a quality rule
    eng, pa = make_project(sqlite_url, name="a", n_tasks=40, n_gold=30, workers=1,
                           max_labels=2, gold_schedule="fixed:rate=0.5", quality=QUALITY)
    _, pb = make_project(sqlite_url, name="b", n_tasks=30, workers=1, max_labels=2,
                         labels="x,y,z")
    with session_scope(eng) as s:
        _, token = enroll_worker(s, get_project(s, "a"), "pat")
        _, again = enroll_worker(s, get_project(s, "b"), "pat")
        assert token and again is None
    app = create_app(redis_url)
    notify = lambda p: app.send_task("labelq.apply_labels", args=[p], queue="labelq")  # noqa
    svc = Service(eng, r, settings=Settings(database_url=sqlite_url), notify=notify,
                  state_max_age=0.05, worker_max_age=0.2)
    celery_worker(celery_env(sqlite_url))
    rng = np.random.default_rng(7)
    given = {("pat", pa): 0, ("pat", pb): 0, ("a-w0", pa): 0, ("b-w0", pb): 0}
    paused_at = None

    def label(handle, pid, pick):
        a = svc.next_assignment(handle, pid)
        if a is None:
            return False
        svc.submit(handle, a.assignment_id, pick(a), project_id=pid)
        given[(handle, pid)] += 1
        return True

    # When pat alternates between the projects, answering project a's gold wrong, and the
    # projects' own annotators label too
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        more = False
        if paused_at is None:
            try:
                # (in a, the gold answer is "a"; pat answers "b" to everything there)
                more |= label("pat", pa, lambda a: "b")
            except Forbidden:
                paused_at = given[("pat", pa)]
        more |= label("pat", pb, lambda a: "xyz"[int(rng.integers(3))])
        more |= label("b-w0", pb, lambda a: "xyz"[int(rng.integers(3))])
        more |= label("a-w0", pa, lambda a: "a")
        if not more and paused_at is not None:
            break
        if not more:
            time.sleep(0.3)  # (the applier's pause lands within the worker cache's age)
    # Then the quality rule paused pat in a only, and pat went on labelling in b
    assert paused_at is not None and paused_at >= 10, given
    with session_scope(eng) as s:
        assert get_worker(s, "pat", "a").status == "paused"
        assert get_worker(s, "pat", "b").status == "active"
        with pytest.raises(Forbidden):
            svc.next_assignment("pat", pa)
    assert given[("pat", pb)] > 0 and given[("pat", pb)] + given[("b-w0", pb)] == 60
    # and every label landed on the enrolment of its own project, applied by the worker
    n_a = given[("pat", pa)] + given[("a-w0", pa)]
    wait_applied(eng, pa, n_a)
    wait_applied(eng, pb, 60)
    with session_scope(eng) as s:
        for pid in (pa, pb):
            mine = get_worker(s, "pat", pid)
            rows = s.exec(select(Label.worker_id, Worker.project_id)
                          .join(Worker, Worker.id == Label.worker_id)
                          .where(Label.project_id == pid)).all()
            assert {p for _, p in rows} == {pid}
            assert sum(w == mine.id for w, _ in rows) == given[("pat", pid)]
            # and each project's live posterior equals a fresh fold from SQL
            hot = fold_from_sql(s, s.get(Project, pid))
            live = svc.cache.get(eng, r, pid)
            np.testing.assert_allclose(live.policy.predict_proba(live.state),
                                       hot.policy.predict_proba(hot.state))
