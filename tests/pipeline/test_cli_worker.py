"""``labelq worker`` under a supervisor: its SIGTERM must stop Celery, not just a wrapper."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

from .conftest import ROOT


def _processes_with(marker: str) -> list[int]:
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline:
            found.append(int(pid))
    return found


def test_sigterm_to_labelq_worker_stops_celery_and_its_pool(redis_url, sqlite_url, tmp_path):
    queue = f"labelq-sigterm-{uuid.uuid4().hex[:8]}"  # appears in every process's cmdline
    env = {k: v for k, v in os.environ.items() if not k.startswith("LABELQ_")}
    env.update(LABELQ_REDIS_URL=redis_url, LABELQ_DATABASE_URL=sqlite_url,
               LABELQ_CELERY_QUEUE=queue, PYTHONPATH=str(ROOT))
    # the database exists first (only `labelq init` creates one)
    subprocess.run([sys.executable, "-m", "cli.main", "init"], cwd=tmp_path, env=env,
                   check=True, capture_output=True, timeout=120)
    log = tmp_path / "worker.log"
    with open(log, "wb") as out:
        # the worker's own process group, so that nothing here signals it but the one kill
        proc = subprocess.Popen([sys.executable, "-m", "cli.main", "worker", "-c", "2"],
                                cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while b"ready." not in log.read_bytes():
            assert proc.poll() is None, log.read_text()[-2000:]
            assert time.monotonic() < deadline, "worker did not get ready"
            time.sleep(0.1)
        assert len(_processes_with(queue)) >= 3  # the worker, its pool of 2 (and beat)
        # the beat keeps its schedule file in labelq's temporary folder, not in the folder
        # the worker was started from (issue 35: celerybeat-schedule appeared there)
        from workers.main import beat_schedule_file
        kept = Path(beat_schedule_file(redis_url, queue))
        deadline = time.monotonic() + 20
        while not list(kept.parent.glob(kept.name + "*")):
            assert time.monotonic() < deadline, "the beat wrote no schedule file"
            time.sleep(0.1)
        assert [p.name for p in tmp_path.iterdir() if p.name.startswith("celerybeat")] == []
        # the PID a supervisor holds is Celery's main process itself
        assert b"celery" in Path(f"/proc/{proc.pid}/cmdline").read_bytes()
        proc.send_signal(signal.SIGTERM)  # to that PID only, as systemd or docker stop do
        proc.wait(30)
        deadline = time.monotonic() + 15
        while _processes_with(queue) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _processes_with(queue) == [], "Celery processes outlived `labelq worker`"
        assert b"Warm shutdown" in log.read_bytes() or b"worker: Warm" in log.read_bytes()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        for pid in _processes_with(queue):
            os.kill(pid, signal.SIGKILL)


def test_the_beat_keeps_its_schedule_only_in_a_private_folder_of_its_own(tmp_path,
                                                                         monkeypatch):
    # The schedule file is a shelve (pickles, loaded when the beat starts): one that another
    # user can replace runs their code as this user. Given the system's temporary folder
    import tempfile

    from workers.main import beat_schedule_file
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    folder = tmp_path / f"labelq-{os.getuid()}"
    # a private folder of this user's: the file is kept there
    folder.mkdir(mode=0o700)
    assert Path(beat_schedule_file("redis://x", "q")).parent == folder
    # When the folder is one that others may write to, or a link planted where it would
    # be (to a folder of this user's: os.stat followed it and saw this user's)
    folder.chmod(0o777)
    open_to_all = beat_schedule_file("redis://x", "q")
    folder.chmod(0o700)
    folder.rename(tmp_path / "elsewhere")
    folder.symlink_to(tmp_path / "elsewhere")
    linked = beat_schedule_file("redis://x", "q")
    # Then neither is used: Celery's own file in the current folder is
    assert open_to_all == linked == "celerybeat-schedule"
