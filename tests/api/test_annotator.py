"""Annotator endpoints over a real ``labelq serve`` on loopback, with real Redis, PostgreSQL
and a Celery worker applying the labels."""

from __future__ import annotations

import time

from sqlalchemy import func
from sqlmodel import select

from labelq.record.db import session_scope
from labelq.record.models import Label

from .conftest import make_project


def wait_applied(stack, pid: int, n: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with session_scope(stack.engine) as s:
            applied = s.exec(select(func.count()).select_from(Label).where(
                Label.project_id == pid, Label.applied_seq.is_not(None))).one()
        if applied == n:
            return
        time.sleep(0.2)
    raise AssertionError(f"{applied} of {n} labels applied by the Celery worker")


def test_happy_path_next_submit_progress(stack):
    # Given a project and an annotator enrolled through the operator API
    pid = make_project(stack, "happy", n_tasks=4, gold=1, gold_schedule="fixed:rate=1")
    token = stack.enroll("happy", "ann-happy", capacity=10)
    with stack.client(token) as c:
        me = c.get("/api/v1/me").json()
        assert me == {"handle": "ann-happy", "project": "happy", "status": "active",
                      "labels": ["pos", "neg", "neutral"], "capacity": 10, "categories": [],
                      "label_names": ["pos", "neg", "neutral"], "instructions": None}
        # When they label every task they are given
        given = []
        while (r := c.post("/api/v1/assignments/next")).json()["assignment"] is not None:
            a = r.json()["assignment"]
            assert a["labels"] == ["pos", "neg", "neutral"]
            # (a gold question shows exactly what a task shows: no id to tell them apart)
            assert set(a) == {"assignment_id", "category", "payload", "labels", "expires_ms",
                              "expires_at"}
            assert a["payload"]["text"].startswith(("sentence number", "gold"))
            assert a["expires_ms"] > time.time() * 1000 + 60_000
            s = c.post(f"/api/v1/assignments/{a['assignment_id']}/label", json={"label": "pos"})
            assert s.status_code == 200, s.text
            assert s.json() == {"assignment_id": a["assignment_id"], "label": "pos",
                                "duplicate": False, "next": None}  # next: not asked for
            given.append(stack.task_of(a["assignment_id"]))
        # Then each task came once, none is left, and the progress counts them
        assert sorted(given) == ["g0", "t0", "t1", "t2", "t3"]
        assert r.status_code == 200 and r.json()["message"]
        p = c.get("/api/v1/me/progress").json()
    assert p["labels"] == 5 and p["open_assignments"] == 0 and p["declined"] == 0
    # (gold is counted per 10 labels, so that it never tells which item was gold:
    # tests/api/test_people.py; 5 labels show none yet)
    assert p["gold"] == {"answered": 0, "correct": 0, "accuracy": None, "as_of": 0}
    assert p["capacity"] == 10 and p["remaining_capacity"] == 5
    # And the real Celery worker folds every label into the posterior
    wait_applied(stack, pid, 5)


def test_submit_and_next_in_one_request(stack):
    # Given a project of three tasks and an annotator who took the first one
    pid = make_project(stack, "chain", n_tasks=3)
    token = stack.enroll("chain", "ann-chain")
    with stack.client(token) as c:
        a = c.post("/api/v1/assignments/next").json()["assignment"]
        given = [stack.task_of(a["assignment_id"])]
        # When they submit each label with ?next=true
        while a is not None:
            s = c.post(f"/api/v1/assignments/{a['assignment_id']}/label?next=true",
                       json={"label": "neg"})
            assert s.status_code == 200, s.text
            body = s.json()
            assert (body["assignment_id"], body["label"], body["duplicate"]) == \
                (a["assignment_id"], "neg", False)
            a = body["next"]["assignment"]
            if a is not None:
                assert a["labels"] == ["pos", "neg", "neutral"] and "task" not in a
                assert stack.task_of(a["assignment_id"]) not in given
                given.append(stack.task_of(a["assignment_id"]))
        # Then every answer carried the next assignment, and the last says why none is left
        assert sorted(given) == ["t0", "t1", "t2"]
        # (the one annotator has seen every task, each below its cap of 2: stalled)
        assert body["next"]["message"].startswith("stalled: no task is left that you can")
        # and a replayed submit with ?next=true is still idempotent
        again = c.post(f"/api/v1/assignments/{body['assignment_id']}/label?next=true",
                       json={"label": "neg"}).json()
        assert again["duplicate"] is True and again["next"]["assignment"] is None
    wait_applied(stack, pid, 3)


def test_wrong_or_missing_token_is_401(stack):
    # Given a project with an annotator
    make_project(stack, "auth401")
    stack.enroll("auth401", "ann-401")
    # When requests come with a wrong token, no token, or a non-bearer scheme
    for headers in ({"Authorization": "Bearer not-a-token"}, {},
                    {"Authorization": "Basic dXNlcjpwYXNz"}):
        r = stack.client().post("/api/v1/assignments/next", headers=headers)
        # Then they are refused with 401, a code, a message and the auth challenge
        assert r.status_code == 401, (headers, r.text)
        assert r.json()["code"] == "unauthorized" and r.json()["message"]
        assert r.headers["www-authenticate"].startswith("Bearer")


def test_another_workers_assignment_is_403(stack):
    # Given two annotators, and an assignment issued to the first
    make_project(stack, "theft")
    alice, bob = stack.enroll("theft", "alice"), stack.enroll("theft", "bob")
    with stack.client(alice) as a, stack.client(bob) as b:
        aid = a.post("/api/v1/assignments/next").json()["assignment"]["assignment_id"]
        # When the second submits or declines it
        sub = b.post(f"/api/v1/assignments/{aid}/label", json={"label": "neg"})
        dec = b.post(f"/api/v1/assignments/{aid}/decline")
        # Then both are forbidden, and the owner can still submit it
        assert sub.status_code == 403 and sub.json()["code"] == "forbidden"
        assert dec.status_code == 403 and dec.json()["code"] == "forbidden"
        assert a.post(f"/api/v1/assignments/{aid}/label", json={"label": "pos"}).json()[
            "duplicate"] is False
        # And after it is recorded, the other still cannot replay it as theirs
        again = b.post(f"/api/v1/assignments/{aid}/label", json={"label": "pos"})
        assert again.status_code == 403
    with session_scope(stack.engine) as s:
        assert s.exec(select(Label.value).where(Label.assignment_id == aid)).all() == ["pos"]


def test_label_outside_the_label_set_is_422(stack):
    # Given an issued assignment
    make_project(stack, "badlabel")
    token = stack.enroll("badlabel", "ann-422")
    with stack.client(token) as c:
        aid = c.post("/api/v1/assignments/next").json()["assignment"]["assignment_id"]
        # When the label is not in the set, missing, or the body is not JSON
        bad = c.post(f"/api/v1/assignments/{aid}/label", json={"label": "maybe"})
        missing = c.post(f"/api/v1/assignments/{aid}/label", json={})
        garbage = c.post(f"/api/v1/assignments/{aid}/label", content=b"{not json",
                         headers={"Content-Type": "application/json"})
        # Then 422 with a code and a message naming the problem; nothing recorded
        assert bad.status_code == 422 and bad.json()["code"] == "invalid_input"
        assert "maybe" in bad.json()["message"] and "label set" in bad.json()["message"]
        assert missing.status_code == 422 and missing.json()["code"] == "validation_error"
        assert missing.json()["message"].startswith("label")
        assert garbage.status_code == 422 and garbage.json()["code"] == "validation_error"
        # And the assignment is still open for a valid label
        assert c.post(f"/api/v1/assignments/{aid}/label",
                      json={"label": "neutral"}).status_code == 200


def test_replayed_submission_is_idempotent(stack):
    # Given a submitted label
    pid = make_project(stack, "replay")
    token = stack.enroll("replay", "ann-replay")
    with stack.client(token) as c:
        aid = c.post("/api/v1/assignments/next").json()["assignment"]["assignment_id"]
        first = c.post(f"/api/v1/assignments/{aid}/label", json={"label": "neg"})
        # When the same submission is replayed (a retry after a lost response)
        replays = [c.post(f"/api/v1/assignments/{aid}/label", json={"label": "neg"})
                   for _ in range(3)]
        # Then every replay succeeds as a duplicate, and one label exists
        assert first.json()["duplicate"] is False
        assert all(r.status_code == 200 and r.json()["duplicate"] is True for r in replays)
        # But a different value for the same assignment is a conflict
        other = c.post(f"/api/v1/assignments/{aid}/label", json={"label": "pos"})
        assert other.status_code == 409 and other.json()["code"] == "duplicate_submission"
        assert c.get("/api/v1/me/progress").json()["labels"] == 1
    with session_scope(stack.engine) as s:
        assert s.exec(select(func.count()).select_from(Label)
                      .where(Label.project_id == pid)).one() == 1


def test_decline_returns_the_task_and_closes_the_assignment(stack):
    # Given an annotator holding an assignment
    make_project(stack, "decline", n_tasks=1, max_labels=1)
    one, two = stack.enroll("decline", "dec-1"), stack.enroll("decline", "dec-2")
    with stack.client(one) as c1, stack.client(two) as c2:
        a = c1.post("/api/v1/assignments/next").json()["assignment"]
        # While it is held, the only task is not given to anyone else
        assert c2.post("/api/v1/assignments/next").json()["assignment"] is None
        # When they decline it
        d = c1.post(f"/api/v1/assignments/{a['assignment_id']}/decline")
        assert d.status_code == 200 and d.json()["declined"] is True
        assert d.json()["duplicate"] is False
        # (a repeat, its first answer lost, is an idempotent OK that records nothing new)
        again = c1.post(f"/api/v1/assignments/{a['assignment_id']}/decline")
        assert again.status_code == 200 and again.json()["duplicate"] is True
        # Then it can no longer be submitted, progress counts the decline, and the task
        # goes to the other annotator
        late = c1.post(f"/api/v1/assignments/{a['assignment_id']}/label", json={"label": "pos"})
        assert late.status_code == 404 and late.json()["code"] == "not_found"
        assert c1.get("/api/v1/me/progress").json()["declined"] == 1
        b = c2.post("/api/v1/assignments/next").json()["assignment"]
        assert stack.task_of(b["assignment_id"]) == stack.task_of(a["assignment_id"])


def test_submit_with_next_that_spends_the_budget_is_200(stack):
    # Given a budget of 0.2 and an annotator paid 0.1 a label
    pid = make_project(stack, "budget", n_tasks=5, budget=0.2)
    token = stack.enroll("budget", "ann-budget", cost=0.1)
    with stack.client(token) as c:
        a = c.post("/api/v1/assignments/next").json()["assignment"]
        b = c.post(f"/api/v1/assignments/{a['assignment_id']}/label?next=true",
                   json={"label": "neg"}).json()["next"]["assignment"]
        # When the second label, which spends the budget, is submitted with ?next=true
        r = c.post(f"/api/v1/assignments/{b['assignment_id']}/label?next=true",
                   json={"label": "pos"})
        # Then it is recorded (200, not 409 budget_exhausted) and the missing next says why
        assert r.status_code == 200, r.text
        body = r.json()
        assert (body["label"], body["duplicate"]) == ("pos", False)
        assert body["next"] == {
            "assignment": None,
            "message": "finished: the project needs no more labels (budget spent); thank you"}
        # and a plain next is still 409 budget_exhausted
        r = c.post("/api/v1/assignments/next")
        assert r.status_code == 409 and r.json()["code"] == "budget_exhausted"
    wait_applied(stack, pid, 2)


def test_capacity_limits_and_is_reported(stack):
    # Given an annotator with capacity 2
    make_project(stack, "capacity", n_tasks=5)
    token = stack.enroll("capacity", "ann-cap", capacity=2)
    with stack.client(token) as c:
        # When they ask twice, they get one assignment (a repeated next gives it again)
        held = [c.post("/api/v1/assignments/next").json()["assignment"] for _ in range(2)]
        assert held[0]["assignment_id"] == held[1]["assignment_id"]
        c.post(f"/api/v1/assignments/{held[0]['assignment_id']}/label", json={"label": "neg"})
        # and after answering it a second one, which they get again while they hold it
        second = c.post("/api/v1/assignments/next").json()["assignment"]
        assert second["assignment_id"] != held[0]["assignment_id"]
        out = c.post("/api/v1/assignments/next").json()
        assert out["assignment"]["assignment_id"] == second["assignment_id"]
        c.post(f"/api/v1/assignments/{second['assignment_id']}/label", json={"label": "neg"})
        # Then once both are answered nothing remains of their capacity, and they are told
        out = c.post("/api/v1/assignments/next").json()
        assert out["assignment"] is None
        assert out["message"] == "you have reached your capacity of 2 labels"
        p = c.get("/api/v1/me/progress").json()
    assert p["labels"] == 2 and p["remaining_capacity"] == 0


def test_paused_annotator_is_403_on_next(stack):
    # Given an annotator the operator paused
    from labelq.record.projects import set_worker_status

    make_project(stack, "paused")
    token = stack.enroll("paused", "ann-paused")
    with session_scope(stack.engine) as s:
        set_worker_status(s, "ann-paused", "paused")
    # When they ask for work, Then they are told they are paused
    r = stack.client(token).post("/api/v1/assignments/next")
    assert r.status_code == 403 and "paused" in r.json()["message"]


def test_a_removed_annotator_is_refused_within_a_second(stack):
    # Given a signed-in annotator (the server keeps sign-ins for up to 1 s)
    import time

    from labelq.record.projects import set_worker_status

    make_project(stack, "removed")
    token = stack.enroll("removed", "ann-removed")
    with stack.client(token) as c:
        assert c.get("/api/v1/me").status_code == 200
        # When the operator removes them
        with session_scope(stack.engine) as s:
            set_worker_status(s, "ann-removed", "removed")
        t0 = time.monotonic()
        while (r := c.get("/api/v1/me")).status_code == 200 and time.monotonic() - t0 < 10:
            time.sleep(0.05)
    # Then their requests are refused once the kept sign-in is older than a second
    assert r.status_code == 403 and "removed" in r.json()["message"]
    assert time.monotonic() - t0 < 3


def test_bodies_over_64_kib_are_413(stack):
    # Given a signed-in annotator
    make_project(stack, "big")
    token = stack.enroll("big", "ann-big")
    with stack.client(token) as c:
        # When the body is over the limit (declared, or streamed without a length)
        declared = c.post("/api/v1/assignments/x/label", content=b"x" * (65 * 1024),
                          headers={"Content-Type": "application/json"})

        def chunks():
            for _ in range(70):
                yield b"y" * 1024
        streamed = c.post("/api/v1/assignments/x/label", content=chunks(),
                          headers={"Content-Type": "application/json"})
    # Then 413 with a code, before any route ran
    for r in (declared, streamed):
        assert r.status_code == 413 and r.json()["code"] == "payload_too_large"


def test_unknown_routes_and_methods_answer_json(stack):
    with stack.client() as c:
        nf, mna = c.get("/api/v1/nothing-here"), c.get("/api/v1/assignments/next")
    assert nf.status_code == 404 and nf.json()["code"] == "not_found"
    assert mna.status_code == 405 and mna.json()["code"] == "method_not_allowed"


def test_current_shows_the_held_assignment_without_issuing(stack):
    # Given an annotator who holds nothing
    make_project(stack, "held", n_tasks=3, max_labels=1)
    token = stack.enroll("held", "ann-held")
    with stack.client(token) as c:
        assert c.get("/api/v1/assignments/current").json() == {"assignments": []}
        # When they take an assignment, current shows that one (same id, expiry, payload)
        a = c.post("/api/v1/assignments/next").json()["assignment"]
        cur = c.get("/api/v1/assignments/current").json()["assignments"]
        assert cur == [a]
        # and asking current again issues nothing new
        assert c.get("/api/v1/assignments/current").json()["assignments"] == [a]
        # Once answered, they hold nothing again
        assert c.post(f"/api/v1/assignments/{a['assignment_id']}/label",
                      json={"label": "pos"}).status_code == 200
        assert c.get("/api/v1/assignments/current").json() == {"assignments": []}
    with stack.client() as anon:
        assert anon.get("/api/v1/assignments/current").status_code == 401
