"""Density-ordered greedy for the bounded knapsack problem (BKP).

Rangi & Franceschetti (2018), Algorithm 2 ("greedyAlgoForBKP"), after Kellerer, Pferschy &
Pisinger (2004): items k have value ``w_k``, cost ``c_k`` and at most ``m_k`` copies. Visit
the items in decreasing density ``w_k / c_k`` (lower index first on ties) and take

    m*_k = min(m_k, floor((B - used) / c_k))

copies of each, ``used += m*_k c_k``. An item that no longer fits gets 0 and the scan goes on
to cheaper ones. By Lemma 4.1 of the paper this is the LP optimum rounded down on the
splitting item, so its value is within one item's value of the integer optimum.

Infinite budgets are allowed: the first item (in density order) with unlimited copies then
takes ``inf`` copies and consumes the rest of the budget, which is the limit of the finite
answer as ``B -> inf``. Free items (``c_k == 0``) take all their copies.
"""

from __future__ import annotations

import numpy as np

__all__ = ["density_greedy", "density_order"]


def density_order(values: np.ndarray, costs: np.ndarray) -> np.ndarray:
    """Item indices by decreasing ``values / costs``; a stable sort keeps lower index first
    on ties. A free item (cost 0) with positive value comes first."""
    values = np.asarray(values, dtype=float)
    costs = np.asarray(costs, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        dens = np.where(costs > 0, values / np.where(costs > 0, costs, 1.0),
                        np.where(values > 0, np.inf, 0.0))
    return np.argsort(-dens, kind="stable")


def density_greedy(values: np.ndarray, costs: np.ndarray, units: np.ndarray,
                   budget: float) -> np.ndarray:
    """Copies ``m*`` of each item taken by the density-ordered greedy (float array; ``inf``
    only when both the budget and an item's copies are unlimited).

    ``units`` may hold ``inf`` (unlimited copies); negative units count as 0.
    """
    costs = np.asarray(costs, dtype=float)
    units = np.maximum(np.asarray(units, dtype=float), 0.0)
    if costs.shape != units.shape or np.shape(values) != costs.shape:
        raise ValueError("values, costs and units must have the same shape")
    if np.any(costs < 0):
        raise ValueError("costs must be >= 0")
    taken = np.zeros_like(costs)
    left = float(budget)
    for k in density_order(values, costs):
        if units[k] <= 0:
            continue
        if costs[k] == 0:
            taken[k] = units[k]
            continue
        if costs[k] > left:
            continue
        take = min(units[k], np.floor(left / costs[k]))
        taken[k] = take
        if np.isinf(take):
            break  # an unlimited item under an unlimited budget absorbs everything left
        left -= take * costs[k]
    return taken
