"""Replay of a real data set: answers are the labels the workers actually gave.

A pair (task i, worker j) can be asked only if j labelled i in the data; the runner never
asks a pair twice, so each recorded label is used at most once. When the file holds several
labels of one worker on one task, the first is kept (the shared data sets have none).
Categories come from ``task_types.csv`` when the folder has one.
"""

from __future__ import annotations

import numpy as np

from ..datasets import LabelData
from .environment import Environment

__all__ = ["replay_environment"]


def replay_environment(data: LabelData) -> Environment:
    recorded = np.full((data.n_tasks, data.n_workers), -1, dtype=np.int64)
    # reversed assignment: for repeated pairs the first occurrence is written last and wins
    recorded[data.task[::-1], data.worker[::-1]] = data.label[::-1]
    return Environment(truth=data.truth.copy(), n_workers=data.n_workers,
                       n_classes=data.n_classes, task_category=data.category.copy(),
                       n_categories=max(len(data.categories), 1), recorded=recorded,
                       name=data.name)
