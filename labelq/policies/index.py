"""``PriorityIndex``: tasks ordered by a policy's ``priority``, so a decision scans no pool.

Bucketed lazy max-heap. Tasks with exactly the same priority share a bucket (a min-heap of
task indices, so ties go to the lowest index, as the policies' own tie rule); the distinct
priority values sit in a max-heap. With Opt-KG's integer Beta states most tasks share a few
states, so there are few buckets (a fresh project of a million tasks is one bucket).

* ``update(tasks, priorities)`` re-files only the touched tasks (what ``Policy.update``
  returns), O(log n) each; the old entries are left behind and dropped lazily when met.
* ``top(k, eligible)`` walks buckets from the best value, pops entries, skips stale ones,
  keeps the first k that ``eligible(tasks) -> bool array`` accepts, and pushes back every
  live entry it took out: cost O((k + skipped) log n), independent of the pool size
  otherwise. The caller then lets the policy choose among these candidates
  (``select_task(state, worker, candidates, mask, rng)``); for policies whose ``score`` is
  the ``priority`` (optkg, kg, cvar, uniform) the result equals a full scan.

Pure Python + numpy, no I/O; the live pipeline keeps the same order in a Redis sorted set.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike

__all__ = ["PriorityIndex"]


class PriorityIndex:
    """Max-priority index over tasks ``0..n-1`` (lowest index first among equal priorities)."""

    def __init__(self, priorities: np.ndarray) -> None:
        prio = np.asarray(priorities, dtype=float).copy()
        if np.isnan(prio).any():
            raise ValueError("priorities must not be NaN")
        self._prio = prio
        self._buckets: dict[float, list[int]] = {}
        self._keys: list[float] = []  # heap of -value
        self._entries = 0
        order = np.argsort(-prio, kind="stable")
        values, starts = np.unique(-prio[order], return_index=True)
        bounds = list(starts) + [len(order)]
        for n, neg in enumerate(values):
            # tasks of one value are already ascending (stable sort): a valid min-heap
            self._buckets[float(-neg)] = order[bounds[n]:bounds[n + 1]].tolist()
            self._keys.append(float(neg))
        heapq.heapify(self._keys)
        self._entries = len(prio)

    def __len__(self) -> int:
        return len(self._prio)

    @property
    def n_buckets(self) -> int:
        return len(self._buckets)

    def priority(self, task: int) -> float:
        return float(self._prio[task])

    def update(self, tasks: ArrayLike, priorities: ArrayLike) -> None:
        """Re-file ``tasks`` under their new ``priorities``."""
        for task, value in zip(np.asarray(tasks, dtype=np.int64).tolist(),
                               np.asarray(priorities, dtype=float).tolist(), strict=True):
            if value != value:
                raise ValueError(f"priority of task {task} is NaN")
            if self._prio[task] == value:
                continue
            self._prio[task] = value
            bucket = self._buckets.get(value)
            if bucket is None:
                self._buckets[value] = [task]
                heapq.heappush(self._keys, -value)
            else:
                heapq.heappush(bucket, task)
            self._entries += 1
        if self._entries > 2 * len(self._prio) + 1024:
            type(self).__init__(self, self._prio)  # drop the stale entries

    def top(self, k: int, eligible: Callable[[np.ndarray], np.ndarray] | None = None,
            chunk: int = 16) -> np.ndarray:
        """Up to ``k`` eligible tasks in decreasing priority (ties: lowest index first)."""
        found: list[int] = []
        taken_keys: list[float] = []
        taken: list[tuple[float, int]] = []
        seen: set[int] = set()
        prio = self._prio
        while len(found) < k and self._keys:
            neg = heapq.heappop(self._keys)
            value = -neg
            bucket = self._buckets[value]
            n_taken = 0
            while len(found) < k and bucket:
                batch: list[int] = []
                while bucket and len(batch) < max(chunk, k - len(found)):
                    task = heapq.heappop(bucket)
                    if prio[task] != value or task in seen:
                        self._entries -= 1  # stale or duplicate entry: drop it for good
                        continue
                    seen.add(task)
                    batch.append(task)
                if not batch:
                    break
                taken.extend((value, task) for task in batch)
                n_taken += len(batch)
                arr = np.asarray(batch, dtype=np.int64)
                ok = arr if eligible is None else arr[np.asarray(eligible(arr), dtype=bool)]
                found.extend(ok[: k - len(found)].tolist())
            if bucket or n_taken:
                taken_keys.append(neg)
            else:
                del self._buckets[value]
        for value, task in taken:  # put back every live entry taken out
            heapq.heappush(self._buckets[value], task)
        for neg in taken_keys:
            heapq.heappush(self._keys, neg)
        return np.asarray(found, dtype=np.int64)
