"""The HTTP API of labelq: annotator and operator endpoints and the labeling page.

``create_app(settings)`` builds the FastAPI application (``labelq serve`` runs it with
uvicorn). The modules:

* :mod:`labelq.api.app` — the app factory and its wiring (engine, Redis, service, Celery).
* :mod:`labelq.api.auth` — bearer tokens: the annotator's (hashed at rest) and the operator's.
* :mod:`labelq.api.annotator` / :mod:`labelq.api.operator` — the routes
  (:func:`labelq.api.annotator.submit_body`: a label's way in, for the route and the fast
  path alike, through :meth:`labelq.service.Service.submit_async`).
* :mod:`labelq.api.fastpath` — ``HotPath``: the two requests an annotator's client makes
  per label, answered ahead of the middleware stack when plainly well-formed.
* :mod:`labelq.api.committer` — the API process's group-commit thread (the submits'
  batches); :mod:`labelq.api.onewrite` — one socket write per fast-path answer.
* :mod:`labelq.api.errors` — labelq errors to JSON ``{"code", "message", ...}`` responses.
* :mod:`labelq.api.limits` — the request body size limit (413).
* export jobs are :mod:`labelq.jobs` (run by the Celery task ``labelq.export``).
* :mod:`labelq.api.progress` — an annotator's progress, over SQL and the hot state.

Importing this package does not import FastAPI; ``create_app`` does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from fastapi import FastAPI

    from ..record.settings import Settings

__all__ = ["create_app"]


def create_app(settings: Settings | None = None, **kwargs: Any) -> FastAPI:
    """The FastAPI application for ``settings`` (default: the ``LABELQ_*`` environment);
    ``send_task`` (see :func:`labelq.api.app.create_app`) enqueues worker tasks."""
    from .app import create_app as _create_app

    return _create_app(settings, **kwargs)
