"""A rebuild from SQL gives back the counts the hot state kept: the gold questions given to
each worker, in all and per category (the per-category gold schedule reads them)."""

from __future__ import annotations

import numpy as np

from labelq.live.rebuild import rebuild_project
from labelq.record.settings import Settings
from labelq.service import Service

from .conftest import hot_sets, make_project


def test_a_rebuild_restores_the_gold_given_per_category(r, sqlite_url):
    # Given gold questions in two categories handed out under a per-category schedule
    eng, pid = make_project(sqlite_url, n_tasks=8, n_gold=6, workers=2, categories=("x", "y"),
                            gold_schedule="per-category:s=2")
    svc = Service(eng, r, settings=Settings(database_url=sqlite_url), worker_max_age=0,
                  state_max_age=0, rng=np.random.default_rng(1))
    for _ in range(5):
        for h in ("p-w0", "p-w1"):
            a = svc.next_assignment(h)
            if a is not None:
                svc.submit(h, a.assignment_id, "a")
    before = hot_sets(r, pid, eng)["nissued"]
    per_category = {f: n for f, n in before.items() if ":" in f}
    assert per_category and sum(per_category.values()) == sum(
        n for f, n in before.items() if f[0] == "g" and f[1:].isdigit())
    # When the hot state is rebuilt from SQL, the counts per category come back too (and
    # the gold records, which only the applier has written so far)
    rebuild_project(eng, r, pid)
    after = hot_sets(r, pid, eng)["nissued"]
    assert {f: n for f, n in after.items() if not f.startswith(("ga", "gr"))} == before
