"""``labelq demo``: the whole live pipeline on a synthetic project, in about a minute.

A temporary SQLite record, synthetic tasks with categories and a known truth, gold questions,
simulated annotators (:func:`labelq.simulate.workers.make_pool`) pulling and submitting
through the service in parallel threads, and a real Celery worker subprocess applying the
labels to the posterior. At the end: the export (CSV) and the accuracy against the truth.

Redis: ``LABELQ_REDIS_URL`` when it is set and answers; otherwise an embedded in-process
Redis (fakeredis on a free loopback port, so the Celery subprocess can connect too). The
demo uses its own Celery queue and deletes its keys afterwards.
"""

from __future__ import annotations

import csv
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import click
import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _redis(url: str | None):
    """(client, url, server or None): the configured Redis, else an embedded one."""
    import redis
    if url:
        client = redis.Redis.from_url(url)
        try:
            client.ping()
            return client, url, None
        except redis.RedisError as exc:
            click.echo(f"Redis at {url} is not reachable ({exc}).")
    else:
        click.echo("No Redis configured (LABELQ_REDIS_URL).")
    port = _free_port()
    url = f"redis://127.0.0.1:{port}/0"
    binary = shutil.which("redis-server")
    if binary:  # a private, memory-only redis-server is the most faithful embedded Redis
        proc = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1",
                                 "--save", "", "--appendonly", "no"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        client = redis.Redis.from_url(url)
        for _ in range(100):
            try:
                client.ping()
                break
            except redis.RedisError:
                time.sleep(0.05)
        click.echo(f"Running on a private redis-server at {url} (stopped at the end).")
        return client, url, _Stop(proc.terminate)
    from fakeredis import TcpFakeServer
    server = TcpFakeServer(("127.0.0.1", port), server_type="redis")
    threading.Thread(target=server.serve_forever, daemon=True).start()
    click.echo(f"Running on an embedded in-process Redis (fakeredis) at {url}.")
    return redis.Redis.from_url(url), url, _Stop(lambda: (server.shutdown(),
                                                          server.server_close()))


class _Stop:
    def __init__(self, fn) -> None:
        self.shutdown = fn


def _setup(db_url, *, n_tasks, n_gold, n_workers, n_categories, max_labels, budget,
           policy, rng):
    from labelq.db import engine_for, init_schema, session_scope
    from labelq.models import Task
    from labelq.projects import create_project, enroll_worker

    eng = engine_for(db_url)
    init_schema(eng)
    labels = ["yes", "no"]
    truth = rng.integers(2, size=n_tasks + n_gold)
    cats = rng.integers(n_categories, size=n_tasks + n_gold)
    with session_scope(eng) as s:
        p = create_project(s, "demo", labels, policy=policy, max_labels=max_labels,
                           budget=budget, gold_schedule="fixed:rate=0.05",
                           quality={"threshold": 0.6, "min_gold": 5, "confidence": 0.95})
        s.connection().execute(Task.__table__.insert(), [
            {"project_id": p.id, "seq": i, "external_id": f"{'g' if i >= n_tasks else 't'}{i}",
             "category": f"c{cats[i]}", "payload": {"text": f"item {i}"},
             "is_gold": i >= n_tasks, "gold_answer": labels[truth[i]] if i >= n_tasks else None}
            for i in range(n_tasks + n_gold)])
        for j in range(n_workers):
            enroll_worker(s, p, f"demo-{uuid.uuid4().hex[:6]}-{j}")
        return eng, p.id, labels, truth, cats


def _start_celery(env: dict, log: Path) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "workers.main", "worker", "-c", "1",
         "-Q", env["LABELQ_CELERY_QUEUE"], "--loglevel", "info", "--without-gossip",
         "--without-mingle", "--without-heartbeat"],
        cwd=ROOT, env=env, stdout=open(log, "wb"), stderr=subprocess.STDOUT,
        start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if b"ready." in log.read_bytes():
            return proc
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGKILL)
    raise click.ClickException(f"the Celery worker did not start; see {log}")


@click.command("demo")
@click.option("--tasks", "n_tasks", type=int, default=300, show_default=True)
@click.option("--gold", "n_gold", type=int, default=30, show_default=True)
@click.option("--workers", "n_workers", type=int, default=12, show_default=True)
@click.option("--categories", "n_categories", type=int, default=3, show_default=True)
@click.option("--labels-per-task", type=float, default=3.0, show_default=True,
              help="Budget, in labels per task.")
@click.option("--policy", default="optkg", show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Folder for the database and the export [default: a temporary one].")
@click.option("--redis-url", envvar="LABELQ_REDIS_URL", default=None,
              help="Redis to use [env: LABELQ_REDIS_URL]; embedded when absent/unreachable.")
def demo_cmd(n_tasks, n_gold, n_workers, n_categories, labels_per_task, policy, seed, out,
             redis_url) -> None:
    """Run the live pipeline end to end on a synthetic project and report its accuracy."""
    from sqlalchemy import func
    from sqlmodel import select

    from labelq.db import session_scope
    from labelq.errors import BudgetExhausted, Forbidden
    from labelq.models import Label, Project, Task, Worker
    from labelq.policies import names
    from labelq.queue.hotstate import fold_from_sql
    from labelq.queue.keys import Keys
    from labelq.queue.rebuild import delete_hot
    from labelq.service import Service
    from labelq.settings import Settings
    from labelq.simulate.workers import make_pool
    from workers.main import create_app

    t0 = time.monotonic()
    if policy not in names():
        policy = "uniform"
    out = out or Path(tempfile.mkdtemp(prefix="labelq-demo-"))
    out.mkdir(parents=True, exist_ok=True)
    db_url = f"sqlite:///{out / 'demo.db'}"
    rng = np.random.default_rng(seed)
    client, url, server = _redis(redis_url)
    budget = labels_per_task * n_tasks
    eng, pid, labels, truth, cats = _setup(
        db_url, n_tasks=n_tasks, n_gold=n_gold, n_workers=n_workers,
        n_categories=n_categories, max_labels=int(np.ceil(labels_per_task)) + 2,
        budget=budget, policy=policy, rng=rng)
    if client.exists(Keys(pid).meta):
        raise click.ClickException(f"{url} already holds keys of a project {pid}; give the "
                                   "demo another Redis (--redis-url) or database number")
    queue = f"labelq-demo-{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "LABELQ_DATABASE_URL": db_url, "LABELQ_REDIS_URL": url,
           "LABELQ_CELERY_QUEUE": queue, "PYTHONPATH": str(ROOT)}
    click.echo(f"Project 'demo': {n_tasks} tasks in {n_categories} categories + {n_gold} gold, "
               f"{n_workers} simulated annotators, policy {policy}, budget {budget:g} labels.")
    click.echo(f"Record: {db_url}")
    from labelq.queue.rebuild import ensure_hot
    ensure_hot(eng, client, pid)  # build the hot state once, up front
    celery = _start_celery(env, out / "celery.log")
    app = create_app(url)
    with session_scope(eng) as s:
        handles = [w.handle for w in s.exec(select(Worker).where(Worker.project_id == pid)
                                            .order_by(Worker.seq))]
    pool = make_pool("one-coin", n_workers, n_categories, 2, rng, beta=(4.0, 1.5))
    counts = [0] * n_workers
    errors: list[BaseException] = []
    try:
        svc = Service(eng, client, settings=Settings(database_url=db_url, redis_url=url),
                      notify=lambda p: app.send_task("labelq.apply_labels", args=[p],
                                                     queue=queue), state_max_age=0.2)

        def annotator(j: int) -> None:
            wrng = np.random.default_rng(seed * 1000 + j)
            try:
                while True:
                    try:
                        a = svc.next_assignment(handles[j])
                    except (BudgetExhausted, Forbidden):
                        return
                    if a is None:
                        return
                    t = a.task_seq
                    ans = int(pool.answer(j, cats[t], truth[t], wrng))
                    svc.submit(handles[j], a.assignment_id, labels[ans])
                    counts[j] += 1
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        t1 = time.monotonic()
        threads = [threading.Thread(target=annotator, args=(j,)) for j in range(n_workers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]
        took = time.monotonic() - t1
        total = sum(counts)
        click.echo(f"Annotators submitted {total} labels in {took:.1f} s "
                   f"({total / max(took, 1e-9):.0f} labels/s, each durable before its OK).")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with session_scope(eng) as s:
                left = s.exec(select(func.count()).select_from(Label).where(
                    Label.project_id == pid, Label.applied_seq.is_(None))).one()
            if left == 0:
                break
            time.sleep(0.2)
        click.echo(f"Celery applied every label to the posterior "
                   f"({'all' if left == 0 else f'{left} still pending'}) "
                   f"{time.monotonic() - t1 - took:.1f} s after the last submission.")
        with session_scope(eng) as s:
            project = s.get(Project, pid)
            hot = fold_from_sql(s, project)
            rows = s.exec(select(Task.external_id, Task.seq, Task.is_gold, Worker.handle,
                                 Label.value).join(Task, Task.id == Label.task_id)
                          .join(Worker, Worker.id == Label.worker_id)
                          .where(Label.project_id == pid).order_by(Label.id)).all()
            paused = s.exec(select(Worker.handle).where(Worker.project_id == pid,
                                                        Worker.status == "paused")).all()
        proba = hot.policy.predict_proba(hot.state)[:n_tasks]
        guess = proba.argmax(axis=1)
        with open(out / "labels.csv", "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["task", "worker", "label", "gold"])
            w.writerows([(r[0], r[3], r[4], int(r[2])) for r in rows])
        with open(out / "answers.csv", "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["task", "answer", "confidence", "truth"])
            w.writerows([(f"t{i}", labels[guess[i]], f"{proba[i].max():.3f}",
                          labels[truth[i]]) for i in range(n_tasks)])
        votes = np.zeros((n_tasks, 2))
        for r in rows:
            if not r[2]:
                votes[r[1], labels.index(r[4])] += 1
        labelled = votes.sum(axis=1) > 0
        mv = (votes.argmax(axis=1) == truth[:n_tasks])[labelled].mean() if labelled.any() \
            else float("nan")
        acc = float((guess == truth[:n_tasks]).mean())
        click.echo(f"Exported {len(rows)} labels to {out / 'labels.csv'} and the posterior "
                   f"answers to {out / 'answers.csv'}.")
        click.echo(f"Tasks labelled: {int(labelled.sum())}/{n_tasks}; paused by the gold "
                   f"quality rule: {len(paused)}.")
        click.echo(f"Accuracy against the truth: posterior ({policy}) {acc:.3f}; "
                   f"majority vote on labelled tasks {mv:.3f}.")
        click.echo(f"Done in {time.monotonic() - t0:.1f} s.")
    finally:
        os.killpg(celery.pid, signal.SIGTERM)
        try:
            celery.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(celery.pid, signal.SIGKILL)
        if server is None:
            delete_hot(client, pid)
            client.delete(Keys(pid).apply_lock, queue)
        else:
            server.shutdown()


commands = [demo_cmd]
