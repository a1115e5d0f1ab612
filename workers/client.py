"""Sending tasks to the workers by name, for processes that are not workers (the API).

The core (``labelq/``) never imports Celery; edges that must enqueue get this function
injected (``labelq serve`` passes it to ``labelq.api.create_app``)."""

from __future__ import annotations

from .main import app, queue_for

__all__ = ["send_task"]


def send_task(name: str, args: list[object]) -> None:
    """Send task ``name`` to the queue of this process's database (the API serves the
    database it was configured with: :func:`workers.main.database`, read at the first
    send)."""
    app.send_task(name, args=args, queue=queue_for(name))
