"""The lazy rebuild after losing Redis (issue 44, ``labelq.live.backfill``): the first
request's rebuild puts only the highest priorities in ``pending`` and the rest streams in
behind; meanwhile no task outside ``pending`` is handed out, and the end state is the full
rebuild's. Real Redis; SQLite and PostgreSQL."""

from __future__ import annotations

import time

import fakeredis
import numpy as np
import pytest
from sqlmodel import select

import labelq.live.rebuild as rebuild_module
from labelq.live.backfill import (
    _backfill_source,
    backfill,
    backfill_step,
    bulk_write,
    resume_stalled,
)
from labelq.live.hotstate import StateCache
from labelq.live.rebuild import rebuild_project
from labelq.live.redis.keys import Keys
from labelq.live.redis.wire import load_script
from labelq.record.db import database_id, session_scope
from labelq.record.models import Assignment, Label, Task, Worker, utcnow
from labelq.record.settings import Settings
from labelq.service import Service

from .conftest import make_project

FIRST = 50


def labelled_project(url, workers=3):
    """300 tasks, cap 2, three annotators (or ``workers``); w0 labelled tasks 0-59 and w1
    tasks 0-19 (those at the cap), all applied: priorities (uniform: minus the labels)
    differ."""
    eng, pid = make_project(url, n_tasks=300, workers=workers, max_labels=2)
    with session_scope(eng) as s:
        tid = dict(s.exec(select(Task.seq, Task.id).where(Task.project_id == pid)).all())
        wid = dict(s.exec(select(Worker.seq, Worker.id).where(Worker.project_id == pid)).all())
        pairs = [(0, t) for t in range(60)] + [(1, t) for t in range(20)]
        now = utcnow()
        for j, (w, t) in enumerate(pairs):
            s.add(Assignment(id=f"a{j}", project_id=pid, task_id=tid[t], worker_id=wid[w],
                             issued=now, expires=now, state="submitted"))
            s.add(Label(assignment_id=f"a{j}", project_id=pid, task_id=tid[t],
                        worker_id=wid[w], value="a", received=now, applied_seq=j + 1))
    return eng, pid


def everything(r, k):
    """The hot state a rebuild writes, but its epoch-stamped snapshot and meta."""
    out = {}
    for key in r.scan_iter(match=k.pattern()):
        name = key.decode().rsplit(":", 1)[-1] if b":seen:" not in key else key.decode()
        kind = r.type(key)
        if name in ("state", "meta", "apply_lock", "rebuild_gate"):
            continue
        if kind == b"zset":
            out[name] = dict(r.zrange(key, 0, -1, withscores=True))
        elif kind == b"hash":
            out[name] = r.hgetall(key)
        elif kind == b"set":
            out[name] = r.smembers(key)
        else:
            out[name] = r.get(key)
    return out


PLAN_KEYS = ("warm", "warm_base", "warm_seen", "warm_ix")


def held_back(name, value, planned):
    """A full rebuild's key ``name`` as a lazy one writes it before the stream: the
    planned tasks' ``nlabels``/``applied`` fields and ``seen`` members left out."""
    if name in ("nlabels", "applied"):
        return {t: n for t, n in value.items() if t not in planned}
    if ":seen:" in name:
        return value - planned
    return value


def test_lazy_rebuild_serves_from_the_top_and_ends_as_the_full_one(r, db_url):
    eng, pid = labelled_project(db_url)
    k = Keys(pid, database_id(eng))
    # Given the full rebuild's hot state as the reference
    rebuild_project(eng, r, pid)
    full = everything(r, k)
    r.flushdb()
    # When Redis is lost and the lazy rebuild puts in only the first 50
    out = rebuild_project(eng, r, pid, first=FIRST)
    # Then pending holds 50 of the highest priorities, at the full rebuild's scores, the
    # plan the rest, and every other key is already the full rebuild's
    ref = full["pending"]
    head = dict(r.zrange(k.pending, 0, -1, withscores=True))
    assert len(head) == FIRST and out["streaming"] == len(ref) - FIRST
    assert all(ref[t] == s for t, s in head.items())
    assert min(head.values()) >= max(s for t, s in ref.items() if t not in head)
    # (but the planned tasks' counters and seen entries: held back, with their chunks)
    planned = {str(t).encode() for t in np.frombuffer(r.get(k.warm), dtype="<i8").tolist()}
    now = everything(r, k)
    assert {n: v for n, v in now.items() if n not in ("pending", *PLAN_KEYS)} == \
        {n: held_back(n, v, planned) for n, v in full.items() if n != "pending"}
    assert any(v != held_back(n, v, planned) for n, v in full.items())  # some are
    # And while it is warming, decisions hand out only tasks in pending
    s = Service(eng, r, settings=Settings(database_url=db_url), worker_max_age=0)
    for _ in range(8):
        a = s.next_assignment("p-w2")
        assert a is not None and a.task_seq in {int(t) for t in head}
        s.submit("p-w2", a.assignment_id, "b")
    # When the rest streams in (in steps of 60)
    cache = StateCache()
    steps = 0
    while backfill_step(eng, r, pid, k, cache, chunk=60) is not None:
        steps += 1
    # Then pending is the full rebuild's, but for what happened meanwhile: nothing at its
    # cap came back, and the plan is gone
    assert steps == -(-(len(ref) - FIRST) // 60)
    got = dict(r.zrange(k.pending, 0, -1, withscores=True))
    parked = {int(t) for t in r.zrange(k.parked, 0, -1)}
    nlabels = {int(t): int(n) for t, n in r.hgetall(k.nlabels).items()}
    assert {int(t) for t in got} == {int(t) for t in ref} - {
        t for t, n in nlabels.items() if n >= 2} - parked
    assert all(got[t] == ref[t] for t in got if t not in head)
    assert not r.exists(k.warm) and not r.hexists(k.meta, "warming")


def test_a_lazy_rebuild_and_its_stream_leave_the_full_rebuilds_state_key_for_key(r, db_url):
    eng, pid = labelled_project(db_url)
    k = Keys(pid, database_id(eng))
    rebuild_project(eng, r, pid)
    full = everything(r, k)
    r.flushdb()
    # When the lazy rebuild's plan streams in, in uneven steps, with nothing else going on
    rebuild_project(eng, r, pid, first=FIRST)
    cache = StateCache()
    while backfill_step(eng, r, pid, k, cache, chunk=70) is not None:
        pass
    # Then every key, counters and seen sets included, is the full rebuild's
    assert everything(r, k) == full


def test_labels_for_planned_tasks_while_streaming_end_as_a_full_rebuild(r, db_url):
    from labelq.live.applier import Applier
    eng, pid = labelled_project(db_url, workers=4)
    k = Keys(pid, database_id(eng))
    # Given leases of w2 and w3 issued before Redis is lost, on tasks w0 then labelled too
    # (so after the flush they are below the highest priorities: in the plan, their
    # counts held back)
    rebuild_project(eng, r, pid)
    s = Service(eng, r, settings=Settings(database_url=db_url), worker_max_age=0)
    a2, a3 = s.next_assignment("p-w2"), s.next_assignment("p-w3")
    x2, x3 = a2.task_seq, a3.task_seq
    assert x2 != x3
    with session_scope(eng) as ses:
        tid = dict(ses.exec(select(Task.seq, Task.id).where(Task.project_id == pid)).all())
        w0 = ses.exec(select(Worker.id).where(Worker.project_id == pid,
                                              Worker.seq == 0)).one()
        now = utcnow()
        for j, t in ((80, x2), (81, x3)):
            ses.add(Assignment(id=f"a{j}", project_id=pid, task_id=tid[t], worker_id=w0,
                               issued=now, expires=now, state="submitted"))
            ses.add(Label(assignment_id=f"a{j}", project_id=pid, task_id=tid[t],
                          worker_id=w0, value="a", received=now, applied_seq=j + 1))
    r.flushdb()
    rebuild_project(eng, r, pid, first=FIRST)
    planned = np.frombuffer(r.get(k.warm), dtype="<i8").tolist()
    assert x2 in planned and x3 in planned and r.hget(k.nlabels, x2) is None
    cache = StateCache()
    assert backfill_step(eng, r, pid, k, cache, chunk=60) == 60  # a first step
    # When w2 and w3 submit their lost leases (taken again: recorded) before their chunk
    for h, a in (("p-w2", a2), ("p-w3", a3)):
        assert s.submit(h, a.assignment_id, "b")["duplicate"] is False
    assert r.hget(k.nlabels, x2) == b"1"  # the live count alone, the rebuild's held back
    # and the applier folds them: w2's label as usual (HINCRBY), w3's as the replay of a
    # label an applier that died before its Redis writes committed (an absolute count)
    with session_scope(eng) as ses:
        top = max(x for x in ses.exec(select(Label.applied_seq)).all() if x is not None)
        lab = ses.exec(select(Label).where(Label.assignment_id == a3.assignment_id)).one()
        lab.applied_seq = top + 1
        ses.add(lab)
    Applier(eng, r, cache=StateCache(track_dirty=True)).apply_pending(pid, refill=False)
    assert r.hget(k.applied, x2) == b"1" and r.hget(k.applied, x3) == b"1"
    # and the rest streams in
    backfill(eng, r, pid, k, cache)
    assert not r.exists(k.warm, k.warm_base, k.warm_seen, k.warm_ix)
    lazy = everything(r, k)
    # Then the counters, seen sets, pending and parked are a full rebuild's of the record
    # now: w2's and w3's tasks are at their cap and stayed out of pending
    r.flushdb()
    rebuild_project(eng, r, pid)
    full = everything(r, k)
    names = [n for n in full if n in ("nlabels", "applied", "wcount", "nissued", "pending",
                                      "parked") or ":seen:" in n]
    assert {n: lazy.get(n) for n in names} == {n: full[n] for n in names}
    assert full["nlabels"][str(x2).encode()] == b"2" and full["applied"][str(x3).encode()] == b"2"
    assert r.zscore(k.pending, x2) is None and r.zscore(k.pending, x3) is None


def test_the_snapshot_is_written_after_the_first_request_and_a_load_meanwhile_reads_sql(
        r, db_url, caplog):
    import logging

    from labelq.live.hotstate import fold_from_sql
    from labelq.record.models import Project
    eng, pid = labelled_project(db_url)
    k = Keys(pid, database_id(eng))
    rebuild_project(eng, r, pid)  # (the state kept in SQL too)
    r.flushdb()
    # When the first request's lazy rebuild leaves its snapshot for later
    out = rebuild_project(eng, r, pid, cache=StateCache(), first=FIRST, snapshot=False)
    assert r.hexists(k.meta, "built") and not r.exists(k.state)
    # Then a process loading the state meanwhile reads the one kept in SQL (not a fold of
    # every label), the same as a fold from the labels
    with caplog.at_level(logging.INFO, logger="labelq.live.saved"):
        hot = StateCache().get(eng, r, pid)
    assert "saved state at applied seq 80 loaded" in caplog.text
    with session_scope(eng) as ses:
        ref = fold_from_sql(ses, ses.get(Project, pid))
    assert hot.seq == ref.seq == 80
    np.testing.assert_allclose(hot.policy.predict_proba(hot.state),
                               ref.policy.predict_proba(ref.state))
    # and the keeper writes the snapshot (once)
    out["keep"]()
    assert int(r.get(k.state_seq)) == 80 and r.exists(k.state)


def test_a_task_no_longer_settled_comes_back_only_once_streamed(r, db_url):
    from labelq.live.modelsettled import sync_settled
    eng, pid = labelled_project(db_url)
    k = Keys(pid, database_id(eng))
    rebuild_project(eng, r, pid, first=FIRST)
    # Given a planned task w0 labelled (its count held back) that a model had settled
    # alone (auto:min_human_labels=0: out of pending, in settled) and no longer does
    t = 30
    assert t in np.frombuffer(r.get(k.warm), dtype="<i8").tolist()
    r.sadd(k.settled, t)
    hot = StateCache().get(eng, r, pid)
    # When the applier syncs the settled tasks before the stream brought it in
    sync_settled(r, k, hot.policy, hot.state, hot.view.is_gold, 2)
    # Then it stays out of pending (a decision would see it with no label and w0's seen
    # set without it), and the stream leaves it there too
    assert r.zscore(k.pending, t) is None and r.sismember(k.settled, t)
    backfill(eng, r, pid, k)
    assert r.zscore(k.pending, t) is None and r.hget(k.nlabels, t) == b"1"
    # and once streamed the next sync puts it back, open at its full count
    sync_settled(r, k, hot.policy, hot.state, hot.view.is_gold, 2)
    assert r.zscore(k.pending, t) is not None and not r.sismember(k.settled, t)


def test_a_cap_raised_while_streaming_ends_as_a_full_rebuild_under_it(r, db_url):
    from labelq.live.rebuild import reopen_below_cap
    from labelq.record.models import Project
    eng, pid = labelled_project(db_url)
    k = Keys(pid, database_id(eng))
    rebuild_project(eng, r, pid, first=FIRST)
    cache = StateCache()
    backfill_step(eng, r, pid, k, cache, chunk=60)
    # When the cap goes from 2 to 3 while the plan streams in
    with session_scope(eng) as ses:
        p = ses.get(Project, pid)
        p.max_labels = 3
        ses.add(p)
    assert reopen_below_cap(eng, r, pid, cache) == 20  # (tasks 0-19, at the old cap)
    assert r.hget(k.meta, "cap") == b"3"
    backfill(eng, r, pid, k, cache)
    # Then pending and the counters are a full rebuild's under the new cap
    lazy = everything(r, k)
    r.flushdb()
    rebuild_project(eng, r, pid)
    full = everything(r, k)
    assert {int(t) for t in lazy["pending"]} == {int(t) for t in full["pending"]}
    assert lazy["nlabels"] == full["nlabels"] and lazy["applied"] == full["applied"]


def test_first_request_after_a_flush_streams_the_rest_behind(r, db_url, monkeypatch):
    eng, pid = labelled_project(db_url)
    k = Keys(pid, database_id(eng))
    rebuild_project(eng, r, pid)
    ref = {int(t) for t in r.zrange(k.pending, 0, -1)}
    r.flushdb()
    monkeypatch.setattr(rebuild_module, "FIRST", FIRST)
    # When the first request after a flush rebuilds (the service's ensure_hot)
    s = Service(eng, r, settings=Settings(database_url=db_url), worker_max_age=0)
    a = s.next_assignment("p-w2")
    assert a is not None
    # Then the rest of pending comes in behind it, from a thread of this process
    deadline = time.monotonic() + 60
    while r.hexists(k.meta, "warming") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not r.hexists(k.meta, "warming")
    assert {int(t) for t in r.zrange(k.pending, 0, -1)} | \
        {int(t) for t in r.zrange(k.parked, 0, -1)} == ref
    assert r.exists(k.state)  # (its snapshot written by the same thread, first)


def test_a_stream_of_an_older_rebuild_writes_nothing_and_a_stalled_one_is_resumed(r, db_url):
    eng, pid = labelled_project(db_url)
    k = Keys(pid, database_id(eng))
    rebuild_project(eng, r, pid, first=FIRST)
    old_epoch = r.hget(k.meta, "epoch").decode()
    # Given a newer lazy rebuild since (a new epoch, a new plan)
    rebuild_project(eng, r, pid, first=FIRST)
    before = r.zcard(k.pending)
    # When a streamer of the older one sends its chunk
    chunk = np.zeros(1, dtype=[("s", "<f8"), ("m", "<i8")])
    chunk["m"] = 299
    got = load_script(r, _backfill_source())(
        keys=[k.meta, k.pending, k.warm], args=[old_epoch, "0", "1", chunk.tobytes(), "0"])
    # Then it is refused and writes nothing
    assert int(got) == -1 and r.zcard(k.pending) == before
    # And a stream nobody moves for long is finished by the beat's upkeep
    assert resume_stalled(eng, r, pid, k, None, stale_ms=3_600_000) == 0
    assert resume_stalled(eng, r, pid, k, None, stale_ms=0) > 0
    assert not r.hexists(k.meta, "warming")
    # a full rebuild (labelq rebuild) drops any plan: nothing is left to stream
    rebuild_project(eng, r, pid, first=FIRST)
    rebuild_project(eng, r, pid)
    assert backfill(eng, r, pid, k) == 0 and not r.exists(k.warm)


@pytest.mark.parametrize("server", ["redis", "fakeredis"])
def test_bulk_writes_are_the_plain_commands(r, server):
    # Given scores that print long and members past a million
    client = r if server == "redis" else fakeredis.FakeRedis()
    rng = np.random.default_rng(3)
    members = rng.choice(10**9, size=12_345, replace=False).astype(np.int64)
    scores = rng.normal(size=members.size) / 3
    scores[:3] = [-0.0, 1e300, -1e-300]
    # When written in bulk
    bulk_write(client, "z", "ZADD", members, scores)
    bulk_write(client, "h", "HSET", members, members * 3)
    bulk_write(client, "s", "SADD", members)
    bulk_write(client, "z", "ZADDNX", members[:10], np.zeros(10))
    # Then Redis holds exactly what ZADD/HSET/SADD of the Python values would have
    z = client.zrange("z", 0, -1, withscores=True)
    assert {int(m): s for m, s in z} == dict(zip(members.tolist(), scores.tolist(), strict=True))
    assert {int(f): int(v) for f, v in client.hgetall("h").items()} == \
        dict(zip(members.tolist(), (members * 3).tolist(), strict=True))
    assert {int(m) for m in client.smembers("s")} == set(members.tolist())
    client.delete("z", "h", "s")


def test_a_task_marked_gold_while_warming_goes_to_gold_not_pending(r, db_url):
    from labelq.live.goldmark import mark_gold_live
    from labelq.record.projects import GoldMark
    eng, pid = labelled_project(db_url)
    k = Keys(pid, database_id(eng))
    # Given a lazy rebuild whose plan holds task t299 (no labels: streamed in last)
    rebuild_project(eng, r, pid, first=FIRST)
    plan = np.frombuffer(r.get(k.warm), dtype="<i8")
    assert 299 in plan.tolist() and r.zscore(k.pending, 299) is None
    # When it is marked gold before the stream reaches it, then the stream ends
    mark_gold_live(eng, r, "p", [GoldMark("t299", "a")])
    backfill(eng, r, pid, k)
    # Then it is a gold question, and not in pending
    assert r.sismember(k.gold, 299) and r.zscore(k.pending, 299) is None
    assert not r.hexists(k.meta, "warming")
