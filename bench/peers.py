"""labelq side by side with Label Studio (issues 23, 36): one driver, two small adapters.

    python bench/peers.py --label-studio-bin ../venv-ls/bin/label-studio   # ~45 min
    python bench/peers.py --quick --systems labelq      # the harness check the tests run

Installs nothing (Label Studio lives in a venv of its own, with its ``uwsgi`` extra: README).
Starts, on 127.0.0.1 and free ports:

* one PostgreSQL for the run that both systems use (``--postgres private``: ``initdb`` of the
  machine's PostgreSQL binaries in a temp dir, default settings, so that its CPU can be
  charged to the system running; or ``--postgres postgresql://…``, an existing server);
* Label Studio as its docker-compose.yml deploys it for production, without the containers:
  ``DJANGO_DB=default`` with ``POSTGRE_*`` pointing at that server, ``manage.py
  locked_migrate`` once per run into a template database (with the admin and the annotators,
  made with Django's ORM through the Label Studio venv's own Python: a legacy API token
  each), then per phase a fresh copy of it and ``uwsgi --ini`` its deploy/uwsgi.ini
  (``UWSGI_INI`` below: twice the cores in processes, one thread each) — no nginx in front
  (docs/benchmarks.md says why that does not favour labelq); ``--ls-server start`` runs
  ``label-studio start`` (runserver) on the same database instead;
* a ``labelq serve`` + ``labelq run-worker`` stack (a fresh schema on that PostgreSQL, or
  ``--database sqlite``/``postgresql://…``; Redis at ``--redis-url``, a DB number of its own,
  flushed), new for every phase, with the project created and its annotators enrolled
  in-process as ``bench/through_api.py`` does.

Both get the same ``--tasks`` binary tasks (``{"id", "text"}``) and ``--annotators``
annotators. The same client code drives both: ``--load-procs`` processes, a thread per
annotator with an ``httpx`` client of its own, looping *ask for my next task, submit a
label* until the system says there is nothing left for it or ``--seconds`` run out, after
``--warmup`` untimed seconds of asking who they are (uWSGI's cheaper mode adds workers
under load). The connection is kept alive to labelq and new per request to Label Studio
(``http_client``):

=========  ==========================================  ======================================
           next task                                   submit
=========  ==========================================  ======================================
labelq     ``POST /api/v1/assignments/next``           ``POST /api/v1/assignments/{id}/label``
LS         ``GET /api/projects/{id}/next``             ``POST /api/tasks/{id}/annotations``
=========  ==========================================  ======================================

Both run at overlap 3 and 1 (labelq's ``max_labels``, Label Studio's
``maximum_annotations``, which CE's API accepts and its stream honours: docs/benchmarks.md).
The systems alternate ``--rounds`` times (the order reversed every other round, so a drift
in the machine's load falls on both). Each phase reports labels/s (labels / time from the
first request to the last submitted label), next-task and submit p50/p99, and the server
processes' CPU per label (/proc, reaped children included: Label Studio's uWSGI process
group; labelq's API and worker process groups; the private PostgreSQL's, in both; the
shared Redis server apart). In the first ``--export-rounds`` rounds
each system then has every task labelled once and the export of those labels is timed. The
table goes to docs/benchmarks.md (section ``peers``) unless ``--no-doc``.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._procs import free_port  # noqa: E402
from bench._report import command_line, machine, write_section  # noqa: E402
from bench.pipeline import cpu_seconds, fresh_database, wait_applied  # noqa: E402
from bench.through_api import wait_http  # noqa: E402

LABELS = ("a", "b")
LS_CONFIG = ('<View><Text name="text" value="$text"/><Choices name="label" toName="text">'
             '<Choice value="a"/><Choice value="b"/></Choices></View>')


def make_tasks(n: int) -> list[dict]:
    """The same binary tasks for both systems."""
    return [{"id": f"t{i}", "text": f"item {i}: is this a or b?"} for i in range(n)]


def _kill_group(proc: subprocess.Popen | None, timeout: float = 30) -> None:
    if proc is None or proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout)
    except ProcessLookupError:
        return
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


# --------------------------------------------------------------------------------------
# the driver: the same client code for both systems


TIMEOUT = 120.0  # one request's limit in the driver; a timed-out request is counted
RETRIES = 8  # a 5xx is retried (Label Studio on SQLite: "database is locked"), then fatal


def _send(c, method, url, retried, **kw):
    for attempt in range(RETRIES + 1):
        r = c.request(method, url, **kw)
        if r.status_code < 500 or attempt == RETRIES:
            return r
        retried.append(r.status_code)
        time.sleep(0.05 * (attempt + 1))


def _adapter(kind: str, project, retried: list):
    """(next(client) -> key or None, submit(client, key, label)) for one system; 5xx
    answers are retried and counted in ``retried``."""
    if kind == "labelq":
        def nxt(c):
            r = _send(c, "POST", "/api/v1/assignments/next", retried)
            r.raise_for_status()
            a = r.json()["assignment"]
            return None if a is None else a["assignment_id"]

        def submit(c, key, label):
            r = _send(c, "POST", f"/api/v1/assignments/{key}/label", retried,
                      json={"label": label})
            r.raise_for_status()
    else:
        def nxt(c):
            r = _send(c, "GET", f"/api/projects/{project}/next", retried)
            if r.status_code == 404:  # "There are no tasks for <user>"
                return None
            r.raise_for_status()
            return r.json()["id"]

        def submit(c, key, label):
            r = _send(c, "POST", f"/api/tasks/{key}/annotations?project={project}", retried,
                      json={"result": [{"from_name": "label", "to_name": "text",
                                        "type": "choices", "value": {"choices": [label]}}],
                            "lead_time": 1.0, "project": project})
            r.raise_for_status()
    return nxt, submit


def http_client(kind: str, **kw):  # -> httpx.Client
    """The client's connection: kept alive to labelq; a new one per request to Label
    Studio, whose uWSGI HTTP router closes the connection after every response without
    saying so (no ``Connection: close``), so that a kept-alive connection gets reset."""
    import httpx
    if kind == "ls":
        kw["limits"] = httpx.Limits(max_keepalive_connections=0)
    return httpx.Client(**kw)


def _client(kind, base, project, auth, seconds, warm, ready, go, out):
    """One load process: a thread per annotator, one kept-alive connection each. With
    ``warm``, each thread keeps asking who it is until the start (the warm-up)."""
    import random

    import httpx
    results, errors, retried = [], [], []
    nxt, submit = _adapter(kind, project, retried)

    def one(i, header):
        rng = random.Random(i)
        n, next_ms, submit_ms, last = 0, [], [], None
        with http_client(kind, base_url=base, headers={"Authorization": header},
                         timeout=TIMEOUT) as c:
            me = "/api/v1/me" if kind == "labelq" else "/api/current-user/whoami"
            c.get(me).raise_for_status()
            ready.put(i)
            while warm and not go.is_set():
                c.get(me)
            go.wait()
            stop = time.monotonic() + seconds
            try:
                empty = 0
                while time.monotonic() < stop:
                    t = time.perf_counter()
                    try:
                        key = nxt(c)
                    except httpx.TimeoutException:  # counted, its time kept; ask again
                        next_ms.append(1000 * (time.perf_counter() - t))
                        retried.append("timeout")
                        continue
                    next_ms.append(1000 * (time.perf_counter() - t))
                    if key is None:  # said twice, a short while apart: done
                        empty += 1
                        if empty >= 2:
                            break
                        time.sleep(0.2)
                        continue
                    empty = 0
                    t = time.perf_counter()
                    try:
                        submit(c, key, LABELS[rng.random() < 0.5])
                    except httpx.TimeoutException:  # counted; the label may or may not be in
                        retried.append("timeout")
                        continue
                    submit_ms.append(1000 * (time.perf_counter() - t))
                    last = time.time()
                    n += 1
            except Exception as exc:  # noqa: BLE001 - reported by the parent
                errors.append(repr(exc)[:300])
        results.append((n, next_ms, submit_ms, last))
    def guarded(i, header):
        try:
            one(i, header)
        except Exception as exc:  # noqa: BLE001 - before the start: reported, and ready
            errors.append(repr(exc)[:300])
            ready.put(i)

    ts = [threading.Thread(target=guarded, args=(i, h)) for i, h in enumerate(auth)]
    [t.start() for t in ts]
    go.wait()
    cpu0 = time.process_time()
    [t.join() for t in ts]
    out.put((results, time.process_time() - cpu0, errors, len(retried)))


def drive(kind, base, project, auth, seconds, load_procs, server_cpu, warmup=0.0):
    """Run the annotators against one system; ``server_cpu()`` -> {part: CPU seconds}.
    ``warmup`` seconds of every annotator asking who it is come first, untimed."""
    import multiprocessing as mp
    ctx = mp.get_context("spawn")
    q, ready, go = ctx.Queue(), ctx.Queue(), ctx.Event()
    ps = [ctx.Process(target=_client, args=(kind, base, project, auth[i::load_procs], seconds,
                                            warmup > 0, ready, go, q))
          for i in range(load_procs) if auth[i::load_procs]]
    [p.start() for p in ps]
    try:
        deadline = time.monotonic() + 120
        for _ in auth:
            while True:
                try:
                    ready.get(timeout=1)
                    break
                except Exception:  # noqa: BLE001 - queue.Empty
                    if time.monotonic() > deadline or not all(p.is_alive() for p in ps):
                        raise RuntimeError("the client processes did not get ready")
        time.sleep(warmup)
        c0 = server_cpu()
        t0 = time.time()
        go.set()
        got = [q.get(timeout=seconds + 300) for _ in ps]
        t_end = time.time()
    finally:
        for p in ps:
            p.join(30)
            if p.is_alive():
                p.kill()
    results = [r for g in got for r in g[0]]
    lasts = [r[3] for r in results if r[3] is not None]
    return {"labels": sum(r[0] for r in results),
            "seconds": (max(lasts) if lasts else t_end) - t0,
            "next_ms": [x for r in results for x in r[1]],
            "submit_ms": [x for r in results for x in r[2]],
            "client_cpu": sum(g[1] for g in got),
            "errors": [e for g in got for e in g[2]], "retried": sum(g[3] for g in got),
            "c0": c0}


def _pct(xs, q):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q / 100 * (len(xs) - 1))))]


# --------------------------------------------------------------------------------------
# labelq: `labelq serve` + `labelq run-worker`, a fresh record per phase


class Labelq:
    kind = "labelq"

    def __init__(self, args, overlap: int, pg: Postgres):
        self.args, self.overlap, self.pg = args, overlap, pg
        self.name = f"labelq (overlap {overlap})"
        self.procs: list[subprocess.Popen] = []

    def start(self, tasks: list[dict]) -> dict:
        from labelq.live.redis.connect import connect
        from labelq.record.db import engine_for, init_schema, session_scope
        from labelq.record.loading import load_tasks
        from labelq.record.projects import create_project, enroll_worker, get_project
        from labelq.record.settings import Settings
        a = self.args
        self.r = connect(a.redis_url)
        self.r.flushdb()
        self.dir = Path(tempfile.mkdtemp(prefix="peers-labelq-"))
        database = self.pg.start() if a.database == "postgres" else a.database
        url, self.cleanup = fresh_database(database, str(self.dir))
        self.url = url
        self.engine = eng = engine_for(Settings(database_url=url).sqlalchemy_url)
        init_schema(eng)
        path = self.dir / "tasks.jsonl"
        path.write_text("".join(json.dumps(t) + "\n" for t in tasks))
        t = time.perf_counter()
        with session_scope(eng) as s:  # what `labelq project create` + `tasks load` do
            p = create_project(s, "peers", ",".join(LABELS), policy="uniform",
                               max_labels=self.overlap)
            load_tasks(s, p, path)
        load_s = time.perf_counter() - t
        with session_scope(eng) as s:
            p = get_project(s, "peers")
            tokens = [enroll_worker(s, p, f"ann{j}")[1] for j in range(a.annotators)]
        self.operator = secrets.token_hex(16)
        env = {**os.environ, "LABELQ_DATABASE_URL": url, "LABELQ_REDIS_URL": a.redis_url,
               "LABELQ_CELERY_QUEUE": "labelq-peers", "LABELQ_OPERATOR_TOKEN": self.operator,
               "PYTHONPATH": str(ROOT)}
        self.port = free_port()
        cli = [sys.executable, "-m", "cli.main"]
        log = self.dir / "worker.log"
        self.worker = subprocess.Popen(cli + ["run-worker", "-c", str(a.worker_procs)],
                                       cwd=self.dir, env=env, start_new_session=True,
                                       stdout=open(log, "wb"), stderr=subprocess.STDOUT)
        self.procs.append(self.worker)
        self.api = subprocess.Popen(cli + ["serve", "--port", str(self.port), "--log-level",
                                           "warning"],
                                    cwd=self.dir, env=env, start_new_session=True,
                                    stdout=open(self.dir / "api.log", "wb"),
                                    stderr=subprocess.STDOUT)
        self.procs.append(self.api)
        deadline = time.monotonic() + 120
        while b"ready." not in log.read_bytes():
            if self.worker.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"labelq worker did not start: {log.read_text()[-1000:]}")
            time.sleep(0.1)
        self.base = f"http://127.0.0.1:{self.port}"
        wait_http(f"{self.base}/healthz", self.api, deadline)
        self.redis_pid = int(self.r.info("server")["process_id"])
        return {"base": self.base, "project": "peers", "load_s": load_s,
                "auth": [f"Bearer {tok}" for tok in tokens]}

    def cpu(self) -> dict:
        pg = self.pg.cpu() if self.args.database == "postgres" else {}
        return {"api": group_cpu(self.api.pid), "worker": group_cpu(self.worker.pid), **pg,
                "redis": cpu_seconds(pids={self.redis_pid})}

    def processes(self) -> int:
        return len([p for p in self.procs if p.poll() is None])

    def log_tail(self) -> str:
        return (self.dir / "api.log").read_text(errors="replace")[-3000:]

    def fill(self) -> tuple[float, int]:
        """Give every task its labels in process (``Service``, the calls the API makes),
        round robin over the annotators; the input of the export timing. (s, labels)"""
        from labelq.record.settings import Settings
        from labelq.service import Service
        from workers.main import create_app
        app = create_app(self.args.redis_url)
        svc = Service(self.engine, self.r, settings=Settings(database_url=self.url,
                                                             redis_url=self.args.redis_url),
                      notify=lambda p: app.send_task("labelq.apply_labels", args=[p],
                                                     queue="labelq-peers"))
        handles = [f"ann{j}" for j in range(self.args.annotators)]
        t, n, idle = time.perf_counter(), 0, 0
        while idle < len(handles):
            idle = 0
            for j, h in enumerate(handles):
                a = svc.next_assignment(h)
                if a is None:
                    idle += 1
                    continue
                svc.submit(h, a.assignment_id, LABELS[(n + j) % 2])
                n += 1
        self.settle()
        return time.perf_counter() - t, n

    def settle(self) -> None:
        """Every label folded into the posterior (the worker's share of the work)."""
        wait_applied(self.engine)

    def export(self) -> dict:
        """Through the operator API: an export job run by the worker, polled, fetched.
        Aggregated (one row per task, CSV) and raw (every label, JSON lines)."""
        import httpx
        out = {}
        with httpx.Client(base_url=self.base, timeout=300,
                          headers={"Authorization": f"Bearer {self.operator}"}) as c:
            for what, body in (("per_task", {"format": "csv"}),
                               ("labels", {"format": "jsonl", "raw": True})):
                t = time.perf_counter()
                r = c.post("/api/v1/projects/peers/exports", json=body)
                r.raise_for_status()
                job = r.json()
                deadline = time.monotonic() + 300
                while job["state"] not in ("done", "failed"):
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"export job stuck: {job}")
                    time.sleep(0.02)
                    job = c.get(f"/api/v1/exports/{job['id']}").json()
                if job["state"] != "done":
                    raise RuntimeError(f"export failed: {job}")
                data = c.get(job["result_url"]).content
                rows = data.count(b"\n") - (1 if what == "per_task" else 0)
                out[what] = (time.perf_counter() - t, rows)
        return out

    def stop(self) -> None:  # noqa: D102 - the whole stack goes
        for proc in self.procs:
            _kill_group(proc)
        self.procs = []
        self.engine.dispose()
        self.cleanup()
        self.r.flushdb()
        self.r.close()
        shutil.rmtree(self.dir, ignore_errors=True)


# --------------------------------------------------------------------------------------
# PostgreSQL for both systems


def group_cpu(pgid: int) -> float:
    """CPU seconds of a process group, including its reaped children (uWSGI recycles its
    workers, PostgreSQL's postmaster reaps a backend per closed connection)."""
    return cpu_seconds(pgid=pgid, children=True)


def _pg_bindir() -> Path:
    """PostgreSQL's server binaries (initdb, postgres): pg_config's, else Debian's layout."""
    pg_config = shutil.which("pg_config")
    if pg_config:
        out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True)
        if out.returncode == 0 and (Path(out.stdout.strip()) / "initdb").exists():
            return Path(out.stdout.strip())
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
    if not found:
        raise SystemExit("--postgres private needs PostgreSQL's server binaries (initdb, "
                         "postgres); none found: pass --postgres postgresql://… instead")
    return found[-1].parent


class Postgres:
    """The PostgreSQL server both systems use in a run.

    ``private`` (the default): a cluster of its own (``initdb`` in a temp dir, the machine's
    PostgreSQL binaries and their default settings, 127.0.0.1 on a free port), so that its
    CPU per phase — every backend either system opened, reaped ones included — can be read
    from /proc and charged to the system that ran then. A ``postgresql://`` URL names an
    existing server instead (its databases made and dropped there; its CPU is not measured:
    other work shares it)."""

    def __init__(self, spec: str) -> None:
        self.spec = spec
        self.url = ""
        self.version = "PostgreSQL"
        self.proc: subprocess.Popen[bytes] | None = None
        self.dir: Path | None = None
        if spec != "private" and not spec.startswith("postgresql://"):
            raise SystemExit(f"--postgres: 'private' or a postgresql:// URL, not {spec!r}")

    def start(self) -> str:
        """The admin URL (``postgresql://user@host:port/postgres``), the server started."""
        if self.url:
            return self.url
        if self.spec != "private":
            self.url = self.spec
            self._version()
            return self.url
        bindir = _pg_bindir()
        self.dir = Path(tempfile.mkdtemp(prefix="peers-pg-"))
        data = self.dir / "data"
        as_pg: list[str] = []
        if os.geteuid() == 0:  # PostgreSQL refuses to run as root
            as_pg = ["runuser", "-u", "postgres", "--"]
            shutil.chown(self.dir, "postgres")
        out = subprocess.run(as_pg + [str(bindir / "initdb"), "-D", str(data), "-U", "postgres",
                                      "-A", "trust", "-E", "UTF8", "--no-sync"],
                             capture_output=True, text=True)
        if out.returncode:
            raise RuntimeError(f"initdb failed: {out.stdout[-1000:]} {out.stderr[-1000:]}")
        self.port = free_port()
        self.proc = subprocess.Popen(
            as_pg + [str(bindir / "postgres"), "-D", str(data), "-p", str(self.port),
                     "-c", "listen_addresses=127.0.0.1", "-c", f"unix_socket_directories={self.dir}"],
            start_new_session=True, stdout=open(self.dir.parent / f"{self.dir.name}.log", "wb"),
            stderr=subprocess.STDOUT)
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        deadline = time.monotonic() + 60
        while True:
            try:
                with self.admin() as conn:
                    conn.execute("SELECT 1")
                break
            except Exception:  # noqa: BLE001 - not up yet
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the private PostgreSQL did not start") from None
                time.sleep(0.2)
        self._version()
        return self.url

    def _version(self) -> None:
        with self.admin() as conn:
            row = conn.execute("SHOW server_version").fetchone()
        self.version = f"PostgreSQL {row[0].split()[0] if row else '?'}"

    def admin(self) -> psycopg.Connection[tuple[Any, ...]]:
        """A connection in autocommit (CREATE/DROP DATABASE)."""
        import psycopg
        return psycopg.connect(self.url, autocommit=True)

    def cpu(self) -> dict[str, float]:
        """{"postgres": CPU seconds} of the private server; {} for a shared one."""
        return {} if self.proc is None else {"postgres": group_cpu(self.proc.pid)}

    def close(self) -> None:
        if self.proc is not None:
            _kill_group(self.proc)
            self.proc = None
            self.url = ""
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            Path(self.dir.parent / f"{self.dir.name}.log").unlink(missing_ok=True)
            self.dir = None


# --------------------------------------------------------------------------------------
# Label Studio: its production setup, a fresh database and server per phase


# Label Studio's deploy/uwsgi.ini (the `label-studio-uwsgi` command of its docker image and
# docker-compose.yml), with the paths and the address of this machine; left out: the stats
# server (`stats = :1717`, a monitoring socket on every interface), the pidfile, process
# names and the JSON log encoders (cosmetic). `processes` is its default, twice the cores.
UWSGI_INI = """[uwsgi]
chdir = {chdir}
http = 127.0.0.1:{port}
module = core.wsgi:application
master = true
cheaper = true
single-interpreter = true
processes = {processes}
threads = {threads}
vacuum = true
die-on-term = true
buffer-size = 65535
http-timeout = 300
need-app = true
env = APP_WEBSERVER=uwsgi
ignore-sigpipe = true
ignore-write-errors = true
disable-write-exception = true
harakiri = 120
harakiri-verbose = true
post-buffering = 4096
disable-logging = True
log-5xx = true
enable-threads = True
thunder-lock = True
lazy-apps = True
max-requests = 5000
reload-on-rss = 2048
worker-reload-mercy = 300
"""

# The admin (as `label-studio init` / `start --username` makes it: LS's own _create_user
# steps, its organization with legacy API tokens on) and the annotators, in the admin's
# organization, a legacy API token each; Django's ORM in the Label Studio venv (its CE API
# makes no users with a password or token). Prints "TOKEN <key>" per annotator.
LS_USERS = """
import os, sys
import django
django.setup()
from organizations.models import Organization
from rest_framework.authtoken.models import Token
from users.models import User
admin = User.objects.create_user(email="admin@peers.local", password=sys.argv[1])
admin.is_staff = admin.is_superuser = True
admin.save()
Token.objects.filter(key=admin.auth_token.key).update(key=sys.argv[2])
org = Organization.create_organization(created_by=admin, title="Label Studio",
                                       legacy_api_tokens_enabled=True)
admin.active_organization = org
admin.save(update_fields=["active_organization"])
for j in range(int(sys.argv[3])):
    u = User.objects.create_user(email=f"ann{j}@peers.local", username=f"ann{j}")
    org.add_user(u)
    u.active_organization = org
    u.save(update_fields=["active_organization"])
    print("TOKEN", Token.objects.get_or_create(user=u)[0].key)
"""


class LabelStudioServer:
    """Label Studio as its docker-compose.yml deploys it, minus the containers: PostgreSQL
    (``DJANGO_DB=default``, ``POSTGRE_*``), migrations run first (``manage.py
    locked_migrate``, as its entrypoint does), then ``uwsgi --ini`` its deploy/uwsgi.ini
    (``--ls-server uwsgi``, the default) — or ``label-studio start`` (Django's runserver,
    one process) on the same database with ``--ls-server start``.

    The migrated database with its users is made once per run (``labelstudio_bench_tpl``);
    every phase gets a fresh copy of it (``CREATE DATABASE … TEMPLATE``) and a fresh server,
    as labelq gets a fresh record and stack."""

    DB = "labelstudio_bench"

    def __init__(self, args: argparse.Namespace, pg: Postgres) -> None:
        self.args, self.pg = args, pg
        self.server: subprocess.Popen[bytes] | None = None
        self.dir: Path | None = None

    def _python(self) -> str:
        """The Python of the Label Studio venv (from the launcher's shebang)."""
        first = Path(self.bin).read_text(errors="replace").splitlines()[0]
        return first[2:].strip() if first.startswith("#!") else sys.executable

    def _prepare(self) -> None:
        """Once per run: the venv found, the template database migrated, the users made."""
        a = self.args
        self.bin = shutil.which(a.label_studio_bin) or a.label_studio_bin
        if not Path(self.bin).exists():
            raise SystemExit(f"label-studio not found ({a.label_studio_bin}); see "
                             "docs/benchmarks.md for its venv, or --systems labelq")
        py = self._python()
        out = subprocess.run([py, "-c", "import label_studio, os; "
                              "print(os.path.dirname(label_studio.__file__))"],
                             capture_output=True, text=True)
        if out.returncode:
            raise SystemExit(f"label_studio does not import in {py}: {out.stderr[-500:]}")
        self.pkg = Path(out.stdout.strip())
        out = subprocess.run([py, "-c", "import label_studio; print(label_studio.__version__)"],
                             capture_output=True, text=True)
        self.version = out.stdout.strip()
        self.uwsgi = Path(py).parent / "uwsgi"
        if a.ls_server == "uwsgi" and not self.uwsgi.exists():
            raise SystemExit(f"no uwsgi in Label Studio's venv ({self.uwsgi}): install "
                             "label-studio[uwsgi] there (its pinned pyuwsgi), or --ls-server "
                             "start")
        self.uwsgi_version = subprocess.run([str(self.uwsgi), "--version"], capture_output=True,
                                            text=True).stdout.strip() if self.uwsgi.exists() else ""
        self.dir = Path(tempfile.mkdtemp(prefix="peers-ls-"))
        admin_url = self.pg.start()
        self.admin_token = secrets.token_hex(20)
        user = admin_url.split("://", 1)[1].split("@", 1)[0]
        host, port = admin_url.split("@", 1)[1].split("/", 1)[0].rsplit(":", 1)
        self.env = {k: v for k, v in os.environ.items()
                    if not k.startswith(("LABELQ_", "PYTHON", "VIRTUAL_ENV"))}
        self.env.update({
            "DJANGO_SETTINGS_MODULE": "core.settings.label_studio",  # as its Dockerfile
            "LABEL_STUDIO_BASE_DATA_DIR": str(self.dir / "data"),
            "DJANGO_DB": "default", "POSTGRE_NAME": f"{self.DB}_tpl", "POSTGRE_USER": user,
            "POSTGRE_PASSWORD": "", "POSTGRE_HOST": host, "POSTGRE_PORT": port,
            "JSON_LOG": "1",  # as its docker-compose.yml
            "LOG_LEVEL": "WARNING", "DEBUG": "false",  # its settings' defaults, stated
            "PYTHONUNBUFFERED": "1",
            # nothing leaves the machine: no error reports to Sentry (on by default in CE),
            # no analytics, no version check on PyPI
            "SENTRY_DSN": "", "FRONTEND_SENTRY_DSN": "", "COLLECT_ANALYTICS": "false",
            "LATEST_VERSION_CHECK": "false", "FEATURE_FLAGS_OFFLINE": "true"})
        with self.pg.admin() as conn:
            for db in (self.DB, f"{self.DB}_tpl"):
                conn.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
            conn.execute(f"CREATE DATABASE {self.DB}_tpl")
        t = time.perf_counter()
        out = subprocess.run([py, "manage.py", "locked_migrate"], cwd=self.pkg, env=self.env,
                             capture_output=True, text=True, timeout=1800)
        if out.returncode:
            raise RuntimeError(f"Label Studio migrations: {out.stdout[-1000:]} "
                               f"{out.stderr[-2000:]}")
        self.migrate_s = time.perf_counter() - t
        out = subprocess.run([py, "-c", LS_USERS, secrets.token_hex(12), self.admin_token,
                              str(a.annotators)], cwd=self.pkg, env=self.env,
                             capture_output=True, text=True, timeout=300)
        self.tokens = [ln.split()[1] for ln in out.stdout.splitlines()
                       if ln.startswith("TOKEN ")]
        if out.returncode or len(self.tokens) != a.annotators:
            raise RuntimeError(f"Label Studio users: {out.stdout[-500:]} {out.stderr[-2000:]}")
        self.env["POSTGRE_NAME"] = self.DB

    def launch(self) -> None:
        """A fresh copy of the template database and a fresh server on it."""
        if self.dir is None:
            self._prepare()
        assert self.dir is not None
        a = self.args
        with self.pg.admin() as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {self.DB} WITH (FORCE)")
            conn.execute(f"CREATE DATABASE {self.DB} TEMPLATE {self.DB}_tpl")
        self.port = free_port()
        log = self.dir / "ls.log"
        if a.ls_server == "uwsgi":
            ini = self.dir / "uwsgi.ini"
            ini.write_text(UWSGI_INI.format(chdir=self.pkg, port=self.port,
                                            processes=a.ls_processes or 2 * (os.cpu_count() or 1),
                                            threads=a.ls_threads))
            cmd = [str(self.uwsgi), "--ini", str(ini)]
        else:
            cmd = [self.bin, "start", "--no-browser", "--internal-host", "127.0.0.1", "--port",
                   str(self.port), "--data-dir", str(self.dir / "data"), "--log-level",
                   "WARNING"]
        self.server = subprocess.Popen(cmd, cwd=self.pkg, env=self.env, start_new_session=True,
                                       stdout=open(log, "ab"), stderr=subprocess.STDOUT)
        self.base = f"http://127.0.0.1:{self.port}"
        wait_http(f"{self.base}/health", self.server, time.monotonic() + 600)

    def processes(self) -> int:
        """Live processes of the server (uWSGI: master, HTTP router, workers)."""
        if self.server is None:
            return 0
        return sum(1 for e in os.listdir("/proc") if e.isdigit() and _pgid(int(e)) ==
                   self.server.pid)

    def stop_server(self) -> None:
        _kill_group(self.server)
        self.server = None

    def log_tail(self) -> str:
        if self.dir is None:
            return ""
        return (self.dir / "ls.log").read_text(errors="replace")[-3000:]

    def close(self) -> None:
        self.stop_server()
        if self.dir is None:
            return
        try:
            with self.pg.admin() as conn:
                for db in (self.DB, f"{self.DB}_tpl"):
                    conn.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
        except Exception as exc:  # noqa: BLE001 - the private server may be gone already
            print(f"Label Studio databases not dropped: {exc!r}", file=sys.stderr)
        if not self.args.keep:
            shutil.rmtree(self.dir, ignore_errors=True)
        else:
            print(f"kept {self.dir}", file=sys.stderr)
        self.dir = None


def _pgid(pid: int) -> int:
    try:
        return os.getpgid(pid)
    except OSError:
        return -1


class LabelStudio:
    """A phase: a fresh database and server (``LabelStudioServer.launch``), a new project
    at overlap ``maximum_annotations``."""
    kind = "ls"

    def __init__(self, server: LabelStudioServer, overlap: int):
        self.ls, self.overlap = server, overlap
        self.name = f"Label Studio (overlap {overlap})"

    def start(self, tasks: list[dict]) -> dict:
        ls = self.ls
        ls.launch()
        self.base, self.tasks = ls.base, tasks
        with http_client("ls", base_url=self.base, timeout=600,
                         headers={"Authorization": f"Token {ls.admin_token}"}) as c:
            r = c.post("/api/projects", json={
                "title": f"peers {time.time():.0f}", "label_config": LS_CONFIG,
                "maximum_annotations": self.overlap, "overlap_cohort_percentage": 100,
                "show_skip_button": False})
            r.raise_for_status()
            self.project = r.json()["id"]
            t = time.perf_counter()
            r = c.post(f"/api/projects/{self.project}/import",
                       json=[{"data": {"ext_id": t_["id"], "text": t_["text"]}} for t_ in tasks])
            r.raise_for_status()
            self._wait_imported(c, len(tasks), 600)
            load_s = time.perf_counter() - t
        return {"base": self.base, "project": self.project, "load_s": load_s,
                "auth": [f"Token {tok}" for tok in ls.tokens]}

    def _wait_imported(self, c, n: int, timeout: float) -> None:
        """Until the project holds ``n`` tasks (Label Studio imports in the background)."""
        deadline = time.monotonic() + timeout
        while c.get(f"/api/projects/{self.project}").json().get("task_number") != n:
            if time.monotonic() > deadline:
                raise RuntimeError("Label Studio import did not finish")
            time.sleep(0.1)

    def fill(self) -> tuple[float, int]:
        """A new project of the same tasks, each imported with one annotation (the import
        API takes annotations along; labelling 10,000 through the stream takes too long
        here): the input of the export timing. (s, labels)"""
        tasks = self.tasks
        with http_client("ls", base_url=self.base, timeout=900,
                         headers={"Authorization": f"Token {self.ls.admin_token}"}) as c:
            r = c.post("/api/projects", json={"title": f"peers export {time.time():.0f}",
                                              "label_config": LS_CONFIG})
            r.raise_for_status()
            self.project = r.json()["id"]
            t = time.perf_counter()
            r = c.post(f"/api/projects/{self.project}/import", json=[
                {"data": {"ext_id": t_["id"], "text": t_["text"]},
                 "annotations": [{"result": [{"from_name": "label", "to_name": "text",
                                              "type": "choices",
                                              "value": {"choices": [LABELS[i % 2]]}}]}]}
                for i, t_ in enumerate(tasks)])
            r.raise_for_status()
            self._wait_imported(c, len(tasks), 900)
            return time.perf_counter() - t, len(tasks)

    def cpu(self) -> dict:
        assert self.ls.server is not None
        return {"server": group_cpu(self.ls.server.pid), **self.ls.pg.cpu()}

    def processes(self) -> int:
        return self.ls.processes()

    def log_tail(self) -> str:
        return self.ls.log_tail()

    def settle(self) -> None:
        pass

    def export(self) -> dict:
        """The synchronous export endpoint: JSON (every task with its annotations) and CSV
        (one row per task). An answer that is not a 200 (uWSGI's harakiri ends a request
        after 120 s) is kept as ``(s, -1)`` and its status or error in ``out["failed"]``."""
        import httpx
        out: dict = {}
        with http_client("ls", base_url=self.base, timeout=600,
                         headers={"Authorization": f"Token {self.ls.admin_token}"}) as c:
            for what, fmt in (("per_task", "CSV"), ("labels", "JSON")):
                t = time.perf_counter()
                try:
                    r = c.get(f"/api/projects/{self.project}/export",
                              params={"exportType": fmt})
                    r.raise_for_status()
                except httpx.HTTPError as exc:
                    out[what] = (time.perf_counter() - t, -1)
                    out.setdefault("failed", []).append(f"{fmt}: {exc!r}"[:200])
                    continue
                if fmt == "JSON":
                    rows = sum(len(x.get("annotations", [])) for x in r.json())
                else:
                    rows = r.content.count(b"\n") - 1
                out[what] = (time.perf_counter() - t, rows)
        return out

    def stop(self) -> None:
        self.ls.stop_server()


# --------------------------------------------------------------------------------------


def phase(system, tasks, args) -> dict:
    t = time.perf_counter()
    info = system.start(tasks)
    procs: list[int] = []

    def server_cpu() -> dict[str, float]:  # the first call is the start: processes counted
        if not procs:
            procs.append(system.processes())
        cpu: dict[str, float] = system.cpu()
        return cpu
    try:
        setup_s = time.perf_counter() - t
        got = drive(system.kind, info["base"], info["project"], info["auth"], args.seconds,
                    args.load_procs, server_cpu, args.warmup)
        if got["errors"]:
            raise SystemExit(f"{system.name}: client errors: {got['errors'][:3]}\n"
                             f"server log: ...{system.log_tail()}")
        system.settle()
        c1 = system.cpu()
        cpu = {k: c1[k] - got["c0"][k] for k in c1}
        load = os.getloadavg()[0]
    finally:
        system.stop()
    n = max(got["labels"], 1)
    per = {k: 1000 * v / n for k, v in cpu.items()}
    own = sum(v for k, v in per.items() if k != "redis")
    return {"system": system.name, "kind": system.kind, "overlap": system.overlap,
            "labels": got["labels"], "seconds": got["seconds"],
            "rate": got["labels"] / got["seconds"],
            "next_p50": _pct(got["next_ms"], 50), "next_p99": _pct(got["next_ms"], 99),
            "submit_p50": _pct(got["submit_ms"], 50), "submit_p99": _pct(got["submit_ms"], 99),
            "cpu": per, "cpu_own": own, "cpu_all": sum(per.values()),
            "client_cpu": 1000 * got["client_cpu"] / n, "load": load, "retried": got["retried"],
            "load_s": info["load_s"], "setup_s": setup_s, "procs": procs[0]}


def export_phase(system, tasks) -> dict:
    """Every task labelled once (``system.fill``), then both exports timed."""
    system.start(tasks)
    try:
        fill_s, n = system.fill()
        return {"system": system.name.split(" (")[0], "kind": system.kind, "labels": n,
                "fill_s": fill_s, "export": system.export(), "load": os.getloadavg()[0]}
    finally:
        system.stop()


def _num(x: float) -> str:
    return f"{x:,.0f}" if x >= 100 else f"{x:.1f}"


def row(res: dict, rnd: int) -> str:
    cpu = res["cpu"]
    parts = " + ".join(f"{k} {v:.2f}" for k, v in cpu.items())
    return (f"| {rnd} | {res['system']} | {res['labels']:,} | {res['seconds']:.1f} "
            f"| {_num(res['rate'])} | {res['next_p50']:.1f} | {res['next_p99']:.1f} "
            f"| {res['submit_p50']:.1f} | {res['submit_p99']:.1f} | {res['cpu_own']:.2f} "
            f"| {parts} | {res['client_cpu']:.2f} | {res['procs']} | {res['load_s']:.1f} "
            f"| {res['retried']} | {res['load']:.1f} |")


def export_row(res: dict, rnd: int) -> str:
    ex = res["export"]

    def cell(s: float, rows: int) -> str:
        return f"failed after {s:.2f}" if rows < 0 else f"{s:.2f} ({rows:,})"
    return (f"| {rnd} | {res['system']} | {res['labels']:,} | {res['fill_s']:.1f} "
            f"| {cell(*ex['per_task'])} | {cell(*ex['labels'])} | {res['load']:.1f} |")


EXPORT_HEAD = ("| round | system | labels | labelled by (s) | export one row per task (s, rows) "
               "| export every label (s, labels) | load avg (1 min) |\n"
               "|---:|---|---:|---:|---:|---:|---:|")


HEAD = ("| round | system | labels | time (s) | labels/s | next p50 (ms) | next p99 (ms) "
        "| submit p50 (ms) | submit p99 (ms) | server CPU ms/label | of which | client CPU "
        "ms/label | server processes | load tasks (s) | 5xx or timed out | load avg (1 min) |\n"
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|")


def summary(results: list[tuple[int, dict]], exports: list[tuple[int, dict]]) -> list[str]:
    """Medians per system and the per-round ratios labelq / Label Studio."""
    med = statistics.median
    by: dict[str, list[dict]] = {}
    for _, res in results:
        by.setdefault(res["system"], []).append(res)
    out = ["| system | rounds | labels/s | next p50 (ms) | next p99 (ms) "
           "| server CPU ms/label |", "|---|---:|---:|---:|---:|---:|"]
    for name, rs in by.items():
        out.append(f"| {name} | {len(rs)} | {_num(med(r['rate'] for r in rs))} "
                   f"| {med(r['next_p50'] for r in rs):.1f} "
                   f"| {med(r['next_p99'] for r in rs):.1f} "
                   f"| {med(r['cpu_own'] for r in rs):.2f} |")
    lines = []
    f = lambda xs: " / ".join(f"{x:.0f}×" if x >= 10 else f"{x:.1f}×" for x in xs)  # noqa: E731
    for name, rs in by.items():
        if rs[0]["kind"] == "ls":
            continue
        # Label Studio in the same round at the same overlap
        ls = {rnd: res for rnd, res in results if res["kind"] == "ls"
              and res["overlap"] == rs[0]["overlap"]}
        rounds = [(rnd, res) for rnd, res in results if res["system"] == name and rnd in ls]
        if not rounds:
            continue
        # each as "how many times better labelq is": more labels/s, less time and CPU
        better = {"rate": [res["rate"] / ls[rnd]["rate"] for rnd, res in rounds]}
        for k in ("next_p50", "next_p99", "cpu_own"):
            better[k] = [ls[rnd][k] / res[k] for rnd, res in rounds]
        lines.append(f"| {name} vs {ls[rounds[0][0]]['system']} | {f(better['rate'])} "
                     f"| {f(better['next_p50'])} | {f(better['next_p99'])} "
                     f"| {f(better['cpu_own'])} | |")
    ex_ls = {rnd: res for rnd, res in exports if res["kind"] == "ls"}
    ex_lq = [(rnd, res) for rnd, res in exports if res["kind"] == "labelq" and rnd in ex_ls]
    for what, key in (("every label", "labels"), ("one row per task", "per_task")):
        if ex_lq:  # a failed Label Studio export: at least its time until it failed
            lines.append(f"| export, {what} (time) | | | | | " + " / ".join(
                ("≥ " if ex_ls[rnd]["export"][key][1] < 0 else "")
                + f([ex_ls[rnd]["export"][key][0] / res["export"][key][0]])
                for rnd, res in ex_lq) + " |")
    if lines:
        out += ["", "How many times better labelq did than Label Studio, same round and "
                "overlap, one figure per round (its labels/s ÷ Label Studio's; Label "
                "Studio's latency, CPU per label or export time ÷ labelq's):", "",
                "| labelq vs Label Studio | labels/s | next p50 | next p99 "
                "| server CPU per label | export time |",
                "|---|---|---|---|---|---|"] + lines
    return out


def main(argv=None) -> tuple[list, list]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--systems", default="labelq,ls",
                    help="which to run: labelq, ls (Label Studio), or both")
    ap.add_argument("--tasks", type=int, default=10_000)
    ap.add_argument("--annotators", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=3, help="alternations of the systems")
    ap.add_argument("--overlaps", default="3,1", help="labelq's overlaps (max labels per task)")
    ap.add_argument("--ls-overlaps", default="3,1",
                    help="Label Studio's overlaps (its projects' maximum_annotations)")
    ap.add_argument("--seconds", type=float, default=60.0,
                    help="length of one labelling phase (it ends sooner when no task is left)")
    ap.add_argument("--export-rounds", type=int, default=1,
                    help="time the export in the first N rounds (0: never)")
    ap.add_argument("--load-procs", type=int, default=2, help="client processes")
    ap.add_argument("--worker-procs", type=int, default=1,
                    help="`labelq run-worker -c` (Celery processes)")
    ap.add_argument("--postgres", default="private",
                    help="the PostgreSQL both systems use: private (a cluster of its own, "
                         "started for the run, its CPU measured) or a postgresql:// URL of a "
                         "server (databases made and dropped there, CPU not measured)")
    ap.add_argument("--database", default="postgres",
                    help="labelq's record: postgres (a fresh schema on --postgres), sqlite "
                         "(a file) or a postgresql:// URL")
    ap.add_argument("--redis-url", default=os.environ.get("LABELQ_REDIS_URL",
                                                          "redis://127.0.0.1:6379/9"),
                    help="labelq's Redis; this DB number is flushed")
    ap.add_argument("--label-studio-bin", default="label-studio",
                    help="the label-studio launcher (of its own venv, with label-studio[uwsgi])")
    ap.add_argument("--ls-server", choices=("uwsgi", "start"), default="uwsgi",
                    help="uwsgi: its production app server, as its docker image runs it "
                         "(default); start: `label-studio start` (Django's runserver)")
    ap.add_argument("--ls-processes", type=int, default=0,
                    help="uWSGI processes (0: its uwsgi.ini's default, twice the cores)")
    ap.add_argument("--ls-threads", type=int, default=1,
                    help="uWSGI threads per process (its uwsgi.ini's default: 1)")
    ap.add_argument("--warmup", type=float, default=20.0,
                    help="untimed seconds of every annotator asking who it is before each "
                         "phase (lets uWSGI's cheaper mode bring up all its workers)")
    ap.add_argument("--quick", action="store_true",
                    help="500 tasks, 4 annotators, 1 round, labelled to the end (120 s cap); "
                         "no doc")
    ap.add_argument("--no-doc", action="store_true", help="print only")
    ap.add_argument("--json", help="also write every phase's figures to this file")
    ap.add_argument("--keep", action="store_true",
                    help="keep Label Studio's data dir and log (printed at the end)")
    args = ap.parse_args(argv)
    if args.quick:
        args.tasks, args.annotators, args.rounds = 500, 4, 1
        args.seconds = 120.0  # a cap: the phases end when the 500 tasks run out
        args.no_doc = True
    kinds = [k.strip() for k in args.systems.split(",") if k.strip()]
    unknown = set(kinds) - {"labelq", "ls"}
    if unknown:
        ap.error(f"unknown systems {sorted(unknown)}")
    tasks = make_tasks(args.tasks)
    # interleaved: LS and labelq at each overlap in turn, the order reversed every other round
    pg = Postgres(args.postgres)
    server = LabelStudioServer(args, pg) if "ls" in kinds else None
    lq_overlaps = [o for o in args.overlaps.split(",") if o] if "labelq" in kinds else []
    ls_overlaps = [o for o in args.ls_overlaps.split(",") if o] if server else []
    order: list[Labelq | LabelStudio] = []
    for o in sorted({int(o) for o in lq_overlaps + ls_overlaps}, reverse=True):
        if server is not None and str(o) in ls_overlaps:
            order.append(LabelStudio(server, o))
        if str(o) in lq_overlaps:
            order.append(Labelq(args, o, pg))
    exporters: list[Labelq | LabelStudio] = [LabelStudio(server, 1)] if server else []
    exporters += [Labelq(args, 1, pg)] if "labelq" in kinds else []
    results, exports = [], []
    print(HEAD, flush=True)
    try:
        for rnd in range(1, args.rounds + 1):
            for system in (order if rnd % 2 else order[::-1]):
                res = phase(system, tasks, args)
                results.append((rnd, res))
                print(row(res, rnd), flush=True)
            if rnd <= args.export_rounds:
                for system in (exporters if rnd % 2 else exporters[::-1]):
                    res = export_phase(system, tasks)
                    exports.append((rnd, res))
                    print(export_row(res, rnd), flush=True)
    finally:
        setup = setup_line(args, server, pg) if pg.url else ""
        if server:
            server.close()
        pg.close()
    lines = summary(results, exports)
    print("\n".join(lines), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"results": results, "exports": exports},
                                              indent=1))
    if not args.no_doc:
        write_section("peers", doc_section(args, results, exports, lines, setup))
    return results, exports


def setup_line(args: argparse.Namespace, server: LabelStudioServer | None,
               pg: Postgres) -> str:
    """What ran, for the doc: the versions and the servers' shapes."""
    where = ("a private PostgreSQL cluster started for the run (its CPU counted per phase)"
             if args.postgres == "private" else "the PostgreSQL server at --postgres")
    parts = [f"Both on {pg.version}, {where}"]
    if server is not None and hasattr(server, "version"):
        if args.ls_server == "uwsgi":
            procs = args.ls_processes or 2 * (os.cpu_count() or 1)
            parts.append(f"Label Studio {server.version}: uWSGI {server.uwsgi_version}, "
                         f"{procs} processes × {args.ls_threads} thread (its deploy/uwsgi.ini), "
                         "a fresh database per phase")
        else:
            parts.append(f"Label Studio {server.version}: `label-studio start` (runserver), "
                         "a fresh database per phase")
    db = {"postgres": "a fresh schema per phase", "sqlite": "a fresh SQLite file per phase"}
    parts.append(f"labelq: `labelq serve` + `labelq run-worker -c {args.worker_procs}`, "
                 + db.get(args.database, "a fresh schema per phase at --database"))
    return "; ".join(parts) + "."


def doc_section(args: argparse.Namespace, results: list[tuple[int, dict[str, Any]]],
                exports: list[tuple[int, dict[str, Any]]], lines: list[str],
                setup: str = "") -> str:
    return "\n".join([
        "## Side by side with Label Studio (`bench/peers.py`)", "",
        f"Command: `{command_line()}`", "",
        f"Machine: {machine()}; the load average is in the last column (2 cores; it "
        "includes this benchmark's own processes, so read it against the rounds'), "
        "one run.", "",
        setup, "",
        f"{args.tasks:,} binary tasks and {args.annotators} annotators in each system, "
        f"driven by the same client code ({args.load_procs} processes, a thread per "
        "annotator, its connection kept alive to labelq and new per request to Label "
        "Studio's uWSGI, ask for the next task then submit a label: two requests per label) "
        f"for {args.seconds:.0f} s per phase (after {args.warmup:.0f} s of warm-up) or until "
        f"no task is left; the systems alternate, {args.rounds} rounds:", "", HEAD]
        + [row(res, rnd) for rnd, res in results]
        + ["", f"Export of {args.tasks:,} tasks' labels (each task labelled once first):", "",
           EXPORT_HEAD] + [export_row(res, rnd) for rnd, res in exports]
        + ["", "Medians over the rounds:", ""] + lines)


if __name__ == "__main__":
    main()
