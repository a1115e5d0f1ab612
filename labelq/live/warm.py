"""Keeping an applier process's states loaded while it is idle (:class:`Warmer`).

Any of a Celery worker's prefork processes may get a project's next applier run (a label's
or a decline's wake-up goes to whichever is free), and a process without the project's
policy state in its cache loads it first: at 1,000,000 tasks it was about 1.4 s of CPU (the
Redis snapshot, then the labels applied since, from SQL) and is a few tenths of a second
since the snapshot is binary and carries the view (:mod:`.snapshot`, issue 36), more under
load, plus the labels applied since the snapshot — holding the apply lock meanwhile, so
labels and declines wait, inboxes are not refilled, and the load competes for the cores
with the API processes exactly when requests want them. A state also ages in a process
that does not run the applier for a while: its next run replays every label the other
processes applied meanwhile.

A :class:`Warmer` is a daemon thread in each applier process (``workers.tasks`` starts one
in every prefork child). Every ``Tuning.warm_every_s`` it looks at the projects with hot
state (``lq:projects``; they appear after the workers start: a project's first request
builds its hot state) and, only while the process runs no task of its own
(``Applier.running``), loads the state of a project it does not hold yet and catches up
one older than that period (a few hundred labels at most under load). So the load happens
when the project appears, off the request path, and a run finds its state at most a
period behind. It reads and folds only — no Redis writes, no apply lock: the state is
the fold of what SQL holds (:mod:`.hotstate`), whoever catches it up; a run that starts
meanwhile waits for a load in progress and follows it (``StateCache``) rather than load
the same state twice.

The price: every applier process holds every hot project's state (memory) and folds
every label once (CPU; the API processes do the same for their decisions).
"""

from __future__ import annotations

import logging
import threading
import time

from ..errors import NotFound
from .applier import Applier

__all__ = ["Warmer"]

log = logging.getLogger(__name__)


class Warmer:
    """Loads and catches up, in the background, the states of an :class:`Applier`'s cache
    (see the module docstring). ``start()`` once per process; ``run_once()`` is one pass."""

    def __init__(self, applier: Applier, every_s: float | None = None) -> None:
        self.applier = applier
        self.every_s = applier.tuning.warm_every_s if every_s is None else every_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def run_once(self) -> list[int]:
        """One pass; returns the projects whose state it loaded or caught up."""
        applier, done = self.applier, []
        for raw in sorted(applier.redis.smembers(applier.projects_key)):
            if applier.running:  # a task of this process: it keeps its own state up
                break
            pid = int(raw)
            age = applier.cache.age(pid)
            if age is not None and age < self.every_s:
                continue
            try:
                applier.cache.get(applier.engine, applier.redis, pid, max_age=self.every_s)
            except NotFound:  # deleted meanwhile (its hot state goes with it)
                continue
            done.append(pid)
        return done

    def start(self) -> Warmer:
        if self.every_s > 0 and self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="labelq-warmer",
                                            daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _loop(self) -> None:
        while not self._stop.wait(self.every_s):
            t = time.monotonic()
            try:
                done = self.run_once()
            except Exception as exc:  # noqa: BLE001 - Redis or SQL away: the next pass
                log.debug("state warmer: %s", exc)
                continue
            if done:
                log.debug("state warmer: %s in %.3f s", done, time.monotonic() - t)
