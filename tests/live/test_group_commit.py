"""Group commit: concurrent submits of one process share a batch, and each still gets its
own answer only once its label is committed."""

from __future__ import annotations

import threading
import time

import pytest
from sqlmodel import func, select

from labelq.errors import NotFound
from labelq.live.group import Group
from labelq.live.redis.keys import Keys
from labelq.record.db import database_id, session_scope
from labelq.record.models import Label
from labelq.record.settings import Settings
from labelq.service import Service

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


def test_stages_of_successive_batches_overlap():
    # Given two stages, the second of which waits until another batch is in the first
    in_first = threading.Event()
    first_calls = []

    def first(batch):
        first_calls.append([it.args for it in batch])
        if len(first_calls) == 2:
            in_first.set()

    def second(batch):
        if batch[0].args == "a":  # the first batch stays here until the next one starts
            assert in_first.wait(5), "the next batch never started its first stage"
        for it in batch:
            it.result = it.args.upper()

    g = Group(first, second)
    out = {}
    ta = threading.Thread(target=lambda: out.__setitem__("a", g.call("a")))
    ta.start()
    while not first_calls:
        time.sleep(0.001)
    # When a second call comes while the first batch is in its second stage
    out["b"] = g.call("b")
    ta.join()
    # Then it ran its first stage meanwhile (else the first batch's assertion failed), and
    # both callers got their own results
    assert out == {"a": "A", "b": "B"}
    assert first_calls == [["a"], ["b"]]


def test_an_item_finished_in_an_early_stage_returns_before_the_batch_ends():
    # Given a first stage that refuses "no" (and holds the first batch, "hold", until told),
    # and a last stage that waits until the refused caller has returned
    gate, returned, holding = threading.Event(), threading.Event(), threading.Event()

    def first(batch):
        if batch[0].args == "hold":
            holding.set()
            assert gate.wait(5)
        for it in batch:
            if it.args == "no":
                it.error = ValueError("refused")

    def last(batch):
        if batch[0].args != "hold":
            assert returned.wait(5), "the refused caller waited for the whole batch"
        for it in batch:
            it.result = it.args

    g = Group(first, last)
    out, errors = {}, {}

    def call(x):
        try:
            out[x] = g.call(x)
        except ValueError as exc:
            errors[x] = exc
        finally:
            if x == "no":
                returned.set()

    def queued(n):
        deadline = time.monotonic() + 5
        while len(g._queue) < n and time.monotonic() < deadline:
            time.sleep(0.001)
    ts = [threading.Thread(target=call, args=("hold",))]
    ts[0].start()
    assert holding.wait(5)
    for x, n in (("yes", 1), ("no", 2)):  # "yes" queued first, so it leads their batch
        ts.append(threading.Thread(target=call, args=(x,)))
        ts[-1].start()
        queued(n)
    # When "yes" and "no" run as the next batch and "no" is refused in its first stage
    gate.set()
    [t.join(10) for t in ts]
    # Then "no" got its error without waiting for the last stage, and "yes" its result
    assert out == {"hold": "hold", "yes": "yes"} and str(errors["no"]) == "refused"


def test_an_error_in_a_stage_goes_to_its_items_and_the_group_goes_on():
    # Given a second stage that fails once
    calls = []

    def first(batch):
        for it in batch:
            if it.args < 0:
                it.result = "early"

    def second(batch):
        calls.append(len(batch))
        if len(calls) == 1:
            raise RuntimeError("database down")
        for it in batch:
            it.result = it.args

    g = Group(first, second)
    # When the first call meets the failure
    with pytest.raises(RuntimeError, match="database down"):
        g.call(1)
    # Then later calls are served, and an item finished early never reaches the failing
    # stage
    assert g.call(2) == 2
    assert g.call(-1) == "early"
    assert calls == [1, 1]


def test_many_callers_through_three_stages_each_get_their_result_in_batch_order():
    # Given three stages that record the batches they see, with small random delays
    import random
    seen = [[], [], []]
    lock = threading.Lock()

    def stage(i):
        def run(batch):
            with lock:
                seen[i].append(tuple(it.args for it in batch))
            time.sleep(random.random() / 2000)
            if i == 2:
                for it in batch:
                    it.result = it.args * 2
        return run

    g = Group(stage(0), stage(1), stage(2))
    out, errors = {}, []

    def go(t):
        try:
            for j in range(100):
                x = t * 1000 + j
                got = g.call(x)
                assert got == 2 * x
                out[x] = got
        except Exception as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)

    # When sixteen threads call a hundred times each
    ts = [threading.Thread(target=go, args=(t,)) for t in range(16)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    # Then every call got its own result, every stage saw the same batches in the same
    # order, each item once, and some batch held several callers
    assert not errors and len(out) == 1600
    assert seen[0] == seen[1] == seen[2]
    items = [x for b in seen[0] for x in b]
    assert sorted(items) == sorted(out) and len(items) == 1600
    assert max(len(b) for b in seen[0]) > 1


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
    k = Keys(pid, database_id(eng))
    assert sum(int(v) for v in r.hvals(k.nlabels)) == 8
    assert sum(int(v) for v in r.hvals(k.reserved)) == 0
    # and an assignment nobody issued is still refused inside a batch
    with pytest.raises(NotFound):
        s.submit("p-w0", "f" * 32, "a")


def test_concurrent_submits_with_next_each_get_their_own_next_assignment(r, sqlite_url):
    # Given eight workers, each with one assignment and an inbox the applier filled
    from labelq.live.applier import Applier
    from labelq.live.hotstate import StateCache
    eng, pid = make_project(sqlite_url, n_tasks=60, workers=8, max_labels=3)
    s = Service(eng, r, settings=Settings(database_url=sqlite_url), worker_max_age=0)
    k = Keys(pid, database_id(eng))
    issued = {f"p-w{i}": s.next_assignment(f"p-w{i}") for i in range(8)}
    Applier(eng, r, cache=StateCache()).apply_pending(pid)  # refills the active workers' inboxes
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
