"""A fresh install gets what CI tested: bounded requirements, CI installing like a newcomer.

A newcomer's ``pip install -e ".[dev]"`` once pulled pytest 9.2, with which schemathesis'
pytest plugin fails (``'Function' object has no attribute '_nodeid'``) while CI, reusing an
older environment, stayed green.
"""

from __future__ import annotations

import re
from importlib import metadata
from pathlib import Path

import pytest
import tomllib
from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
RUNTIME = [Requirement(r) for r in PROJECT["dependencies"]]
EXTRAS = {k: [Requirement(r) for r in v] for k, v in PROJECT["optional-dependencies"].items()}


def _names(reqs: list[Requirement]) -> set[str]:
    return {r.name.lower() for r in reqs}


@pytest.mark.parametrize("group", ["runtime", "dev"])
def test_every_requirement_has_an_upper_bound(group):
    reqs = RUNTIME if group == "runtime" else EXTRAS["dev"]
    unbounded = [str(r) for r in reqs if not any(s.operator in ("<", "<=", "==", "~=")
                                                  for s in r.specifier)]
    assert unbounded == []


def test_pytest_bound_excludes_the_release_that_breaks_schemathesis():
    (pytest_req,) = [r for r in EXTRAS["dev"] if r.name == "pytest"]
    assert "9.2.0" not in pytest_req.specifier
    assert pytest.__version__ in pytest_req.specifier


def test_the_suite_runs_on_versions_the_bounds_allow():
    # the environment running this suite is one a fresh install could produce
    outside = []
    for req in RUNTIME + EXTRAS["dev"]:
        if req.marker is not None and not req.marker.evaluate():
            continue
        version = metadata.version(req.name)
        if version not in req.specifier:
            outside.append(f"{req.name} {version} (pyproject: {req.specifier})")
    assert outside == []


def test_test_and_plot_only_packages_are_extras():
    assert not _names(RUNTIME) & {"fakeredis", "matplotlib"}
    assert {"fakeredis", "matplotlib"} <= _names(EXTRAS["dev"])
    assert _names(EXTRAS["embedded"]) == {"fakeredis"}
    assert _names(EXTRAS["plot"]) == {"matplotlib"}
    # Parquet exports: pyarrow in its own extra, and in dev so that CI tests them
    assert "pyarrow" not in _names(RUNTIME)
    assert _names(EXTRAS["parquet"]) == {"pyarrow"} and "pyarrow" in _names(EXTRAS["dev"])


def _readme_test_command() -> str:
    readme = (REPO / "README.md").read_text()
    blocks = re.findall(r"```bash\n(.*?)```", readme, flags=re.S)
    (command,) = [line for b in blocks for line in b.splitlines() if "pytest" in line]
    return command.strip()


def test_ci_runs_the_readme_command_in_a_fresh_virtualenv():
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    command = _readme_test_command()
    assert command in [line.strip() for line in ci]
    at = [line.strip() for line in ci].index(command)
    before = "\n".join(ci[:at])
    # a new environment, made by this run, active when the command runs
    assert re.search(r"^VENV=\"\$\(mktemp -d", before, flags=re.M)
    assert 'python3 -m venv "$VENV"' in before
    assert '. "$VENV/bin/activate"' in before
    # pytest's "no tests collected" is a failure, not a green run
    assert "-eq 5" in "\n".join(ci[at:])
