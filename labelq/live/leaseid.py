"""Assignment ids that name their task, so that a lease lost with Redis can be taken again.

Live leases exist only in Redis (no SQL write at issue). A Redis restart without
persistence, or a ``FLUSHDB``, loses them; the annotator's label then finds no lease. To
record it anyway when the task still takes it (:meth:`labelq.live.submit.Submitter.
_recover`), the id carries what the lease held that SQL cannot give back: the task's
sequence number and the time the assignment was reserved::

    <16 hex random>-<task seq, base 36>-<reserved at, Unix ms, base 36>

(at most 40 characters, the ``Assignment.id`` column). The worker is the caller; the cost,
the gold flag and the task's SQL id are read again; the expiry is bounded by the time.

The id is not signed: an annotator who crafts one can submit for a task of their choice,
but only one they were never issued, only within a lease's length of the time it names,
and only where ``RESERVE`` would issue it to them anyway (below the cap, within their
capacity and the budget) — no more than the recovery itself allows.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass

__all__ = ["new_assignment_id", "parse_assignment_id", "LeaseId"]

_ID = re.compile(r"([0-9a-f]{16})-([0-9a-z]{1,12})-([0-9a-z]{1,10})")
_DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"


def _b36(n: int) -> str:
    if n < 0:
        raise ValueError("negative")
    out = ""
    while True:
        n, r = divmod(n, 36)
        out = _DIGITS[r] + out
        if n == 0:
            return out


@dataclass(frozen=True, slots=True)
class LeaseId:
    task: int  # seq
    reserved_ms: int


def new_assignment_id(task: int, now_ms: int) -> str:
    """A new assignment id for ``task`` (its seq) reserved at ``now_ms``."""
    return f"{secrets.token_hex(8)}-{_b36(int(task))}-{_b36(int(now_ms))}"


def parse_assignment_id(aid: str) -> LeaseId | None:
    """The task and time an id names, or None (an id of an earlier labelq: a bare uuid)."""
    m = _ID.fullmatch(aid)
    if m is None:
        return None
    return LeaseId(int(m.group(2), 36), int(m.group(3), 36))
