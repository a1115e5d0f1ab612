"""Webhooks delivered by a real worker (issue 43): ``labelq run-worker`` (its hooks
process, on ``<queue>.hooks``) POSTs signed events to a real HTTP receiver (a
``http.server`` thread of the test) for an annotator paused, a project stalled, a project
finished and an export ready; a receiver answering 500 then 200 gets the event once more
with the same event id, and ``hooks deliveries`` shows both tries. Real Redis, SQLite,
Celery processes."""

from __future__ import annotations

import json
import os
import time
import uuid

import pytest
from click.testing import CliRunner

from labelq.hooks import verify
from labelq.jobs import create_export_job, get_job
from labelq.record.db import database_id, session_scope
from labelq.record.hooks import add_hook
from labelq.record.projects import get_project, set_worker_status
from labelq.record.settings import Settings
from labelq.service import Service

from .conftest import ROOT, RunWorker, make_project
from .receiver import Receiver


def _flaky_once(path: str, headers: dict[str, str], tries: int) -> tuple[int, dict[str, str]]:
    """500 to an event's first try on ``/flaky``, 200 to everything else."""
    return (500 if path == "/flaky" and tries == 1 else 200), {}


def worker_env(redis_url: str, url: str, beat_seconds: float) -> tuple[dict[str, str], str]:
    """The environment of a ``labelq run-worker`` of database ``url`` on a queue of its
    own (returned too), its beat every ``beat_seconds``, delivering to loopback."""
    queue = f"lq-hooks-{uuid.uuid4().hex[:8]}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("LABELQ_")}
    env.update(LABELQ_REDIS_URL=redis_url, LABELQ_DATABASE_URL=url, LABELQ_CELERY_QUEUE=queue,
               PYTHONPATH=str(ROOT), LABELQ_BEAT_SECONDS=str(beat_seconds),
               LABELQ_VISIBILITY_TIMEOUT="30",
               LABELQ_HOOK_ALLOW_NETWORKS="127.0.0.1/32")  # (the receiver: loopback)
    return env, queue


@pytest.fixture
def receiver():
    with Receiver(_flaky_once) as got:
        yield got


def test_a_real_worker_delivers_signed_events_and_retries(redis_url, tmp_path, receiver):
    # Given project "s" (one annotator) and project "f" (budget 2, labels cost 1), with
    # hooks: s's to /ok for pauses and stalls; f's to /ok for finished and export ready,
    # and one more of f's to /flaky (500 on an event's first try) for finished
    url = f"sqlite:///{tmp_path / 'hooks.db'}"
    eng, _ = make_project(url, n_tasks=3, workers=1, name="s")
    make_project(url, n_tasks=3, workers=1, name="f", budget=2.0)
    with session_scope(eng) as s:
        _, s_secret = add_hook(s, get_project(s, "s"), "ops", receiver.url + "/ok",
                               ["annotator.paused", "project.stalled"])
        f = get_project(s, "f")
        _, f_secret = add_hook(s, f, "ops", receiver.url + "/ok",
                               ["project.finished", "export.ready"])
        _, flaky_secret = add_hook(s, f, "flaky", receiver.url + "/flaky",
                                   ["project.finished"])
    env, queue = worker_env(redis_url, url, beat_seconds=1)
    # (ready: its labels', long work and hooks processes)
    with RunWorker(env, tmp_path / "worker.log", "-c", "1") as worker:
        import redis as redis_lib

        from workers.main import create_app
        r = redis_lib.Redis.from_url(redis_url)
        settings = Settings(database_url=url, redis_url=redis_url, celery_queue=queue)
        celery = create_app(redis_url, settings)
        d = database_id(eng)
        # When the operator pauses s's only annotator (s stalls: nobody can label it)
        with session_scope(eng) as s:
            set_worker_status(s, "s-w0", "paused")
        # and f's annotator spends its budget (f finishes), and an export of f is made
        svc = Service(eng, r, settings=settings,
                      notify=lambda p: celery.send_task("labelq.apply_labels", args=[p, d],
                                                        queue=queue))
        for _ in range(2):
            a = svc.next_assignment("f-w0")
            assert a is not None
            svc.submit("f-w0", a.assignment_id, "a")
        job = create_export_job(r, d, "f", out=str(tmp_path / "f.csv"), method="mv")
        celery.send_task("labelq.export", args=[job.job_id, d], queue=f"{queue}.long")

        # Then the receiver gets each event, signed with its hook's secret
        def kinds(path: str) -> list[tuple[str, str]]:
            return sorted((b["project"], b["type"]) for _, b in receiver.requests(path))

        want = [("f", "export.ready"), ("f", "project.finished"), ("s", "annotator.paused"),
                ("s", "project.stalled")]
        deadline = time.monotonic() + 90
        while kinds("/ok") != want or len(receiver.requests("/flaky")) < 2:
            assert worker.running(), worker.tail()
            assert time.monotonic() < deadline, (kinds("/ok"), receiver.requests("/flaky"),
                                                 worker.tail())
            time.sleep(0.2)
        with receiver.lock:
            raw = list(receiver.got)
        secrets = {("/ok", "s"): s_secret, ("/ok", "f"): f_secret,
                   ("/flaky", "f"): flaky_secret}
        for path, headers, body in raw:
            doc = json.loads(body)
            secret = secrets[(path, doc["project"])]
            stamp = headers["X-Labelq-Timestamp"]
            assert verify(secret, body, headers["X-Labelq-Signature"], stamp), (path, doc)
            assert not verify(secret, body + b" ", headers["X-Labelq-Signature"], stamp)
            assert headers["X-Labelq-Event"] == doc["type"]
            assert headers["X-Labelq-Delivery"] == doc["id"]
            assert headers["Content-Type"] == "application/json"
        ok = {b["type"]: b for _, b in receiver.requests("/ok")}
        assert ok["annotator.paused"]["data"]["worker"] == "s-w0"
        assert ok["annotator.paused"]["data"]["rule"] == "operator"
        assert ok["project.stalled"]["data"]["tasks"] == 3
        assert ok["project.finished"]["data"]["reason"] == "budget spent"
        assert ok["export.ready"]["data"]["job"] == job.job_id
        assert ok["export.ready"]["data"]["rows"] == 3
        assert get_job(r, d, job.job_id)["state"] == "done"
        # each event once on the receiver that answered 200 at once
        assert len({b["id"] for _, b in receiver.requests("/ok")}) == len(want)
        # and the flaky receiver got the same event twice: 500, then 200
        flaky = receiver.requests("/flaky")
        assert len(flaky) == 2 and flaky[0][1] == flaky[1][1]
        assert [h["X-Labelq-Attempt"] for h, _ in flaky] == ["1", "2"]
        # which `labelq hooks deliveries` shows
        from cli.main import cli
        out = CliRunner().invoke(cli, ["hooks", "deliveries", "f", "flaky", "-o", "json",
                                       "--database-url", url])
        assert out.exit_code == 0, out.output
        tries = json.loads(out.output)
        assert [(t["attempt"], t["status"], t["state"]) for t in tries] == [
            (2, 200, "delivered"), (1, 500, "delivered")]
        assert {t["event"] for t in tries} == {flaky[0][1]["id"]}


def test_check_warns_when_no_worker_delivers_the_webhooks(redis_url, tmp_path, celery_env,
                                                          celery_worker):
    # Given database A with a project and its label worker (its own queue), no hook yet
    from cli.main import cli

    url = f"sqlite:///{tmp_path / 'a.db'}"
    eng, _ = make_project(url, n_tasks=3, workers=1, name="p")
    d = database_id(eng)
    celery_worker(celery_env(url, queue=None), beat=False, name="own@%h")

    def check() -> tuple[int, dict[str, dict], str]:
        env = {"LABELQ_DATABASE_URL": url, "LABELQ_REDIS_URL": redis_url}
        res = CliRunner().invoke(cli, ["check", "--timeout", "3", "-o", "json"], env=env)
        table = CliRunner().invoke(cli, ["check", "--timeout", "3"], env=env).output
        return res.exit_code, {row["check"]: row for row in json.loads(res.output)}, table

    # When it is checked: no webhooks row (nothing to deliver)
    code, rows, _ = check()
    assert code == 0 and rows["celery worker"]["ok"] and "webhooks worker" not in rows
    # When the project gets a hook and no worker consumes the webhooks' queue
    with session_scope(eng) as s:
        add_hook(s, get_project(s, "p"), "ops", "http://127.0.0.1:9/", ["project.finished"])
    code, rows, table = check()
    # Then a warning row names the queue (not a failure: labels are applied)
    row = rows["webhooks worker"]
    assert code == 0 and row["ok"] and row["warning"]
    assert row["queue"] == f"labelq.{d}.hooks" and row["hooks"] == 1
    assert row["projects"] == ["p"] and row["workers"] == []
    assert f"no Celery worker of this database consumes its webhooks' queue " \
           f"'labelq.{d}.hooks'" in row["detail"]
    assert any(line.startswith("webhooks worker") and " WARN " in line
               for line in table.splitlines()), table
    # When run-worker's hooks process of A serves that queue
    celery_worker(celery_env(url, queue=None), beat=False, name="hooks@%h",
                  queues=f"labelq.{d}.hooks")
    code, rows, _ = check()
    # Then the row is ok, naming it
    row = rows["webhooks worker"]
    assert code == 0 and row["ok"] and not row.get("warning")
    assert [w.split("@")[0] for w in row["workers"]] == ["hooks"]
    assert "delivered by hooks@" in row["detail"]


@pytest.mark.timeout(240)
def test_a_worker_side_event_is_delivered_at_once_not_at_the_next_beat(redis_url, tmp_path,
                                                                       receiver):
    # Given a project with a hook for export.ready, and `labelq run-worker` whose beat
    # (the hooks' sweep, the safety net) comes every 120 s: the first one 120 s after it
    # started
    from datetime import datetime

    url = f"sqlite:///{tmp_path / 'now.db'}"
    eng, _ = make_project(url, n_tasks=3, workers=1, name="f")
    with session_scope(eng) as s:
        add_hook(s, get_project(s, "f"), "ops", receiver.url + "/ok", ["export.ready"])
    env, queue = worker_env(redis_url, url, beat_seconds=120)
    with RunWorker(env, tmp_path / "worker.log", "-c", "1") as worker:
        import redis as redis_lib

        from workers.main import create_app
        r = redis_lib.Redis.from_url(redis_url)
        celery = create_app(redis_url, Settings(redis_url=redis_url, celery_queue=queue))
        d = database_id(eng)
        # When an export job runs in the worker (its long work process writes the event)
        job = create_export_job(r, d, "f", out=str(tmp_path / "f.csv"), method="mv")
        celery.send_task("labelq.export", args=[job.job_id, d], queue=f"{queue}.long")
        deadline = time.monotonic() + 60
        while not receiver.requests("/ok"):
            assert worker.running(), worker.tail()
            assert time.monotonic() < deadline, worker.tail()
            time.sleep(0.1)
        # Then the receiver has it within seconds of the event, signed at its first try,
        # with no sweep run yet (the delivery was sent when the job's transaction committed)
        (headers, body), = receiver.requests("/ok")
        assert body["type"] == "export.ready" and body["data"]["job"] == job.job_id
        assert headers["X-Labelq-Attempt"] == "1"
        lag = int(headers["X-Labelq-Timestamp"]) - datetime.fromisoformat(body["at"]).timestamp()
        assert lag < 5, lag
        assert b"labelq.hooks_sweep[" not in worker.log.read_bytes()  # (none received)


@pytest.mark.timeout(240)
def test_an_operator_commands_events_are_delivered_at_once(redis_url, tmp_path, receiver):
    # Given a project with a hook for pauses, resumes and exports, and `labelq run-worker`
    # whose beat (the hooks' sweep, the safety net) comes every 120 s
    import subprocess
    import sys

    url = f"sqlite:///{tmp_path / 'cli.db'}"
    eng, _ = make_project(url, n_tasks=3, workers=1, name="c")
    with session_scope(eng) as s:
        add_hook(s, get_project(s, "c"), "ops", receiver.url + "/ok",
                 ["annotator.paused", "annotator.resumed", "export.ready"])
    env, queue = worker_env(redis_url, url, beat_seconds=120)
    with RunWorker(env, tmp_path / "worker.log", "-c", "1") as worker:
        # When the operator pauses and resumes the annotator and exports, from the shell
        for args in (["workers", "pause", "c-w0"], ["workers", "resume", "c-w0"],
                     ["export", "c", "--out", str(tmp_path / "c.csv")]):
            done = subprocess.run([sys.executable, "-m", "cli.main", *args], cwd=ROOT, env=env,
                                  capture_output=True, text=True, timeout=120)
            assert done.returncode == 0, done.stderr
        # Then the receiver has each event within seconds, at its first try, with no sweep
        # run yet (each was sent when the command's transaction committed)
        deadline = time.monotonic() + 60
        while len(receiver.requests("/ok")) < 3:
            assert worker.running(), worker.tail()
            assert time.monotonic() < deadline, (receiver.requests("/ok"), worker.tail())
            time.sleep(0.1)
        got = receiver.requests("/ok")
        assert sorted(b["type"] for _, b in got) == ["annotator.paused", "annotator.resumed",
                                                      "export.ready"]
        assert {h["X-Labelq-Attempt"] for h, _ in got} == {"1"}
        assert b"labelq.hooks_sweep[" not in worker.log.read_bytes()  # (none received)
