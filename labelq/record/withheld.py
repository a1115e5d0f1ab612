"""Which assignments of a project that shows suggestions show none (issue 42).

With ``show_suggestions`` on, the labeling page shows the model's answer beside a task. A
gold answer given with it shown says little about the annotator (one who copies a good
model scores as well as the model), so gold scores annotators on the answers given
*without* one (:mod:`labelq.record.goldstats`). For that to leave the quality rule any
evidence, and to tell no one which tasks are gold, a random share of the assignments —
gold and ordinary tasks alike — shows no suggestion: :data:`NO_SUGGESTION_SHARE`, drawn
per (annotator, task) from a keyed hash of their SQL ids, so that

* the same task shows the same to the same annotator every time (``assignments/next``,
  a page reload's ``assignments/current``, the lease issued again);
* the submit path marks the label from the same two ids, with no SQL read
  (``label.suggested`` is then exactly "the project showed suggestions and this
  assignment was not one withheld");
* an annotator cannot compute it: the ids are never shown (no task id in an assignment),
  and gold is withheld as often as any task.

A task no model predicted shows no suggestion either; the gold scoring reads that from
the ``prediction`` table, and ``labelq check`` warns where gold questions lack one more
often than tasks do (docs/models.md, "Gold with suggestions shown").
"""

from __future__ import annotations

import hashlib

__all__ = ["NO_SUGGESTION_SHARE", "withheld", "marked_suggested"]

# a quarter of the assignments show no suggestion: the gold answers the quality rule reads
# while suggestions are on (a round number: more slows the rule less and shows fewer
# suggestions; not fitted to a data set)
NO_SUGGESTION_SHARE = 0.25
_KEY = b"labelq:no-suggestion:v1"
_SCALE = float(1 << 64)


def withheld(worker_id: int, task_id: int, share: float = NO_SUGGESTION_SHARE) -> bool:
    """Whether the assignment of task ``task_id`` to worker ``worker_id`` (SQL ids) shows
    no suggestion: a keyed BLAKE2b of the pair, uniform on [0, 1), below ``share``."""
    digest = hashlib.blake2b(f"{worker_id}:{task_id}".encode(), digest_size=8,
                             key=_KEY).digest()
    return int.from_bytes(digest, "big") / _SCALE < share


def marked_suggested(show_suggestions: bool | None, worker_id: int, task_id: int) -> bool:
    """``label.suggested`` of a label given now: the project shows suggestions and this
    assignment was not one withheld (whether the model predicted the task is read apart,
    where it matters)."""
    return bool(show_suggestions) and not withheld(worker_id, task_id)
