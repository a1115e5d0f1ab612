"""Processes of a benchmark run: a free port, a Celery worker started and awaited, the CPU
seconds of processes and process groups (from /proc), the simulated annotators' load
processes, and the groups stopped at the end.

One home for what ``pipeline.py``, ``scaling.py``, ``through_api.py``, ``cold_start.py``
and ``hooks.py`` each did in a copy of their own (issue 43, duplicates).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["ROOT", "free_port", "cpu_seconds", "groups_cpu", "start_celery", "stop_groups",
           "Load", "start_load"]

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cpu_seconds(pids: Iterable[int] | None = None, pgid: int | None = None,
                children: bool = False) -> float:
    """User + system CPU seconds of the given processes, or of every process in a process
    group, from /proc (Linux); ``children``: also what each has collected from the children
    it waited for (cutime, cstime: a server that recycles its workers or reaps a backend per
    closed connection)."""
    wanted = set(pids) if pids is not None else None
    tick = os.sysconf("SC_CLK_TCK")
    last = 15 if children else 13  # after the command: utime stime (12th, 13th) cutime cstime
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        # after the command: state ppid pgrp ... (fields[2] is the process group)
        if (wanted is not None and int(entry) in wanted) or \
                (pgid is not None and int(fields[2]) == pgid):
            total += sum(int(x) for x in fields[11:last])
    return total / tick


def groups_cpu(pgids: Iterable[int]) -> float:
    """CPU seconds of every process in the given process groups (each process started with
    ``start_new_session=True`` leads one: its pid is the group's id)."""
    return sum(cpu_seconds(pgid=g) for g in pgids)


def start_celery(env: dict[str, str], log: Path, *, procs: int = 1, queue: str = "labelq",
                 timeout: float = 180.0, extra: Sequence[str] = ()) -> subprocess.Popen[bytes]:
    """A real Celery worker (``procs`` processes, on ``queue``; ``extra``: more of Celery's
    options, e.g. ``--beat``) in its own process group, once it says it is ready; stopped
    and :class:`RuntimeError` if it does not."""
    proc = subprocess.Popen([sys.executable, "-m", "celery", "-A", "workers.main", "worker",
                             "-c", str(procs), "-Q", queue, "--loglevel", "info",
                             "--without-gossip", "--without-mingle", "--without-heartbeat",
                             *extra],
                            cwd=ROOT, env=env, stdout=open(log, "wb"),
                            stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + timeout
    while b"ready." not in log.read_bytes():
        if proc.poll() is not None or time.monotonic() > deadline:
            stop_groups([proc])
            raise RuntimeError(f"celery worker did not start: {log.read_text()[-1000:]}")
        time.sleep(0.1)
    return proc


@dataclass
class Load:
    """Load processes started by :func:`start_load`, every annotator warmed up: ``go.set()``
    starts them all at once."""

    procs: list[Any]
    go: Any
    out: Any

    def results(self) -> list[tuple[int, float, int]]:
        """Each process's (labels, CPU seconds, requests that decided at once), as its
        annotators finish (put before it exits)."""
        return [self.out.get() for _ in self.procs]

    def join(self) -> None:
        for proc in self.procs:
            proc.join()


def start_load(url: str, redis_url: str, handles: Sequence[str], seconds: float,
               load_procs: int, *, separate: bool = False) -> Load:
    """``load_procs`` spawned processes whose annotators (``handles``, dealt out among
    them; a thread each) pull and submit through one service per process (like one API
    process) for ``seconds`` after ``go``; returned once every annotator has warmed up.
    ``separate``: two requests per label (submit, then next), else submit-and-next."""
    import multiprocessing as mp
    ctx = mp.get_context("spawn")
    out, ready, go = ctx.Queue(), ctx.Queue(), ctx.Event()
    procs = [ctx.Process(target=_annotate, args=(url, redis_url, list(handles[i::load_procs]),
                                                 seconds, ready, go, out, separate))
             for i in range(load_procs)]
    for proc in procs:
        proc.start()
    for _ in handles:
        ready.get(timeout=300)
    return Load(procs, go, out)


def _annotate(url: str, redis_url: str, handles: list[str], seconds: float, ready: Any,
              go: Any, out: Any, separate: bool = False) -> None:
    """One load process: its annotators (threads) pull and submit for ``seconds`` after
    ``go`` is set (every process has imported and warmed up by then)."""
    import redis

    from labelq.record.db import engine_for
    from labelq.record.settings import Settings
    from labelq.service import Service
    from workers.main import create_app
    app = create_app(redis_url)
    eng = engine_for(url)
    counts = {}

    # one service per process, shared by its annotator threads (like one API process)
    svc = Service(eng, redis.Redis.from_url(redis_url), settings=Settings(database_url=url),
                  notify=lambda p: app.send_task("labelq.apply_labels", args=[p],
                                                 queue="labelq-bench"))

    # count the requests that found the inbox empty and decided at once
    at_once = [0]
    decide_at_once = svc.assigner.decide

    def counted(*a, **kw):
        at_once[0] += 1
        return decide_at_once(*a, **kw)
    svc.assigner.decide = counted

    def one(h):
        svc.assigner.hot(svc.worker(h))  # warm the worker and policy-state caches
        ready.put(h)
        go.wait()
        n = 0
        stop = time.monotonic() + seconds
        a = svc.next_assignment(h)
        while a is not None and time.monotonic() < stop:
            if separate:  # two requests per label
                svc.submit(h, a.assignment_id, "a")
                a = svc.next_assignment(h)
            else:  # submit-and-continue: one request per label
                a = svc.submit(h, a.assignment_id, "a", then_next=True)["next"]
            n += 1
        counts[h] = n
    ts = [threading.Thread(target=one, args=(h,)) for h in handles]
    [t.start() for t in ts]
    go.wait()
    cpu0 = time.process_time()
    [t.join() for t in ts]
    out.put((sum(counts.values()), time.process_time() - cpu0, at_once[0]))



def stop_groups(procs: Iterable[subprocess.Popen[bytes]], timeout: float = 30.0, *,
                warm: bool = False) -> None:
    """Stop each process's group (SIGTERM to all, then each awaited up to ``timeout``), and
    kill what is left of the group (Celery's beat process can outlive SIGTERM and would go
    on sending upkeep tasks into the next run). ``warm``: SIGTERM to each group's leader
    only, as a supervisor sends it — Celery's main process lets its running task finish
    and stops its pool (sent to the whole group, it also reaches the pool process, where
    Celery resets SIGTERM to its default, so it died at once: an applier between its SQL
    commit and its Redis writes)."""
    procs = list(procs)
    for proc in procs:
        try:
            if warm:
                proc.send_signal(signal.SIGTERM)
            else:
                os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    for proc in procs:
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout)
