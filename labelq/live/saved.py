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
from typing import Any

import numpy as np
from sqlalchemy import update
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from ..record.db import session_scope
from ..record.models import SavedState, utcnow
from . import snapshot as binary

# (the reading side lives in :mod:`.hotstate`, which loads a saved state when Redis has no
# snapshot: here it would make an import circle)
from .hotstate import SAVED_FORMAT, SAVED_VERSION, Hot, _gold, _identity_text, load_saved, n_applied

__all__ = ["FORMAT", "gold_digest", "save_state", "load_saved", "delete_saved", "n_applied"]

log = logging.getLogger(__name__)
FORMAT = SAVED_FORMAT
__version__ = SAVED_VERSION


def gold_digest(hot: Hot) -> str:
    """The digest of the gold questions (task seqs) and their answers (label indexes) of
    the state's view: what its fold's gold truths were."""
    view = hot.view
    seqs = np.flatnonzero(view.is_gold)
    return _gold(seqs, view.gold_answer[seqs], list(hot.project.labels))


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
