"""``labelq``'s entry point ends a command as the interpreter would, only faster: it
disposes the database engines and freezes the objects the command imported, so the
interpreter's last garbage collection need not walk them (cli/main.py ``_before_exit``).
What a collection would have closed is closed first; exit codes and output are the same."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# what the ``labelq`` script runs
ENTRY = "import sys; sys.argv[0] = 'labelq'; from cli.main import main; main()"


def _labelq(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", ENTRY, *args], cwd=ROOT, text=True,
                          capture_output=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **env})


def test_a_command_closes_its_sqlite_database(tmp_path: Path) -> None:
    """SQLite removes its write-ahead log when the last connection to the file closes: a
    command that read or wrote the database leaves no ``-wal`` or ``-shm`` file, which it
    would if its pooled connections were left open at exit."""
    db = tmp_path / "exit.db"
    env = {"LABELQ_DATABASE_URL": f"sqlite:///{db}"}
    for args in (["init"], ["project", "create", "p", "--labels", "a,b", "--budget", "10"],
                 ["workers", "enroll", "p", "ann"], ["status", "p"], ["status", "p", "-o", "json"]):
        result = _labelq(*args, env=env)
        assert result.returncode == 0, result.stdout + result.stderr
        left = sorted(p.name for p in tmp_path.iterdir() if p.name != db.name)
        assert left == [], (args, left)
    assert '"project": "p"' in result.stdout


def test_exit_codes_and_messages_are_kept(tmp_path: Path) -> None:
    """An error still exits with its documented code and message (4: not found; 9: no
    database), and ``--help`` with 0."""
    env = {"LABELQ_DATABASE_URL": f"sqlite:///{tmp_path / 'codes.db'}"}
    missing = _labelq("status", "p", env=env)
    assert missing.returncode == 9 and "no labelq database" in missing.stderr
    assert _labelq("init", env=env).returncode == 0
    unknown = _labelq("status", "nosuch", env=env)
    assert unknown.returncode == 4 and "no project named 'nosuch'" in unknown.stderr
    shown = _labelq("--help", env=env)
    assert shown.returncode == 0 and "Usage: labelq" in shown.stdout
