"""bench/_procs.py: what the benchmarks share to start, measure and stop processes."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

from bench._procs import cpu_seconds, free_port, groups_cpu, stop_groups

SPIN = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass\n" \
       "time.sleep(600)\n"


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_free_port_can_be_bound():
    port = free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))


def test_cpu_of_a_group_counts_its_children_and_stop_ends_the_whole_group(tmp_path):
    # Given a process group: a leader and a child that each burn 0.3 s of CPU, then sleep
    leader = subprocess.Popen(
        [sys.executable, "-c", f"import subprocess, sys\n"
         f"subprocess.Popen([sys.executable, '-c', {SPIN!r}])\nexec({SPIN!r})"],
        start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while groups_cpu([leader.pid]) < 0.55 and time.monotonic() < deadline:
            time.sleep(0.1)
        # Then the group's CPU is both processes', more than the leader's alone
        group = groups_cpu([leader.pid])
        assert group >= 0.55
        assert cpu_seconds(pids={leader.pid}) < group
        members = [int(p) for p in os.listdir("/proc") if p.isdigit()
                   and _in_group(int(p), leader.pid)]
        assert len(members) == 2
    finally:
        # When the group is stopped, every member is gone, the child too
        stop_groups([leader], timeout=10)
    assert leader.returncode is not None
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in members) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(p) for p in members)


def _in_group(pid: int, pgid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[2]) == pgid
    except OSError:
        return False
