"""Processes of a benchmark run: a free port, a Celery worker started and awaited, the CPU
seconds of processes and process groups (from /proc), and the groups stopped at the end.

One home for what ``pipeline.py``, ``scaling.py``, ``through_api.py`` and ``cold_start.py``
each did in a copy of their own (issue 43, duplicates).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path

__all__ = ["ROOT", "free_port", "cpu_seconds", "groups_cpu", "start_celery", "stop_groups"]

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
                 timeout: float = 180.0) -> subprocess.Popen[bytes]:
    """A real Celery worker (``procs`` processes, on ``queue``) in its own process group,
    once it says it is ready; stopped and :class:`RuntimeError` if it does not."""
    proc = subprocess.Popen([sys.executable, "-m", "celery", "-A", "workers.main", "worker",
                             "-c", str(procs), "-Q", queue, "--loglevel", "info",
                             "--without-gossip", "--without-mingle", "--without-heartbeat"],
                            cwd=ROOT, env=env, stdout=open(log, "wb"),
                            stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + timeout
    while b"ready." not in log.read_bytes():
        if proc.poll() is not None or time.monotonic() > deadline:
            stop_groups([proc])
            raise RuntimeError(f"celery worker did not start: {log.read_text()[-1000:]}")
        time.sleep(0.1)
    return proc


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
