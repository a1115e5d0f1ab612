"""Long-format crowd label files (``task,worker,label``) as dense numpy arrays.

The shared data sets (``labels.csv``, ``truth.csv``, optional ``task_types.csv``) and any
file given to ``labelq aggregate`` are read here, once, into :class:`LabelData`:
external ids are mapped to dense indices ``0..n-1`` in order of first appearance, label
values to class indices in sorted order (numerically when every value is a number, so
``0,1`` and ``1,2`` both map to classes 0 and 1; the *second* class is the "+1" class of
the binary papers).

A file is CSV, or JSONL (one object a line, keys as the CSV's columns) when its name ends
``.jsonl``, ``.ndjson`` or ``.json`` or, under another name than ``.csv``, its first
character is ``{``; a ``.csv`` file that starts with ``{`` is refused by name (it was read
as a malformed CSV). Both are read by the one strict reader (:mod:`labelq.record.reading`).

A truth file naming a task twice is refused (line and task), and so is one that shares no
task with the labels. A (task, worker) pair given more than once is kept as given by
default (the shared data sets hold such repeats: ds1979's repeated examinations, adult2,
zencrowd_in); ``read_labels(..., repeats="first")`` — ``labelq aggregate`` — counts it once,
the first label, as the record does (a worker is never given a task twice, and a second
submission of an assignment is a duplicate of the first: ``labelq.live.submit``), and says
how many were dropped (:attr:`LabelData.repeats`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from .errors import FileFormatError, InputError
from .record.reading import csv_records, read_text, records
from .record.reading import name as check_name

if TYPE_CHECKING:
    from .policies.base import IntArray

MAX_NAME = 500  # characters of a task, worker or label name (as a task id: models.Task)

__all__ = ["LabelData", "read_labels", "load_dataset", "shared_datasets_dir", "sort_classes",
           "csv_rows", "ALIASES"]


def sort_classes(values: set[str] | list[str]) -> list[str]:
    vals = list(set(values))
    try:
        return sorted(vals, key=float)
    except ValueError:
        return sorted(vals)


@dataclass
class LabelData:
    tasks: list[str]
    workers: list[str]
    classes: list[str]
    task: IntArray  # (n_labels,)
    worker: IntArray  # (n_labels,)
    label: IntArray  # (n_labels,) class index
    truth: IntArray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    category: IntArray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    categories: list[str] = field(default_factory=list)
    name: str = ""
    # (task, worker) pairs given again and dropped (``repeats="first"``), how many had
    # another label than the first, and the first such line, said as a warning
    repeats: int = 0
    repeats_differing: int = 0
    first_repeat: str | None = None

    def __post_init__(self) -> None:
        if self.truth.size == 0:
            self.truth = np.full(self.n_tasks, -1, dtype=np.int64)
        if self.category.size == 0:
            self.category = np.zeros(self.n_tasks, dtype=np.int64)
            self.categories = self.categories or ["default"]

    @property
    def n_tasks(self) -> int:
        return len(self.tasks)

    @property
    def n_workers(self) -> int:
        return len(self.workers)

    @property
    def n_classes(self) -> int:
        return len(self.classes)

    @property
    def n_labels(self) -> int:
        return int(self.task.size)

    def accuracy(self, predicted: IntArray) -> float:
        """Share of tasks with a known truth whose predicted class index equals it."""
        known = self.truth >= 0
        return float(np.mean(predicted[known] == self.truth[known])) if known.any() else float("nan")


# other names the columns of crowd label files go by (crowd-kit, Toloka, Label Studio
# exports, the data sets' own sources); matched without regard to case, the canonical
# name first
ALIASES: dict[str, tuple[str, ...]] = {
    "task": ("item", "item_id", "task_id", "question", "object", "example", "id"),
    "worker": ("annotator", "worker_id", "annotator_id", "rater", "labeler", "user",
               "performer"),
    "label": ("response", "answer", "annotation", "value", "output"),
    "truth": ("gold", "true_label", "gold_label", "label", "answer", "golden"),
    "type": ("category", "task_type", "kind"),
}


def _resolve(header: list[str], name: str) -> str | None:
    """The column of ``header`` that holds ``name``: itself, else its first alias present
    (case-insensitive)."""
    lower = {h.lower(): h for h in reversed(header)}
    for candidate in (name, *ALIASES.get(name, ())):
        if candidate in lower:
            return lower[candidate]
    return None


JSONL_SUFFIXES = (".jsonl", ".ndjson", ".json")


def table_format(path: Path) -> str:
    """``"jsonl"`` or ``"csv"`` (module docstring): by the name, else the first character;
    a ``.csv`` file starting with ``{`` is refused by name."""
    suffix = path.suffix.lower()
    if suffix in JSONL_SUFFIXES:
        return "jsonl"
    try:
        with path.open("rb") as fh:
            head = fh.read(4096).lstrip(b"\xef\xbb\xbf \t\r\n")
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror}", path=str(path)) from exc
    if head.startswith(b"{"):
        if suffix == ".csv":
            raise FileFormatError(str(path), 1, None,
                                  "a JSON object, not a CSV header: the file is JSONL, "
                                  "named .csv; name it .jsonl to read it as JSONL")
        return "jsonl"
    return "csv"


def csv_rows(path: Path, required: tuple[str, ...]) -> Iterator[tuple[int, dict[str, str]]]:
    """Yield (line_number, row dict) of a CSV file, read strictly by
    :func:`labelq.record.reading.csv_records` (encoding, quotes, column count, NUL, field size),
    or of a JSONL one (:func:`table_format`; each object's keys as the columns, read by
    :func:`labelq.record.reading.records`: duplicate keys, fields over 1 MiB refused). A
    required column may go by one of its :data:`ALIASES` (``item,annotator,response``
    reads as ``task,worker,label``); the rows name it by its canonical name. The required
    columns' values are names (:func:`labelq.record.reading.name`): no control characters, no
    spaces around them (refused, not trimmed), at most 500 characters; empty ones are
    ``""`` (the caller decides)."""
    path = Path(path)
    if table_format(path) == "jsonl":
        yield from _jsonl_table(path, required)
        return
    rows = csv_records(path, read_text(path))
    header: list[str] | None = None
    rename: dict[str, str] = {}
    for line, raw in rows:
        if header is None:
            header = list(raw)
            for name in required:
                found = _resolve([h for h in header if h not in rename], name)
                if found is None:
                    also = ", ".join(ALIASES.get(name, ()))
                    raise FileFormatError(str(path), 1, name,
                                          f"missing column; header is {header}"
                                          + (f" (also accepted for {name!r}: {also})"
                                             if also else ""))
                rename[found] = name
        # an alias takes its column's canonical name; a column left over under a canonical
        # name (another case of one found) steps aside, so the rows keep the one found
        row = {(rename[h] if h in rename else f"_{h}" if h in required else h): v
               for h, v in raw.items()}
        for col in required:
            row[col] = check_name(row[col], path, line, col, required=False,
                                  max_length=MAX_NAME)
        yield line, row


def _jsonl_table(path: Path, required: tuple[str, ...]
                 ) -> Iterator[tuple[int, dict[str, str]]]:
    """:func:`csv_rows` of a JSONL file: each object's keys resolved as a header."""
    for line, obj in records(path, "jsonl"):
        row: dict[str, Any] = dict(obj)
        for name in required:
            found = _resolve(list(obj), name)
            if found is None:
                also = ", ".join(ALIASES.get(name, ()))
                raise FileFormatError(str(path), line, name,
                                      f"missing key; the object has {sorted(obj)}"
                                      + (f" (also accepted for {name!r}: {also})"
                                         if also else ""))
            row[name] = check_name(obj[found], path, line, name, required=False,
                                   max_length=MAX_NAME)
        yield line, row


def read_labels(path: str | os.PathLike[str], truth: str | os.PathLike[str] | None = None,
                categories: str | os.PathLike[str] | None = None, *,
                repeats: Literal["keep", "first"] = "keep") -> LabelData:
    """Read a ``task,worker,label`` CSV or JSONL file (plus optional ``task,truth`` and
    ``task,type``). ``repeats``: a (task, worker) pair given again is kept (``"keep"``) or
    dropped, the first label counted (``"first"``; module docstring)."""
    path = Path(path)
    task_ix: dict[str, int] = {}
    worker_ix: dict[str, int] = {}
    t_list: list[int] = []
    w_list: list[int] = []
    raw_labels: list[str] = []
    pairs: dict[tuple[int, int], tuple[int, str]] = {}  # (task, worker) -> (line, label)
    dropped = differing = 0
    first_repeat: str | None = None
    for line, row in csv_rows(path, ("task", "worker", "label")):
        for col in ("task", "worker", "label"):
            if not row[col]:
                raise FileFormatError(str(path), line, col, "empty value")
        t = task_ix.setdefault(row["task"], len(task_ix))
        w = worker_ix.setdefault(row["worker"], len(worker_ix))
        if repeats == "first":
            before = pairs.setdefault((t, w), (line, row["label"]))
            if before[0] != line:
                dropped += 1
                differing += before[1] != row["label"]
                if first_repeat is None:
                    first_repeat = (f"{path}, line {line}: task {row['task']!r}, worker "
                                    f"{row['worker']!r} again (first on line {before[0]})")
                continue
        t_list.append(t)
        w_list.append(w)
        raw_labels.append(row["label"])
    if not raw_labels:
        raise FileFormatError(str(path), 1, None, "no labels in file")
    truth_rows: list[tuple[int, str, str]] = []
    if truth is not None:
        truth_rows = _truth_rows(Path(truth), path, task_ix)
    classes = sort_classes(set(raw_labels) | {v for _, _, v in truth_rows})
    class_ix = {c: k for k, c in enumerate(classes)}
    data = LabelData(
        tasks=list(task_ix), workers=list(worker_ix), classes=classes,
        task=np.asarray(t_list, dtype=np.int64), worker=np.asarray(w_list, dtype=np.int64),
        label=np.asarray([class_ix[v] for v in raw_labels], dtype=np.int64),
        name=path.parent.name, repeats=dropped, repeats_differing=differing,
        first_repeat=first_repeat,
    )
    for _, task, value in truth_rows:
        if task in task_ix:
            data.truth[task_ix[task]] = class_ix[value]
    if categories is not None:
        cat_ix: dict[str, int] = {}
        for line, row in csv_rows(Path(categories), ("task", "type")):
            if row["task"] in task_ix:
                data.category[task_ix[row["task"]]] = cat_ix.setdefault(row["type"], len(cat_ix))
        data.categories = list(cat_ix) or ["default"]
    return data


def _truth_rows(truth: Path, labels: Path, task_ix: dict[str, int]
                ) -> list[tuple[int, str, str]]:
    """``(line, task, truth)`` of a truth file's rows with a truth (an empty one is
    unknown): a task named twice is refused, and so is a file sharing no task with the
    labels (every accuracy against it would be of nothing)."""
    first: dict[str, int] = {}
    rows: list[tuple[int, str, str]] = []
    for line, r in csv_rows(truth, ("task", "truth")):
        if not r["task"]:
            raise FileFormatError(str(truth), line, "task", "empty value")
        if r["task"] in first:
            raise FileFormatError(str(truth), line, "task",
                                  f"task {r['task']!r} is given a truth twice (first on "
                                  f"line {first[r['task']]}): give each task one")
        first[r["task"]] = line
        if r["truth"]:
            rows.append((line, r["task"], r["truth"]))
    if not any(task in task_ix for _, task, _ in rows):
        shown = ", ".join(repr(t) for _, t, _ in rows[:3])
        raise InputError(f"{truth}: no task with a truth is in {labels} ({len(rows)} truths, "
                         f"{len(task_ix)} labelled tasks; the truth file's first tasks: "
                         f"{shown or 'none'}): is it the truth of another file?",
                         path=str(truth))
    return rows


def load_dataset(directory: str | os.PathLike[str]) -> LabelData:
    """Load a shared-format data set folder: labels.csv, truth.csv, optional task_types.csv."""
    d = Path(directory)
    if not (d / "labels.csv").exists():
        raise InputError(f"{d}: no labels.csv (expected a data set folder)", path=str(d))
    truth = d / "truth.csv"
    types = d / "task_types.csv"
    data = read_labels(d / "labels.csv", truth if truth.exists() else None,
                       types if types.exists() else None)
    data.name = d.name
    return data


def shared_datasets_dir() -> Path | None:
    """Where the shared data sets live: ``$LABELQ_SHARED/datasets`` or ``../shared/datasets``
    next to the repository; ``None`` when absent."""
    env = os.environ.get("LABELQ_SHARED")
    candidates = [Path(env) / "datasets"] if env else []
    here = Path(__file__).resolve().parent.parent
    candidates += [here.parent / "shared" / "datasets", Path.cwd().parent / "shared" / "datasets"]
    for c in candidates:
        if c.is_dir():
            return c
    return None
