"""Redis Sentinel failover under a live Celery worker and annotator traffic (issue 44).

Real processes: a ``redis-server`` master and its replica, three ``redis-server --sentinel``
watching them (each on its own free port and folder), a ``celery -A workers.main worker``
subprocess and annotator threads on a :class:`~labelq.service.Service`, all given
``LABELQ_REDIS_URL=redis+sentinel://...`` (:mod:`labelq.live.redis.connect`). The master is
SIGKILLed mid-traffic; the sentinels promote the replica and labelq follows it, losing no
acknowledged label and applying none twice."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
import redis as redis_lib
from sqlmodel import select

from labelq.errors import LabelqError, ServiceUnavailable
from labelq.live.hotstate import fold_from_sql
from labelq.live.redis.connect import connect
from labelq.live.redis.keys import Keys, replication_key
from labelq.record.db import database_id, session_scope
from labelq.record.models import Label, Project, Task
from labelq.record.settings import Settings, load_settings
from labelq.service import Service
from workers.main import create_app

from .conftest import _free_port, make_project

MASTER = "labelqmaster"
DOWN_AFTER_MS = 1000
FAILOVER_TIMEOUT_MS = 3000


def _need_redis_server() -> None:
    if shutil.which("redis-server") is None:
        if os.environ.get("CI"):
            pytest.fail("redis-server is not installed, and CI must run this test")
        pytest.skip("redis-server not installed (CI installs it)")


class SentinelGroup:
    """A master, its replica and three sentinels, each ``redis-server`` on a free port."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.master_port, self.replica_port = _free_port(), _free_port()
        self.sentinel_ports = [_free_port() for _ in range(3)]
        self.procs: dict[str, subprocess.Popen] = {}

    @property
    def url(self) -> str:
        hosts = ",".join(f"127.0.0.1:{p}" for p in self.sentinel_ports)
        return f"redis+sentinel://{hosts}/{MASTER}/0"

    def _spawn(self, name: str, args: list[str]) -> None:
        folder = self.root / name
        folder.mkdir()
        self.procs[name] = subprocess.Popen(
            ["redis-server", *args], cwd=folder, stdout=open(folder / "log", "ab"),
            stderr=subprocess.STDOUT, start_new_session=True)

    def start(self) -> SentinelGroup:
        common = ["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        self._spawn("master", ["--port", str(self.master_port), *common])
        self._spawn("replica", ["--port", str(self.replica_port), *common,
                                "--replicaof", "127.0.0.1", str(self.master_port)])
        for i, port in enumerate(self.sentinel_ports):
            conf = self.root / f"sentinel{i}.conf"  # (a sentinel rewrites its config file)
            conf.write_text(
                f"port {port}\nbind 127.0.0.1\n"
                f"sentinel monitor {MASTER} 127.0.0.1 {self.master_port} 2\n"
                f"sentinel down-after-milliseconds {MASTER} {DOWN_AFTER_MS}\n"
                f"sentinel failover-timeout {MASTER} {FAILOVER_TIMEOUT_MS}\n"
                f"sentinel parallel-syncs {MASTER} 1\n")
            self._spawn(f"sentinel{i}", [str(conf), "--sentinel"])
        # ready: the replica in sync, and every sentinel knows it and the two others
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if self._ready():
                    return self
            except redis_lib.RedisError:
                pass
            time.sleep(0.1)
        raise RuntimeError("the sentinel group did not get ready: " + self.logs())

    def _ready(self) -> bool:
        info = redis_lib.Redis(port=self.replica_port).info("replication")
        if info.get("master_link_status") != "up":
            return False
        for port in self.sentinel_ports:
            state = redis_lib.Redis(port=port, decode_responses=True).sentinel_master(MASTER)
            if int(state["num-slaves"]) < 1 or int(state["num-other-sentinels"]) < 2:
                return False
        return True

    def master_port_now(self) -> int | None:
        """The master's port as a majority of the sentinels name it (None: no majority)."""
        seen: Counter[int] = Counter()
        for port in self.sentinel_ports:
            try:
                _, p = redis_lib.Redis(port=port, socket_timeout=1).sentinel_get_master_addr_by_name(
                    MASTER)
                seen[int(p)] += 1
            except (redis_lib.RedisError, TypeError):
                continue
        best = seen.most_common(1)
        return best[0][0] if best and best[0][1] >= 2 else None

    def kill9(self, name: str) -> None:
        self.procs[name].send_signal(signal.SIGKILL)
        self.procs[name].wait(10)

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{(p / 'log').read_text()[-1500:]}"
                         for p in sorted(self.root.iterdir()) if (p / "log").exists())

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)


@pytest.fixture
def sentinel_group(tmp_path):
    _need_redis_server()
    root = tmp_path / "sentinel"
    root.mkdir()
    group = SentinelGroup(root)
    try:
        yield group.start()
    finally:
        group.stop()


def test_sentinel_url_is_checked_with_precise_errors():
    from labelq.errors import ConfigError
    ok = load_settings({"LABELQ_REDIS_URL": "redis+sentinel://:pw@a:26380,b/mymaster/2",
                        "LABELQ_DATABASE_URL": "sqlite:///x.db"})
    assert ok.redis_url.endswith("/mymaster/2")
    for url, says in [("redis+sentinel://a:26379/", "names no master"),
                      ("redis+sentinel://a:0/m", "sentinel 1 has no valid port"),
                      ("redis+sentinel://a,,b/m", "sentinel 2 names no host"),
                      ("redis+sentinel://a/m/x", "database number"),
                      ("redis+sentinel://a/m/0/1", "more path than /MASTER/DB"),
                      ("redis+sentinel://a,a/m", "names a sentinel twice"),
                      ("redis+sentinel://a/m?x=1", "no query"),
                      ("redis+sentinel://:hunter2@a:x/m", "sentinel 1 has no valid port")]:
        with pytest.raises(ConfigError) as err:
            load_settings({"LABELQ_REDIS_URL": url, "LABELQ_DATABASE_URL": "sqlite:///x.db"})
        assert "LABELQ_REDIS_URL" in str(err.value) and says in str(err.value), url
        assert "hunter2" not in str(err.value)  # (the password is masked)


def test_celery_broker_of_a_sentinel_url():
    from labelq.live.redis.connect import celery_broker
    assert celery_broker("redis://h:1/3") == ("redis://h:1/3", {})
    broker, options = celery_broker("redis+sentinel://u:p%40ss@a:1,[::1]/m/3")
    assert broker == "sentinel://u:p%40ss@a:1/3;sentinel://u:p%40ss@[::1]:26379/3"
    assert options == {"master_name": "m"}
    app = create_app("redis+sentinel://a:1,b:2/m/3")
    assert app.conf.broker_transport == "workers.broker:SentinelTransport"
    assert app.conf.broker_transport_options["master_name"] == "m"
    # and after a failover switch to the next sentinel, still workers.broker's transport
    from workers.broker import SentinelTransport
    with app.connection_for_write() as conn:
        assert type(conn.transport) is SentinelTransport
        conn.switch(conn.alt[1])
        assert conn.hostname == "b" and type(conn.transport) is SentinelTransport


@pytest.mark.timeout(120)
def test_labelq_follows_a_failover_and_loses_no_label(sentinel_group, sqlite_url, celery_env,
                                                      celery_worker):
    # Given a project, a Celery worker and annotators, all on a Redis watched by Sentinel
    group = sentinel_group
    url = group.url
    eng, pid = make_project(sqlite_url, n_tasks=1500, workers=4, max_labels=3, policy="optkg")
    env = celery_env(sqlite_url)
    env["LABELQ_REDIS_URL"] = url
    worker = celery_worker(env)
    r = connect(url, socket_timeout=10, health_check_interval=30)  # as the API makes it
    app = create_app(url)

    def notify(project_id: int) -> None:
        app.send_task("labelq.apply_labels", args=[project_id], queue="labelq")

    svc = Service(eng, r, settings=Settings(database_url=sqlite_url, redis_url=url),
                  notify=notify, state_max_age=0.05)
    stop = threading.Event()
    lock = threading.Lock()
    acked: dict[str, float] = {}  # assignment id -> when its submit was acknowledged
    interrupted: set[str] = set()  # submits cut off (503: maybe recorded)
    refused: Counter[str] = Counter()  # other outcomes, by kind

    unexpected: list[str] = []

    def annotate(j: int) -> None:
        try:
            work(j)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            unexpected.append(f"{type(exc).__name__}: {exc}")

    def work(j: int) -> None:
        i = 0
        while not stop.is_set():
            handle = f"p-w{j}"
            i += 1
            try:
                a = svc.next_assignment(handle)
            except (redis_lib.ConnectionError, redis_lib.TimeoutError, ServiceUnavailable):
                time.sleep(0.02)  # the API answers 503 meanwhile
                continue
            if a is None:
                time.sleep(0.01)
                continue
            try:
                svc.submit(handle, a.assignment_id, "ab"[i % 2])
            except ServiceUnavailable:
                with lock:
                    interrupted.add(a.assignment_id)
            except LabelqError as exc:  # a lease the promoted replica never saw, say
                with lock:
                    refused[type(exc).__name__] += 1
            else:
                with lock:
                    acked[a.assignment_id] = time.monotonic()

    # (the beat has looked at the master once, as in a deployment that ran for a while: it
    # learns the replication id it tells a promotion by)
    key, deadline = replication_key(database_id(eng)), time.monotonic() + 30
    replica = redis_lib.Redis(port=group.replica_port)
    while not replica.exists(key) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert replica.exists(key), worker.logfile.read_text()[-3000:]
    threads = [threading.Thread(target=annotate, args=(j,), daemon=True) for j in range(4)]
    for t in threads:
        t.start()
    try:
        deadline = time.monotonic() + 20
        while len(acked) < 100 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(acked) >= 100, "no traffic before the failover"
        # When the master is SIGKILLed mid-traffic
        connected = worker.logfile.read_text().count("] Connected to ")
        group.kill9("master")
        killed = time.monotonic()
        before = len(acked)
        # Then the sentinels promote the replica...
        promoted = None
        while time.monotonic() < killed + 30:
            if group.master_port_now() == group.replica_port:
                promoted = time.monotonic()
                break
            time.sleep(0.05)
        assert promoted is not None, group.logs()
        # ...and labelq follows it: labels are acknowledged again soon after
        while time.monotonic() < promoted + 15:
            with lock:
                after = sorted(t for t in acked.values() if t > promoted)
            if len(after) >= 100:
                break
            time.sleep(0.05)
        assert len(after) >= 100, (f"{len(after)} labels acknowledged since the promotion",
                                   unexpected, refused, group.logs())
        resumed = after[0] - promoted
        back = min(t for t in acked.values() if t > killed) - killed
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    assert not unexpected, unexpected
    failover = promoted - killed
    print(f"\nfailover: promoted {failover:.1f} s after the kill, labels acknowledged again "
          f"{back:.1f} s after the kill; {before} labels before, {len(acked) - before} "
          f"after; {len(interrupted)} submits cut off, refused: {dict(refused)}")
    # the sentinels' own time: down-after, then an election (a failover-timeout at most)
    assert failover < (DOWN_AFTER_MS + 2 * FAILOVER_TIMEOUT_MS) / 1000 + 2
    # a client reconnects on its next command, asking the sentinels for the master
    assert resumed < 3.0 and back < failover + 3.0

    # every label SQL holds gets applied by the worker (on the promoted master's broker)
    deadline = time.monotonic() + 60
    while True:
        with session_scope(eng) as s:
            rows = s.exec(select(Label.assignment_id, Label.applied_seq, Task.seq)
                          .join(Task, Task.id == Label.task_id)
                          .where(Label.project_id == pid)).all()
        if all(x[1] is not None for x in rows) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    log = worker.logfile.read_text()
    assert worker.proc.poll() is None, log[-3000:]
    assert "Unrecoverable error" not in log
    assert log.count("] Connected to ") > connected  # its broker connection followed too
    # and the beat saw the promotion: the hot state was rebuilt from SQL, as after a flush
    # (the beat's task result, which the worker logs)
    assert "'rebuilt_after_failover': 1" in log
    in_sql = Counter(x[0] for x in rows)
    # no acknowledged label lost, none recorded twice, nothing recorded that was not sent
    assert set(acked) <= set(in_sql)
    assert max(in_sql.values()) == 1
    assert set(in_sql) - set(acked) <= interrupted
    # every label applied exactly once, densely, and the fold counts each once
    n = len(rows)
    assert sorted(x[1] for x in rows) == list(range(1, n + 1)), "labels left unapplied"
    with session_scope(eng) as s:
        assert fold_from_sql(s, s.get(Project, pid)).seq == n
    # the hot state on the promoted master counts every label (but those whose submit the
    # failover cut between the SQL commit and the Redis finish: the reaper finishes them)
    k = Keys(pid, database_id(eng))
    counted = sum(int(v) for v in r.hgetall(k.nlabels).values())
    assert n - len(interrupted) <= counted <= n
    r.close()


def test_a_promotion_rebuilds_the_hot_state_and_a_restart_does_not(
        sentinel_group, private_redis, sqlite_url, monkeypatch, caplog):
    import logging

    import labelq.live.rebuild as rebuild_module
    from labelq.live.failover import check_failover
    from labelq.live.rebuild import ensure_hot

    # Given a project with hot state on the group's master, the beat's check having run
    group = sentinel_group
    eng, pid = make_project(sqlite_url, n_tasks=30, workers=2)
    master = redis_lib.Redis(port=group.master_port)
    replica = redis_lib.Redis(port=group.replica_port)
    database = database_id(eng)
    assert ensure_hot(eng, master, pid)
    assert check_failover(eng, master, database) == []  # (first look: remembered)
    assert check_failover(eng, master, database) == []
    k = Keys(pid, database)
    deadline = time.monotonic() + 10
    while not replica.exists(replication_key(database)) and time.monotonic() < deadline:
        time.sleep(0.05)
    # When the replica lost some of the master's last writes and is promoted
    master.hset(k.nlabels, "3", 7)  # (a counter written on the master...)
    time.sleep(0.2)
    replica.execute_command("REPLICAOF", "NO", "ONE")
    replica.hdel(k.nlabels, "3")  # (...that the replica never got, as if it lagged)
    replica.hset(k.nlabels, "4", 2)  # (and one it got wrong)
    # Then the check rebuilds the project's hot state from SQL (no labels: no counts), once,
    # lazily as after a flush: the 10 highest priorities first, the rest streamed behind
    monkeypatch.setattr(rebuild_module, "FIRST", 10)
    with caplog.at_level(logging.INFO, logger="labelq.live.rebuild"):
        assert check_failover(eng, replica, database) == [pid]
    assert "'streaming': 20" in caplog.text
    assert replica.hgetall(k.nlabels) in ({}, {b"4": b"0"}) or \
        all(int(v) == 0 for v in replica.hgetall(k.nlabels).values())
    assert replica.hexists(k.meta, "built")
    assert check_failover(eng, replica, database) == []
    deadline = time.monotonic() + 30
    while replica.hexists(k.meta, "warming") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not replica.hexists(k.meta, "warming") and replica.zcard(k.pending) == 30

    # and a restarted Redis (its data persisted, a new replication id) rebuilds nothing
    r = redis_lib.Redis.from_url(private_redis.url)
    assert ensure_hot(eng, r, pid)
    assert check_failover(eng, r, database) == []
    r.hset(k.nlabels, "5", 1)  # (a mark the rebuild would drop)
    before = r.get(replication_key(database))
    private_redis.stop()
    private_redis.start()
    r = redis_lib.Redis.from_url(private_redis.url)
    assert r.get(replication_key(database)) == before
    assert check_failover(eng, r, database) == []
    assert r.get(replication_key(database)) != before  # (the new id, remembered)
    assert r.hget(k.nlabels, "5") == b"1"
