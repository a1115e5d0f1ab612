"""When a worker's next assignment should be a gold question (the project's gold schedule).

Schedules (``Project.gold_schedule``): ``None``/``"none"`` no gold; ``"every:N"`` the N-th,
2N-th, ... assignment issued to a worker is gold; ``"rate:P"`` (or just ``"P"``) each
assignment is gold with probability P. A due gold question that the worker cannot get (all
seen) falls back to a normal task.
"""

from __future__ import annotations

import numpy as np

from ..errors import InputError

__all__ = ["parse_schedule", "gold_due"]


def parse_schedule(text: str | None) -> tuple[str, float]:
    if text is None or not str(text).strip() or str(text).strip().lower() == "none":
        return ("none", 0.0)
    kind, _, value = str(text).strip().partition(":")
    if not value:
        kind, value = "rate", kind
    try:
        x = float(value)
    except ValueError:
        raise InputError(f"gold schedule {text!r}: expected every:N or rate:P") from None
    if kind == "every" and x >= 1:
        return ("every", x)
    if kind == "rate" and 0 <= x <= 1:
        return ("rate", x)
    raise InputError(f"gold schedule {text!r}: expected every:N (N >= 1) or rate:P (0..1)")


def gold_due(schedule: str | None, n_issued: int, rng: np.random.Generator) -> bool:
    """Is the worker's next assignment (their ``n_issued + 1``-th) a gold question?"""
    kind, x = parse_schedule(schedule)
    if kind == "every":
        return (n_issued + 1) % int(x) == 0
    if kind == "rate":
        return bool(rng.random() < x)
    return False
