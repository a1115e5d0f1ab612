"""Every LABELQ_* value is checked with its bounds at start (issue 35): values that passed
before and broke later — a lease of 10**13 s (``next`` answered 500 for its annotator from
then on), a beat of ``inf`` (the beat died) or ``1e-9`` (thousands of maintenance tasks a
second), a Redis URL without host or port (tracebacks, ``status`` exited 0) — stop every
command, ``labelq check`` included, with exit code 2 and an error naming the variable and
the allowed range."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from pipeline.conftest import r, sqlite_url  # noqa: F401,F811 - fixtures: real Redis, SQLite

from labelq.errors import ConfigError
from labelq.record.settings import check_environment, load_settings

BAD = [
    ("LABELQ_LEASE_SECONDS", "9999999999999", "at most 604800"),
    ("LABELQ_LEASE_SECONDS", "0", "from 1 to 604800"),
    ("LABELQ_BEAT_SECONDS", "inf", "from 0.5 to 300"),
    ("LABELQ_BEAT_SECONDS", "1e-9", "from 0.5 to 300"),
    ("LABELQ_BEAT_SECONDS", "nan", "from 0.5 to 300"),
    ("LABELQ_VISIBILITY_TIMEOUT", "99999999999", "at most 86400"),
    ("LABELQ_INBOX_SIZE", "100000", "at most 1000"),
    ("LABELQ_INBOX_MAX", "10000000", "at most 10000"),
    ("LABELQ_MAX_OPEN", "5000", "at most 1000"),
    ("LABELQ_DECISION_SEED", str(2**64), "at most"),
    ("LABELQ_CELERY_QUEUE", "a queue", "1 to 200 letters"),
    ("LABELQ_REDIS_URL", "redis://:@:notaport/0", "port"),
    ("LABELQ_REDIS_URL", "redis://:@/0", "no host"),
    ("LABELQ_REDIS_URL", "redis://localhost:6379/zero", "database number"),
    ("LABELQ_REDIS_URL", "redis://localhost:99999/0", "port"),
    ("LABELQ_DATABASE_URL", "postgresql://u@h:port/db", "port"),
]


@pytest.mark.parametrize("var,value,needle", BAD)
def test_out_of_bounds_values_are_refused_naming_the_variable_and_range(var, value, needle):
    with pytest.raises(ConfigError) as exc:
        load_settings({var: value})
    assert exc.value.variable == var and var in str(exc.value)
    assert needle in str(exc.value)


@pytest.mark.parametrize("var,value", [
    ("LABELQ_HOST", "local host"), ("LABELQ_API_URL", "http://"),
    ("LABELQ_API_URL", "http://h:notaport"), ("LABELQ_TOKEN", "a token"),
])
def test_the_cli_edges_variables_too(var, value):
    with pytest.raises(ConfigError) as exc:
        check_environment({var: value})
    assert exc.value.variable == var


@pytest.mark.parametrize("var,value", [
    ("LABELQ_LEASE_SECONDS", "604800"), ("LABELQ_LEASE_SECONDS", "1"),
    ("LABELQ_BEAT_SECONDS", "0.5"), ("LABELQ_BEAT_SECONDS", "300"),
    ("LABELQ_VISIBILITY_TIMEOUT", "5"), ("LABELQ_REDIS_URL", "redis://:pw@redis:6379/3"),
    ("LABELQ_REDIS_URL", "unix:///run/redis.sock"), ("LABELQ_CELERY_QUEUE", "labelq-bench"),
    ("LABELQ_DATABASE_URL", "postgresql://u:p@db:5432/labelq"),
])
def test_values_within_bounds_pass(var, value):
    check_environment({var: value})


@pytest.mark.parametrize("args", [("status", "p"), ("check",), ("project", "list")],
                         ids=lambda a: a[0])
@pytest.mark.parametrize("var,value", [("LABELQ_LEASE_SECONDS", "9999999999999"),
                                       ("LABELQ_BEAT_SECONDS", "inf"),
                                       ("LABELQ_REDIS_URL", "redis://:@:notaport/0")])
def test_every_command_stops_with_exit_code_2(tmp_path, args, var, value):
    from cli.main import cli
    db = f"sqlite:///{tmp_path / 'l.db'}"
    res = CliRunner().invoke(cli, list(args), env={"LABELQ_DATABASE_URL": db, var: value})
    assert res.exit_code == 2, res.output
    assert f"Error: {var}" in res.output and "Traceback" not in res.output


def test_a_lease_of_the_longest_allowed_length_is_issued_and_issued_again(r, sqlite_url):  # noqa: F811
    """The longest lease allowed is served: ``next`` twice (the open one again), no 500."""
    from pipeline.conftest import make_project

    from labelq.service import Service
    eng, _ = make_project(sqlite_url, n_tasks=2, workers=1)
    settings = load_settings({"LABELQ_DATABASE_URL": sqlite_url,
                              "LABELQ_LEASE_SECONDS": "604800"})
    s = Service(eng, r, settings=settings)
    a = s.next_assignment("p-w0")
    b = s.next_assignment("p-w0")
    assert a is not None and b is not None and a.assignment_id == b.assignment_id
    assert s.submit("p-w0", a.assignment_id, "a")["duplicate"] is False
