"""Group execution: the threads of one process share batches (group commit), and successive
batches overlap stage by stage.

``Group(stage_1, …, stage_n).call(args)`` queues ``args`` and returns once a batch holding
it has run through every stage. A caller that finds no batch being formed becomes the
leader: it takes every item queued so far and runs the stages on them in order; callers that
arrive meanwhile queue up, and the first of them leads the next batch as soon as this one
has entered its second stage. Each stage runs one batch at a time, in batch order (a batch
takes stage *i + 1* before it lets go of stage *i*), so stage 1 of batch *k + 1* runs while
batch *k* is in stage 2 — for a submit, the next batch's ``SUBMIT_BEGIN`` round trip
overlaps this batch's SQL commit, and its commit this batch's ``SUBMIT_FINISH`` — much as
the stages of MySQL's binary-log group commit (flush, sync, commit) each have their own
queue. Each caller still returns only after *its* item was processed: for a submit, after
its label is committed.

A stage ``run(items)`` gets the items of the batch still open and may finish any of them by
setting ``item.result`` or ``item.error`` (later stages do not see them, and their callers
return at once — except the leader's, which runs the batch to its end); ``item.state`` carries what one stage leaves for the next. An exception out of a
stage is given to every item it was running. An item still open after the last stage
returns ``item.result`` (``None`` unless set).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

__all__ = ["Group", "Item"]


class Item:
    __slots__ = ("args", "result", "error", "state", "done", "_wake")

    def __init__(self, args: Any) -> None:
        self.args = args
        self.result: Any = None
        self.error: BaseException | None = None
        self.state: Any = None
        self.done = False
        self._wake: threading.Lock | None = None  # held while the caller must wait


class Group:
    def __init__(self, *stages: Callable[[list[Item]], None]) -> None:
        if not stages:
            raise ValueError("a group needs at least one stage")
        self._stages = stages
        self._stage_locks = [threading.Lock() for _ in stages]
        self._mutex = threading.Lock()
        self._queue: list[Item] = []  # waiting for the next batch; queue[0] will lead it
        self._forming = False  # a leader is taking or running the first stage

    def call(self, args: Any) -> Any:
        item = Item(args)
        with self._mutex:
            if self._forming:  # a batch is in its first stage: wait for a later one
                item._wake = threading.Lock()
                item._wake.acquire()
                self._queue.append(item)
            else:
                self._forming = True
        if item._wake is not None:
            item._wake.acquire()  # released when the item is done, or when it is to lead
        if not item.done:
            self._lead(item)
        if item.error is not None:
            raise item.error
        return item.result

    def _lead(self, leader: Item) -> None:
        with self._mutex:
            batch = [leader] + [it for it in self._queue if it is not leader]
            self._queue = []
        held, handed = None, False
        try:
            for i, (stage, lock) in enumerate(zip(self._stages, self._stage_locks, strict=True)):
                live = [it for it in batch if not it.done]
                if not live:
                    break
                lock.acquire()  # the previous batch has left this stage
                if held is not None:
                    held.release()
                held = lock
                if i == 1:  # the first stage is free: the next batch may start
                    self._next_leader()
                    handed = True
                try:
                    stage(live)
                except BaseException as exc:  # noqa: BLE001 - handed to every caller
                    for it in live:
                        if it.error is None and it.result is None:
                            it.error = exc
                for it in live:
                    if it.error is not None or it.result is not None:
                        self._finish(it, leader)
        finally:
            if held is not None:
                held.release()
            if not handed:
                self._next_leader()
            for it in batch:
                self._finish(it, leader)

    def _next_leader(self) -> None:
        """The first stage is free for the next batch: wake the first queued caller to lead
        it, or let the next caller lead."""
        with self._mutex:
            if self._queue:
                wake = self._queue[0]._wake
                assert wake is not None  # a queued caller waits on its lock
                wake.release()
            else:
                self._forming = False

    @staticmethod
    def _finish(item: Item, leader: Item) -> None:
        if item.done:
            return
        item.done = True
        if item is not leader and item._wake is not None:
            item._wake.release()
