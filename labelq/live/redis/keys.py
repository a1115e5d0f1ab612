"""The one place Redis key names are made. Every key of a project starts
``lq:{D:P}:``, ``D`` the identity of its SQL database (``labelq_database.uid``, made by
``labelq init``) and ``P`` the project's id there: any number of labelq databases can share
one Redis database, and a rebuild, a project's deletion or an applier of one never touches
another's keys. The braces are a Redis Cluster hash tag: one project's keys share a slot
(the Lua scripts touch several at once). The projects with hot state of database ``D`` are
the set ``lq:{D}:projects`` (:func:`projects_key`); its export jobs are
``lq:{D}:job:<id>`` (:func:`job_key`) and ``lq:{D}:exports`` (:func:`exports_key`);
``lq:{D}:replid`` is the replication id the beat last saw (:func:`replication_key`,
``labelq.live.failover``). :func:`parse_key` reads a key back (``labelq check`` counts the
keys of other databases with it).

=========================  ======  =====  ====================================================
key (after the prefix)     type    TTL    meaning
=========================  ======  =====  ====================================================
``meta``                   HASH    none   built=1, n_tasks, n_workers, cap (set by a rebuild;
                                          cap follows ``project update``), epoch (bumped by
                                          ``gold correct``: every holder refolds its state);
                                          while ``pending`` is streamed in after a lazy
                                          rebuild: warming (tasks in the plan), warm_pos
                                          (how many are in), warm_at (ms of the last chunk)
``warm``                   STRING  none   the plan of a lazy rebuild: the seqs still to come
                                          into ``pending`` (int64, by priority; deleted with
                                          its last chunk: ``labelq.live.backfill``)
``warm_base``              STRING  none   per plan position (int32 x3): the task's
                                          ``nlabels`` and ``applied`` counts held back
                                          by the rebuild, and where its workers start
                                          in ``warm_seen`` (one more record: the end);
                                          its chunk adds them (deleted with ``warm``)
``warm_seen``              STRING  none   the workers (int32) whose ``seen`` sets get the
                                          planned tasks with their chunk, by position
``warm_ix``                STRING  none   per task seq (int32): its position in the plan,
                                          -1 for none (absolute writers of ``applied``)
``pending``                ZSET    none   open non-gold task seq -> policy priority (higher =
                                          ask sooner); a task leaves it when labels + live
                                          leases reach the cap, and comes back on release
``parked``                 ZSET    none   task seq -> priority of tasks at the cap only
                                          because of live leases (return on release)
``settled``                SET     none   task seqs a model settled alone, out of
                                          ``pending`` (``auto:min_human_labels=0``;
                                          ``labelq.live.modelsettled``)
``gold``                   SET     none   gold task seqs (exempt from the cap)
``inbox:{w}``              LIST    none   assignment ids the applier reserved ahead of time
                                          for worker w (held reservations: their lease hash
                                          expires 30 s after the refill until popped)
``lease:{a}``              HASH    lease  task, worker, gold, cost, expires (ms; the hold
                                          while in an inbox, the lease once issued), tid
                                          (SQL task id, may be empty), submitting
                                          (1 once the label is being written to SQL)
``leases``                 ZSET    none   assignment id -> expiry in ms (for the reaper)
``open:{w}``               ZSET    none   assignment id -> expiry of the leases issued to
                                          worker w (popped or decided at once), pruned as
                                          they end: bounds their number (``max_open``)
``nlabels``                HASH    none   task seq -> labels recorded (SQL) and counted
``reserved``               HASH    none   task seq -> live leases and held reservations
``applied``                HASH    none   task seq -> labels folded into the posterior (the
                                          rest of ``nlabels`` is still on its way: ``next``
                                          prefers tasks with nothing outstanding)
``seen:{w}``               SET     none   task seqs ever issued to worker w
``wcount``                 HASH    none   worker seq -> labels + live leases (capacity)
``nissued``                HASH    none   worker seq -> assignments ever issued, and
                                          "g{seq}" -> gold ones among them (gold schedule);
                                          an inbox reservation counts when made and is
                                          taken back if released before it was popped;
                                          "ga{seq}" / "gr{seq}" -> the worker's gold
                                          answers applied / right among them (written by
                                          the applier from SQL: gold on suspicion);
                                          "aa{seq}" / "ar{seq}" -> its labels checked by
                                          agreement / judged right (soft counts, written
                                          by the applier from the policy state: issue 41);
                                          "o{seq}" -> ordinary-task decisions owed to the
                                          worker (its held ordinary reservations others
                                          reclaimed: :func:`owed_field`)
``spent``                  STRING  none   cost of the recorded labels (float)
``reserved_cost``          STRING  none   cost of the live leases (float)
``state``                  STRING  none   snapshot of the policy state and the view's task
                                          arrays (binary: ``labelq.live.snapshot``)
``state_seq``              STRING  none   last ``Label.applied_seq`` folded into ``state``
``pushed_seq``             STRING  none   last ``Label.applied_seq`` whose tasks' priorities
                                          and ``applied`` counts are written here (set by
                                          the applier after a batch's Redis writes)
``apply_lock``             STRING  PX     the applier's lock (token), one applier a project
``apply_wanted``           STRING  PX     set when labels await the applier (wake-up flag;
                                          30 s, so a crash cannot silence wake-ups)
``apply_retry``            STRING  PX     id of the one Celery task retrying while another
                                          applier holds the lock (3 s, renewed per retry)
``rebuild_gate``           STRING  PX     held by the one process rebuilding the hot state
``gold_queued``            STRING  none   set while gold marks wait for an assignment to end
                                          (``pending_gold_mark``): the applier's run then
                                          looks for those it can apply (labelq.live.goldmark)
``declines``               LIST    none   "task:worker" declines awaiting the applier
``declining``              HASH    none   assignment id -> "task:worker:task id:gold:ms" of a
                                          decline released here whose SQL row or entry in
                                          ``declines`` is not written yet (``labelq.live.
                                          decline``: its retry or the beat finishes it)
``active``                 ZSET    none   worker seq -> last request (ms); those of the last
                                          60 s get inbox refills
``requests``               HASH    none   worker seq -> next-assignment requests ever made
                                          (the refill sizes inboxes to each worker's pace)
=========================  ======  =====  ====================================================

``lease:{a}`` expires in Redis one grace period after the lease itself, so a key is never
left behind; the reaper normally removes it first.

Field and member encodings are made here too: the gold counters in ``nissued``
(:func:`gold_issued_field`, :func:`gold_category_field`; the Lua scripts spell them
``'g' .. w`` and ``'g' .. w .. ':' .. c``; :func:`gold_record_fields`, :func:`gold_records`,
:func:`agreement_fields`, :func:`agreement_records`)
and the ``declines`` entries (:func:`decline_entry`, :func:`parse_decline`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, NamedTuple

__all__ = ["Keys", "projects_key", "home_key", "job_key", "exports_key", "replication_key",
           "parse_key",
           "KeyOwner", "gold_issued_field", "gold_category_field", "gold_record_fields",
           "gold_records", "agreement_fields", "agreement_records", "owed_field", "decline_entry",
           "parse_decline"]

_DATABASE = re.compile(r"[0-9a-z]{1,32}")


def _database(database: str) -> str:
    if not isinstance(database, str) or not _DATABASE.fullmatch(database):
        raise ValueError(f"not a database identity: {database!r}")
    return database


def projects_key(database: str) -> str:
    """SET of the ids of database ``database``'s projects with hot state (for the beat and
    the warmer)."""
    return f"lq:{{{_database(database)}}}:projects"


def replication_key(database: str) -> str:
    """STRING: the replication id (``INFO replication``'s ``master_replid``) of the master
    database ``database``'s beat last saw (``labelq.live.failover``): another one whose
    ``master_replid2`` is it means a replica was promoted."""
    return f"lq:{{{_database(database)}}}:replid"


def home_key(database: str) -> str:
    """STRING naming where database ``database`` lives (``labelq.live.home``): claimed by
    the first process to use the identity on this Redis; a copy of the database (same
    identity, another place) is refused by it."""
    return f"lq:{{{_database(database)}}}:home"


def job_key(database: str, job_id: str) -> str:
    """HASH of export job ``job_id`` of database ``database`` (:mod:`labelq.jobs`): under
    the database's prefix, so an operator of another database never reads it."""
    return f"lq:{{{_database(database)}}}:job:{job_id}"


def exports_key(database: str) -> str:
    """HASH of database ``database``'s export jobs that are queued or running: the export
    they make (project, method, format, raw, exclude_paused) -> job id (:mod:`labelq.jobs`:
    a second request for the same export returns that job)."""
    return f"lq:{{{_database(database)}}}:exports"


class KeyOwner(NamedTuple):
    """Whose key a Redis key is: its database's identity (``None``: a key of labelq before
    keys carried one, ``lq:P:...`` or ``lq:projects``) and project id (``None``: the
    database's own ``projects`` set)."""

    database: str | None
    project_id: int | None


_OWNED = re.compile(rb"^lq:\{([0-9a-z]{1,32})(?::([0-9]+))?\}:")
_LEGACY = re.compile(rb"^lq:(?:([0-9]+):|projects$)")


def parse_key(key: bytes | str) -> KeyOwner | None:
    """The owner of a labelq key (the hot state's, and export jobs' ``lq:{D}:job:...``,
    owned by their database); ``None`` for any other key (the Celery broker's, export jobs
    of a labelq before they named their database, ``lq:job:...``)."""
    raw = key.encode() if isinstance(key, str) else key
    m = _OWNED.match(raw)
    if m:
        return KeyOwner(m.group(1).decode(), int(m.group(2)) if m.group(2) else None)
    m = _LEGACY.match(raw)
    if m:
        return KeyOwner(None, int(m.group(1)) if m.group(1) else None)
    return None


class Keys:
    """Key names of project ``project_id`` of database ``database``:
    ``Keys(7, "a1b2").pending == "lq:{a1b2:7}:pending"``."""

    __slots__ = ("project_id", "database", "prefix")

    def __init__(self, project_id: int, database: str) -> None:
        self.project_id = int(project_id)
        self.database = _database(database)
        self.prefix = f"lq:{{{self.database}:{self.project_id}}}:"

    @property
    def projects(self) -> str:
        """The database's set of projects with hot state (:func:`projects_key`)."""
        return projects_key(self.database)

    def _k(self, name: str) -> str:
        return self.prefix + name

    meta = property(lambda self: self._k("meta"))
    pending = property(lambda self: self._k("pending"))
    parked = property(lambda self: self._k("parked"))
    settled = property(lambda self: self._k("settled"))
    gold = property(lambda self: self._k("gold"))
    leases = property(lambda self: self._k("leases"))
    nlabels = property(lambda self: self._k("nlabels"))
    reserved = property(lambda self: self._k("reserved"))
    applied = property(lambda self: self._k("applied"))
    wcount = property(lambda self: self._k("wcount"))
    nissued = property(lambda self: self._k("nissued"))
    spent = property(lambda self: self._k("spent"))
    reserved_cost = property(lambda self: self._k("reserved_cost"))
    state = property(lambda self: self._k("state"))
    state_seq = property(lambda self: self._k("state_seq"))
    pushed_seq = property(lambda self: self._k("pushed_seq"))
    warm = property(lambda self: self._k("warm"))
    warm_base = property(lambda self: self._k("warm_base"))
    warm_seen = property(lambda self: self._k("warm_seen"))
    warm_ix = property(lambda self: self._k("warm_ix"))
    apply_lock = property(lambda self: self._k("apply_lock"))
    apply_wanted = property(lambda self: self._k("apply_wanted"))
    apply_retry = property(lambda self: self._k("apply_retry"))
    rebuild_gate = property(lambda self: self._k("rebuild_gate"))
    declines = property(lambda self: self._k("declines"))
    gold_queued = property(lambda self: self._k("gold_queued"))
    declining = property(lambda self: self._k("declining"))
    active = property(lambda self: self._k("active"))
    requests = property(lambda self: self._k("requests"))

    def inbox(self, worker: int) -> str:
        return self._k(f"inbox:{int(worker)}")

    def lease(self, assignment_id: str) -> str:
        return self._k(f"lease:{assignment_id}")

    def seen(self, worker: int) -> str:
        return self._k(f"seen:{int(worker)}")

    def open_leases(self, worker: int) -> str:
        return self._k(f"open:{int(worker)}")

    def pattern(self) -> str:
        """Glob matching every key of the project (for a rebuild's cleanup), and no key of
        another project or database (braces are not special in Redis globs)."""
        return self.prefix + "*"


def gold_issued_field(worker: int) -> str:
    """``nissued`` field counting the gold questions issued to ``worker``."""
    return f"g{int(worker)}"


def gold_record_fields(worker: int) -> tuple[str, str]:
    """``nissued`` fields of ``worker``'s gold record: answers applied, right among them."""
    return f"ga{int(worker)}", f"gr{int(worker)}"


def gold_records(workers: Iterable[int], answered: Any, right: Any) -> dict[str, int]:
    """The ``nissued`` fields and values of the gold records of ``workers`` (worker
    ``workers[i]`` answered ``answered[i]`` gold questions, ``right[i]`` of them right);
    workers with no gold answer are left out."""
    out: dict[str, int] = {}
    for w, n, c in zip(workers, answered, right, strict=True):
        if n:
            fields = gold_record_fields(w)
            out[fields[0]], out[fields[1]] = int(n), int(c)
    return out


def agreement_fields(worker: int) -> tuple[str, str]:
    """``nissued`` fields of ``worker``'s agreement record: labels checked, right among
    them (soft counts)."""
    return f"aa{int(worker)}", f"ar{int(worker)}"


def agreement_records(workers: Iterable[int], answered: Any, right: Any) -> dict[str, str]:
    """The ``nissued`` fields and values (rounded to 0.01) of the agreement records of
    ``workers``; workers with nothing checked are left out."""
    out: dict[str, str] = {}
    for w, n, c in zip(workers, answered, right, strict=True):
        if n > 0:
            fields = agreement_fields(w)
            out[fields[0]], out[fields[1]] = f"{float(n):.2f}", f"{min(float(c), float(n)):.2f}"
    return out


def owed_field(worker: int) -> str:
    """``nissued`` field counting the ordinary-task decisions owed to ``worker``: its held
    reservations of ordinary tasks that other workers reclaimed (:meth:`.scripts.Scripts.
    release` with ``keep_decision``). Its next decisions are ordinary tasks again, drawing
    no gold, until they are paid (``RESERVE`` takes one back per ordinary task it issues;
    the field is deleted at 0): gold is never reclaimed, so without this a reclaimed slot
    was drawn again, and its worker got more gold than the schedule's rate."""
    return f"o{int(worker)}"


def gold_category_field(worker: int, category: int) -> str:
    """``nissued`` field counting the gold questions of category index ``category``
    issued to ``worker``."""
    return f"g{int(worker)}:{int(category)}"


def decline_entry(task: int, worker: int) -> str:
    """A ``declines`` list entry: ``"task:worker"`` (seqs)."""
    return f"{int(task)}:{int(worker)}"


def parse_decline(entry: bytes | str) -> tuple[int, int]:
    """(task seq, worker seq) of a ``declines`` entry."""
    raw = entry.decode() if isinstance(entry, bytes) else entry
    task, worker = raw.split(":")
    return int(task), int(worker)
