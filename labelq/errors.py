"""The one exception tree of labelq.

::

    LabelqError                      exit code 1 (generic)
    ├── ConfigError                  2  a LABELQ_* setting is malformed
    ├── InputError                   3  a file or argument the user gave is malformed
    │   └── FileFormatError          3  ... at a known file, line and field
    ├── NotFound                     4  project, task, worker or assignment does not exist
    │   └── AssignmentUnknown        4  an assignment id this server never issued to this
    │                                   annotator (forged, or another's): nothing recorded
    ├── Conflict                     5  the request contradicts the current state
    │   ├── AlreadyExists            5  unique name/handle/id taken
    │   ├── DuplicateSubmission      5  a label for this assignment was already recorded
    │   ├── LeaseExpired             5  the assignment's lease ran out
    │   ├── LeaseLost                5  a lease lost with Redis whose task no longer takes
    │   │                               the label: not saved (``recorded: false``)
    │   └── TooManyJobs              5  too many exports queued for the project (HTTP 429)
    ├── Forbidden                    6  acting on something that is not yours / paused worker
    ├── BudgetExhausted              7  the project has no budget left
    ├── PolicyError                  8  a policy spec is invalid
    └── ServiceUnavailable           9  Redis or the database does not answer

Errors carry context (``project``, ``task_id``, ``worker``...) as attributes and are chained
with ``raise ... from exc`` at the edges. The CLI maps ``exit_code`` to the process status;
the HTTP API maps ``http_status`` and ``code``.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "LabelqError",
    "ConfigError",
    "InputError",
    "FileFormatError",
    "NotFound",
    "AssignmentUnknown",
    "Conflict",
    "AlreadyExists",
    "DuplicateSubmission",
    "LeaseExpired",
    "LeaseLost",
    "TooManyJobs",
    "Forbidden",
    "BudgetExhausted",
    "PolicyError",
    "ServiceUnavailable",
]


class LabelqError(Exception):
    """Root of every error labelq raises on purpose."""

    exit_code = 1
    http_status = 500
    code = "error"

    def __init__(self, message: str, **context: Any) -> None:
        super().__init__(message)
        self.message = message
        self.context = context
        for key, value in context.items():
            setattr(self, key, value)

    def __str__(self) -> str:
        return self.message

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message,
                **{k: v for k, v in self.context.items() if _jsonable(v)}}


def _jsonable(value: Any) -> bool:
    """A scalar, or a flat mapping of names to scalars (a pause's trail: ``Forbidden``)."""
    if isinstance(value, dict):
        return all(isinstance(k, str) and _jsonable(v) and not isinstance(v, dict)
                   for k, v in value.items())
    return isinstance(value, (str, int, float, bool, type(None)))


class ConfigError(LabelqError):
    exit_code = 2
    code = "config_error"


class InputError(LabelqError):
    exit_code = 3
    http_status = 422
    code = "invalid_input"


class FileFormatError(InputError):
    """Malformed input file; names the file, the 1-based line and the field."""

    code = "file_format"

    def __init__(self, path: str, line: int, field: str | None, problem: str) -> None:
        where = f"{path}, line {line}"
        if field:
            where += f", field '{field}'"
        super().__init__(f"{where}: {problem}", path=path, line=line, field=field)


class NotFound(LabelqError):
    exit_code = 4
    http_status = 404
    code = "not_found"


class AssignmentUnknown(NotFound):
    """A submit for an assignment id whose lease is gone (lost with Redis) and that this
    database's servers never issued to this annotator: its MAC does not check out
    (:mod:`labelq.live.leaseid`) — crafted, or another annotator's. Nothing is recorded."""

    code = "assignment_unknown"


class Conflict(LabelqError):
    exit_code = 5
    http_status = 409
    code = "conflict"


class AlreadyExists(Conflict):
    code = "already_exists"


class DuplicateSubmission(Conflict):
    code = "duplicate_submission"


class LeaseExpired(Conflict):
    http_status = 410
    code = "lease_expired"


class LeaseLost(Conflict):
    """The assignment's lease was lost with Redis (a restart without persistence, a flush)
    and its task no longer takes this worker's label (cap, budget, capacity, already
    labelled, paused): the label was not saved, and sending it again will not save it."""

    http_status = 410
    code = "lease_lost"


class TooManyJobs(Conflict):
    """A project has as many distinct exports queued or running as it may
    (:data:`labelq.jobs.EXPORTS_PER_PROJECT`); asking again for one of them returns it."""

    http_status = 429
    code = "too_many_exports"


class Forbidden(LabelqError):
    exit_code = 6
    http_status = 403
    code = "forbidden"


class BudgetExhausted(LabelqError):
    exit_code = 7
    http_status = 409
    code = "budget_exhausted"


class PolicyError(LabelqError):
    exit_code = 8
    http_status = 422
    code = "invalid_policy"


class ServiceUnavailable(LabelqError):
    exit_code = 9
    http_status = 503
    code = "service_unavailable"
