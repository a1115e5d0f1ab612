"""Tasks a model settles alone leave ``pending`` (issue 42, ``auto:min_human_labels=0``).

With ``min_human_labels=0`` the operator lets a model's prediction settle a task with no
human label (SageMaker-style): once the posterior on the model's measured evidence alone
reaches ``auto``'s confidence, the task is done, and a human label there would be spent
against the operator's choice. ``auto`` keeps every settled task in ``pending`` at a
negative priority (asked again only when no unsettled task is left), so such a task left
``pending`` only at the cap. Here it leaves ``pending`` once settled, and is kept in the
``settled`` set; it comes back when it is no longer settled — a refit measured the model
worse, or the model's version changed (a predictions load or remove bumps the epoch, every
holder folds again, and the new version is measured afresh from the labels: a task it does
not settle comes back) — and only while it is open:
its recorded labels plus live leases below the cap (a task out of ``pending`` cannot be
reserved, so the counts read before the ZADD cannot change in between).

:func:`sync_settled` is called by the applier after each batch's priorities (and on the
first batch of a freshly folded state, whether labels came or not) and by a rebuild.
A lease released on a settled task returns it to ``parked`` only (where it never was), so
it stays out of ``pending``; a task put back by another path is taken out at the next
batch.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .backfill import unstreamed
from .redis.keys import Keys

__all__ = ["model_settled", "sync_settled"]


def model_settled(policy: Any, state: Any, is_gold: np.ndarray) -> np.ndarray:
    """bool (n_tasks,): tasks a model settled alone — no human label applied, a prediction,
    the posterior at the policy's confidence — under a policy with ``min_human_labels``
    0 (else none)."""
    T = int(np.asarray(is_gold).size)
    params = getattr(policy, "params", None)
    cell = getattr(state, "model_cell", None)
    if params is None or getattr(params, "min_human_labels", 1) != 0 or cell is None \
            or cell.size == 0:
        return np.zeros(T, dtype=bool)
    cand = np.flatnonzero((np.asarray(state.n_labels) == 0) & (cell >= 0).any(axis=0)
                          & ~np.asarray(is_gold, bool))
    out = np.zeros(T, dtype=bool)
    if cand.size:
        post = policy.predict_proba(state)[cand]
        out[cand] = post.max(axis=1) >= float(params.confidence)
    return out


def sync_settled(redis: Any, k: Keys, policy: Any, state: Any, is_gold: np.ndarray,
                 cap: int | None, pipeline: Any = None) -> tuple[int, int]:
    """Take the tasks a model settled alone out of ``pending`` (into ``settled``) and put
    back those no longer settled while open (module doc). Returns (taken out, put back)."""
    settled = model_settled(policy, state, is_gold)
    members = {int(x) for x in redis.smembers(k.settled)}
    new = [int(t) for t in np.flatnonzero(settled) if int(t) not in members]
    gone = sorted(t for t in members if t >= settled.size or not settled[t])
    pipe = pipeline or redis.pipeline(transaction=False)
    if new:
        pipe.zrem(k.pending, *new)
        pipe.sadd(k.settled, *new)
    back: list[int] = []
    if gone:
        known = [t for t in gone if t < settled.size]
        # a task a lazy rebuild's stream has not brought in yet stays in ``settled`` (its
        # counts are not all in; the stream skips it): a later call puts it back
        held = unstreamed(redis, k, known)
        known = [t for t, h in zip(known, held, strict=True) if not h]
        stale = [t for t in gone if t >= settled.size]
        if known:
            n = redis.hmget(k.nlabels, known)
            live = redis.hmget(k.reserved, known)
            for t, a, b in zip(known, n, live, strict=True):
                if cap is None or int(a or 0) + int(b or 0) < cap:
                    back.append(t)
        if back:
            pri = policy.priority(state, np.asarray(back, np.int64))
            pipe.zadd(k.pending, {t: float(p) for t, p in zip(back, pri, strict=True)},
                      nx=True)
        if back or stale:
            pipe.srem(k.settled, *back, *stale)
    if pipeline is None:
        pipe.execute()
    return len(new), len(back)
