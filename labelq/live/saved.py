"""The folded policy state in SQL: what outlives Redis (issue 44).

Losing Redis (a restart without persistence, a failover to an empty replica, a ``FLUSHDB``)
used to cost a fold of every applied label before anyone got work (1M tasks, 200k labels,
``auto``: most of a 16–49 s first ``next``). The applier therefore also keeps its snapshot
(:func:`.hotstate.encode_snapshot`'s bytes: the state and the view's task arrays) in the
``saved_state`` table (:class:`labelq.record.models.SavedState`), one row per project, at
most every ``Tuning.saved_every_s`` seconds, and a rebuild writes the row it folded. A
rebuild (:func:`.rebuild.rebuild_project`, so also ``ensure_hot`` after a flush) starts
from it and folds only the labels applied after its ``applied_seq``.

A snapshot is only a shortcut; SQL decides. The row is used only when everything the state
was folded from is as it was (:func:`load_saved` checks each, cheapest first, and says
why not in the log):

* the same project (name and creation time: SQLite reuses a deleted project's id), labelq
  version and snapshot format, policy spec, layout of the policy's state
  (``Policy.state_version``) and (budget-aware policy) budget and cap;
* the same task count (tasks loaded since: their arrays are not in it);
* the same gold questions and answers (:func:`gold_digest` of the state's view against the
  task rows': ``gold mark`` and ``gold correct`` change them);
* the same labels up to its sequence: as many with ``applied_seq <= applied_seq`` as were
  folded (a label deleted), and none applied beyond the project's highest;
* its bytes as written (``digest``: a damaged row) and readable.

Else the state is folded from the labels as before. ``project delete`` deletes the row.
"""

from __future__ import annotations

import hashlib
import logging
import time
from typing import Any

import numpy as np
from sqlalchemy import func, update
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

import labelq as _package

from ..policies import build
from ..record.db import database_id, session_scope
from ..record.models import Label, Project, SavedState, Task, utcnow
from ..record.problem import gc_paused
from . import snapshot as binary
from .hotstate import Hot, _identity, _limits, _replay, _snapshot_view, _task_span, decode_snapshot

__all__ = ["FORMAT", "gold_digest", "save_state", "load_saved", "delete_saved", "n_applied"]

#: the labelq version a saved state is written under, checked when it is read (read from
#: the package, not imported by name: ``labelq``'s own names are the app layer's)
__version__: str = _package.__version__
log = logging.getLogger(__name__)

# the layout of ``body`` (the binary snapshot's magic; a zlib-JSON body is marked too)
FORMAT = binary.MAGIC.decode()


def _gold(seqs: np.ndarray, answers: np.ndarray, labels: list[str]) -> str:
    h = hashlib.sha256()
    h.update("\x1f".join(labels).encode())
    h.update(np.ascontiguousarray(seqs, dtype="<i8").tobytes())
    h.update(np.ascontiguousarray(answers, dtype="<i8").tobytes())
    return h.hexdigest()


def gold_digest(hot: Hot) -> str:
    """The digest of the gold questions (task seqs) and their answers (label indexes) of
    the state's view: what its fold's gold truths were."""
    view = hot.view
    seqs = np.flatnonzero(view.is_gold)
    return _gold(seqs, view.gold_answer[seqs], list(hot.project.labels))


def _sql_gold_digest(session: Session, project: Project) -> str:
    """:func:`gold_digest` of the task rows now (the gold ones, through their index
    ``ix_task_project_gold``; sorted here: with ``ORDER BY seq`` SQLite walked the
    ``(project_id, seq)`` index over every task of the project instead, 0.11 s at 400,000
    tasks for no gold question)."""
    rows = session.exec(select(col(Task.seq), col(Task.gold_answer))
                        .where(col(Task.project_id) == project.id, col(Task.is_gold))).all()
    index = {v: i for i, v in enumerate(project.labels)}
    seqs = np.array([int(s) for s, _a in rows], dtype=np.int64)
    answers = np.array([index.get(a, -1) if a is not None else -1 for _s, a in rows],
                       dtype=np.int64)
    order = np.argsort(seqs, kind="stable")
    return _gold(seqs[order], answers[order], list(project.labels))


def n_applied(session: Session, project_id: int, upto: int) -> int:
    """How many of the project's labels were applied at or before ``upto``."""
    return int(session.exec(select(func.count()).select_from(Label).where(
        col(Label.project_id) == project_id, col(Label.applied_seq).is_not(None),
        col(Label.applied_seq) <= upto)).one())


def _identity_text(project: Project) -> str:
    return "\x1f".join(_identity(project))


def save_state(engine: Engine, hot: Hot, blob: bytes, *, gold: str | None = None,
               seq: int | None = None) -> bool:
    """Keep ``blob`` (the snapshot of ``hot`` at applied sequence ``seq``, by default
    ``hot.seq``; ``gold``: :func:`gold_digest` of ``hot`` taken with it, under its lock)
    as the project's saved state, unless a row of a later sequence under the same gold is
    there. One transaction; two writers racing for a new row: one keeps it. True if
    written."""
    seq = hot.seq if seq is None else seq
    gold = gold_digest(hot) if gold is None else gold
    pid = hot.project_id
    with session_scope(engine) as session:
        n = n_applied(session, pid, seq)
        # (the columns, not the row: its body is the size of the snapshot)
        had = session.exec(select(col(SavedState.applied_seq), col(SavedState.gold))
                           .where(col(SavedState.project_id) == pid)).first()
        if had is not None and had[0] > seq and had[1] == gold:
            return False
        fields: dict[str, Any] = {
            "applied_seq": seq, "n_applied": n, "n_tasks": hot.view.n_tasks, "gold": gold,
            "identity": _identity_text(hot.project), "version": __version__,
            "format": FORMAT if binary.is_binary(blob) else "zlib-json",
            "digest": hashlib.sha256(blob).hexdigest(), "written": utcnow(), "body": blob}
        if had is None:
            session.add(SavedState(project_id=pid, **fields))
        else:
            session.exec(update(SavedState).where(col(SavedState.project_id) == pid)
                         .values(**fields))
        try:
            session.flush()
        except IntegrityError:  # another writer's new row came first: it stands
            session.rollback()
            return False
    return True


def delete_saved(session: Session, project_id: int) -> int:
    """Delete the project's saved state (``project delete``), in the caller's transaction."""
    row = session.get(SavedState, project_id)
    if row is None:
        return 0
    session.delete(row)
    return 1


def load_saved(session: Session, project: Project) -> tuple[Hot, int, int] | None:
    """The project's state from its saved row, caught up with the labels applied since
    (folded here), how many those were and the row's sequence; None when there is no row or it does not
    hold (module docstring: then fold from the labels)."""
    pid = project.id
    assert pid is not None  # a stored project
    started = time.monotonic()
    row = session.get(SavedState, pid)
    if row is None:
        return None

    def refuse(why: str) -> tuple[Hot, int, int] | None:
        log.warning("project %s: saved state at applied seq %s not used: %s", pid,
                    row.applied_seq, why)
        return None

    policy = build(project.policy)
    if row.identity != _identity_text(project):
        return refuse("another project's (a deleted one's id)")
    if row.version != __version__ or row.format not in (FORMAT, "zlib-json"):
        return refuse(f"written by labelq {row.version} in format {row.format} "
                      f"(this is {__version__}, {FORMAT})")
    n_tasks = _task_span(session, pid)
    if row.n_tasks != n_tasks:
        return refuse(f"{row.n_tasks} tasks, the project has {n_tasks}")
    if row.gold != _sql_gold_digest(session, project):
        return refuse("gold questions or answers changed since (gold mark, gold correct)")
    if n_applied(session, pid, row.applied_seq) != row.n_applied:
        return refuse(f"{row.n_applied} labels were folded up to it, SQL has "
                      f"{n_applied(session, pid, row.applied_seq)} (labels deleted?)")
    blob = bytes(row.body)
    if hashlib.sha256(blob).hexdigest() != row.digest:
        return refuse("damaged (its bytes do not match their digest)")
    try:
        with gc_paused():
            snap = decode_snapshot(blob)
            del blob
            if snap.get("project", _identity(project)) != _identity(project) or \
                    int(snap["seq"]) != row.applied_seq:
                return refuse("its snapshot is not the row's")
            if snap["policy"] != project.policy or \
                    (policy.budget_aware and snap.get("limits") != _limits(project)):
                return refuse("made under another policy spec, budget or cap")
            view = _snapshot_view(session, project, snap, snap.get("epoch", 0))
            if view is None:
                from ..record.problem import load_view
                view = load_view(session, project)
            if tuple(snap["dims"]) != view.dims:
                return refuse(f"its dimensions {tuple(snap['dims'])} are not the "
                              f"project's {view.dims} (annotators enrolled since)")
            if snap.get("models", []) != sorted(view.predictions or ()):
                # (a predictions load or remove since: the state was folded with other models)
                return refuse(f"folded with the models {snap.get('models', [])}, the latest "
                              f"in SQL are {sorted(view.predictions or ())}")
            if snap.get("state_version", 1) != policy.state_version:
                return refuse(f"its {policy.name} state is of layout "
                              f"{snap.get('state_version', 1)}, this labelq's is "
                              f"{policy.state_version}")
            state = policy.state_from_dict(snap["state"])
    except Exception as exc:  # noqa: BLE001 - an unreadable row is only a shortcut missed
        log.warning("project %s: saved state unreadable, folded from the labels: %r", pid,
                    exc)
        return None
    hot = Hot(view, policy, state, row.applied_seq, database=database_id(session))
    folded = _replay(session, hot)
    log.info("project %s: saved state at applied seq %s loaded, %s later labels folded "
             "(%.2f s)", pid, row.applied_seq, folded, time.monotonic() - started)
    return hot, folded, row.applied_seq
