"""kombu's Redis transport, with one fix: a worker survives a Redis restart under traffic.

When the broker connection drops, Celery's consumer first *collects* the kombu connection
(which detaches the transport: ``transport.client = None``) and then closes it. Closing the
default channel disconnects its connection pools and then restores the messages delivered
but not yet acknowledged (``task_acks_late``: the task that was running) — which needs a
new pool, whose parameters are read from ``transport.client``: ``AttributeError:
'NoneType' object has no attribute 'hostname'``. That error is not one of the connection
errors the close ignores, so it reached the worker as ``Unrecoverable error`` and the
worker exited (3 of 7 Redis restarts under traffic; only when a message was unacknowledged
at that moment). Seen with celery 5.7 / kombu 5.7; the same trace is reported in kombu
issues #582 and #970 for older versions.

Here a channel whose transport was detached answers with a connection error instead, which
the close ignores; the unacknowledged message stays in kombu's ``unacked`` hash in Redis and
is redelivered after the visibility timeout (and correctness never rests on redelivery:
the beat wakes every project's applier, which works from SQL). Selected with
``broker_transport`` in :mod:`workers.main`; :class:`SentinelTransport` is kombu's
sentinel transport (``redis+sentinel://`` URLs) with the same fix.
"""

from __future__ import annotations

from typing import Any

from kombu.transport import redis as kombu_redis
from redis.exceptions import ConnectionError as RedisConnectionError

__all__ = ["Channel", "Transport", "SentinelChannel", "SentinelTransport"]


def _check_attached(channel: Any) -> None:
    if channel.connection is None or channel.connection.client is None:
        raise RedisConnectionError("broker connection already closed (transport detached)")


class Channel(kombu_redis.Channel):
    def _connparams(self, asynchronous: bool = False) -> dict[str, Any]:
        _check_attached(self)
        # (kombu ships no type hints)
        params: dict[str, Any] = super()._connparams(  # type: ignore[no-untyped-call]
            asynchronous=asynchronous)
        return params


class Transport(kombu_redis.Transport):
    Channel = Channel


class SentinelChannel(kombu_redis.SentinelChannel):
    """kombu's sentinel channel with the same fix: its pool (``_sentinel_managed_pool``,
    which asks the sentinels for the master) starts from ``_connparams`` too."""

    def _connparams(self, asynchronous: bool = False) -> dict[str, Any]:
        _check_attached(self)
        params: dict[str, Any] = super()._connparams(  # type: ignore[no-untyped-call]
            asynchronous=asynchronous)
        return params


class SentinelTransport(kombu_redis.SentinelTransport):
    Channel = SentinelChannel
