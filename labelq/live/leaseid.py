"""Assignment ids that name their task, so that a lease lost with Redis can be taken again,
and that prove who they were issued to.

Live leases exist only in Redis (no SQL write at issue). A Redis restart without
persistence, or a ``FLUSHDB``, loses them; the annotator's label then finds no lease. To
record it anyway when the task still takes it (:meth:`labelq.live.submit.Submitter.
_recover`), the id carries what the lease held that SQL cannot give back: the task's
sequence number and the time the assignment was reserved, after a MAC::

    <MAC, 16 hex>-<task seq masked, base 36>-<reserved at, Unix ms, base 36>

(at most 40 characters, the ``Assignment.id`` column). The seq is masked by a keyed
permutation of 60-bit numbers, one per project and worker (a 4-round Feistel network whose
round function is HMAC-SHA256), so only the server reads it. In clear, it told an
annotator a gold question from a task at a glance (gold loaded after the tasks is numbered
after them), which the API otherwise never shows (docs/annotators.md). A permutation and
not a pad XORed in: the applier reserves several tasks for a worker in the same
millisecond, and two ids under one pad would show the XOR of their seqs (a gold
question's high bits among them). The MAC is HMAC-SHA256, truncated to 64 bits, over the project, the
worker (their seq in it), the masked task and the time, keyed with the database's server
secret (:mod:`labelq.record.secret`). So the recovery takes a lease
again only for an id this database issued to this worker: a crafted id, or another
worker's, fails :meth:`IdSigner.issued` (checked in constant time) and is refused
(:class:`~labelq.errors.AssignmentUnknown`, nothing recorded). The worker is the caller;
the cost, the gold flag and the task's SQL id are read again; the expiry is bounded by the
time. On the hot path the Redis lease proves the issue; the MAC is not checked there.

A worker is issued a task once (``seen:{w}``), so the id is unique without a random part.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from dataclasses import dataclass

__all__ = ["IdSigner", "parse_assignment_id", "LeaseId"]

_ID = re.compile(r"([0-9a-f]{16})-([0-9a-z]{1,12})-([0-9a-z]{1,10})")
_DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"
_HALF = 30  # a masked seq is 60 bits, two halves (at most 12 base-36 digits: 36**12 > 2**60)
_HALF_MASK = (1 << _HALF) - 1
_ROUNDS = 4  # Luby-Rackoff: 4 rounds of a pseudorandom function make a strong permutation


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


def parse_assignment_id(aid: str) -> LeaseId | None:
    """The task (masked: :meth:`IdSigner.issued` reads it) and time an id shows, or None
    (an id of an earlier labelq: a bare uuid)."""
    m = _ID.fullmatch(aid)
    if m is None:
        return None
    return LeaseId(int(m.group(2), 36), int(m.group(3), 36))


class IdSigner:
    """Makes and checks the assignment ids of one database (``key``: its server secret,
    :func:`labelq.record.secret.assignment_key`)."""

    __slots__ = ("_mac",)

    def __init__(self, key: bytes) -> None:
        if len(key) < 16:
            raise ValueError("an assignment id key has at least 16 bytes")
        self._mac = hmac.new(key, digestmod=hashlib.sha256)  # copied per id: keyed once

    def _tag(self, project: int, worker: int, task: str, at: str) -> str:
        h = self._mac.copy()
        h.update(f"{int(project)}:{int(worker)}:{task}:{at}".encode())
        return h.hexdigest()[:16]

    def _round(self, project: int, worker: int, r: int, half: int) -> int:
        """Round ``r``'s function of the seq permutation of ``project`` and ``worker`` (a
        message of its own: "seq:" never starts a MAC's)."""
        h = self._mac.copy()
        h.update(f"seq:{int(project)}:{int(worker)}:{r}:{half}".encode())
        return int.from_bytes(h.digest()[:4], "big") & _HALF_MASK

    def _mask(self, project: int, worker: int, seq: int) -> int:
        """``seq`` (below 2**60) through the permutation of ``project`` and ``worker``."""
        left, right = seq >> _HALF, seq & _HALF_MASK
        for r in range(_ROUNDS):
            left, right = right, left ^ self._round(project, worker, r, right)
        return (left << _HALF) | right

    def _unmask(self, project: int, worker: int, masked: int) -> int:
        left, right = masked >> _HALF, masked & _HALF_MASK
        for r in reversed(range(_ROUNDS)):
            left, right = right ^ self._round(project, worker, r, left), left
        return (left << _HALF) | right

    def new(self, project: int, worker: int, task: int, now_ms: int) -> str:
        """The id of ``task`` (its seq) of ``project`` issued to ``worker`` (their seq)
        at ``now_ms``."""
        if not 0 <= int(task) < 1 << (2 * _HALF):
            raise ValueError(f"task seq {task} is not below 2**60")
        at = _b36(int(now_ms))
        t = _b36(self._mask(project, worker, int(task)))
        return f"{self._tag(project, worker, t, at)}-{t}-{at}"

    def issued(self, aid: str, project: int, worker: int) -> LeaseId | None:
        """The task and time ``aid`` names if this database issued it to ``worker`` of
        ``project`` (its MAC checks out, compared in constant time), else None."""
        m = _ID.fullmatch(aid)
        if m is None:
            return None
        want = self._tag(project, worker, m.group(2), m.group(3))
        if not hmac.compare_digest(want, m.group(1)):
            return None
        masked = int(m.group(2), 36)
        if masked >> (2 * _HALF):  # (12 base-36 digits can exceed 60 bits; never issued)
            return None
        return LeaseId(self._unmask(project, worker, masked), int(m.group(3), 36))
