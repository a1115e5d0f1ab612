"""Group execution: the threads of one process share one batch (group commit).

``Group(run).call(item)`` queues ``item`` and returns once a batch holding it has run. The
first caller to take the leader lock drains the queue and runs ``run(batch)`` for every item
queued so far; callers that arrive meanwhile queue up behind the lock, and the next leader
takes them all at once. So under load one SQL transaction (or one Redis pipeline) serves
several requests, and each caller still returns only after *its* item was processed — for a
submit, after its label is committed.

``run(batch)`` must set ``item.result`` (or ``item.error``) on each item; an exception out
of ``run`` is given to every item of the batch that has neither.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

__all__ = ["Group", "Item"]


class Item:
    __slots__ = ("args", "result", "error", "done")

    def __init__(self, args: Any) -> None:
        self.args = args
        self.result: Any = None
        self.error: BaseException | None = None
        self.done = False


class Group:
    def __init__(self, run: Callable[[list[Item]], None]) -> None:
        self._run = run
        self._queue: list[Item] = []
        self._queue_lock = threading.Lock()
        self._leader = threading.Lock()

    def call(self, args: Any) -> Any:
        item = Item(args)
        with self._queue_lock:
            self._queue.append(item)
        with self._leader:
            if not item.done:
                with self._queue_lock:
                    batch, self._queue = self._queue, []
                try:
                    self._run(batch)
                except BaseException as exc:  # noqa: BLE001 - handed to every caller
                    for it in batch:
                        if it.error is None and not it.done:
                            it.error = exc
                finally:
                    for it in batch:
                        it.done = True
        if item.error is not None:
            raise item.error
        return item.result
