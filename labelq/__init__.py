"""labelq: a backend for running an in-house annotation workforce.

The core package holds the durable record (``models``), settings, the policy core
(``policies``), aggregation, the simulator and the Redis queue. It never imports Celery;
the Celery app lives in the top-level ``workers`` package and the CLI in ``cli``.
"""

__version__ = "0.1.0"
