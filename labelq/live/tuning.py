"""The live engine's tunables in one frozen object, made at the edge and passed in.

None of these is read from the environment (the deployment's knobs are :class:`labelq.
settings.Settings`); they are the engine's constants, gathered here so that each is written
once and a test or a benchmark can change one (``Tuning(top_k=4)``) without patching
modules. The defaults are what production runs.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Tuning", "TUNING"]


@dataclass(frozen=True)
class Tuning:
    # --- deciding (labelq.live.decide) ----------------------------------------------------
    top_k: int = 64  # the first window of ``pending`` a decision looks at
    enough: int = 16  # a window's scan stops once this many settled candidates turned up
    settled_scan: int = 1024  # tasks looked at beyond the first window for a settled one
    max_scan: int = 100_000  # never look deeper into ``pending`` than this
    gold_sample: int = 64  # gold questions drawn (SRANDMEMBER) when one is due
    # tries after a lost race: re-choices within a window, re-decisions on moved gold
    # counts, pops after the inbox was refilled meanwhile
    retries: int = 8
    # --- inboxes (labelq.live.refill, labelq.live.assign) ----------------------------------
    hold_ms: int = 30_000  # an unpopped inbox reservation returns to the pool after this
    active_ms: int = 60_000  # workers who asked this recently get their inbox refilled
    lookahead_s: float = 0.5  # an inbox holds what its worker asks for in this long
    pace_weight: float = 0.5  # weight of the latest rate in a worker's pace
    min_left_ms: int = 1_000  # a held reservation with less hold left is skipped
    reclaim_scan: int = 256  # held reservations looked at by a worker reclaiming one
    reclaim_tries: int = 4  # RELEASE attempts of a reclaim
    rows_kept: int = 200_000  # task rows kept per project in an applier process
    # --- caches ---------------------------------------------------------------------------
    state_max_age: float = 0.5  # an API process's policy state is at most this far behind
    # ... and once this share of that old it is caught up in the background, so no request
    # waits for the catch-up
    state_refresh_share: float = 0.5
    worker_max_age: float = 1.0  # worker and project rows cached this long (a pause)
    refill_state_max_age: float = 1.0  # the applier's state when it refills outside a run
    # an idle applier process loads the state of every project with hot state and catches
    # it up this often (labelq.live.warm; 0: only at a run, as it needs it)
    warm_every_s: float = 1.0
    # --- applier (labelq.live.applier) -----------------------------------------------------
    wanted_ttl_ms: int = 30_000  # ``apply_wanted`` outlives one batch
    retry_ttl_ms: int = 3_000  # ``apply_retry``: the one retrier's claim, renewed per retry
    retry_countdown_s: float = 1.0  # a busy run retries this much later
    apply_batch: int = 2000  # labels folded per SQL transaction
    lock_ttl_ms: int = 10_000  # ``apply_lock``, extended per batch
    refill_every_s: float = 0.05  # inbox refills while labels keep arriving
    linger_below: int = 64  # after a batch smaller than this ...
    linger_s: float = 0.01  # ... wait this long so the next one is bigger
    snapshot_every_s: float = 2.0  # a Redis snapshot of the policy state at most this often
    snapshot_share: int = 20  # ... or every this many times the last snapshot's duration
    # the snapshot kept in SQL too (labelq.live.saved: what a rebuild after losing Redis
    # starts from), with a Redis snapshot at most this often (or every snapshot_share
    # times the last SQL write's duration, if longer); 0: never by the applier
    saved_every_s: float = 30.0
    # --- reaper (labelq.live.reaper) -------------------------------------------------------
    submit_grace_ms: int = 60_000  # a lease being submitted is left alone this long
    reap_grace_ms: int = 2_000  # leases are expired this long after their expiry

    def lease_key_ttl_ms(self, lease_ms: int) -> int:
        """TTL of a lease hash: the lease, plus room for a submit in progress and the
        reaper."""
        return lease_ms + 2 * self.submit_grace_ms


TUNING = Tuning()
