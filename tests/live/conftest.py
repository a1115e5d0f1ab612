"""Fixtures of the live engine's tests (``labelq/live``): the pipeline tests' project
factory and real, flushed Redis; :func:`label_some`, labels through the service."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipeline.conftest import make_project, r, sqlite_url  # noqa: F401

if TYPE_CHECKING:
    import numpy as np

    from labelq.service import Service

__all__ = ["make_project", "label_some"]


def label_some(s: Service, n: int, workers: int, rng: np.random.Generator) -> int:
    """Up to ``n`` labels through the service ``s``, by annotators ``p-w0`` .. ``p-w<workers
    - 1>`` in turn (each label "a", or "b" with probability 0.3); returns how many were
    given (a worker with nothing to do gives none)."""
    done = 0
    for i in range(n):
        h = f"p-w{i % workers}"
        a = s.next_assignment(h)
        if a is not None:
            s.submit(h, a.assignment_id, "ab"[int(rng.random() < 0.3)])
            done += 1
    return done
