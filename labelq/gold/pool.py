"""Gold pool helpers: give a worker a gold question it has never seen; warn before the pool
runs out for a worker (a worker who has seen most gold questions can learn their answers).

Pure functions over task indices; the caller keeps each worker's seen set (SQL is the record,
Redis a cache).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

__all__ = ["unseen_gold", "pick_unseen_gold", "ExhaustionRule"]


def unseen_gold(pool: np.ndarray, seen: Iterable[int] | np.ndarray,
                allowed: np.ndarray | None = None) -> np.ndarray:
    """Gold tasks of ``pool`` not in ``seen`` (and, when given, where ``allowed`` is True;
    ``allowed`` is a bool array aligned with ``pool``, e.g. "of a wanted category")."""
    pool = np.asarray(pool, dtype=np.int64)
    seen_arr = np.fromiter(seen, dtype=np.int64) if not isinstance(seen, np.ndarray) \
        else seen.astype(np.int64)
    keep = ~np.isin(pool, seen_arr)
    if allowed is not None:
        keep &= np.asarray(allowed, dtype=bool)
    return pool[keep]


def pick_unseen_gold(pool: np.ndarray, seen: Iterable[int] | np.ndarray,
                     rng: np.random.Generator, allowed: np.ndarray | None = None) -> int | None:
    """A uniformly chosen gold task the worker has never had, or ``None`` if there is none."""
    fresh = unseen_gold(pool, seen, allowed)
    return int(fresh[rng.integers(fresh.size)]) if fresh.size else None


@dataclass(frozen=True)
class ExhaustionRule:
    """A worker is close to exhausting the gold pool once it has seen at least ``fraction``
    of it (default 80%); an empty pool counts as exhausted."""

    fraction: float = 0.8

    def __post_init__(self) -> None:
        if isinstance(self.fraction, bool) or not isinstance(self.fraction, (int, float)) \
                or not 0 < self.fraction <= 1:
            raise ValueError(f"fraction must be in (0, 1], got {self.fraction!r}")

    def near_exhaustion(self, pool_size: int | np.ndarray,
                        n_seen: int | np.ndarray) -> bool | np.ndarray:
        """True where ``n_seen / pool_size >= fraction``; vectorised over workers."""
        size = np.asarray(pool_size, dtype=float)
        seen = np.asarray(n_seen, dtype=float)
        if (size < 0).any() or (seen < 0).any():
            raise ValueError("pool_size and n_seen must be >= 0")
        # multiply instead of dividing: exact at the boundary (8 of 10 with 0.8)
        out = (size <= 0) | (seen >= self.fraction * size - 1e-9)
        return bool(out) if out.ndim == 0 else out
