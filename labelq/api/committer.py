"""The hot path's group commit: one thread per API process runs the submits' batches.

The FastAPI endpoint makes one thread-pool call per submit, and the pool threads share
batches through :class:`labelq.live.group.Group`; each submit then costs a hand-off to a
pool thread, the hand-offs between the batch's threads, and one back to the event loop,
and the process's many threads take turns at the GIL — on two shared cores, context
switches were a fifth of the API's CPU (``perf``). :class:`Committer` gathers the submits
the event loop hands it (:meth:`Committer.submit`) while the previous batch runs, runs
each batch's three stages (:meth:`labelq.live.submit.Submitter.run_batch`: ``SUBMIT_BEGIN``
pipeline, one SQL transaction, ``SUBMIT_FINISH`` pipeline with the inbox pops) in its one
thread, and answers the whole batch with one call into each waiting event loop. Each
submit's future resolves only after the batch's commit, as with the group: an OK still
means the label is durable. Only the batch runs here; what a submit needs after it (finish
one alone, decide its next assignment at once) is the caller's, in the thread pool.
"""

from __future__ import annotations

import asyncio
import queue
import threading

from ..live.submit import BatchOutcome, SubmitJob, Submitter

__all__ = ["Committer"]

_Waiting = tuple[SubmitJob, asyncio.Future[BatchOutcome]]
# a submit's future, and its outcome or what the batch raised for it
_Done = tuple[asyncio.Future[BatchOutcome], BatchOutcome | None, BaseException | None]


class Committer:
    """The :class:`~labelq.service.Batches` of an API process (``Runtime.committer``)."""

    def __init__(self, submitter: Submitter) -> None:
        self.submitter = submitter
        self._queue: queue.SimpleQueue[_Waiting] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()

    def submit(self, job: SubmitJob) -> asyncio.Future[BatchOutcome]:
        """Queue ``job`` for the next batch; call on an event loop. The future resolves to
        the job's outcome (for :meth:`~labelq.live.submit.Submitter.settled` and
        :meth:`~labelq.live.submit.Submitter.complete`) once the batch ran, or raises what
        the batch could not do (an outage: :func:`~labelq.live.submit.unavailable`)."""
        fut: asyncio.Future[BatchOutcome] = asyncio.get_running_loop().create_future()
        if self._thread is None:
            self._start()
        self._queue.put((job, fut))
        return fut

    def _start(self) -> None:
        with self._start_lock:
            if self._thread is None:
                thread = threading.Thread(target=self._run, name="labelq-committer",
                                          daemon=True)
                thread.start()
                self._thread = thread

    def _run(self) -> None:
        q = self._queue
        while True:
            batch = [q.get()]  # wait for a submit, then take every one queued meanwhile
            while True:
                try:
                    batch.append(q.get_nowait())
                except queue.Empty:
                    break
            try:
                items = self.submitter.run_batch([job for job, _ in batch])
                done: list[_Done] = [(fut, it.result, it.error)
                                     for (_, fut), it in zip(batch, items, strict=True)]
            except BaseException as exc:  # noqa: BLE001 - every submit of the batch hears it
                done = [(fut, None, exc) for _, fut in batch]
            by_loop: dict[asyncio.AbstractEventLoop, list[_Done]] = {}
            for one in done:
                by_loop.setdefault(one[0].get_loop(), []).append(one)
            for loop, ones in by_loop.items():
                try:
                    loop.call_soon_threadsafe(_resolve, ones)
                except RuntimeError:  # that loop has closed: nobody waits
                    pass


def _resolve(done: list[_Done]) -> None:
    for fut, result, error in done:
        if fut.cancelled():
            continue
        if error is None and result is not None:
            fut.set_result(result)
        else:
            fut.set_exception(error or RuntimeError("the batch left a submit without outcome"))
