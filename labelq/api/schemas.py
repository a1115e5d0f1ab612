"""Request and response bodies of the API (they make the OpenAPI schema)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..exporting import METHODS

__all__ = ["Name", "AssignmentId", "Assignment", "NextAssignment", "NextOut", "SubmitIn", "SubmitOut",
           "DeclineOut", "GoldStats", "PauseOut", "ProgressOut", "MeOut", "EnrollIn", "EnrollOut",
           "ExportIn", "JobOut", "WorkerStatus", "TaskCounts", "CategoryCounts",
           "ProjectStatusOut", "StallOut", "HealthOut", "GoldWarning", "ProjectOut",
           "DashboardOut",
           "GoldSuggestion", "GoldSuggestionsOut",
           "CurrentOut", "PredictionsOut", "SuggestionCoverage",
           "WorkerStatusIn", "WorkerStatusOut", "TokenOut", "TaskLabel", "TaskDetailOut",
           "ReviewMeOut", "ReviewProject", "ReviewTask", "ReviewQueueOut", "ReviewAnswer",
           "ReviewAnswersOut", "ReviewIn", "ReviewOut", "MyProject", "MyProjectsOut",
           "HookIn", "HookOut", "HookAddedOut", "HookRemovedOut", "HookDeliveryOut"]

# printable text without control characters (they are refused by PostgreSQL or are noise)
_TEXT = r"^[^\x00-\x1f\x7f]+$"
Name = Annotated[str, Field(min_length=1, max_length=200, pattern=_TEXT)]
AssignmentId = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")]


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Assignment(_Out):
    """What an annotator sees of a task. No task id: the operator's ids (``g17``,
    ``gold-3``) would tell a gold question from a task, and gold measures an annotator only
    while it looks like any other task."""
    assignment_id: str = Field(description="Send it back with the label or the decline; "
                                           "quote it to report a problem with the task.")
    category: str
    payload: dict[str, Any] = Field(description="What to label: text, image_url, ...")
    labels: list[str] = Field(description="The label set; answer with one of these.")
    expires_ms: int = Field(description="Lease end, milliseconds since the Unix epoch.")
    expires_at: str = Field(description="Lease end, ISO 8601 UTC.")


class NextAssignment(Assignment):
    """An assignment as ``next`` gives it: with ``suggestion`` when the project shows
    suggestions (issue 42)."""
    suggestion: str | None = Field(
        default=None, description="Only when the project shows suggestions (off by "
                                  "default): the model's answer for the task, or null; a "
                                  "label given then is marked as given with it shown.")


class NextOut(_Out):
    assignment: NextAssignment | None = None
    message: str | None = Field(None, description="Why there is no assignment, if so.")


class CurrentOut(_Out):
    assignments: list[NextAssignment] = Field(description="Held now, oldest first (empty: "
                                                          "none), as `next` gave them.")


class SubmitIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    label: Name = Field(description="One of the project's labels.")


class SubmitOut(_Out):
    assignment_id: str
    label: str
    duplicate: bool = Field(description="True when this repeats an earlier, identical "
                                        "submission (nothing new was recorded).")
    next: NextOut | None = Field(None, description="With `?next=true`: my next "
                                    "assignment (or why there is none), as "
                                    "`POST /assignments/next` would answer.")


class DeclineOut(_Out):
    assignment_id: str
    declined: bool
    duplicate: bool = Field(False, description="True when this repeats an earlier decline "
                                               "of the assignment (nothing new was "
                                               "recorded).")


class GoldStats(_Out):
    answered: int
    correct: int
    accuracy: float | None
    as_of: int = Field(0, description="The counts are of my first `as_of` labels: the "
                                      "number given, rounded down to a multiple of 10 (so "
                                      "they never move on the answer just given, and tell "
                                      "no one which item was gold).")


class PauseOut(_Out):
    at: str = Field(description="When (ISO 8601, UTC).")
    rule: str = Field(description="`quality`: the project's quality rule, on gold answers; "
                                  "`operator`: paused by an operator.")
    gold_right: int | None
    gold_answered: int | None
    statistic: str | None = Field(description="The quality rule's test: `likelihood_ratio` "
                                              "(sequential) or `prob_below` (posterior).")
    value: float | None = Field(description="The test's value when it fired.")
    bound: float | None = Field(description="The bound the value reached.")
    category: str | None
    text: str = Field(description="The pause in words, e.g. \"paused by the quality rule "
                                  "after 9 of 24 gold answers right; ask your operator\".")


class ProgressOut(_Out):
    handle: str
    status: str
    labels: int
    declined: int
    expired: int
    open_assignments: int
    gold: GoldStats
    capacity: int | None
    remaining_capacity: int | None
    pause: PauseOut | None = Field(None, description="While paused: when, by which rule, on "
                                                     "what evidence.")


class MeOut(_Out):
    handle: str
    project: str
    status: str
    labels: list[str]
    label_names: list[str] = Field(description="What to show for each label, in the order "
                                               "of `labels` (the label itself when the "
                                               "project names none).")
    instructions: str | None = Field(description="The project's instructions for "
                                                    "annotators (Markdown source), if any.")
    capacity: int | None
    categories: list[str]


class EnrollIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    handle: Name
    default: bool = Field(False, description="Make this project the annotator's default "
                                             "(where a client naming no project works).")
    # strict: a number is a JSON number ("cost": false was taken as 0.0, "5" as 5)
    cost: Annotated[float, Field(ge=0, le=1e12, allow_inf_nan=False, strict=True)] = 1.0
    capacity: Annotated[int | None, Field(ge=1, le=1_000_000_000, strict=True)] = None
    categories: Annotated[list[Name], Field(max_length=1000)] = []


class EnrollOut(_Out):
    handle: str
    project: str
    cost: float
    capacity: int | None
    categories: list[str]
    token: str | None = Field(description="Shown only now; stored hashed. Hand it to the "
                                          "annotator. null: the handle was enrolled in "
                                          "another project already, and its token now works "
                                          "here too.")
    default: bool = Field(False, description="This project is the annotator's default.")


class TaskLabel(_Out):
    worker: str
    label: str
    received: str
    assignment: str = Field(description="The assignment id the annotator saw.")


class TaskDetailOut(_Out):
    task: str
    category: str
    gold: bool
    gold_answer: str | None
    marked: str | None = Field(
        default=None, description="when a loaded task was marked gold (ISO 8601), if it was")
    gold_kind: str | None = Field(
        default=None, description="a gold question's kind: loaded or audit (a random "
                                  "sample: scores annotators), suggested or reviewed (chosen)")
    gold_source: str | None = Field(
        default=None, description="where a gold answer came from: the file loaded or marked "
                                  "from, 'cli', 'review NAME' (the review page's reviewer), "
                                  "'correct cli' (labelq gold correct); null if unknown "
                                  "(written before labelq recorded it)")
    payload: dict[str, Any]
    labels: list[TaskLabel]


class WorkerStatusIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    status: Literal["active", "paused", "removed"] = Field(
        description="paused: no new work; removed: no sign-in either; active: back to work.")
    project: Name | None = Field(None, description="The project of the enrolment, for an "
                                                   "annotator enrolled in several (else "
                                                   "their only one, or their default).")


class WorkerStatusOut(_Out):
    handle: str
    status: str
    project: str | None = None


class MyProject(_Out):
    name: str
    status: str = Field(description="My status there: active, paused or removed.")
    default: bool = Field(description="The project a request naming none works in.")


class MyProjectsOut(_Out):
    handle: str
    projects: list[MyProject] = Field(description="The projects I am enrolled in, oldest "
                                                  "enrolment first.")
    current: str | None = Field(description="Where a request naming no project works "
                                            "(`?project=NAME` names one): the only "
                                            "project, else the default, else null (name "
                                            "one).")


class TokenOut(_Out):
    handle: str
    token: str = Field(description="Shown only now; the annotator's previous token no longer "
                                   "signs in (within a second).")


class ExportIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    method: Literal[METHODS] | None = Field(  # type: ignore[valid-type]
        default=None, description="Aggregation method (default: the project's). `kos` "
        "needs binary labels: a project with more classes answers 422 listing the methods "
        "it can run.")
    format: Literal["csv", "jsonl", "parquet"] = Field(
        default="csv", description="parquet needs pyarrow on the server "
        "(`pip install 'labelq[parquet]'`).")
    raw: bool = Field(default=False, strict=True,
                      description="Every label instead of one row per task.")
    exclude_paused: bool = Field(default=False, strict=True)


class HookIn(BaseModel):
    """A webhook to add (as ``labelq hooks add``; docs/hooks.md)."""
    model_config = ConfigDict(extra="forbid")
    url: Annotated[str, Field(min_length=1, max_length=2000)] = Field(
        description="Where events are POSTed: an http:// or https:// URL with a host "
                    "(anything else: 422 naming the field `url`).")
    events: Annotated[list[Name], Field(max_length=50)] = Field(
        default=[], description="Event types (project.finished, project.stalled, "
        "annotator.paused, annotator.resumed, budget.below, export.ready, "
        "gold.seen_through), or `all` (every one but budget.below). May be empty only "
        "with `budget_below`.")
    budget_below: Annotated[float | None, Field(allow_inf_nan=False, strict=True)] = Field(
        default=None, description="budget.below fires when less than this share of the "
                                  "budget is left, in (0, 1); implies budget.below.")
    name: Name | None = Field(default=None, description="The hook's name in the project "
                              "(default: the URL's host, made unique).")


class HookOut(_Out):
    name: str
    url: str
    events: list[str]
    budget_below: float | None
    created: str
    pending: int = Field(description="Events not delivered yet (retries included).")
    delivered: int
    failed: int = Field(description="Events given up on after 5 tries.")


class HookAddedOut(_Out):
    project: str
    name: str
    url: str
    events: list[str]
    budget_below: float | None
    secret: str = Field(description="Shown only now: the receiver checks "
                                    "X-Labelq-Signature (HMAC-SHA256 of "
                                    "`<X-Labelq-Timestamp>.<body>`) with it.")


class HookRemovedOut(_Out):
    project: str
    name: str
    url: str
    removed: bool


class HookDeliveryOut(_Out):
    at: str = Field(description="When the try was made (ISO 8601 UTC).")
    event: str = Field(description="The event id (X-Labelq-Delivery).")
    type: str
    attempt: int
    status: int | None = Field(description="The receiver's HTTP status; null: no answer.")
    error: str | None = Field(description="Why there was no answer (timeout, refused).")
    duration_ms: float
    state: str = Field(description="The event's state now: pending, delivered, failed.")


class PredictionsOut(_Out):
    """A load of a model's predictions (as ``labelq predictions load -o json``)."""

    project: str
    model: str
    version: int = Field(description="This load's version of the model (1, 2, ...).")
    source: str = Field(description="The version's name as a source: MODEL@vN.")
    rows: int = Field(description="Predictions loaded (one per task).")
    normalised: int = Field(description="Rows divided by their sum (normalise=true).")


class JobOut(_Out):
    id: str
    project: str
    state: Literal["queued", "running", "done", "failed"]
    method: str | None = Field(description="Aggregation method; null: the project's.")
    format: str
    raw: bool
    exclude_paused: bool
    done: int = Field(description="Rows written so far.")
    total: int = Field(description="Rows to write (known once the job is running).")
    progress: float = Field(description="done / total, 0..1 (1 when done).")
    error: str | None
    created: str = Field(description="ISO 8601 (UTC), as every time the API answers.")
    finished: str | None = Field(description="ISO 8601 (UTC); null until it ends.")
    result_url: str | None = None
    chosen: str | None = Field(None, description="The method that made the answers "
                                  "(auto's choice); null until aggregated, and for raw.")
    aggregation: str | None = Field(None, description="Which method and why, as "
                                       "`labelq export` prints it.")
    warning: str | None = Field(None, description="Why the confidences are not "
                                   "trustworthy yet; null when they are.")
    models: dict[str, Any] | None = Field(
        None, description="The project's models as the export measured them (issue 42; "
                          "null without any): per source `MODEL@vN` its accuracy per class "
                          "with the 95 % interval and the answers it rests on, and how many "
                          "answers rest on each kind of evidence (`model_alone`: on the "
                          "model alone). docs/models.md.")


class WorkerStatus(_Out):
    handle: str
    status: str
    cost: float
    capacity: int | None
    labels: int
    gold_answered: int
    declined: int
    expired: int


class TaskCounts(_Out):
    unlabeled: int
    in_progress: int
    complete: int
    gold: int


class CategoryCounts(TaskCounts):
    category: str = Field(description="The category ('' for tasks loaded without one).")


class GoldWarning(_Out):
    worker: str
    gold_seen: int
    gold_pool: int


class StallOut(_Out):
    tasks: int = Field(description="Open tasks no active annotator can serve.")
    all: bool = Field(description="True: every open task (the project is stalled); false: "
                                  "the tasks of categories no active annotator works on.")
    categories: list[str] = Field(description="Those tasks' categories.")
    reasons: list[str] = Field(description="Why, one line each (paused annotators, "
                                           "capacities spent, tasks seen, ...).")
    ways_out: list[str] = Field(description="What the operator can do, as commands.")


class SuggestionCoverage(_Out):
    gold: int
    gold_predicted: int
    tasks: int
    tasks_predicted: int


class ProjectStatusOut(_Out):
    project: str
    policy: dict[str, Any]
    finished: Literal["budget spent", "every task at its cap"] | None = Field(
        None, description="Why no label will be asked for again (the tasks in progress stay "
                          "below their cap), or null while the project runs.")
    stalled: StallOut | None = Field(
        None, description="Open tasks no active annotator can serve (issue 41), or null.")
    state: Literal["running", "stalled", "finished"] = Field(
        "running", description="finished (see finished), stalled (no open task can be "
                               "served until the operator acts: see stalled) or running.")
    spendable: float | None = Field(
        None, description="At most what can still be spent: 0 when finished or stalled; "
                          "with a cap, what the open tasks' missing labels cost at the "
                          "dearest active annotator's cost, at most the budget left.")
    gold_unscheduled: int = Field(
        0, description="Gold questions that are never served: the project has no gold "
                       "schedule (labelq project update --gold-schedule).")
    suggestion_coverage: SuggestionCoverage | None = Field(
        None, description="Only on a project that shows suggestions and has gold (issue "
                          "42): gold questions and tasks, and how many of each a model "
                          "predicted; "
                          "gold predicted less often than tasks shows fewer suggestions, "
                          "which points at gold (docs/models.md).")
    suggestion_warnings: list[str] = Field(
        [], description="Where gold lacks a prediction more often than tasks: the warning "
                        "labelq status prints (empty: none).")
    tasks: TaskCounts
    categories: list[CategoryCounts] = Field(description="Tasks by state, per category.")
    labels: int
    unapplied: int = Field(description="Labels durable in SQL that the applier (Celery) has "
                                       "not folded into the policy state yet.")
    oldest_unapplied_s: float | None = Field(
        description="Age of the oldest of them, in seconds; minutes mean no labelq run-worker "
                    "is applying this project's labels.")
    budget: float | None
    spent: float
    left: float | None
    workers: list[WorkerStatus]
    gold_warnings: list[GoldWarning] = Field(
        [], description="Active annotators who have seen most of the gold questions.")


class ProjectOut(_Out):
    name: str
    labels: list[str]
    label_names: dict[str, str] = Field(description="Display names of labels, by label.")
    budget: float | None
    max_labels: int | None
    aggregation: str
    created: str


class DashboardOut(_Out):
    status: ProjectStatusOut = Field(description="As `labelq status -o json`.")
    gold: dict[str, dict[str, Any]] = Field(
        description="By handle: gold answers, right ones, gold_accuracy (raw: right / "
                    "answered), gold_smoothed (Beta posterior mean) and gold_interval (95%).")
    throughput: dict[str, Any] = Field(
        description="Labels/min over time and when the budget runs out at the recent rate.")
    quality: dict[str, Any] = Field(
        description="Agreement and the accuracy estimate (auto: basis gold, an exact 95% "
                    "interval in estimate_low/estimate_high from random gold answers held "
                    "out; basis models, the models' unchecked belief with no interval and "
                    "estimate_audit_n, the audit answers that would bound it to +-0.03; "
                    "calibration: whether the confidences are calibrated and on how many "
                    "random answers; other methods: the mean posterior confidence of the "
                    "answers) with its curve against labels spent; `models` (null without one): "
                    "each model version's measured accuracy per class with its 95% interval "
                    "and the answers it rests on, and how many answers rest on the model "
                    "alone (docs/models.md).")
    pauses: dict[str, PauseOut] = Field(
        default_factory=dict,
        description="By handle, each paused annotator's pause: when, by which rule, on what "
                    "evidence.")


class GoldSuggestion(_Out):
    id: str = Field(description="The task's id (as loaded).")
    answer: str = Field(description="Empty: the expert's answer goes here (labelq gold mark "
                                    "--file reads id and answer).")
    category: str
    current: str = Field(description="The task's answer now (the project's aggregation).")
    confidence: float
    current_method: str = Field(description="What gave `current`: the project's method, or "
                                            "`committee` (the candidates' mean posterior) "
                                            "before the dashboard has fitted it.")
    candidates: list[str] = Field(description="The candidate aggregations' answers, most "
                                              "candidates first.")
    labels: dict[str, int] = Field(description="The labels given, answer -> count.")
    n_labels: int
    score: float = Field(description="Expected information of the answer, bits.")
    reason: str


class GoldSuggestionsOut(_Out):
    labels: int = Field(description="Labels the computation saw.")
    computed: str = Field(description="When it was computed (ISO 8601 UTC); kept up to "
                                      "`refresh_seconds` while labels arrive.")
    refresh_seconds: float
    tasks: list[GoldSuggestion] = Field(description="Best first (labelq gold suggest).")


class HealthOut(_Out):
    status: str
    redis: bool
    database: bool


# --- the review page (/review): labelq.api.review ------------------------------------------

class ReviewProject(_Out):
    name: str
    labels: list[str]
    label_names: list[str] = Field(description="What each label's button shows.")
    instructions: str = Field(description="The annotators' instructions (Markdown).")


class ReviewMeOut(_Out):
    reviewer: str = Field(description="The reviewer's name (``operator`` for the operator "
                                      "token).")
    projects: list[ReviewProject] = Field(description="The projects it may review.")


class ReviewTask(_Out):
    """A task to answer, as the labeling page shows it; no annotator's answer (see
    ``/answers``)."""
    id: str
    kind: Literal["audit", "suggested"] = Field(
        description="audit: drawn at random by labelq gold audit (answer every one); "
                    "suggested: listed by labelq gold suggest. The answer is gold of this "
                    "kind.")
    category: str
    payload: dict[str, Any]


class ReviewQueueOut(_Out):
    tasks: list[ReviewTask]
    left: dict[str, int] = Field(description="Tasks waiting for an answer, by kind.")


class ReviewAnswer(_Out):
    worker: str
    label: str


class ReviewAnswersOut(_Out):
    task: str
    answers: list[ReviewAnswer] = Field(description="The annotators' labels, oldest first.")


class ReviewIn(BaseModel):
    task: Name = Field(description="The task's id.")
    answer: Name = Field(description="The expert's answer: one of the project's labels.")
    kind: Literal["audit", "suggested"] = Field(
        description="The kind the queue gave the task.")


class ReviewOut(_Out):
    task: str
    state: Literal["marked", "queued", "skipped"] = Field(
        description="marked: gold now; queued: assigned to an annotator right now, marked "
                    "when that assignment ends; skipped: gold already with this answer.")
    kind: str
    replaced: str | None = Field(
        None, description="The answer queued earlier for this task (by labelq gold mark "
                          "while it was assigned; the assignment ended since, the queued "
                          "mark not applied yet) that this answer replaced; null: none.")
