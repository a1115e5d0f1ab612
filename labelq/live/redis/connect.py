"""Redis clients made from ``LABELQ_REDIS_URL``: the one place that reads the URL.

Two kinds of URL:

* ``redis://``, ``rediss://``, ``unix://`` — one server (redis-py's ``Redis.from_url``);
* ``redis+sentinel://[[USER]:PASSWORD@]HOST[:PORT][,HOST[:PORT]...]/MASTER[/DB]`` — a
  Redis watched by Sentinel (port 26379 unless given). The client asks the sentinels, in
  order, where master ``MASTER`` is now, and asks again after a connection error, so a
  process follows a failover (redis-py's ``redis.sentinel.Sentinel.master_for``). The
  user and password are the master's (and its replicas'); the sentinels themselves are
  reached without one (keep them on a private network, as docker-compose.yml does).

:func:`parse_sentinel_url` checks a sentinel URL and says what is wrong with it;
:func:`connect` makes a client of either kind; :func:`celery_broker` gives the Celery
broker URL and transport options of either kind (kombu's ``sentinel://`` transport for a
sentinel URL).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote

import redis
import redis.sentinel

__all__ = ["SENTINEL_SCHEME", "SentinelURL", "parse_sentinel_url", "is_sentinel_url",
           "connect", "celery_broker"]

SENTINEL_SCHEME = "redis+sentinel"
SENTINEL_PORT = 26379
_FORM = "redis+sentinel://[[USER]:PASSWORD@]HOST[:PORT][,HOST[:PORT]...]/MASTER[/DB]"
_MASTER = re.compile(r"[A-Za-z0-9._-]{1,100}")
_HOST = re.compile(r"[A-Za-z0-9._-]{1,253}|\[[0-9A-Fa-f:.]{2,45}\]")


@dataclass(frozen=True)
class SentinelURL:
    """A parsed ``redis+sentinel://`` URL."""

    sentinels: tuple[tuple[str, int], ...]
    master: str
    db: int = 0
    username: str | None = None
    password: str | None = None


def is_sentinel_url(url: str) -> bool:
    return url.startswith(SENTINEL_SCHEME + "://")


def parse_sentinel_url(url: str) -> SentinelURL:
    """Parse ``url`` (see the module docstring); :class:`ValueError` names what is wrong."""
    if not is_sentinel_url(url):
        raise ValueError(f"not a {SENTINEL_SCHEME}:// URL ({_FORM})")
    rest = url[len(SENTINEL_SCHEME) + 3:]
    if "?" in rest or "#" in rest:
        raise ValueError(f"takes no query or fragment ({_FORM})")
    where, _, path = rest.partition("/")
    username = password = None
    if "@" in where:
        auth, _, where = where.rpartition("@")
        user, colon, secret = auth.partition(":")
        if not colon:
            raise ValueError(f"the credentials must be [USER]:PASSWORD@ ({_FORM})")
        username, password = unquote(user) or None, unquote(secret) or None
    sentinels: list[tuple[str, int]] = []
    for i, part in enumerate(where.split(","), start=1):
        host, port = _host_port(part, i)
        sentinels.append((host, port))
    if len(set(sentinels)) != len(sentinels):
        raise ValueError("names a sentinel twice")
    parts = path.split("/") if path else []
    if not parts or not parts[0]:
        raise ValueError(f"names no master (the name the sentinels monitor) ({_FORM})")
    if len(parts) > 2 or (len(parts) == 2 and parts[1] == ""):
        raise ValueError(f"has more path than /MASTER/DB ({_FORM})")
    if not _MASTER.fullmatch(parts[0]):
        raise ValueError(f"the master name must be 1 to 100 letters, digits and . _ -, got "
                         f"{parts[0]!r}")
    db = 0
    if len(parts) == 2:
        if not (parts[1].isdigit() and int(parts[1]) < 2**31):
            raise ValueError(f"the database number must be a whole number from 0, got "
                             f"{parts[1]!r}")
        db = int(parts[1])
    return SentinelURL(tuple(sentinels), parts[0], db, username, password)


def _host_port(part: str, i: int) -> tuple[str, int]:
    if not part:
        raise ValueError(f"sentinel {i} names no host ({_FORM})")
    if part.startswith("["):  # [IPv6]:port
        close = part.find("]")
        host, tail = part[:close + 1], part[close + 1:]
        port_text = tail[1:] if tail.startswith(":") else ("" if not tail else None)
    else:
        host, colon, port_text = part.partition(":")
        if not colon:
            port_text = ""
    if not host or not _HOST.fullmatch(host) or port_text is None:
        raise ValueError(f"sentinel {i} is no HOST[:PORT]: {part!r}")
    if port_text == "":
        return host.strip("[]"), SENTINEL_PORT
    if not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
        raise ValueError(f"sentinel {i} has no valid port (a number from 1 to 65535): "
                         f"{part!r}")
    return host.strip("[]"), int(port_text)


def connect(url: str, **options: Any) -> redis.Redis:
    """A client of the Redis ``url`` names (no connection is opened yet). ``options`` are
    redis-py's connection options (``socket_timeout``, ``health_check_interval``...); for a
    sentinel URL they apply to the master's connections, and the socket timeouts also to
    the sentinels'."""
    if not is_sentinel_url(url):
        return redis.Redis.from_url(url, **options)
    where = parse_sentinel_url(url)
    sentinel_options = {k: v for k, v in options.items() if k.startswith("socket_")}
    sentinel_options.setdefault("socket_timeout", 5.0)
    sentinel_options.setdefault("socket_connect_timeout", 5.0)
    # (redis-py's sentinel module is not annotated)
    watch = redis.sentinel.Sentinel(  # type: ignore[no-untyped-call]
        list(where.sentinels), sentinel_kwargs=sentinel_options)
    client: redis.Redis = watch.master_for(  # type: ignore[no-untyped-call]
        where.master, db=where.db, username=where.username, password=where.password,
        **options)
    return client


def celery_broker(url: str) -> tuple[str, dict[str, Any]]:
    """The Celery broker URL and transport options for ``url``: itself and none for one
    server; for a sentinel URL kombu's form ``sentinel://[:PW@]H1:P1;sentinel://...;/DB``
    and ``{"master_name": MASTER}`` (kombu's sentinel transport, which asks the sentinels
    for the master at every (re)connection)."""
    if not is_sentinel_url(url):
        return url, {}
    where = parse_sentinel_url(url)
    auth = ""
    if where.password is not None or where.username is not None:
        auth = f"{quote(where.username or '', safe='')}:{quote(where.password or '', safe='')}@"
    hosts = [f"sentinel://{auth}{f'[{h}]' if ':' in h else h}:{p}/{where.db}"
             for h, p in where.sentinels]
    return ";".join(hosts), {"master_name": where.master}
