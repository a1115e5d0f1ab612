"""Service operations against a real Redis and SQL: the errors the API will map, and the
durable-before-OK submit."""

from __future__ import annotations

import time

import numpy as np
import pytest
from sqlmodel import select

from labelq.errors import (
    BudgetExhausted,
    DuplicateSubmission,
    Forbidden,
    InputError,
    LeaseExpired,
    NotFound,
)
from labelq.live.redis.keys import Keys
from labelq.live.redis.scripts import Refusal
from labelq.record.db import database_id, session_scope
from labelq.record.models import Assignment, Label
from labelq.record.projects import set_worker_status
from labelq.record.settings import Settings
from labelq.service import Service

from .conftest import make_project


@pytest.fixture
def svc(r, sqlite_url):
    eng, pid = make_project(sqlite_url, n_tasks=6, workers=3, max_labels=2)
    return Service(eng, r, settings=Settings(database_url=sqlite_url), worker_max_age=0), pid


def test_submit_is_durable_and_idempotent(svc):
    s, pid = svc
    # Given an issued assignment
    a = s.next_assignment("p-w0")
    # When it is submitted twice with the same value
    first = s.submit("p-w0", a.assignment_id, "a")
    again = s.submit("p-w0", a.assignment_id, "a")
    # Then one label is recorded, the retry is an idempotent OK, and a different value is a
    # duplicate submission
    assert first["duplicate"] is False and again["duplicate"] is True
    with pytest.raises(DuplicateSubmission):
        s.submit("p-w0", a.assignment_id, "b")
    with session_scope(s.engine) as ses:
        assert len(ses.exec(select(Label)).all()) == 1
        assert ses.get(Assignment, a.assignment_id).state == "submitted"
    assert int(s.redis.hget(s.live.keys(pid).nlabels, a.task_seq)) == 1


def test_errors(svc):
    s, pid = svc
    with pytest.raises(NotFound):
        s.next_assignment("nobody")
    a = s.next_assignment("p-w0")
    with pytest.raises(Forbidden):
        s.submit("p-w1", a.assignment_id, "a")
    with pytest.raises(InputError):
        s.submit("p-w0", a.assignment_id, "zebra")
    with pytest.raises(NotFound):
        s.submit("p-w0", "f" * 32, "a")
    with session_scope(s.engine) as ses:
        set_worker_status(ses, "p-w2", "paused")
    with pytest.raises(Forbidden):
        s.next_assignment("p-w2")


def test_expired_lease(r, sqlite_url):
    eng, pid = make_project(sqlite_url, n_tasks=3, workers=1)
    s = Service(eng, r, settings=Settings(database_url=sqlite_url, lease_seconds=1))
    a = s.next_assignment("p-w0")
    r.hset(Keys(pid, database_id(eng)).lease(a.assignment_id), "expires", 1)  # as if time passed
    with pytest.raises(LeaseExpired):
        s.submit("p-w0", a.assignment_id, "a")
    # the task went back to the pool at once
    assert r.zscore(Keys(pid, database_id(eng)).pending, a.task_seq) is not None
    assert int(r.hget(Keys(pid, database_id(eng)).wcount, 0)) == 0


def test_decline_returns_the_task_to_others_not_to_the_decliner(svc):
    s, pid = svc
    seen = set()
    a = s.next_assignment("p-w0")
    s.decline("p-w0", a.assignment_id)
    assert r_lease_gone(s, pid, a.assignment_id)
    for _ in range(5):
        b = s.next_assignment("p-w0")
        seen.add(b.task_seq)
        s.submit("p-w0", b.assignment_id, "a")
    assert a.task_seq not in seen  # all other 5 tasks, never the declined one
    assert s.next_assignment("p-w0") is None
    assert s.redis.lrange(s.live.keys(pid).declines, 0, -1) == [f"{a.task_seq}:0".encode()]


def r_lease_gone(s, pid, aid):
    return not s.redis.exists(s.live.keys(pid).lease(aid))


def test_budget_exhausted(r, sqlite_url):
    eng, pid = make_project(sqlite_url, n_tasks=5, workers=1, budget=2.0)
    s = Service(eng, r, settings=Settings(database_url=sqlite_url))
    for _ in range(2):
        a = s.next_assignment("p-w0")
        s.submit("p-w0", a.assignment_id, "b")
    with pytest.raises(BudgetExhausted):
        s.next_assignment("p-w0")


def test_submit_with_next_records_the_label_when_the_budget_runs_out(r, sqlite_url):
    """Budget 0.2 at 0.1 a label: the second submit-and-next spends the budget. Its answer
    says the label was recorded and that there is no next (before: BudgetExhausted after
    the commit, so the annotator was told 409 for a label that was saved)."""
    eng, pid = make_project(sqlite_url, n_tasks=5, workers=1, budget=0.2, cost=0.1)
    s = Service(eng, r, settings=Settings(database_url=sqlite_url))
    a = s.next_assignment("p-w0")
    out = s.submit("p-w0", a.assignment_id, "a", then_next=True)
    b = out["next"]
    assert b is not None
    # When the second label is submitted with its next
    out = s.submit("p-w0", b.assignment_id, "b", then_next=True)
    # Then the answer records the label and carries no next, and says why
    assert out == {"assignment_id": b.assignment_id, "label": "b", "duplicate": False,
                   "next": None}
    with session_scope(eng) as db:
        assert db.exec(select(Label.value).where(Label.assignment_id == b.assignment_id)
                       ).one() == "b"
    # (the one annotator's cost: nobody's next label is paid, the project is finished)
    assert s.idle_reason("p-w0") == ("finished: the project needs no more labels (budget "
                                     "spent); thank you")
    # and a retry of it is the idempotent duplicate, again without a next
    again = s.submit("p-w0", b.assignment_id, "b", then_next=True)
    assert again["duplicate"] is True and again["next"] is None
    # while a plain next still answers BudgetExhausted
    with pytest.raises(BudgetExhausted):
        s.next_assignment("p-w0")


def test_retry_after_a_crash_between_commit_and_finish_finishes_it(r, sqlite_url):
    """An API process died after committing the label and before SUBMIT_FINISH: the
    annotator's retry answers ``duplicate`` and finishes the reservation in Redis (before,
    Redis stayed one label short until the lease expired and the reaper's grace ran out)."""
    eng, pid = make_project(sqlite_url, n_tasks=5, workers=1, max_labels=1)
    woken = []
    s = Service(eng, r, settings=Settings(database_url=sqlite_url), notify=woken.append)
    k = Keys(pid, database_id(eng))
    a = s.next_assignment("p-w0")
    # Given the first attempt's SUBMIT_BEGIN and commit, and no SUBMIT_FINISH
    began = s.scripts.submit_begin(k, a.assignment_id, 0, int(time.time() * 1000))
    with eng.begin() as conn:
        s.submitter.insert(conn, [(s.worker("p-w0"), s.project(pid), a.assignment_id, "a", False,
                          began.task_id)], int(time.time() * 1000))
    assert r.hget(k.nlabels, a.task_seq) is None
    # When the annotator retries
    out = s.submit("p-w0", a.assignment_id, "a")
    # Then it is the idempotent duplicate, and Redis counts the label: the task is closed
    # at its cap, the reservation is gone, the cost is spent, and the applier is woken
    assert out == {"assignment_id": a.assignment_id, "label": "a", "duplicate": True}
    assert int(r.hget(k.nlabels, a.task_seq)) == 1
    assert int(r.hget(k.reserved, a.task_seq) or 0) == 0
    assert not r.exists(k.lease(a.assignment_id))
    assert float(r.get(k.spent)) == 1.0 and float(r.get(k.reserved_cost)) == 0.0
    assert r.zscore(k.pending, a.task_seq) is None and woken == [pid]
    # and a second retry changes nothing
    assert s.submit("p-w0", a.assignment_id, "a")["duplicate"] is True
    assert int(r.hget(k.nlabels, a.task_seq)) == 1 and float(r.get(k.spent)) == 1.0


def test_an_outage_after_the_commit_says_the_label_was_recorded(r, sqlite_url, monkeypatch):
    """Redis stops answering between the commit and SUBMIT_FINISH: the error says the label
    was recorded and that a retry is safe; the retry is the duplicate and finishes it."""
    import redis as redis_lib

    from labelq.errors import ServiceUnavailable

    eng, pid = make_project(sqlite_url, n_tasks=5, workers=1)
    s = Service(eng, r, settings=Settings(database_url=sqlite_url))
    a = s.next_assignment("p-w0")

    def down(*_a, **_kw):
        raise redis_lib.ConnectionError("Redis went away")
    monkeypatch.setattr(s.scripts, "submit_finish", down)
    with pytest.raises(ServiceUnavailable) as err:
        s.submit("p-w0", a.assignment_id, "a")
    assert err.value.to_dict()["recorded"] is True and err.value.retry_safe is True
    assert "was recorded" in err.value.message
    with session_scope(eng) as db:
        assert db.exec(select(Label.value).where(Label.assignment_id == a.assignment_id)
                       ).one() == "a"
    monkeypatch.undo()
    assert s.submit("p-w0", a.assignment_id, "a")["duplicate"] is True
    assert int(r.hget(Keys(pid, database_id(eng)).nlabels, a.task_seq)) == 1


def test_next_returns_the_open_assignment_and_bounds_them(r, sqlite_url):
    """Before: every next issued a new lease, so one token could reserve every task."""
    from labelq.live.applier import Applier

    eng, pid = make_project(sqlite_url, n_tasks=30, workers=2)
    s = Service(eng, r, settings=Settings(database_url=sqlite_url))
    k = Keys(pid, database_id(eng))
    # When an annotator asks for work many times without answering
    a = s.next_assignment("p-w0")
    again = [s.next_assignment("p-w0") for _ in range(20)]
    # Then every answer is the same assignment (its lease unchanged): one lease is held
    assert all(x == a for x in again)
    assert int(r.hget(k.wcount, 0)) == 1 and r.zcard(k.leases) == 1
    # also when the applier has filled their inbox meanwhile
    assert Applier(eng, r).refill_project(pid) > 0
    assert s.next_assignment("p-w0") == a
    # and once it is answered (with next), declined or has expired, they get a new one
    b = s.submit("p-w0", a.assignment_id, "a", then_next=True)["next"]
    assert b is not None and b.assignment_id != a.assignment_id
    assert s.next_assignment("p-w0") == b
    s.decline("p-w0", b.assignment_id)
    c = s.next_assignment("p-w0")
    assert c.assignment_id not in (a.assignment_id, b.assignment_id)
    r.hset(k.lease(c.assignment_id), "expires", 1)  # its lease ran out
    d = s.next_assignment("p-w0")
    assert d.assignment_id != c.assignment_id and s.next_assignment("p-w0") == d


def test_concurrent_nexts_of_one_annotator_issue_one_assignment(r, sqlite_url):
    """The bound is checked in the scripts that issue (POP_INBOX, RESERVE): requests of
    one annotator at once cannot both issue past it."""
    from concurrent.futures import ThreadPoolExecutor

    eng, pid = make_project(sqlite_url, n_tasks=30, workers=1)
    s = Service(eng, r, settings=Settings(database_url=sqlite_url))
    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(lambda _: s.next_assignment("p-w0"), range(40)))
    assert len({x.assignment_id for x in got}) == 1
    assert int(r.hget(Keys(pid, database_id(eng)).wcount, 0)) == 1


def test_max_open_allows_that_many_then_repeats_the_oldest(r, sqlite_url):
    eng, pid = make_project(sqlite_url, n_tasks=30, workers=1)
    s = Service(eng, r, settings=Settings(database_url=sqlite_url, max_open=3))
    got = [s.next_assignment("p-w0") for _ in range(6)]
    assert len({x.assignment_id for x in got[:3]}) == 3
    assert got[3:] == [got[0]] * 3
    s.submit("p-w0", got[0].assignment_id, "a")
    assert s.next_assignment("p-w0").assignment_id not in {x.assignment_id for x in got}
    assert s.next_assignment("p-w0") == got[1]


def test_gold_schedule_and_quality_rule_pause_a_bad_worker(r, sqlite_url):
    from labelq.live.applier import Applier
    from labelq.live.hotstate import StateCache

    eng, pid = make_project(sqlite_url, n_tasks=20, n_gold=6, workers=1, gold_schedule="fixed:rate=0.5",
                            quality={"threshold": 0.6, "min_gold": 3, "confidence": 0.8})
    s = Service(eng, r, settings=Settings(database_url=sqlite_url), worker_max_age=0)
    s.assigner.rng = np.random.default_rng(0)
    gold = 0
    for _ in range(12):  # the worker always answers "b"; gold answers are "a"
        a = s.next_assignment("p-w0")
        gold += a.task.startswith("g")
        s.submit("p-w0", a.assignment_id, "b")
    assert 3 <= gold <= 6  # wrong on every gold: P(a < 0.6) > 0.8 from 3 answers on
    report = Applier(eng, r, cache=StateCache()).apply_pending(pid)
    assert report.applied == 12 and report.paused == ["p-w0"]
    with pytest.raises(Forbidden):
        s.next_assignment("p-w0")


def test_gold_on_suspicion_gives_a_worker_failing_gold_more_of_it(r, sqlite_url):
    from labelq.live.applier import Applier
    from labelq.live.hotstate import StateCache
    from labelq.live.rebuild import delete_hot, rebuild_project
    from labelq.live.redis.keys import gold_record_fields
    from labelq.record.goldstats import project_gold_scores
    from labelq.record.models import Project

    # Given a gold schedule of 10 % that rises to 90 % while a worker's gold record is
    # suspect (posterior mean below 0.7), and two workers: w0 answers every gold question
    # wrong, w1 right; the applier runs after every label (without refilling inboxes, so
    # that every next is decided at once, on the record as it is then)
    eng, pid = make_project(sqlite_url, n_tasks=200, n_gold=60, workers=2,
                            gold_schedule="fixed:rate=0.1,suspect=0.9,suspect_below=0.7")
    s = Service(eng, r, settings=Settings(database_url=sqlite_url), worker_max_age=0)
    s.assigner.rng = np.random.default_rng(0)
    applier = Applier(eng, r, cache=StateCache())
    kinds: dict[str, list[bool]] = {"p-w0": [], "p-w1": []}
    for _ in range(40):
        for h, answer in (("p-w0", "b"), ("p-w1", "a")):
            a = s.next_assignment(h)
            kinds[h].append(a.task.startswith("g"))
            s.submit(h, a.assignment_id, answer)
            applier.apply_pending(pid, refill=False)
    # Then once w0 has failed a gold question it gets gold most of the time; w1 at the
    # usual rate
    first = kinds["p-w0"].index(True)
    assert np.mean(kinds["p-w0"][first + 1:]) > 0.7
    assert np.mean(kinds["p-w1"]) < 0.3
    # and the record the schedule read is SQL's, in Redis, and survives a rebuild
    with session_scope(eng) as ses:
        scores = project_gold_scores(ses, ses.get(Project, pid)).scores
    want = {w: (int(scores.total[w].sum()), int(scores.correct[w].sum())) for w in (0, 1)}
    assert want[0][0] >= 20 and want[0][1] == 0 and want[1][1] == want[1][0] > 0

    def record(w):
        return tuple(int(r.hget(Keys(pid, database_id(eng)).nissued, f) or 0) for f in gold_record_fields(w))
    assert {w: record(w) for w in (0, 1)} == want
    delete_hot(r, s.live.keys(pid))
    rebuild_project(eng, r, pid)
    assert {w: record(w) for w in (0, 1)} == want


def test_requests_spread_over_tasks_while_the_applier_lags(r, sqlite_url):
    # Given an Opt-KG project whose applier has not run yet (no Celery here)
    eng, pid = make_project(sqlite_url, n_tasks=30, workers=3, policy="optkg")
    s = Service(eng, r, settings=Settings(database_url=sqlite_url), worker_max_age=0)
    issued = []
    # When three annotators take and answer 30 assignments before any label is applied
    for i in range(30):
        h = f"p-w{i % 3}"
        a = s.next_assignment(h)
        issued.append(a.task)
        s.submit(h, a.assignment_id, "a")
    # Then every task got one label: a task with a label still outstanding is not offered
    # while untouched tasks rank as high (their priorities are stale otherwise)
    assert sorted(issued) == sorted(f"t{i}" for i in range(30))


def applier_refills_inbox_at_next_candidates(s: Service, eng, r, pid) -> list[int]:
    """Make the applier refill the inboxes (to 3) at the moment the service next asks
    Redis for candidates — after its inbox pop found nothing, before it reserves — once.
    Returns a list that then holds the number of reservations the refill made."""
    from labelq.live.hotstate import StateCache
    from labelq.live.refill import refill_inboxes
    from labelq.live.tuning import TUNING
    hot = StateCache().get(eng, r, pid)
    # a decision asks for candidates through CANDIDATES (gold) or CANDIDATES_SCAN (the
    # walk down pending): whichever comes first
    originals, refilled = {n: getattr(s.scripts, n) for n in ("candidates",
                                                               "candidates_scan")}, []

    def striking(name):
        def applier_strikes(*args, **kwargs):
            if not refilled:
                for n, f in originals.items():  # once
                    setattr(s.scripts, n, f)
                refilled.append(refill_inboxes(
                    eng, r, s.scripts, hot, inbox_size=3, lease_ms=600_000,
                    key_ttl_ms=TUNING.lease_key_ttl_ms(600_000),
                    rng=np.random.default_rng(0)))
            return originals[name](*args, **kwargs)
        return applier_strikes
    for n in originals:
        setattr(s.scripts, n, striking(n))
    return refilled


def test_inbox_refilled_while_deciding_at_once_is_served_first(r, sqlite_url):
    # Given an onboarding schedule (the first 4 assignments are gold) and a worker with an
    # empty inbox who has had one gold question
    eng, pid = make_project(sqlite_url, n_tasks=20, n_gold=8, workers=1, policy="optkg",
                            gold_schedule="onboarding:n=4,rate=0,half_life=50,floor=0")
    s = Service(eng, r, settings=Settings(database_url=sqlite_url, max_open=10),
                worker_max_age=0)  # several open assignments at once
    first = s.next_assignment("p-w0")
    assert first.task.startswith("g")
    # When the applier refills the inbox (three held golds) just after the next request
    # found it empty, while that request is deciding at once
    refilled = applier_refills_inbox_at_next_candidates(s, eng, r, pid)
    got = [s.next_assignment("p-w0") for _ in range(4)]
    # Then the worker gets the inbox's golds first, in the order they were decided: the
    # schedule's first four are all gold, and nothing is left held in the inbox
    assert refilled == [3]
    assert [a.task[0] for a in got[:3]] == ["g", "g", "g"]
    assert not got[3].task.startswith("g")
    assert r.llen(Keys(pid, database_id(eng)).inbox(0)) == 0
    issued = r.hmget(Keys(pid, database_id(eng)).nissued, ["0", "g0"])
    assert [int(x) for x in issued] == [5, 4]


def test_raw_inserts_store_what_core_would(db_url):
    # Given a project, one worker and two tasks, on SQLite and on PostgreSQL
    from labelq.live.submit import Inserts
    from labelq.record.models import Project, Task, Worker, utc_from_ms
    eng, pid = make_project(db_url, n_tasks=3, workers=1)
    with session_scope(eng) as s:
        p, w = s.get(Project, pid), s.exec(select(Worker)).one()
        t0, t1, t2 = (s.exec(select(Task.id).where(Task.seq == i)).one() for i in (0, 1, 2))
        s.expunge_all()
    at = utc_from_ms(1_700_000_000_000)  # no microseconds: formats that differ would show
    # When one label is written through Core and two through the driver's plain SQL (one
    # statement per table for both rows on PostgreSQL)
    from sqlalchemy import insert
    with eng.begin() as conn:
        conn.execute(insert(Assignment.__table__), [dict(
            id="core-1", project_id=p.id, task_id=t0, worker_id=w.id, is_gold=True,
            state="submitted", issued=at, expires=at)])
        conn.execute(insert(Label.__table__), [dict(
            assignment_id="core-1", project_id=p.id, task_id=t0, worker_id=w.id, value="a",
            is_gold=True, received=at)])
        Inserts.of(eng).run(conn, [(w, p, "raw-1", "a", True, t1),
                                    (w, p, "raw-2", "a", True, t2)], at)
    # Then the rows read back the same, field by field
    with session_scope(eng) as s:
        got = {a.id: a for a in s.exec(select(Assignment))}
        labels = {x.assignment_id: x for x in s.exec(select(Label))}
        for kind in ("core-1", "raw-1", "raw-2"):
            a, lab = got[kind], labels[kind]
            assert (a.is_gold, a.state, a.issued, a.expires) == \
                (True, "submitted", got["core-1"].issued, got["core-1"].expires)
            assert (lab.value, lab.is_gold, lab.received, lab.applied_seq) == \
                ("a", True, labels["core-1"].received, None)
        assert labels["raw-1"].received.replace(tzinfo=None) == at.replace(tzinfo=None)
    # and as stored, byte for byte
    with eng.connect() as conn:
        stored = dict(conn.exec_driver_sql("SELECT assignment_id, received FROM label").all())
    assert stored["raw-1"] == stored["raw-2"] == stored["core-1"]


def test_inbox_refilled_with_the_last_tasks_while_deciding_is_served(r, sqlite_url):
    # Given three tasks, one of them issued to the worker, whose inbox is empty
    eng, pid = make_project(sqlite_url, n_tasks=3, workers=1, max_labels=1)
    s = Service(eng, r, settings=Settings(database_url=sqlite_url, max_open=10),
                worker_max_age=0)  # several open assignments at once
    first = s.next_assignment("p-w0")
    # When the applier puts the two open tasks in the inbox while the next request, which
    # found the inbox empty, looks for candidates (there are none left for it)
    refilled = applier_refills_inbox_at_next_candidates(s, eng, r, pid)
    got = s.next_assignment("p-w0")
    # Then the request serves the inbox's head instead of answering "nothing for you"
    assert refilled == [2]
    assert got is not None and got.task_seq != first.task_seq
    assert r.llen(Keys(pid, database_id(eng)).inbox(0)) == 1


def test_a_worker_with_nothing_reclaims_a_reservation_held_in_another_inbox(r, sqlite_url):
    from labelq.live.hotstate import StateCache
    from labelq.live.refill import refill_inboxes
    from labelq.live.tuning import TUNING
    # Given three tasks of one label each: w0 took one, and the applier then held the
    # other two in w0's inbox (w0 was the only active worker)
    eng, pid = make_project(sqlite_url, n_tasks=3, workers=3, max_labels=1)
    s = Service(eng, r, settings=Settings(database_url=sqlite_url, max_open=10),
                worker_max_age=0)  # several open assignments at once
    first = s.next_assignment("p-w0")
    hot = StateCache().get(eng, r, pid)
    made = refill_inboxes(eng, r, s.scripts, hot, inbox_size=3, lease_ms=600_000,
                          key_ttl_ms=TUNING.lease_key_ttl_ms(600_000), rng=np.random.default_rng(0))
    assert made == 2 and r.llen(Keys(pid, database_id(eng)).inbox(0)) == 2
    k = Keys(pid, database_id(eng))
    # When w1, who has nothing in its inbox, asks
    got = s.next_assignment("p-w1")
    # Then it gets one of the two instead of "nothing for you" — the tail of w0's inbox
    assert got is not None and got.task_seq != first.task_seq
    # and w0 still gets the other, and then nothing (the reclaimed entry is skipped)
    second = s.next_assignment("p-w0")
    assert second is not None and {first.task_seq, got.task_seq, second.task_seq} == {0, 1, 2}
    assert s.next_assignment("p-w0") is None and s.next_assignment("p-w2") is None
    # and the counters say what was really given: one issued each, the reclaimed
    # reservation taken back from w0's counts and seen set
    assert {int(w): int(n) for w, n in r.hgetall(k.nissued).items()
            if not w.startswith(b"g")} == {0: 2, 1: 1}
    assert {int(t) for t in r.smembers(k.seen(0))} == {first.task_seq, second.task_seq}
    assert {int(t) for t in r.smembers(k.seen(1))} == {got.task_seq}
    assert r.zcard(k.pending) == 0
    # and an issued lease is never reclaimed
    assert s.scripts.release(k, got.assignment_id, held_only=True) is Refusal.ISSUED


def test_reclaim_passes_over_a_task_the_worker_has_seen(r, sqlite_url):
    from labelq.live.hotstate import StateCache
    from labelq.live.refill import refill_inboxes
    from labelq.live.tuning import TUNING
    # Given three tasks of one label each: w0 took one, w1 declined another (it will never
    # get it again), and the applier holds the declined one and the last in w0's inbox,
    # the declined one expiring last (the one a reclaim would try first)
    eng, pid = make_project(sqlite_url, n_tasks=3, workers=2, max_labels=1)
    s = Service(eng, r, settings=Settings(database_url=sqlite_url), worker_max_age=0)
    k = Keys(pid, database_id(eng))
    taken = s.next_assignment("p-w0")
    declined = s.next_assignment("p-w1")
    s.decline("p-w1", declined.assignment_id)
    hot = StateCache().get(eng, r, pid)
    assert refill_inboxes(eng, r, s.scripts, hot, inbox_size=5, lease_ms=600_000,
                          key_ttl_ms=TUNING.lease_key_ttl_ms(600_000),
                          rng=np.random.default_rng(0)) == 2
    held = {int(r.hget(k.lease(a.decode()), "task")): a for a in r.lrange(k.inbox(0), 0, -1)}
    r.zadd(k.leases, {held[declined.task_seq]: int(r.zscore(k.leases,
                                                           held[declined.task_seq])) + 1},
           xx=True)
    # When w1 asks
    got = s.next_assignment("p-w1")
    # Then it gets the third task, and the declined one stays held for w0
    assert got is not None and got.task_seq not in (declined.task_seq, taken.task_seq)
    assert r.hget(k.lease(held[declined.task_seq].decode()), "held") is not None


def test_outstanding_tasks_atop_pending_do_not_soak_up_labels(r, sqlite_url):
    # Given 40 tasks of equal priority (cap 3) and a decision window of 4 tasks
    eng, pid = make_project(sqlite_url, n_tasks=40, workers=10, max_labels=3)
    s = Service(eng, r, settings=Settings(database_url=sqlite_url), worker_max_age=0,
                top_k=4)
    # When ten workers each take an assignment and hold it (the top of pending is all
    # outstanding after the fourth)
    got = [s.next_assignment(f"p-w{j}") for j in range(10)]
    # Then each gets a task nobody holds, found below the window, rather than a second
    # lease on a task already out (as long as such tasks remain)
    assert all(g is not None for g in got)
    assert len({g.task_seq for g in got}) == 10
    # and once every task is out, a worker still gets an eligible (outstanding) one
    make_project(sqlite_url, n_tasks=3, workers=4, max_labels=2, name="q")
    taken = [s.next_assignment(f"q-w{j}") for j in range(4)]
    assert all(t is not None for t in taken)
    assert len({t.task_seq for t in taken[:3]}) == 3 and taken[3].task_seq in \
        {t.task_seq for t in taken[:3]}


@pytest.mark.parametrize("policy", ["uniform", "bkube"])
def test_project_update_reaches_a_running_service(r, sqlite_url, policy):
    """A long-running process (an API worker) sees ``labelq project update``: a budget
    lowered to what is spent stops issuing, a raised one resumes; a budget-aware policy's
    state is folded again under the new budget."""
    from labelq.record.projects import update_project
    # Given a running service whose annotator has spent 1 of a budget of 10
    eng, pid = make_project(sqlite_url, n_tasks=6, workers=2, budget=10, policy=policy)
    s = Service(eng, r, settings=Settings(database_url=sqlite_url), worker_max_age=0,
                state_max_age=0)
    a = s.next_assignment("p-w0")
    s.submit("p-w0", a.assignment_id, "a")
    assert s.cache.peek(pid).project.budget == 10
    # When the operator lowers the budget to what is spent, from another process
    with session_scope(eng) as db:
        update_project(db, "p", budget=1)
    # Then the running service issues nothing more
    with pytest.raises(BudgetExhausted):
        s.next_assignment("p-w1")
    hot = s.cache.peek(pid)
    assert hot.project.budget == 1
    if policy == "bkube":  # its state copies the budget: folded again under the new one
        assert hot.state.budget == 1
    # And raising it again resumes
    with session_scope(eng) as db:
        update_project(db, "p", budget=5)
    assert s.next_assignment("p-w1") is not None


def test_a_raised_label_cap_reopens_the_tasks_that_reached_the_old_one(r, sqlite_url):
    from labelq.live.rebuild import reopen_below_cap
    from labelq.record.projects import update_project
    # Given three tasks at a cap of 1, all labelled once, so nothing is left to issue
    eng, pid = make_project(sqlite_url, n_tasks=3, workers=2, max_labels=1)
    s = Service(eng, r, settings=Settings(database_url=sqlite_url), worker_max_age=0,
                state_max_age=0)
    while (a := s.next_assignment("p-w0")) is not None:
        s.submit("p-w0", a.assignment_id, "a")
    assert s.next_assignment("p-w1") is None and r.zcard(Keys(pid, database_id(eng)).pending) == 0
    assert reopen_below_cap(eng, r, pid, s.cache) == 0  # (nothing changed)
    # When the operator raises the cap to 2 and the upkeep runs
    with session_scope(eng) as db:
        update_project(db, "p", max_labels=2)
    assert reopen_below_cap(eng, r, pid, s.cache) == 3
    # Then the other annotator gets each task once more, and then nothing
    got = []
    while (a := s.next_assignment("p-w1")) is not None:
        got.append(a.task)
        s.submit("p-w1", a.assignment_id, "b")
    assert sorted(got) == ["t0", "t1", "t2"]
    assert reopen_below_cap(eng, r, pid, s.cache) == 0


def test_a_raised_label_cap_does_not_reopen_a_task_whose_gold_mark_is_queued(r, sqlite_url):
    from labelq.live.goldmark import mark_gold_live
    from labelq.live.rebuild import reopen_below_cap
    from labelq.record.projects import GoldMark, update_project
    # Given a cap of 1 and a task at it, leased to an annotator, its gold mark queued
    eng, pid = make_project(sqlite_url, n_tasks=2, workers=2, max_labels=1)
    s = Service(eng, r, settings=Settings(database_url=sqlite_url), worker_max_age=0,
                state_max_age=0)
    a = s.next_assignment("p-w0")
    assert mark_gold_live(eng, r, "p", [GoldMark(a.task, "a")])["queued"] == [a.task]
    # When the operator raises the cap to 2 and the upkeep runs
    with session_scope(eng) as db:
        update_project(db, "p", max_labels=2)
    # Then that task is not reopened: no other annotator is given it
    assert reopen_below_cap(eng, r, pid, s.cache) == 0
    got = []
    while (b := s.next_assignment("p-w1")) is not None:
        got.append(b.task)
        s.submit("p-w1", b.assignment_id, "b")
    assert a.task not in got and len(got) == 1


def test_idle_reason_says_when_open_assignments_hold_the_rest_of_the_budget(r, sqlite_url):
    # Given a budget of 2 labels, both held by open assignments of two annotators
    eng, pid = make_project(sqlite_url, n_tasks=6, workers=3, budget=2)
    s = Service(eng, r, settings=Settings(database_url=sqlite_url), worker_max_age=0)
    first = s.next_assignment("p-w0")
    assert s.next_assignment("p-w1") is not None
    # When a third asks, there is nothing, and the reason names the held budget
    assert s.next_assignment("p-w2") is None
    assert "budget is held by open assignments" in s.idle_reason("p-w2")
    # Once one is declined, there is work again
    s.decline("p-w0", first.assignment_id)
    assert s.next_assignment("p-w2") is not None
