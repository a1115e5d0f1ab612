"""Redis clients made from ``LABELQ_REDIS_URL``: the one place that reads the URL.

Two kinds of URL:

* ``redis://``, ``rediss://``, ``unix://`` — one server (redis-py's ``Redis.from_url``);
* ``redis+sentinel://[[USER]:PASSWORD@]HOST[:PORT][,HOST[:PORT]...]/MASTER[/DB]`` — a
  Redis watched by Sentinel (port 26379 unless given). The client asks the sentinels, in
  order, where master ``MASTER`` is now, and asks again after a connection error, so a
  process follows a failover (redis-py's ``redis.sentinel.Sentinel.master_for``). The
  user and password are the master's (and its replicas'); the sentinels themselves are
  reached without one (keep them on a private network, as docker-compose.yml does).

:func:`parse_sentinel_url` (:mod:`labelq.record.redisurl`, where the settings use it)
checks a sentinel URL and says what is wrong with it;
:func:`connect` makes a client of either kind; :func:`celery_broker` gives the Celery
broker URL and transport options of either kind (kombu's ``sentinel://`` transport for a
sentinel URL).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import redis
import redis.sentinel

from ...record.redisurl import SENTINEL_SCHEME, SentinelURL, is_sentinel_url, parse_sentinel_url

__all__ = ["SENTINEL_SCHEME", "SentinelURL", "parse_sentinel_url", "is_sentinel_url",
           "connect", "celery_broker"]

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
