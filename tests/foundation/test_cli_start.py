"""The CLI starts at once: ``labelq --help`` and ``labelq status`` import only what they use
(issue 36: every command took 2.2-3.4 s to start, half of it importing scipy through
``labelq.policies``). Each check runs the command in a fresh interpreter and reads the
modules it imported."""

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# runs the CLI as the ``labelq`` script does, then prints the top-level packages imported
PROBE = """
import json, sys
from cli.main import cli
try:
    cli.main(args=sys.argv[1:], prog_name="labelq", standalone_mode=True)
except SystemExit as exc:
    code = exc.code
else:
    code = 0
print(json.dumps({"code": code, "modules": sorted({m.split(".")[0] for m in sys.modules})}),
      file=sys.stderr)
"""

HEAVY = {"scipy", "celery", "kombu", "fastapi", "uvicorn", "sqlalchemy", "sqlmodel", "redis",
         "numpy", "matplotlib", "pydantic", "psycopg"}


def _imports(*args: str, env: dict[str, str] | None = None) -> set[str]:
    result = subprocess.run([sys.executable, "-c", PROBE, *args], cwd=ROOT, text=True,
                            capture_output=True, timeout=120,
                            env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})
    report = json.loads(result.stderr.strip().splitlines()[-1])
    assert report["code"] == 0, result.stdout + result.stderr
    return set(report["modules"])


@pytest.mark.parametrize("args", [["--help"], ["project", "--help"], ["workers", "--help"],
                                  ["gold", "--help"], ["status", "--help"]])
def test_help_imports_no_heavy_library(args):
    assert not _imports(*args) & HEAVY


def test_status_imports_only_the_database_layer(tmp_path):
    """``labelq status NAME`` reads SQL (sqlalchemy, sqlmodel) and nothing else heavy: no
    policy, aggregation or scipy, no numpy, Redis, Celery or web framework."""
    env = {"LABELQ_DATABASE_URL": f"sqlite:///{tmp_path / 'start.db'}"}
    runner = [sys.executable, "-m", "cli.main"]
    for args in (["init"], ["project", "create", "p", "--labels", "a,b", "--budget", "10"]):
        subprocess.run([*runner, *args], cwd=ROOT, env={**os.environ, **env}, check=True,
                       capture_output=True, timeout=120)
    imported = _imports("status", "p", "-o", "json", env=env)
    assert not imported & (HEAVY - {"sqlalchemy", "sqlmodel", "pydantic"})


def test_every_command_is_in_the_table():
    """``cli.main.COMMANDS`` (which module holds each command, so that a command imports its
    module alone) names every command the modules define, each in its own module."""
    from cli.main import COMMAND_MODULES, COMMANDS

    defined = {cmd.name: name for name in COMMAND_MODULES
               for cmd in importlib.import_module(f"cli.{name}").commands}
    assert defined == COMMANDS
