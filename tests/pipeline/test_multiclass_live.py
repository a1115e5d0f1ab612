"""Issue 20's policies on the live path (real Redis, SQLite and PostgreSQL): the multi-class
worker-reliability policies and the overlap baselines fold labels exactly once, keep the
pending index at the policy's own priorities, and rebuild to the same posterior after a
Redis flush."""

from __future__ import annotations

import numpy as np
import pytest
from live.test_applier import fresh_posterior

from labelq.live.applier import Applier
from labelq.live.hotstate import StateCache
from labelq.live.rebuild import rebuild_project
from labelq.live.redis.keys import Keys
from labelq.record.db import database_id
from labelq.record.settings import Settings
from labelq.service import Service

from .conftest import make_project


@pytest.mark.parametrize("policy", ["optkg-workers", "optkg-multi", "overlap:n=2",
                                    "dynamic-overlap:min=1,max=3,confidence=0.8"])
def test_three_class_project_applies_and_rebuilds(r, db_url, policy):
    rng = np.random.default_rng(4)
    eng, pid = make_project(db_url, n_tasks=24, workers=4, max_labels=3, policy=policy,
                            labels="a,b,c", categories=("x", "y"))
    s = Service(eng, r, settings=Settings(database_url=db_url))
    n = 0
    for i in range(60):
        h = f"p-w{i % 4}"
        a = s.next_assignment(h)
        if a is not None:
            s.submit(h, a.assignment_id, "abc"[int(rng.integers(3))])
            n += 1
    assert n > 24
    cache = StateCache()
    assert Applier(eng, r, cache=cache).apply_pending(pid).applied == n
    hot = cache.peek(pid)
    before = hot.policy.predict_proba(hot.state)
    assert before.shape == (24, 3)
    np.testing.assert_allclose(before, fresh_posterior(eng, pid)[0])
    for t, p in r.zrange(Keys(pid, database_id(eng)).pending, 0, -1, withscores=True):
        assert p == pytest.approx(float(hot.policy.priority(hot.state, np.array([int(t)]))[0]))
    r.flushdb()
    rebuild_project(eng, r, pid)
    rebuilt = StateCache().get(eng, r, pid)
    np.testing.assert_allclose(rebuilt.policy.predict_proba(rebuilt.state), before)
