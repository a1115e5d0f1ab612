"""Assignments only as issued (issue 45): an annotator who crafts an assignment id
(``<hex>-<task seq>-<now>``, base 36) for a task never issued to them — a gold question
included — or submits another annotator's id, has nothing recorded: not with the lease
live, and not after a Redis flush, when the lost-lease recovery would otherwise take the
lease again. A genuine id still recovers (tests/live/test_lost_lease.py). Real Redis,
SQLite and PostgreSQL."""

from __future__ import annotations

import secrets
import time

import pytest
from sqlalchemy import text
from sqlmodel import select

from labelq.errors import AssignmentUnknown, Forbidden
from labelq.live.leaseid import IdSigner, parse_assignment_id
from labelq.live.redis.keys import Keys
from labelq.record.db import (
    SchemaMissing,
    database_id,
    forget_database_id,
    init_schema,
    session_scope,
)
from labelq.record.models import Assignment, Label
from labelq.record.secret import assignment_key
from labelq.record.settings import Settings
from labelq.service import Service

from .conftest import make_project


def _service(r, url, **kw):
    eng, pid = make_project(url, **kw)
    return Service(eng, r, settings=Settings(database_url=url), worker_max_age=0), pid


def _recorded(s) -> tuple[list[str], list[str]]:
    """The assignment rows and the labels' assignment ids in SQL."""
    with session_scope(s.engine) as ses:
        return (sorted(a.id for a in ses.exec(select(Assignment)).all()),
                sorted(lab.assignment_id for lab in ses.exec(select(Label)).all()))


def _b36(n: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        n, rem = divmod(n, 36)
        out = digits[rem] + out
        if n == 0:
            return out


def _forged(task: int) -> str:
    """The attack's id: any hex, the task's seq and now, in base 36."""
    return f"{secrets.token_hex(8)}-{_b36(task)}-{_b36(int(time.time() * 1000))}"


def test_a_forged_id_is_refused_and_nothing_recorded(r, db_url):
    # Given a project with gold, and an annotator holding one real assignment
    s, pid = _service(r, db_url, n_tasks=4, n_gold=2, workers=2)
    a = s.next_assignment("p-w0")
    k = Keys(pid, database_id(s.engine))
    before = {key: r.dump(key) for key in r.scan_iter(match=k.pattern())}
    # When they post labels to ids they crafted for other tasks, a gold question included
    for task in (t for t in range(6) if t != a.task_seq):
        with pytest.raises(AssignmentUnknown) as got:
            s.submit("p-w0", _forged(task), "a")
        err = got.value.to_dict()
        assert err["code"] == "assignment_unknown" and err["recorded"] is False
        assert got.value.http_status == 404 and "not saved" in err["message"]
    # Then nothing is recorded, and the hot state is as it was (no lease taken)
    assert _recorded(s) == ([], [])
    assert {key: r.dump(key) for key in r.scan_iter(match=k.pattern())} == before
    # and the real one is still theirs
    assert s.submit("p-w0", a.assignment_id, "a")["duplicate"] is False


def test_after_a_flush_forged_and_borrowed_ids_are_refused_genuine_ones_recover(r, db_url):
    # Given two annotators with an assignment each, and Redis losing every lease
    s, pid = _service(r, db_url, n_tasks=6, n_gold=2, workers=2, max_labels=3)
    a0 = s.next_assignment("p-w0")
    a1 = s.next_assignment("p-w1")
    r.flushdb()
    # When w0 submits crafted ids (every task, gold included) and w1's real id
    for task in range(8):
        with pytest.raises(AssignmentUnknown):
            s.submit("p-w0", _forged(task), "a")
    with pytest.raises(AssignmentUnknown) as got:
        s.submit("p-w0", a1.assignment_id, "a")
    assert got.value.to_dict()["recorded"] is False
    # a signed id with its task or time changed
    tag, task, at = a0.assignment_id.split("-")
    for aid in (f"{tag}-{_b36((a0.task_seq + 1) % 6)}-{at}",
                f"{tag}-{task}-{_b36(int(at, 36) + 1)}"):
        with pytest.raises(AssignmentUnknown):
            s.submit("p-w0", aid, "a")
    # Then nothing is recorded
    assert _recorded(s) == ([], [])
    # and each genuine id recovers, for its own annotator
    assert s.submit("p-w0", a0.assignment_id, "a")["duplicate"] is False
    assert s.submit("p-w1", a1.assignment_id, "b")["duplicate"] is False
    assert _recorded(s)[1] == sorted([a0.assignment_id, a1.assignment_id])


def test_another_annotators_live_id_is_forbidden(r, db_url):
    s, pid = _service(r, db_url, n_tasks=4, workers=2)
    a1 = s.next_assignment("p-w1")
    with pytest.raises(Forbidden):
        s.submit("p-w0", a1.assignment_id, "a")
    assert _recorded(s) == ([], [])
    assert s.submit("p-w1", a1.assignment_id, "b")["duplicate"] is False


def test_ids_are_signed_per_database_worker_and_project(r, db_url):
    s, pid = _service(r, db_url, n_tasks=2, workers=2)
    a = s.next_assignment("p-w0")
    key = assignment_key(s.engine)
    assert len(key) == 32
    mine = IdSigner(key)
    lid = mine.issued(a.assignment_id, pid, 0)
    assert lid is not None and lid.task == a.task_seq
    assert lid.reserved_ms == parse_assignment_id(a.assignment_id).reserved_ms
    assert mine.new(pid, 0, lid.task, lid.reserved_ms) == a.assignment_id
    assert mine.issued(a.assignment_id, pid, 1) is None  # another worker
    assert mine.issued(a.assignment_id, pid + 1, 0) is None  # another project
    assert IdSigner(b"\0" * 32).issued(a.assignment_id, pid, 0) is None  # another database
    with pytest.raises(ValueError):
        IdSigner(b"short")


def test_init_gives_an_older_database_its_secret(tmp_path):
    url = f"sqlite:///{tmp_path / 'old.db'}"
    from labelq.record.db import engine_for
    eng = engine_for(url)
    init_schema(eng)
    uid = database_id(eng)
    # Given a database of a labelq before the secret: no column
    with eng.begin() as conn:
        conn.exec_driver_sql("ALTER TABLE labelq_database DROP COLUMN secret")
    forget_database_id(eng)
    # Then using it says to run init
    with pytest.raises(SchemaMissing, match="labelq init"):
        assignment_key(eng)
    # When init upgrades it: the column and a secret, the identity unchanged
    init_schema(eng)
    forget_database_id(eng)
    key = assignment_key(eng)
    assert len(key) == 32 and database_id(eng) == uid
    # and again: the same secret (init is safe to repeat)
    init_schema(eng)
    forget_database_id(eng)
    assert assignment_key(eng) == key
    with eng.connect() as conn:
        assert conn.execute(text("SELECT secret FROM labelq_database")).scalar() == key.hex()


def test_an_id_does_not_show_its_tasks_place_so_gold_cannot_be_told(r, db_url):
    # Given a project whose gold questions come after its tasks (as `labelq gold load`
    # after `labelq tasks load` numbers them: seqs 6, 7, 8 here)
    s, pid = _service(r, db_url, n_tasks=6, n_gold=3, workers=1,
                      gold_schedule="fixed:rate=0.5")
    signer = IdSigner(assignment_key(s.engine))
    # When the annotator labels whatever they are given
    seen: dict[int, str] = {}
    while (a := s.next_assignment("p-w0")) is not None:
        seen[a.task_seq] = a.assignment_id
        s.submit("p-w0", a.assignment_id, "a")
    assert {6, 7, 8} & set(seen) and set(range(6)) & set(seen), seen  # gold and tasks
    # Then no id shows its task's number (it told a gold question from a task at a glance,
    # which the API otherwise hides: docs/annotators.md), and the server still reads it
    for seq, aid in seen.items():
        shown = parse_assignment_id(aid)
        assert shown is not None and shown.task != seq, (seq, aid)
        assert signer.issued(aid, pid, 0).task == seq


def test_the_mask_is_a_permutation_that_ids_of_one_instant_do_not_undo():
    # Given one signer, and ids of several tasks issued to one worker in the same
    # millisecond (the applier fills an inbox in one go)
    signer = IdSigner(bytes(range(32)))
    seqs = [0, 1, 2, 3, 500, 1000, 1001, 2**40 + 7, 2**60 - 1]
    ids = [signer.new(3, 5, t, 1_700_000_000_000) for t in seqs]
    # Then the server reads each back, and no two share their masked number
    assert [signer.issued(a, 3, 5).task for a in ids] == seqs
    shown = [parse_assignment_id(a).task for a in ids]
    assert len(set(shown)) == len(seqs)
    # and the XOR of two masked numbers is not that of their seqs (a pad XORed in would
    # show it: a gold question's high bits beside a task's)
    assert all((shown[i] ^ shown[j]) != (seqs[i] ^ seqs[j])
               for i in range(len(seqs)) for j in range(i + 1, len(seqs)))
    # and a number too big for any seq is refused even under a good MAC, as is a seq of
    # 2**60
    at = ids[0].split("-")[2]
    big = f"{signer._tag(3, 5, 'zzzzzzzzzzzz', at)}-zzzzzzzzzzzz-{at}"
    assert signer.issued(big, 3, 5) is None
    with pytest.raises(ValueError):
        signer.new(3, 5, 2**60, 1)
