"""Group commit: concurrent submits of one process share a batch, and each still gets its
own answer only once its label is committed."""

from __future__ import annotations

import threading
import time

import pytest
from sqlmodel import func, select

from labelq.db import session_scope
from labelq.errors import NotFound
from labelq.models import Label
from labelq.queue.group import Group
from labelq.queue.keys import Keys
from labelq.service import Service
from labelq.settings import Settings

from .conftest import make_project


def test_group_batches_waiting_callers_and_gives_each_its_result():
    # Given a run that is slow, so callers pile up behind the leader
    sizes = []

    def run(batch):
        sizes.append(len(batch))
        time.sleep(0.05)
        for it in batch:
            it.result = it.args * 10

    g = Group(run)
    out = {}
    ts = [threading.Thread(target=lambda i=i: out.__setitem__(i, g.call(i))) for i in range(8)]
    # When eight threads call at once
    [t.start() for t in ts]
    [t.join() for t in ts]
    # Then each got its own result, and some batch held more than one caller
    assert out == {i: i * 10 for i in range(8)}
    assert sum(sizes) == 8 and max(sizes) > 1


def test_group_hands_an_error_of_the_run_to_every_caller_of_the_batch():
    def run(batch):
        raise RuntimeError("database down")

    with pytest.raises(RuntimeError, match="database down"):
        Group(run).call(1)


def test_concurrent_submits_each_commit_once(r, sqlite_url):
    # Given eight workers holding one assignment each
    eng, pid = make_project(sqlite_url, n_tasks=40, workers=8, max_labels=3)
    s = Service(eng, r, settings=Settings(database_url=sqlite_url), worker_max_age=0)
    issued = {f"p-w{i}": s.next_assignment(f"p-w{i}") for i in range(8)}
    results, errors = {}, []

    def go(h):
        a = issued[h]
        try:
            results[h] = [s.submit(h, a.assignment_id, "a"), s.submit(h, a.assignment_id, "a")]
        except Exception as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)

    # When all of them submit at once, and then submit the same label again
    ts = [threading.Thread(target=go, args=(h,)) for h in issued]
    [t.start() for t in ts]
    [t.join() for t in ts]
    # Then every first submit was new, every second one an idempotent duplicate, and SQL
    # holds exactly one label per assignment; the Redis counters moved once each
    assert not errors
    assert all(not a["duplicate"] and b["duplicate"] for a, b in results.values())
    with session_scope(eng) as session:
        assert session.exec(select(func.count()).select_from(Label)).one() == 8
    k = Keys(pid)
    assert sum(int(v) for v in r.hvals(k.nlabels)) == 8
    assert sum(int(v) for v in r.hvals(k.reserved)) == 0
    # and an assignment nobody issued is still refused inside a batch
    with pytest.raises(NotFound):
        s.submit("p-w0", "f" * 32, "a")


def test_concurrent_submits_with_next_each_get_their_own_next_assignment(r, sqlite_url):
    # Given eight workers, each with one assignment and an inbox the applier filled
    from labelq.queue.applier import apply_pending
    from labelq.queue.hotstate import StateCache
    eng, pid = make_project(sqlite_url, n_tasks=60, workers=8, max_labels=3)
    s = Service(eng, r, settings=Settings(database_url=sqlite_url), worker_max_age=0)
    k = Keys(pid)
    issued = {f"p-w{i}": s.next_assignment(f"p-w{i}") for i in range(8)}
    apply_pending(eng, r, pid, cache=StateCache())  # refills the active workers' inboxes
    heads = {h: r.lindex(k.inbox(i), 0).decode() for i, h in enumerate(issued)}
    chains, errors = {}, []

    def go(h):
        try:
            a, got = issued[h], []
            for _ in range(3):  # submit-and-continue, three times
                out = s.submit(h, a.assignment_id, "a", then_next=True)
                assert not out["duplicate"]
                a = out["next"]
                got.append(a)
            chains[h] = got
        except Exception as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)

    # When they all submit at once with then_next, three times over
    ts = [threading.Thread(target=go, args=(h,)) for h in issued]
    [t.start() for t in ts]
    [t.join() for t in ts]
    # Then each got the head of their own inbox first, then fresh tasks, never one twice,
    # and the last next came with its lease started (live in `leases`, no longer held)
    assert not errors and len(chains) == 8
    for h, got in chains.items():
        assert got[0].assignment_id == heads[h]
        tasks = [issued[h].task_seq] + [a.task_seq for a in got]
        assert len(set(tasks)) == 4
        last = got[-1]
        assert r.hget(k.lease(last.assignment_id), "held") is None
        assert int(r.zscore(k.leases, last.assignment_id)) == last.expires_ms
    with session_scope(eng) as session:
        assert session.exec(select(func.count()).select_from(Label)).one() == 24
