import pytest

from labelq.errors import ConfigError
from labelq.settings import Settings, load_settings


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
