import pytest

from labelq.errors import ConfigError
from labelq.record.settings import Settings, load_settings


def test_defaults():
    s = load_settings({})
    assert s.database_url.startswith("sqlite:///")
    assert s.redis_url == "redis://localhost:6379/0"


def test_postgres_url_gets_psycopg3_driver():
    s = load_settings({"LABELQ_DATABASE_URL": "postgresql://u@h:5432/db"})
    assert s.sqlalchemy_url == "postgresql+psycopg://u@h:5432/db"


@pytest.mark.parametrize("var,value,needle", [
    ("LABELQ_DATABASE_URL", "mysql://x", "LABELQ_DATABASE_URL"),
    ("LABELQ_REDIS_URL", "http://localhost", "LABELQ_REDIS_URL"),
    ("LABELQ_LEASE_SECONDS", "ten", "whole number"),
    ("LABELQ_INBOX_SIZE", "0", "positive"),
    ("LABELQ_INBOX_MAX", "-3", "positive"),
])
def test_bad_values_are_named(var, value, needle):
    with pytest.raises(ConfigError) as exc:
        load_settings({var: value})
    assert needle in str(exc.value)
    assert exc.value.variable == var


def test_environment_is_read(monkeypatch):
    monkeypatch.setenv("LABELQ_LEASE_SECONDS", "42")
    assert load_settings().lease_seconds == 42
    assert Settings().lease_seconds == 600


@pytest.mark.parametrize("var,value", [
    ("LABELQ_DECISION_SEED", "x1"), ("LABELQ_DECISION_SEED", "-1"),
    ("LABELQ_PORT", "80a"), ("LABELQ_PORT", "70000"), ("LABELQ_API_WORKERS", "0"),
    ("LABELQ_VISIBILITY_TIMEOUT", "soon"), ("LABELQ_BEAT_SECONDS", "0"),
    ("LABELQ_API_URL", "localhost:8000"),
])
def test_check_environment_covers_the_variables_read_elsewhere(var, value):
    from labelq.record.settings import check_environment
    with pytest.raises(ConfigError) as exc:
        check_environment({var: value})
    assert exc.value.variable == var and var in str(exc.value)
    assert check_environment({}) == load_settings({})


# every command, including those given their database on the command line or by
# LABELQ_DATABASE_URL (they read no other setting before, so LABELQ_LEASE_SECONDS=abc
# labelq status ran), and those that use no database at all
COMMANDS = [("status", "p"), ("project", "list"), ("tasks", "load", "p", "t.csv"),
            ("workers", "list"), ("aggregate", "labels.csv"),
            ("simulate", "--synthetic", "tasks=10,workers=3", "--policy", "uniform")]


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: " ".join(a[:2]))
@pytest.mark.parametrize("var,value", [("LABELQ_LEASE_SECONDS", "abc"),
                                       ("LABELQ_INBOX_SIZE", "0"),
                                       ("LABELQ_DECISION_SEED", "seed")])
def test_a_malformed_setting_stops_every_command(tmp_path, args, var, value):
    from click.testing import CliRunner

    from cli.main import cli
    db = f"sqlite:///{tmp_path / 'l.db'}"
    runner = CliRunner()
    assert runner.invoke(cli, ["init"], env={"LABELQ_DATABASE_URL": db}).exit_code == 0
    assert runner.invoke(cli, ["project", "create", "p", "--labels", "0,1"],
                         env={"LABELQ_DATABASE_URL": db}).exit_code == 0
    res = runner.invoke(cli, list(args), env={"LABELQ_DATABASE_URL": db, var: value})
    assert res.exit_code == 2, res.output
    assert f"Error: {var} must be" in res.output
    # --help still answers, so the operator can read what the variable should be
    help_res = runner.invoke(cli, [*args[:1], "--help"], env={var: value})
    assert help_res.exit_code == 0, help_res.output
