"""One settings object, read from ``LABELQ_*`` environment variables at the edges.

=========================  =====================================  ==========================
variable                   meaning                                default
=========================  =====================================  ==========================
LABELQ_DATABASE_URL        SQLAlchemy URL of the durable record   the nearest labelq.toml's,
                           (labelq.record.location: where it is   else the per-user
                           looked for, in order)                  $XDG_DATA_HOME/labelq/
                                                                  labelq.db
LABELQ_REDIS_URL           Redis URL of the hot state and broker  redis://localhost:6379/0
                           (a host, a port 1-65535, a database
                           number; unix:// a socket path;
                           redis+sentinel://H1:P1,H2:P2/MASTER/DB
                           a Redis watched by Sentinel:
                           labelq.record.redisurl)
LABELQ_LEASE_SECONDS       how long an issued assignment lives    600
                           (1-604800: a week at most)
LABELQ_INBOX_SIZE          ready assignments kept per annotator   5
                           (1-1000)
LABELQ_INBOX_MAX           the most kept for a fast annotator     50
                           (1-10000)
LABELQ_MAX_OPEN            assignments an annotator may hold      1
                           open at once (``next`` then returns
                           the oldest of them again; 1-1000)
LABELQ_OPERATOR_TOKEN      bearer token of the HTTP API's         (unset: operator
                           operator endpoints (status, export,    endpoints answer 503)
                           enroll); at least 16 characters
LABELQ_DECISION_SEED       seeds the decisions' random draws      (unset: unseeded)
                           (reproducible tests), 0 to 2**63-1
LABELQ_CELERY_QUEUE        the Celery queue of the live tasks     labelq.<database id>: a
                           (1-200 of ``A-Z a-z 0-9 . _ : @ -``;   queue per database, so
                           long work: ``<queue>.long``)           several on one Redis never
                                                                  wake each other's workers
LABELQ_BEAT_SECONDS        the beat's period (expire leases,      5
                           take in tasks, wake the appliers):
                           0.5-300, a decimal number
LABELQ_VISIBILITY_TIMEOUT  seconds before an unacknowledged       300
                           Celery message is redelivered
                           (1-86400)
=========================  =====================================  ==========================

Every value is checked with its bounds when a process starts (``load_settings``; the CLI's
:func:`check_environment` before any command, so ``labelq check`` too): an error names the
variable and the allowed range, and the CLI exits with code 2. The bounds are sane limits,
not tuning advice: a lease of 10**13 s overflowed the expiry's date (``next`` answered 500
for its annotator from then on), a beat of ``inf`` killed the beat (no lease expired again)
and one of ``1e-9`` sent thousands of maintenance tasks a second.

:func:`check_environment` also checks the variables the CLI's edges read themselves:
``LABELQ_HOST`` (no spaces), ``LABELQ_PORT`` (0-65535), ``LABELQ_API_WORKERS`` (1-256),
``LABELQ_API_URL`` (an http:// or https:// URL with a host), ``LABELQ_TOKEN`` (no spaces or
control characters).

The engine's other constants (hold and lease grace times, window sizes, retry counts) are
not deployment settings: they are :class:`labelq.live.tuning.Tuning`.

"""

from __future__ import annotations

import ipaddress
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Union
from urllib.parse import urlparse

from ..errors import ConfigError

__all__ = ["Settings", "load_settings", "check_environment", "LEGACY_QUEUE", "Network",
           "parse_networks"]

Network = Union[ipaddress.IPv4Network, ipaddress.IPv6Network]  # noqa: UP007 - (an alias)

# the one queue every database shared before queues were per database (and the prefix of
# each database's own: ``labelq.<database id>``)
LEGACY_QUEUE = "labelq"

_DB_SCHEMES = ("sqlite", "postgresql", "postgresql+psycopg", "postgresql+psycopg2")
_REDIS_SCHEMES = ("redis", "rediss", "unix", "redis+sentinel")


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
    # ``None``: the database's own queue (:meth:`queue_of`)
    celery_queue: str | None = None
    beat_seconds: float = 5.0
    visibility_timeout: int = 300
    # networks beyond the public addresses a webhook may be delivered to
    # (``LABELQ_HOOK_ALLOW_NETWORKS``; labelq/hooknet.py)
    hook_networks: tuple[Network, ...] = ()

    def queue_of(self, database: str) -> str:
        """The Celery queue of database ``database``'s live tasks: ``LABELQ_CELERY_QUEUE``
        when set, else ``labelq.<database id>`` — one per database, so that databases
        sharing a Redis never send their wake-ups to each other's workers (issue 43: a
        worker of one database took the other's off the shared queue and ignored them)."""
        return self.celery_queue or f"{LEGACY_QUEUE}.{database}"

    def long_queue_of(self, database: str) -> str:
        """The Celery queue of database ``database``'s long work (exports):
        ``<queue>.long``, apart from the labels' queue so that no label waits behind an
        export."""
        return f"{self.queue_of(database)}.long"

    def hooks_queue_of(self, database: str) -> str:
        """The Celery queue of database ``database``'s webhook deliveries:
        ``<queue>.hooks``, apart from the labels' and the exports' (a slow receiver delays
        neither; labelq/hooks.py)."""
        return f"{self.queue_of(database)}.hooks"

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


def _positive_int(env: Mapping[str, str], name: str, default: int,
                  high: int = 2**31 - 1) -> int:
    """A whole number from 1 to ``high`` (``default`` when unset)."""
    value = _whole(env, name)
    if value is None:
        return default
    if value <= 0 or value > high:
        raise ConfigError(f"{name} must be positive and at most {high} (from 1 to {high}), "
                          f"got {value}", variable=name)
    return value


def _url(env: Mapping[str, str], name: str, default: str, schemes: tuple[str, ...]) -> str:
    raw = env.get(name) or default
    scheme = urlparse(raw).scheme
    if scheme == "redis+sentinel" and scheme in schemes:
        return _sentinel_url(name, raw)
    if raw.startswith("postgres://"):
        scheme = "postgresql"
    if scheme not in schemes:
        raise ConfigError(
            f"{name} must be a URL with scheme {', '.join(schemes)}; got {raw!r}", variable=name
        )
    if any(c.isspace() or ord(c) < 32 for c in raw):
        raise ConfigError(f"{name} must be a URL without spaces or control characters; "
                          f"got {raw!r}", variable=name)
    where = urlparse(raw)
    try:
        port = where.port  # raises ValueError for a port that is no number or out of range
    except ValueError:
        raise ConfigError(f"{name} has no valid port (a number from 1 to 65535); got "
                          f"{raw!r}", variable=name) from None
    if port == 0:
        raise ConfigError(f"{name} has no valid port (a number from 1 to 65535); got "
                          f"{raw!r}", variable=name)
    if scheme in ("redis", "rediss"):
        if not where.hostname:
            raise ConfigError(f"{name} names no host (redis://HOST[:PORT][/DB]); got {raw!r}",
                              variable=name)
        db = where.path.lstrip("/")
        if db and not (db.isdigit() and int(db) < 2**31):
            raise ConfigError(f"{name}: the database number must be a whole number from 0, "
                              f"got {db!r} in {raw!r}", variable=name)
    elif scheme == "unix" and not where.path:
        raise ConfigError(f"{name} names no socket path (unix:///PATH); got {raw!r}",
                          variable=name)
    elif scheme.startswith("postgres"):
        from sqlalchemy.engine import make_url
        from sqlalchemy.exc import ArgumentError
        try:
            make_url(raw)
        except (ArgumentError, ValueError) as exc:
            raise ConfigError(f"{name} is not a database URL ({exc}); got {raw!r}",
                              variable=name) from None
    return raw


def _sentinel_url(name: str, raw: str) -> str:
    """A ``redis+sentinel://`` URL, checked by :mod:`labelq.record.redisurl`."""
    if any(c.isspace() or ord(c) < 32 for c in raw):
        raise ConfigError(f"{name} must be a URL without spaces or control characters; "
                          f"got {_masked(raw)!r}", variable=name)
    from .redisurl import parse_sentinel_url
    try:
        parse_sentinel_url(raw)
    except ValueError as exc:
        raise ConfigError(f"{name}: the sentinel URL {exc}; got {_masked(raw)!r}",
                          variable=name) from None
    return raw


def _masked(url: str) -> str:
    """``url`` with the password of its credentials (``:PASSWORD@``) replaced by ``***``."""
    scheme, sep, rest = url.partition("://")
    where, slash, path = rest.partition("/")
    if "@" not in where:
        return url
    auth, _, hosts = where.rpartition("@")
    user, colon, _secret_ = auth.partition(":")
    return f"{scheme}{sep}{user}{colon}{'***' if colon else ''}@{hosts}{slash}{path}"


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


def _seconds(env: Mapping[str, str], name: str, default: float, low: float,
             high: float) -> float:
    """A decimal number of seconds from ``low`` to ``high`` (``inf`` and ``nan`` are not)."""
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not low <= value <= high:  # (also false for nan)
        raise ConfigError(f"{name} must be a number of seconds from {low:g} to {high:g}, "
                          f"got {raw!r}", variable=name)
    return value


_QUEUE = re.compile(r"[A-Za-z0-9._:@-]{1,200}")


def _queue(env: Mapping[str, str], name: str) -> str | None:
    raw = env.get(name)
    if raw is None or raw == "":
        return None
    if not _QUEUE.fullmatch(raw):
        raise ConfigError(f"{name} must be 1 to 200 letters, digits and . _ : @ -, got "
                          f"{raw!r}", variable=name)
    return raw


def check_environment(env: Mapping[str, str] | None = None) -> Settings:
    """Validate every ``LABELQ_*`` variable labelq reads, not only those of
    :class:`Settings`; the CLI calls it before any command, so a malformed value stops every
    command (exit code 2), not only those that happen to read it. Returns the settings."""
    env = os.environ if env is None else env
    settings = load_settings(env)
    _int_in(env, "LABELQ_PORT", 0, 65535)  # labelq serve
    _int_in(env, "LABELQ_API_WORKERS", 1, 256)
    host = env.get("LABELQ_HOST")
    if host is not None and host != "" and (any(c.isspace() or ord(c) < 32 for c in host)
                                            or len(host) > 255):
        raise ConfigError(f"LABELQ_HOST must be a host name or address (no spaces, at most "
                          f"255 characters), got {host!r}", variable="LABELQ_HOST")
    api_url = env.get("LABELQ_API_URL")
    if api_url:
        where = urlparse(api_url)
        try:
            port = where.port
        except ValueError:
            port = -1
        if where.scheme not in ("http", "https") or not where.hostname or port == -1 \
                or any(c.isspace() for c in api_url):
            raise ConfigError(f"LABELQ_API_URL must be an http:// or https:// URL with a host "
                              f"(and a port from 1 to 65535); got {api_url!r}",
                              variable="LABELQ_API_URL")
    token = env.get("LABELQ_TOKEN")
    if token and (any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in token)
                  or len(token) > 512):
        raise ConfigError("LABELQ_TOKEN must be the token as enrolment printed it (no spaces "
                          "or control characters, at most 512 characters)",
                          variable="LABELQ_TOKEN")
    return settings


def _default_database_url(env: Mapping[str, str]) -> str:
    if env.get("LABELQ_DATABASE_URL"):
        return Settings.database_url  # (not used: the variable is)
    from .configfile import default_database_url  # (labelq.toml, per-user)
    return default_database_url(env)


def load_settings(env: Mapping[str, str] | None = None) -> Settings:
    """Read and validate the settings; raise :class:`ConfigError` naming the bad variable."""
    env = os.environ if env is None else env
    return Settings(
        database_url=_url(env, "LABELQ_DATABASE_URL", _default_database_url(env), _DB_SCHEMES),
        redis_url=_url(env, "LABELQ_REDIS_URL", Settings.redis_url, _REDIS_SCHEMES),
        lease_seconds=_positive_int(env, "LABELQ_LEASE_SECONDS", Settings.lease_seconds,
                                    604_800),
        inbox_size=_positive_int(env, "LABELQ_INBOX_SIZE", Settings.inbox_size, 1000),
        inbox_max=_positive_int(env, "LABELQ_INBOX_MAX", Settings.inbox_max, 10_000),
        max_open=_positive_int(env, "LABELQ_MAX_OPEN", Settings.max_open, 1000),
        operator_token=_secret(env, "LABELQ_OPERATOR_TOKEN", 16),
        decision_seed=_int_in(env, "LABELQ_DECISION_SEED", 0, 2**63 - 1),
        celery_queue=_queue(env, "LABELQ_CELERY_QUEUE"),
        beat_seconds=_seconds(env, "LABELQ_BEAT_SECONDS", Settings.beat_seconds, 0.5, 300),
        visibility_timeout=_int_in(env, "LABELQ_VISIBILITY_TIMEOUT", 1, 86_400)
        or Settings.visibility_timeout,
        hook_networks=_networks(env, "LABELQ_HOOK_ALLOW_NETWORKS"),
    )


def _networks(env: Mapping[str, str], name: str) -> tuple[Network, ...]:
    """Comma-separated CIDR blocks (:func:`parse_networks`)."""
    raw = env.get(name)
    if not raw:
        return ()
    try:
        return parse_networks(raw)
    except ValueError as exc:
        raise ConfigError(f"{name}: {exc}; got {raw!r}", variable=name) from None


def parse_networks(raw: str) -> tuple[Network, ...]:
    """``"10.0.0.0/8, 127.0.0.1"`` → the networks (a bare address is its /32 or /128);
    ValueError naming the entry that is not one (``LABELQ_HOOK_ALLOW_NETWORKS``:
    labelq/hooknet.py)."""
    out: list[Network] = []
    for part in raw.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            out.append(ipaddress.ip_network(part, strict=False))
        except ValueError:
            raise ValueError(f"{part!r} is not an address or CIDR block "
                             "(e.g. 10.0.0.0/8, 127.0.0.1/32, fd00::/8)") from None
    return tuple(out)
