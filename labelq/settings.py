"""One settings object, read from ``LABELQ_*`` environment variables at the edges.

=========================  =====================================  ==========================
variable                   meaning                                default
=========================  =====================================  ==========================
LABELQ_DATABASE_URL        SQLAlchemy URL of the durable record   sqlite:///./labelq.db
LABELQ_REDIS_URL           Redis URL of the hot state and broker  redis://localhost:6379/0
LABELQ_LEASE_SECONDS       how long an issued assignment lives    600
LABELQ_INBOX_SIZE          ready assignments kept per annotator   5
LABELQ_MAX_OPEN            assignments an annotator may hold      1
                           open at once (``next`` then returns
                           the oldest of them again)
LABELQ_OPERATOR_TOKEN      bearer token of the HTTP API's         (unset: operator
                           operator endpoints (status, export,    endpoints answer 503)
                           enroll); at least 16 characters
LABELQ_DECISION_SEED       seeds the decisions' random draws      (unset: unseeded)
                           (reproducible tests), >= 0
LABELQ_CELERY_QUEUE        the Celery queue of the live tasks     labelq
LABELQ_BEAT_SECONDS        the beat's period (expire leases,      5
                           take in tasks, wake the appliers)
LABELQ_VISIBILITY_TIMEOUT  seconds before an unacknowledged       300
                           Celery message is redelivered
=========================  =====================================  ==========================

The engine's other constants (hold and lease grace times, window sizes, retry counts) are
not deployment settings: they are :class:`labelq.live.tuning.Tuning`.

:func:`check_environment` also checks the variables the CLI's edges read themselves (the
server's port and process count, the annotator's API URL).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlparse

from .errors import ConfigError

__all__ = ["Settings", "load_settings", "check_environment"]

_DB_SCHEMES = ("sqlite", "postgresql", "postgresql+psycopg", "postgresql+psycopg2")
_REDIS_SCHEMES = ("redis", "rediss", "unix")


@dataclass(frozen=True)
class Settings:
    database_url: str = "sqlite:///./labelq.db"
    redis_url: str = "redis://localhost:6379/0"
    lease_seconds: int = 600
    inbox_size: int = 5
    inbox_max: int = 50
    max_open: int = 1
    operator_token: str | None = field(default=None, repr=False)
    decision_seed: int | None = None
    celery_queue: str = "labelq"
    beat_seconds: float = 5.0
    visibility_timeout: int = 300

    @property
    def sqlalchemy_url(self) -> str:
        """The database URL with the psycopg 3 driver made explicit for PostgreSQL."""
        if self.database_url.startswith("postgresql://"):
            return "postgresql+psycopg://" + self.database_url[len("postgresql://"):]
        if self.database_url.startswith("postgres://"):
            return "postgresql+psycopg://" + self.database_url[len("postgres://"):]
        return self.database_url


def _whole(env: Mapping[str, str], name: str) -> int | None:
    """The variable as an int; ``None`` when unset or empty."""
    raw = env.get(name)
    if raw is None or raw == "":
        return None
    try:
        return int(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a whole number, got {raw!r}", variable=name) from None


def _positive_int(env: Mapping[str, str], name: str, default: int) -> int:
    value = _whole(env, name)
    if value is None:
        return default
    if value <= 0:
        raise ConfigError(f"{name} must be positive, got {value}", variable=name)
    return value


def _url(env: Mapping[str, str], name: str, default: str, schemes: tuple[str, ...]) -> str:
    raw = env.get(name) or default
    scheme = urlparse(raw).scheme
    if raw.startswith("postgres://"):
        scheme = "postgresql"
    if scheme not in schemes:
        raise ConfigError(
            f"{name} must be a URL with scheme {', '.join(schemes)}; got {raw!r}", variable=name
        )
    return raw


def _secret(env: Mapping[str, str], name: str, min_length: int) -> str | None:
    raw = env.get(name)
    if raw is None or raw == "":
        return None
    if len(raw) < min_length or raw != raw.strip():
        raise ConfigError(f"{name} must be at least {min_length} characters without "
                          f"surrounding spaces (got {len(raw)} characters)", variable=name)
    return raw


def _int_in(env: Mapping[str, str], name: str, low: int, high: int | None) -> int | None:
    value = _whole(env, name)
    if value is None:
        return None
    if value < low or (high is not None and value > high):
        upper = f" and at most {high}" if high is not None else ""
        raise ConfigError(f"{name} must be at least {low}{upper}, got {value}", variable=name)
    return value


def _positive_number(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise ConfigError(f"{name} must be a positive number of seconds, got {raw!r}",
                          variable=name)
    return value


def check_environment(env: Mapping[str, str] | None = None) -> Settings:
    """Validate every ``LABELQ_*`` variable labelq reads, not only those of
    :class:`Settings`; the CLI calls it before any command, so a malformed value stops every
    command (exit code 2), not only those that happen to read it. Returns the settings."""
    env = os.environ if env is None else env
    settings = load_settings(env)
    _int_in(env, "LABELQ_PORT", 0, 65535)  # labelq serve
    _int_in(env, "LABELQ_API_WORKERS", 1, 256)
    api_url = env.get("LABELQ_API_URL")
    if api_url and urlparse(api_url).scheme not in ("http", "https"):
        raise ConfigError(f"LABELQ_API_URL must be an http:// or https:// URL; got {api_url!r}",
                          variable="LABELQ_API_URL")
    return settings


def load_settings(env: Mapping[str, str] | None = None) -> Settings:
    """Read and validate the settings; raise :class:`ConfigError` naming the bad variable."""
    env = os.environ if env is None else env
    return Settings(
        database_url=_url(env, "LABELQ_DATABASE_URL", Settings.database_url, _DB_SCHEMES),
        redis_url=_url(env, "LABELQ_REDIS_URL", Settings.redis_url, _REDIS_SCHEMES),
        lease_seconds=_positive_int(env, "LABELQ_LEASE_SECONDS", Settings.lease_seconds),
        inbox_size=_positive_int(env, "LABELQ_INBOX_SIZE", Settings.inbox_size),
        inbox_max=_positive_int(env, "LABELQ_INBOX_MAX", Settings.inbox_max),
        max_open=_positive_int(env, "LABELQ_MAX_OPEN", Settings.max_open),
        operator_token=_secret(env, "LABELQ_OPERATOR_TOKEN", 16),
        decision_seed=_int_in(env, "LABELQ_DECISION_SEED", 0, None),
        celery_queue=env.get("LABELQ_CELERY_QUEUE") or Settings.celery_queue,
        beat_seconds=_positive_number(env, "LABELQ_BEAT_SECONDS", Settings.beat_seconds),
        visibility_timeout=_int_in(env, "LABELQ_VISIBILITY_TIMEOUT", 1, None)
        or Settings.visibility_timeout,
    )
