"""What a worker says it serves, asked by ``labelq check`` (a Celery inspect command).

``labelq_serves`` answers, from the worker's main process: the id of the database it
serves (:func:`workers.main.database`, read when it started; ``None`` when it could not
be read), the queue its database's wake-ups go to (:func:`workers.main.queue`) and the
queues it consumes. ``labelq check`` compares them with its own database and queue: a
worker of another database on this database's queue, or a worker of this database on
another queue (the shared ``labelq`` of an earlier labelq), is named and flagged.
A worker of an earlier labelq does not know the command (its reply is an error).
"""

from __future__ import annotations

from typing import Any

from celery.worker.control import inspect_command

from .main import database, queue, queue_for

__all__ = ["labelq_serves", "COMMAND"]

COMMAND = "labelq_serves"


# (Celery ships no type hints: its decorator leaves what it wraps untyped)
@inspect_command()  # type: ignore[untyped-decorator]
def labelq_serves(state: Any) -> dict[str, Any]:
    """The database this worker serves, its queues and the queues it consumes."""
    consumer = state.consumer.task_consumer
    consumed = sorted(q.name for q in consumer.queues) if consumer else []
    own = queue()
    return {"database": database(), "queue": own,
            "long_queue": queue_for("labelq.export") if own is not None else None,
            "consumes": consumed}
