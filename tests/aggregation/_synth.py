"""Small synthetic crowds with known answers and known worker confusion matrices."""

from __future__ import annotations

import numpy as np


def confusion_crowd(rng, n_tasks=3000, n_workers=20, n_classes=3, per_task=5, diag=(0.55, 0.9)):
    """Tasks with uniform classes; worker j answers by row ``truth`` of its own matrix
    ``conf[j]`` (diagonal drawn from ``diag``, the rest split at random)."""
    truth = rng.integers(0, n_classes, n_tasks)
    conf = np.empty((n_workers, n_classes, n_classes))
    for j in range(n_workers):
        for k in range(n_classes):
            rest = rng.dirichlet(np.ones(n_classes - 1)) * (1 - rng.uniform(*diag))
            conf[j, k] = np.insert(rest, k, 1 - rest.sum())
    task = np.repeat(np.arange(n_tasks), per_task)
    worker = np.concatenate([rng.choice(n_workers, per_task, replace=False)
                             for _ in range(n_tasks)])
    cum = conf[worker, truth[task]].cumsum(axis=1)
    label = (rng.random(task.size)[:, None] > cum).sum(axis=1)
    return task, worker, np.minimum(label, n_classes - 1), truth, conf
