"""Webhooks without a worker (issue 43): signing, the outbox written in the transaction of
the change, the watch's once-per-onset conditions, the claim of due events, one delivery
try against a real HTTP receiver (a ``http.server`` thread), and ``labelq hooks``. SQLite
and PostgreSQL."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from datetime import timedelta

import pytest
from click.testing import CliRunner
from pipeline.receiver import Receiver
from sqlmodel import select

from labelq.errors import AlreadyExists, InputError
from labelq.hooknet import parse_networks
from labelq.hooks import (
    CLAIM_S,
    MAX_TRIES,
    TOLERANCE_S,
    backoff,
    body_of,
    claim_due,
    deliver,
    sign,
    verify,
    watch,
)
from labelq.record.db import engine_for, session_scope
from labelq.record.hooks import add_hook, emit, get_hook
from labelq.record.models import (
    Assignment,
    Hook,
    HookDelivery,
    HookEvent,
    Label,
    Task,
    Worker,
    utcnow,
)
from labelq.record.projects import (
    create_project,
    delete_project,
    enroll_worker,
    get_project,
    set_worker_status,
)

# the receivers here listen on loopback, which a delivery refuses unless allowed
# (labelq/hooknet.py; LABELQ_HOOK_ALLOW_NETWORKS where a worker runs)
LOOPBACK = parse_networks("127.0.0.1/32")


def test_the_signature_is_hmac_sha256_of_the_timestamp_and_the_body():
    body = b'{"id":"e1","type":"ping"}'
    now = 1_800_000_000
    expected = hmac.new(b"s3cret", f"{now}.".encode() + body, hashlib.sha256).hexdigest()
    assert sign("s3cret", body, now) == sign("s3cret", body, str(now)) == "sha256=" + expected
    assert verify("s3cret", body, "sha256=" + expected, str(now), now=now + 10)
    assert not verify("s3cret", body + b"\n", "sha256=" + expected, now, now=now)  # body
    assert not verify("other", body, "sha256=" + expected, now, now=now)  # another secret
    # the timestamp is signed: the same signature under another time does not verify
    assert not verify("s3cret", body, "sha256=" + expected, now + 1, now=now)
    # a delivery replayed later than the window (or from too far ahead) is refused
    assert verify("s3cret", body, "sha256=" + expected, now, now=now + TOLERANCE_S)
    assert not verify("s3cret", body, "sha256=" + expected, now, now=now + TOLERANCE_S + 1)
    assert not verify("s3cret", body, "sha256=" + expected, now, now=now - TOLERANCE_S - 1)
    assert verify("s3cret", body, "sha256=" + expected, now, now=now + 3600, tolerance=7200)
    # a timestamp that is not whole Unix seconds is refused, not a crash
    for bad in ("", "abc", "1.5e9", "-1", "１２３"):
        assert not verify("s3cret", body, sign("s3cret", body, bad), bad, now=now)
    # the body-only signature of labelq before the timestamp (docs/hooks.md) no longer
    # verifies: a receiver must sign "<timestamp>.<body>"
    old = "sha256=" + hmac.new(b"s3cret", body, hashlib.sha256).hexdigest()
    assert not verify("s3cret", body, old, now, now=now)


def test_backoff_grows_to_five_minutes():
    assert [backoff(n) for n in range(1, MAX_TRIES)] == [2, 10, 50, 250]
    assert backoff(10) == 300


@pytest.fixture
def project(db_url):
    eng = engine_for(db_url)
    with session_scope(eng) as s:
        p = create_project(s, "p", "a,b", policy="uniform", budget=10.0)
        for i in range(3):
            s.add(Task(project_id=p.id, seq=i, external_id=f"t{i}", category="x"))
        enroll_worker(s, p, "ann")
    return eng


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://example.com/x",
                                 "gopher://example.com", "javascript:alert(1)", "http://",
                                 "example.com/hook"])
def test_only_http_and_https_urls_are_taken(project, url):
    with session_scope(project) as s, pytest.raises(InputError) as got:
        add_hook(s, get_project(s, "p"), "h", url, ["project.finished"])
    assert got.value.field == "url" and "http" in got.value.message
    with session_scope(project) as s:
        assert s.exec(select(Hook)).all() == []


def test_a_hook_s_name_is_unique_and_budget_below_needs_its_share(project):
    with session_scope(project) as s:
        p = get_project(s, "p")
        hook, secret = add_hook(s, p, "h", "https://example.com/x", ["export.ready"])
        assert len(secret) == 64 and hook.secret == secret
        with pytest.raises(AlreadyExists):
            add_hook(s, p, "h", "https://example.com/y", ["export.ready"])
        with pytest.raises(InputError, match="--budget-below"):
            add_hook(s, p, "b", "https://example.com/y", ["budget.below"])
        with pytest.raises(InputError, match=r"in \(0, 1\)"):
            add_hook(s, p, "b", "https://example.com/y", [], budget_below=1.5)
        b, _ = add_hook(s, p, "b", "https://example.com/y", ["export.ready"],
                        budget_below=0.5)
        assert b.events == ["budget.below", "export.ready"]  # implied by the share


def _events(eng) -> list[tuple[str, str]]:
    with session_scope(eng) as s:
        return sorted((e.type, e.payload.get("worker", "")) for e in
                      s.exec(select(HookEvent)).all())


def test_a_pause_and_a_resume_write_their_event_in_their_transaction(project):
    with session_scope(project) as s:
        add_hook(s, get_project(s, "p"), "h", "http://127.0.0.1:9/",
                 ["annotator.paused", "annotator.resumed"])
        add_hook(s, get_project(s, "p"), "other", "http://127.0.0.1:9/", ["export.ready"])
    # a pause rolled back leaves no event
    with pytest.raises(RuntimeError), session_scope(project) as s:
        set_worker_status(s, "ann", "paused")
        raise RuntimeError("rolled back")
    assert _events(project) == []
    with session_scope(project) as s:
        set_worker_status(s, "ann", "paused")
        set_worker_status(s, "ann", "paused")  # already paused: no second event
    with session_scope(project) as s:
        set_worker_status(s, "ann", "active")
    # only the hook subscribed to them gets them
    assert _events(project) == [("annotator.paused", "ann"), ("annotator.resumed", "ann")]
    with session_scope(project) as s:
        paused = s.exec(select(HookEvent).where(HookEvent.type == "annotator.paused")).one()
        assert paused.payload["rule"] == "operator" and "paused by" in paused.payload["text"]


def test_the_watch_announces_a_condition_once_per_onset(project):
    with session_scope(project) as s:
        add_hook(s, get_project(s, "p"), "h", "http://127.0.0.1:9/",
                 ["project.stalled", "project.finished"])
    assert watch(project) == []  # running: nothing
    with session_scope(project) as s:
        set_worker_status(s, "ann", "paused")  # the only annotator: the project stalls
    first = watch(project)
    assert len(first) == 1 and watch(project) == []  # once, not at every beat
    with session_scope(project) as s:
        set_worker_status(s, "ann", "active")
    assert watch(project) == []
    with session_scope(project) as s:
        assert get_hook(s, get_project(s, "p"), "h").fired == []
        set_worker_status(s, "ann", "paused")
    again = watch(project)  # stalled again: announced again
    assert len(again) == 1 and again != first
    with session_scope(project) as s:
        e = s.get(HookEvent, again[0])
        assert e.type == "project.stalled" and e.payload["tasks"] == 3


def test_a_hook_added_while_a_condition_holds_is_told_once_at_the_next_beat(project):
    # Given project p stalled (its only annotator paused), announced to hook "old"
    with session_scope(project) as s:
        add_hook(s, get_project(s, "p"), "old", "http://127.0.0.1:9/", ["project.stalled"])
        set_worker_status(s, "ann", "paused")
    assert len(watch(project)) == 1
    # When hook "new" is added while p is still stalled
    with session_scope(project) as s:
        add_hook(s, get_project(s, "p"), "new", "http://127.0.0.1:9/",
                 ["project.stalled", "project.finished"])
    # Then the next beat tells "new" (docs/hooks.md), not "old" again; and then nobody
    told = watch(project)
    with session_scope(project) as s:
        assert [(s.get(Hook, s.get(HookEvent, e).hook_id).name, s.get(HookEvent, e).type)
                for e in told] == [("new", "project.stalled")]
    assert watch(project) == []


def _label(eng, task_seq: int) -> None:
    """A label of ``ann`` on task ``t<task_seq>``, as the service records it (unapplied:
    status counts it)."""
    with session_scope(eng) as s:
        p = get_project(s, "p")
        t = s.exec(select(Task).where(Task.project_id == p.id, Task.seq == task_seq)).one()
        w = s.exec(select(Worker).where(Worker.handle == "ann")).one()
        aid = f"a{task_seq}"
        s.add(Assignment(id=aid, project_id=p.id, task_id=t.id, worker_id=w.id,
                         expires=utcnow(), state="submitted"))
        s.flush()
        s.add(Label(assignment_id=aid, project_id=p.id, task_id=t.id, worker_id=w.id,
                    value="a"))


def test_budget_below_fires_under_the_hook_s_share(project):
    # budget 10, labels cost 1; hooks at 75 % and 50 % left
    with session_scope(project) as s:
        add_hook(s, get_project(s, "p"), "q3", "http://127.0.0.1:9/", [], budget_below=0.75)
        add_hook(s, get_project(s, "p"), "half", "http://127.0.0.1:9/", [],
                 budget_below=0.5)
    assert watch(project) == []
    _label(project, 0)
    _label(project, 1)  # 8 of 10 left: neither
    assert watch(project) == []
    _label(project, 2)  # 7 of 10 left: below 75 %
    fired = watch(project)
    assert len(fired) == 1 and watch(project) == []
    with session_scope(project) as s:
        e = s.get(HookEvent, fired[0])
        assert e.type == "budget.below" and s.get(Hook, e.hook_id).name == "q3"
        assert e.payload == {"budget": 10.0, "spent": 3.0, "left": 7.0, "share_left": 0.7,
                             "threshold": 0.75}


def test_a_claimed_event_is_not_claimed_again_until_its_claim_lapses(project):
    with session_scope(project) as s:
        add_hook(s, get_project(s, "p"), "h", "http://127.0.0.1:9/", ["annotator.paused"])
        set_worker_status(s, "ann", "paused")
    now = utcnow()
    first = claim_due(project, now=now)
    assert len(first) == 1
    assert claim_due(project, now=now) == []  # the next beat: enqueued already
    assert claim_due(project, now=now + timedelta(seconds=CLAIM_S - 1)) == []
    # a worker that died with it: after the claim, the beat sends it again
    again = claim_due(project, now=now + timedelta(seconds=CLAIM_S + 1))
    assert [e for e, _ in again] == [e for e, _ in first] and again[0][1] != first[0][1]
    # the first message, still in the queue, is stale: it does nothing (no request)
    assert deliver(project, first[0][0], claim=first[0][1], timeout=1.0,
                   allowed=LOOPBACK) is None
    with session_scope(project) as s:
        assert s.exec(select(HookDelivery)).all() == []


def test_a_hook_at_a_private_address_is_a_refused_try_and_nothing_is_sent(project):
    # Given a hook whose URL is on loopback (as one at 169.254.169.254 or 10.0.0.5 would
    # be: inside the worker's network), and a deployment that allows no private network
    rx = Receiver()
    with session_scope(project) as s:
        add_hook(s, get_project(s, "p"), "inside", rx.url + "/in", ["annotator.paused"])
        set_worker_status(s, "ann", "paused")
        event_id = s.exec(select(HookEvent)).one().id
    try:
        # When it is delivered
        out = deliver(project, event_id)
        # Then the try is logged as refused, naming the address and the setting, the event
        # stays pending (an operator who allows the network gets it delivered), and the
        # receiver got nothing
        assert (out.status, out.state) == (None, "pending")
        assert out.error.startswith("refused: 127.0.0.1 resolves to 127.0.0.1, a loopback")
        assert "LABELQ_HOOK_ALLOW_NETWORKS=127.0.0.1/32" in out.error
        assert rx.got == []
        with session_scope(project) as s:
            s.get(HookEvent, event_id).next_at = utcnow()
        assert deliver(project, event_id, allowed=LOOPBACK).state == "delivered"
        assert len(rx.got) == 1
    finally:
        rx.close()


def test_a_delivery_logs_each_try_backs_off_and_gives_up(project):
    rx = Receiver.answering([500, 302] + [503] * 10,
                            redirect_to="http://127.0.0.1:9/elsewhere")
    with session_scope(project) as s:
        hook, secret = add_hook(s, get_project(s, "p"), "h", rx.url + "/redirect",
                                ["annotator.paused"])
        set_worker_status(s, "ann", "paused")
        event_id = s.exec(select(HookEvent)).one().id
    try:
        before = utcnow()
        first = deliver(project, event_id, allowed=LOOPBACK)
        assert (first.attempt, first.status, first.state) == (1, 500, "pending")
        with session_scope(project) as s:
            e = s.get(HookEvent, event_id)
            from labelq.record.models import as_utc
            assert as_utc(e.next_at) >= before + timedelta(seconds=backoff(1))
        # a redirect is not followed: a failed try
        second = deliver(project, event_id, allowed=LOOPBACK)
        assert (second.attempt, second.status, second.state) == (2, 302, "pending")
        assert len(rx.got) == 2  # nothing was sent to the Location
        states = [deliver(project, event_id, allowed=LOOPBACK).state
                  for _ in range(MAX_TRIES - 2)]
        assert states == ["pending"] * (MAX_TRIES - 3) + ["failed"]
        assert deliver(project, event_id, allowed=LOOPBACK) is None  # failed: no more tries
        assert len(rx.got) == MAX_TRIES
        # every try the same body and event id, each signed with its own time
        headers, body = rx.posts()[0]
        assert all(b == body for _, b in rx.posts())
        assert {h["X-Labelq-Delivery"] for h, _ in rx.posts()} == {event_id}
        for h, _ in rx.posts():
            assert verify(secret, body, h["X-Labelq-Signature"], h["X-Labelq-Timestamp"])
            assert abs(int(h["X-Labelq-Timestamp"]) - time.time()) < 60
        doc = json.loads(body)
        assert doc["id"] == event_id and doc["project"] == "p"
        assert doc["type"] == "annotator.paused" and doc["data"]["worker"] == "ann"
        with session_scope(project) as s:
            log = s.exec(select(HookDelivery).order_by(HookDelivery.id)).all()
            assert [(d.attempt, d.status) for d in log] == [
                (1, 500), (2, 302), (3, 503), (4, 503), (5, 503)]
    finally:
        rx.close()


def test_the_docs_receiver_takes_a_real_delivery_and_refuses_a_replay(project):
    # Given the receiver of docs/hooks.md ("Verifying a delivery"), run as written
    import io
    import re
    from contextlib import redirect_stdout
    from pathlib import Path

    doc = (Path(__file__).parents[2] / "docs" / "hooks.md").read_text()
    section = doc[doc.index("## Verifying a delivery"):doc.index("## Retries")]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    snippet: dict = {}
    exec(compile(code, "docs/hooks.md", "exec"), snippet)  # noqa: S102 - the docs' code
    rx = Receiver()
    with session_scope(project) as s:
        _, secret = add_hook(s, get_project(s, "p"), "h", rx.url + "/in",
                             ["annotator.paused"])
        set_worker_status(s, "ann", "paused")
        event_id = s.exec(select(HookEvent)).one().id
    try:
        assert deliver(project, event_id, allowed=LOOPBACK).state == "delivered"
    finally:
        rx.close()
    headers, body = rx.posts()[0]
    snippet["SECRET"] = secret
    # When it handles the delivery labelq made: accepted, once (a retry is a 200 too)
    with redirect_stdout(io.StringIO()) as printed:
        assert snippet["handle"](body, headers) == 200
        assert snippet["handle"](body, headers) == 200
    assert printed.getvalue().count("annotator.paused") == 1
    # Then a body altered on the way, another secret's signature and the old body-only
    # signature are refused
    assert snippet["handle"](body.replace(b"ann", b"bob"), headers) == 401
    stamp = headers["X-Labelq-Timestamp"]
    assert snippet["handle"](body, {**headers, "X-Labelq-Signature":
                                    sign("not-the-secret", body, stamp)}) == 401
    legacy = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    assert snippet["handle"](body, {**headers, "X-Labelq-Signature": legacy}) == 401
    # and so is the same delivery, correctly signed, replayed ten minutes later (a new
    # event id, so it is the time that refuses it, not the de-duplication)
    replay = body.replace(event_id.encode(), b"another-id")
    old = str(int(time.time()) - 600)
    assert snippet["handle"](replay, {**headers, "X-Labelq-Timestamp": old,
                                      "X-Labelq-Signature": sign(secret, replay, old)}) == 401
    now = str(int(time.time()))
    with redirect_stdout(io.StringIO()):
        assert snippet["handle"](replay, {**headers, "X-Labelq-Timestamp": now,
                                          "X-Labelq-Signature": sign(secret, replay, now)}) == 200
    assert snippet["handle"](body, {k: v for k, v in headers.items()
                                    if k.lower() != "x-labelq-timestamp"}) == 401


def test_a_receiver_that_is_down_is_a_logged_error(project):
    with session_scope(project) as s:
        add_hook(s, get_project(s, "p"), "h", "http://127.0.0.1:9/", ["annotator.paused"])
        set_worker_status(s, "ann", "paused")
        event_id = s.exec(select(HookEvent)).one().id
    out = deliver(project, event_id, timeout=2.0, allowed=LOOPBACK)
    assert out.status is None and "Connection" in out.error and out.state == "pending"


def test_a_failed_try_is_logged_without_the_credentials_its_url_carries(project, caplog):
    # Given a hook whose URL carries its receiver's credentials (a chat webhook's path, a
    # token in the query, a user and password), at a receiver that is down
    url = "http://bot:pa55word@127.0.0.1:9/services/T0/B0/XOXB-path-secret?token=q-secret"
    with session_scope(project) as s:
        add_hook(s, get_project(s, "p"), "chat", url, ["annotator.paused"])
        set_worker_status(s, "ann", "paused")
        event_id = s.exec(select(HookEvent)).one().id
    # When a try fails
    with caplog.at_level("WARNING", logger="labelq.hooks"):
        out = deliver(project, event_id, timeout=2.0, allowed=LOOPBACK)
    assert out.status is None
    # Then the log names the hook and where it points, and none of the credentials
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "'chat'" in logged and "127.0.0.1:9" in logged and event_id in logged
    for secret in ("pa55word", "bot", "XOXB-path-secret", "q-secret"):
        assert secret not in logged, logged


def test_a_receivers_garbled_answer_reaches_the_log_without_its_control_characters(project):
    # Given a receiver that answers a status line with terminal escapes (a title and a
    # screen clear: what `labelq hooks deliveries` prints would run them in a terminal)
    import socket
    import threading
    srv = socket.create_server(("127.0.0.1", 0))

    def answer() -> None:
        conn, _ = srv.accept()
        with conn:
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 \x1b]0;owned\x07\x1b[2J OK\r\n\r\n")
    threading.Thread(target=answer, daemon=True).start()
    with session_scope(project) as s:
        add_hook(s, get_project(s, "p"), "h", f"http://127.0.0.1:{srv.getsockname()[1]}/",
                 ["annotator.paused"])
        set_worker_status(s, "ann", "paused")
        event_id = s.exec(select(HookEvent)).one().id
    try:
        # When it is delivered
        out = deliver(project, event_id, timeout=5.0, allowed=LOOPBACK)
    finally:
        srv.close()
    # Then the try is a failed one whose error shows the escapes as text, not as themselves
    assert out.status is None and out.error.startswith("BadStatusLine"), out.error
    assert "\\x1b]0;owned\\x07" in out.error
    assert not any(c != " " and not c.isprintable() for c in out.error), out.error
    with session_scope(project) as s:
        assert s.exec(select(HookDelivery)).one().error == out.error


def test_project_delete_removes_its_hooks_and_their_log(project):
    with session_scope(project) as s:
        add_hook(s, get_project(s, "p"), "h", "http://127.0.0.1:9/", ["annotator.paused"])
        set_worker_status(s, "ann", "paused")
        event_id = s.exec(select(HookEvent)).one().id
    deliver(project, event_id, timeout=2.0, allowed=LOOPBACK)
    with session_scope(project) as s:
        delete_project(s, get_project(s, "p"))
    with session_scope(project) as s:
        for model in (Hook, HookEvent, HookDelivery):
            assert s.exec(select(model)).all() == []


def test_emit_of_an_unknown_type_is_a_programming_error(project):
    with session_scope(project) as s, pytest.raises(ValueError):
        emit(s, get_project(s, "p").id, "project.exploded", {})


def _cli(db_url: str, *args: str):
    from cli.main import cli
    return CliRunner().invoke(cli, [*args, "--database-url", db_url],
                              env={"LABELQ_HOOK_ALLOW_NETWORKS": "127.0.0.1/32"})


def test_cli_add_list_test_deliveries_remove(db_url, project):
    rx = Receiver()
    try:
        bad = _cli(db_url, "hooks", "add", "p", "file:///etc/passwd", "--events", "all")
        assert bad.exit_code == 3 and "not http or https" in bad.output
        bad = _cli(db_url, "hooks", "add", "p", rx.url, "--events", "nope")
        assert bad.exit_code == 3 and "unknown event nope" in bad.output
        added = _cli(db_url, "hooks", "add", "p", rx.url + "/in", "--events",
                     "project.finished,annotator.paused", "--events", "export.ready",
                     "-o", "json")
        assert added.exit_code == 0, added.output
        doc = json.loads(added.output[added.output.index("{"):])
        assert doc["name"] == "127.0.0.1" and len(doc["secret"]) == 64
        assert doc["events"] == ["project.finished", "annotator.paused", "export.ready"]
        again = _cli(db_url, "hooks", "add", "p", rx.url + "/other", "--events", "all",
                     "-o", "json")
        assert json.loads(again.output[again.output.index("{"):])["name"] == "127.0.0.1-2"
        listed = json.loads(_cli(db_url, "hooks", "list", "p", "-o", "json").output)
        assert [h["name"] for h in listed] == ["127.0.0.1", "127.0.0.1-2"]
        assert "secret" not in listed[0]
        ping = _cli(db_url, "hooks", "test", "p", "127.0.0.1", "-o", "json")
        assert ping.exit_code == 0, ping.output
        assert json.loads(ping.output)["status"] == 200
        headers, body = rx.posts()[0]
        assert headers["X-Labelq-Event"] == "ping"
        assert verify(doc["secret"], body, headers["X-Labelq-Signature"],
                      headers["X-Labelq-Timestamp"])
        log = json.loads(_cli(db_url, "hooks", "deliveries", "p", "127.0.0.1",
                              "-o", "json").output)
        assert [(d["type"], d["status"], d["state"]) for d in log] == [
            ("ping", 200, "delivered")]
        gone = _cli(db_url, "hooks", "remove", "p", "127.0.0.1")
        assert gone.exit_code == 0
        missing = _cli(db_url, "hooks", "test", "p", "127.0.0.1")
        assert missing.exit_code == 4 and "no hook named" in missing.output
        down = _cli(db_url, "hooks", "add", "p", "http://127.0.0.1:9/", "--events", "all",
                    "--budget-below", "0.2", "--name", "down")
        assert down.exit_code == 0, down.output
        # --budget-below alone (as docs/hooks.md shows it): budget.below only
        budget = _cli(db_url, "hooks", "add", "p", "https://example.com/b", "--budget-below",
                      "0.2", "-o", "json")
        assert budget.exit_code == 0, budget.output
        assert json.loads(budget.output[budget.output.index("{"):])["events"] == [
            "budget.below"]
        none = _cli(db_url, "hooks", "add", "p", "https://example.com/c")
        assert none.exit_code == 3 and "at least one event" in none.output
        failed = _cli(db_url, "hooks", "test", "p", "down")
        assert failed.exit_code == 9 and "retries it" in failed.output
    finally:
        rx.close()


def test_a_foreground_export_to_a_file_records_export_ready(db_url, project, tmp_path):
    # Given hooks of p: one subscribed to export.ready, one to other events only
    with session_scope(project) as s:
        p = get_project(s, "p")
        add_hook(s, p, "exports", "http://127.0.0.1:9/x", ["export.ready"])
        add_hook(s, p, "pauses", "http://127.0.0.1:9/y", ["annotator.paused"])
    _label(project, 0)
    # When the operator exports in the foreground (no job, no worker) to a file
    out = tmp_path / "answers.csv"
    res = _cli(db_url, "export", "p", "--out", str(out), "--method", "mv")
    assert res.exit_code == 0, res.output
    # Then the export.ready event is in the outbox, for the subscribed hook only, naming
    # the file written (absolute) and its rows; no job, no result URL
    with session_scope(project) as s:
        events = s.exec(select(HookEvent)).all()
        assert [(s.get(Hook, e.hook_id).name, e.type, e.state) for e in events] == [
            ("exports", "export.ready", "pending")]
        data = events[0].payload
    assert data == {"job": None, "format": "csv", "raw": False, "method": "mv",
                    "chosen": "mv", "rows": 3, "file": str(out.resolve()),
                    "result_url": None}
    assert out.read_text().count("\n") == 4  # the header and the 3 rows it says
    # and a raw JSONL export announces its label rows
    raw = tmp_path / "raw.jsonl"
    assert _cli(db_url, "export", "p", "--raw", "-o", "jsonl", "--out", str(raw)).exit_code == 0
    # but an export to standard output is no file to fetch: no event
    assert _cli(db_url, "export", "p", "--method", "mv").exit_code == 0
    with session_scope(project) as s:
        payloads = [e.payload for e in s.exec(select(HookEvent).order_by(HookEvent.created))]
    assert len(payloads) == 2
    assert {k: payloads[1][k] for k in ("raw", "format", "rows", "method", "file")} == {
        "raw": True, "format": "jsonl", "rows": 1, "method": None, "file": str(raw.resolve())}


def test_body_is_compact_json_with_its_project(project):
    with session_scope(project) as s:
        add_hook(s, get_project(s, "p"), "h", "http://127.0.0.1:9/", ["annotator.paused"])
        set_worker_status(s, "ann", "paused")
        e = s.exec(select(HookEvent)).one()
        body = body_of(e, "p")
    doc = json.loads(body)
    assert set(doc) == {"id", "type", "project", "at", "data"} and b" " not in body[:20]


def test_init_adds_the_hook_tables_to_an_older_database(tmp_path):
    """A database made before webhooks gets their tables from ``labelq init``."""
    import sqlite3

    from sqlalchemy import inspect as sa_inspect

    from labelq.record.db import init_schema

    url = f"sqlite:///{tmp_path / 'old.db'}"
    init_schema(engine_for(url))
    engine_for(url).dispose()
    con = sqlite3.connect(tmp_path / "old.db")
    for table in ("hook_delivery", "hook_event", "hook"):
        con.execute(f"DROP TABLE {table}")
    con.commit()
    con.close()
    eng = engine_for(url)
    assert "hook" not in sa_inspect(eng).get_table_names()
    init_schema(eng)
    tables = set(sa_inspect(eng).get_table_names())
    assert {"hook", "hook_event", "hook_delivery"} <= tables
    assert {"claim", "next_at", "state", "attempts"} <= {
        c["name"] for c in sa_inspect(eng).get_columns("hook_event")}


def test_a_quality_rule_pause_is_announced_with_its_evidence(db_url):
    """The quality rule's pause (the applier's, gold mark's) writes ``annotator.paused``
    in its transaction, with the gold answers it rested on."""
    from labelq.record.goldstats import apply_quality_rule

    eng = engine_for(db_url)
    with session_scope(eng) as s:
        p = create_project(s, "q", "a,b", policy="uniform",
                           quality="rule=posterior,threshold=0.7,min_gold=3")
        w, _ = enroll_worker(s, p, "careless")
        add_hook(s, p, "h", "http://127.0.0.1:9/", ["annotator.paused"])
        for i in range(6):  # six gold questions, all answered wrong
            t = Task(project_id=p.id, seq=i, external_id=f"g{i}", is_gold=True,
                     gold_answer="a", gold_kind="loaded", category="")
            s.add(t)
            s.flush()
            s.add(Assignment(id=f"a{i}", project_id=p.id, task_id=t.id, worker_id=w.id,
                             is_gold=True, expires=utcnow(), state="submitted"))
            s.flush()
            s.add(Label(assignment_id=f"a{i}", project_id=p.id, task_id=t.id,
                        worker_id=w.id, value="b", is_gold=True))
        s.flush()
        assert apply_quality_rule(s, p, [w.seq]) == ["careless"]
    with session_scope(eng) as s:
        e = s.exec(select(HookEvent)).one()
        assert e.type == "annotator.paused" and e.payload["worker"] == "careless"
        assert e.payload["rule"] == "quality"
        assert (e.payload["gold_right"], e.payload["gold_answered"]) == (0, 6)
        assert "quality rule" in e.payload["text"]


def test_gold_seen_through_is_announced_per_annotator(db_url):
    """An annotator who has been given 4 of the 5 gold questions (80 %: labelq status's
    warning) is announced once, by the watch."""
    eng = engine_for(db_url)
    with session_scope(eng) as s:
        p = create_project(s, "g", "a,b", policy="uniform", gold_schedule="fixed:rate=0.1")
        w, _ = enroll_worker(s, p, "eager")
        enroll_worker(s, p, "new")
        add_hook(s, p, "h", "http://127.0.0.1:9/", ["gold.seen_through"])
        for i in range(5):
            t = Task(project_id=p.id, seq=i, external_id=f"g{i}", is_gold=True,
                     gold_answer="a", gold_kind="loaded", category="")
            s.add(t)
            s.flush()
            if i < 3:
                s.add(Assignment(id=f"a{i}", project_id=p.id, task_id=t.id, worker_id=w.id,
                                 is_gold=True, expires=utcnow()))
        s.add(Task(project_id=p.id, seq=5, external_id="t0", category=""))
    assert watch(eng) == []  # 3 of 5 seen: not yet
    with session_scope(eng) as s:
        g3 = s.exec(select(Task).where(Task.external_id == "g3")).one()
        s.add(Assignment(id="a3", project_id=g3.project_id, task_id=g3.id,
                         worker_id=s.exec(select(Worker).where(Worker.handle == "eager"))
                         .one().id, is_gold=True, expires=utcnow()))
    fired = watch(eng)
    assert len(fired) == 1 and watch(eng) == []
    with session_scope(eng) as s:
        e = s.get(HookEvent, fired[0])
        assert e.type == "gold.seen_through"
        assert e.payload == {"worker": "eager", "gold_seen": 4, "gold_pool": 5}


def test_a_command_run_in_this_process_leaves_no_delivery_sender_on(db_url, project):
    # (`labelq workers pause` sends its events at commit while it runs; the listeners are
    # the process's, so a command run in a test's process, or any embedding one, must not
    # leave them sending for whatever commits next)
    import labelq.hooks as hooks_module
    assert _cli(db_url, "workers", "pause", "ann").exit_code == 0
    assert _cli(db_url, "export", "p", "--out", "-").exit_code == 0
    assert hooks_module._sender is None


def test_cli_add_shows_the_secret_only_once_the_hook_is_saved(db_url, project, monkeypatch):
    # Given a database whose commit fails (a lock held too long, a connection lost)
    from sqlalchemy.exc import OperationalError
    from sqlmodel import Session

    def fail(self):
        raise OperationalError("COMMIT", {}, Exception("database is locked"))

    monkeypatch.setattr(Session, "commit", fail)
    # When a hook is added
    res = _cli(db_url, "hooks", "add", "p", "https://example.com/in", "--events", "all",
               "-o", "json")
    # Then the command fails and shows no secret (it would name a hook never saved)
    monkeypatch.undo()
    assert res.exit_code != 0
    assert '"secret"' not in res.output and "shown only now" not in res.output
    with session_scope(project) as s:
        assert s.exec(select(Hook)).all() == []
