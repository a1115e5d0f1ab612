"""What a worker says it serves, asked by ``labelq check`` (a Celery inspect command).

``labelq_serves`` answers, from the worker's main process: the id of the database it
serves (:data:`workers.main.DATABASE`, read when it started; ``None`` when it could not
be read), the queue its database's wake-ups go to (:data:`workers.main.QUEUE`) and the
queues it consumes. ``labelq check`` compares them with its own database and queue: a
worker of another database on this database's queue, or a worker of this database on
another queue (the shared ``labelq`` of an earlier labelq), is named and flagged.
A worker of an earlier labelq does not know the command (its reply is an error).
"""

from __future__ import annotations

from typing import Any

from celery.worker.control import inspect_command

from .main import DATABASE, LONG_QUEUE, QUEUE

__all__ = ["labelq_serves", "COMMAND"]

COMMAND = "labelq_serves"


# (Celery ships no type hints: its decorator leaves what it wraps untyped)
@inspect_command()  # type: ignore[untyped-decorator]
def labelq_serves(state: Any) -> dict[str, Any]:
    """The database this worker serves, its queues and the queues it consumes."""
    consumer = state.consumer.task_consumer
    consumed = sorted(q.name for q in consumer.queues) if consumer else []
    return {"database": DATABASE, "queue": QUEUE, "long_queue": LONG_QUEUE,
            "consumes": consumed}
