"""A model's predictions for a replayed data set: ``predictions.csv`` (issue 42).

Format (as the shared ``moviereviews_bin/predictions.csv``): a header ``task,p_<class>...``
with one ``p_<class>`` column per class of the data set, then one row per task with the
model's probability of each class. A task of the data set without a row has no prediction
(a row of NaN in the array). Checked strictly, naming file, line and field: an unknown
task, a missing or unknown class column, a value that is not a number in [0, 1], a row that
does not sum to 1 (within :data:`~labelq.policies._model_source.ROW_SUM_TOL`), a task given
twice.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np

from ..errors import FileFormatError, InputError
from ..policies._model_source import ROW_SUM_TOL
from ..policies.base import FloatArray

__all__ = ["read_predictions_csv", "source_name"]


def source_name(path: str | Path) -> str:
    """The source name a predictions file gets in the simulator: its file stem."""
    return Path(path).stem


def read_predictions_csv(path: str | Path, tasks: list[str], classes: list[str]
                         ) -> FloatArray:
    """(n_tasks, n_classes) probabilities in the order of ``tasks`` and ``classes``; NaN
    rows for the tasks the file does not name (module doc for the checks)."""
    p = Path(path)
    index = {t: i for i, t in enumerate(tasks)}
    out = np.full((len(tasks), len(classes)), np.nan)
    seen = np.zeros(len(tasks), dtype=bool)
    try:
        f = p.open(newline="", encoding="utf-8")
    except OSError as exc:
        raise InputError(f"{p}: cannot read predictions: {exc.strerror}", path=str(p)) from exc
    with f:
        reader = csv.reader(f)
        header = next(reader, None)
        if not header or header[0].strip() != "task":
            raise FileFormatError(str(p), 1, "task", "expected a header task,p_<class>,... "
                                  f"(got {','.join(header or [])!r})")
        cols: dict[str, int] = {}
        for k, name in enumerate(header[1:], start=1):
            cls = name.strip().removeprefix("p_")
            if not name.strip().startswith("p_") or cls not in classes:
                raise FileFormatError(str(p), 1, name, f"column {name!r} is not p_<class> for "
                                      f"a class of the data set ({', '.join(classes)})")
            cols[cls] = k
        for cls in classes:
            if cls not in cols:
                raise FileFormatError(str(p), 1, f"p_{cls}",
                                      f"no column p_{cls} (every class needs one)")
        for line, row in enumerate(reader, start=2):
            if not row:
                continue
            task = row[0].strip()
            if task not in index:
                raise FileFormatError(str(p), line, "task",
                                      f"task {task!r} is not in the data set")
            i = index[task]
            if seen[i]:
                raise FileFormatError(str(p), line, "task", f"task {task!r} is given twice")
            seen[i] = True
            for k, cls in enumerate(classes):
                field = f"p_{cls}"
                try:
                    v = float(row[cols[cls]])
                except (IndexError, ValueError):
                    raise FileFormatError(str(p), line, field, "not a number") from None
                if math.isnan(v) or not 0.0 <= v <= 1.0:
                    raise FileFormatError(str(p), line, field, f"{v!r} is not in [0, 1]")
                out[i, k] = v
            if abs(float(out[i].sum()) - 1.0) > ROW_SUM_TOL:
                raise FileFormatError(str(p), line, "p_*", f"the probabilities sum to "
                                      f"{float(out[i].sum()):.6g}, not 1")
    return out
