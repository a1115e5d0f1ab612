"""A rebuild deletes live leases, so concurrent first requests must rebuild only once."""

import threading

from labelq.live.rebuild import delete_hot, ensure_hot
from labelq.live.redis.keys import Keys
from labelq.record.db import database_id
from labelq.record.settings import Settings
from labelq.service import Service

from .conftest import make_project


def test_concurrent_first_requests_rebuild_once_and_keep_leases(r, sqlite_url):
    # Given a project with no hot state, and eight threads that all need it at once
    eng, pid = make_project(sqlite_url, n_tasks=200, workers=8)
    rebuilt = []
    barrier = threading.Barrier(8)

    def first_use():
        barrier.wait()
        rebuilt.append(ensure_hot(eng, r, pid))

    threads = [threading.Thread(target=first_use) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # Then exactly one of them rebuilt
    assert sorted(rebuilt) == [False] * 7 + [True]
    # And a lease issued afterwards survives later first-use checks
    svc = Service(eng, r, settings=Settings(database_url=sqlite_url))
    a = svc.next_assignment("p-w0")
    assert ensure_hot(eng, r, pid) is False
    assert r.exists(Keys(pid, database_id(eng)).lease(a.assignment_id))
    svc.submit("p-w0", a.assignment_id, "a")


def test_delete_hot_spares_the_locks_of_a_running_rebuild(r):
    k = Keys(5, "a1b2c3")
    r.set(k.rebuild_gate, "token")
    r.set(k.apply_lock, "token")
    r.set(k.spent, "1.0")
    delete_hot(r, k)
    assert r.exists(k.rebuild_gate) and r.exists(k.apply_lock) and not r.exists(k.spent)
