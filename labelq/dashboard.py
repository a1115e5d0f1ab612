"""What an operator watches of a project: the numbers behind ``labelq status``, ``labelq
workers list``, ``labelq agreement`` and the dashboard page (``GET /dashboard``), computed
once here and shared by the CLI and the API.

* :func:`status_report` (:mod:`labelq.reporting`) is ``labelq status -o json`` (tasks by state, per category, labels,
  budget, workers, gold warnings) and the API's ``/projects/{name}/status``.
* :func:`pauses`: each paused annotator's pause trail, by handle (the annotator table).
* :func:`worker_gold` is each annotator's gold accuracy: raw (right / answered) and smoothed
  (the Beta posterior mean the quality rule reads) with its 95% credible interval, on
  random gold (loaded, audit); apart, their agreement with the expert on disputed tasks
  (chosen gold: suggested, reviewed).
* :func:`throughput` buckets labels over time (labels/min) and projects when the budget
  runs out at the recent spending rate.
* :func:`quality` aggregates the labels with the project's method: agreement (as
  ``labelq agreement``), the current accuracy estimate (the mean posterior confidence of
  the aggregated answers) and its curve against labels spent.
* :func:`dashboard` is all of them, the body of ``/api/v1/projects/{name}/dashboard``:
  the status from the counters, the others (which read every label) as the workers last
  computed them in the background (:func:`refresh_figures`, the beat's
  ``labelq.figures``) with their age, or ``pending`` (being computed) — never computed in
  the request: a small project's behind figures are computed in a thread of the serving
  process (:func:`refresh_in_background`), which the request waits for
  :data:`FIGURES_WAIT_S` at most.
* :func:`project_gold_suggestions` is ``labelq gold suggest``: the labelled tasks whose
  expert answer would teach the most (:func:`labelq.gold.suggest.suggest_gold`), as rows an
  expert fills in for ``labelq gold mark --file``; :func:`gold_suggestions` is its top ten
  for the dashboard (``/api/v1/projects/{name}/gold-suggestions``): the list stored with
  the background figures (a small project's computed in the background when behind, as
  the dashboard's), never inside a request.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
from sqlalchemy import func
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from .exporting import aggregate_project, agreement_report, load_project_labels, model_report
from .record.goldstats import ProjectGold, project_gold_scores
from .record.models import DashboardFigures, Label, Project, Worker, as_utc, utcnow
from .record.problem import model_sources
from .reporting import status_report

if TYPE_CHECKING:
    from .exporting import ProjectLabels


class _Fit(Protocol):
    """What the dashboard reads of an aggregation's fit (:func:`aggregate_project`)."""

    labels_: np.ndarray
    confidence_: np.ndarray

__all__ = ["status_report", "worker_gold", "gold_summary", "throughput", "quality",
           "dashboard", "pauses", "compute_figures", "refresh_figures", "refresh_in_background",
           "figures_due", "project_gold_suggestions", "gold_suggestions", "suggestion_csv_row",
           "SUGGESTION_COLUMNS",
           "RECENT_MINUTES", "CURVE_POINTS"]

RECENT_MINUTES = 15  # the spending rate of the projection: over the last this many minutes
CURVE_POINTS = 10    # points of the accuracy-estimate curve (each one aggregation)
MAX_BUCKETS = 60     # at most this many points of labels/min


def gold_summary(pg: ProjectGold, seq: int) -> dict[str, Any]:
    """Annotator ``seq``'s gold: answers, right ones, raw accuracy (right / answered),
    smoothed accuracy (Beta posterior mean) and its 95% credible interval, pooled over
    categories, and per category (those with an answer) — on random gold only (loaded,
    audit: the quality rule's scores). With ``pg.chosen``, apart: ``disputed`` (answers to
    chosen gold: suggested, reviewed), ``disputed_agreement`` (agreement with the expert
    on those disputed tasks, right / answered) and ``disputed_interval`` (95% credible
    interval, Beta(1, 1) prior): never an accuracy, as those tasks were chosen for being
    hard. With ``pg.shown``, apart too: ``gold_with_suggestion`` (random gold answered with
    a model's suggestion shown, issue 42) and ``gold_with_suggestion_correct`` — scoring no
    one: an answer that agrees with the model may be the model's."""
    out = _gold_summary(pg, seq)
    if pg.shown is not None:
        out.update({"gold_with_suggestion": int(pg.shown.total[seq].sum()),
                    "gold_with_suggestion_correct": int(pg.shown.correct[seq].sum())})
    if pg.chosen is not None:
        ch = pg.chosen
        m, agree = int(ch.total[seq].sum()), int(ch.correct[seq].sum())
        lo, hi = ch.credible_interval(pooled=True)
        out.update({"disputed": m,
                    "disputed_agreement": round(agree / m, 4) if m else None,
                    "disputed_interval": [round(float(lo[seq]), 4), round(float(hi[seq]), 4)]
                    if m else None})
    return out


def _gold_summary(pg: ProjectGold, seq: int) -> dict[str, Any]:
    sc = pg.scores
    n = int(sc.total[seq].sum())
    if n == 0:
        return {"gold": 0, "gold_correct": 0, "gold_accuracy": None, "gold_smoothed": None,
                "gold_interval": None, "gold_by_category": None}
    right = int(sc.correct[seq].sum())
    lo, hi = sc.credible_interval(pooled=True)
    cat_mean = sc.mean()
    per_cat = {}
    for k, c in enumerate(pg.categories):
        nk = int(sc.total[seq, k])
        if nk:
            per_cat[c or "-"] = {"gold": nk, "gold_accuracy": round(sc.correct[seq, k] / nk, 4),
                                 "gold_smoothed": round(float(cat_mean[seq, k]), 4)}
    return {"gold": n, "gold_correct": right, "gold_accuracy": round(right / n, 4),
            "gold_smoothed": round(float(sc.mean(pooled=True)[seq]), 4),
            "gold_interval": [round(float(lo[seq]), 4), round(float(hi[seq]), 4)],
            "gold_by_category": per_cat}


def worker_gold(session: Session, project: Project) -> dict[str, dict[str, Any]]:
    """:func:`gold_summary` of every annotator of ``project``, by handle (with their
    agreement on disputed tasks)."""
    pg = project_gold_scores(session, project, with_chosen=True)
    return {h: gold_summary(pg, seq) for seq, h in enumerate(pg.handles)}


def throughput(session: Session, project: Project, *, left: float | None,
               now: datetime | None = None) -> dict[str, Any]:
    """Labels per minute over time (``points``: bucket start ISO time, labels/min, budget
    spent by the end of the bucket) and the projection: at the spending rate of the last
    :data:`RECENT_MINUTES` minutes, when the budget left runs out (``None`` without a
    budget, or when nothing was spent lately)."""
    now = now or datetime.now(timezone.utc)
    t, who = _label_times(session, project)
    costs = dict(session.exec(select(Worker.id, Worker.cost)
                              .where(Worker.project_id == project.id)).all())
    ids = np.array(sorted(costs), dtype=np.int64)
    at = np.minimum(np.searchsorted(ids, who), max(ids.size - 1, 0))
    cost = (np.where(ids[at] == who, np.array([costs[i] for i in ids], dtype=float)[at], 0.0)
            if who.size and ids.size else np.zeros(who.size))
    out: dict[str, Any] = {"bucket_minutes": None, "points": [], "recent_minutes": RECENT_MINUTES,
                           "recent_labels_per_min": 0.0, "recent_spend_per_min": 0.0,
                           "runs_out_in_s": None, "runs_out_at": None}
    if t.size:
        order = np.argsort(t, kind="stable")  # by time: ids follow commit order, nearly so
        t, cost = t[order], cost[order]
        span_min = max((t[-1] - t[0]) / 60, 1e-9)
        width = next((w for w in (1, 2, 5, 10, 15, 30, 60, 120, 360, 720, 1440)
                      if span_min / w <= MAX_BUCKETS), 1440)
        start = np.floor(t[0] / (60 * width)) * 60 * width
        idx = ((t - start) // (60 * width)).astype(np.int64)
        n = np.bincount(idx)
        spent = np.cumsum(np.bincount(idx, weights=cost))
        out["bucket_minutes"] = width
        out["points"] = [{"t": _iso(start + 60 * width * i),
                          "labels_per_min": round(n[i] / width, 3),
                          "spent": round(float(spent[i]), 6)} for i in range(n.size)]
        recent = t >= now.timestamp() - 60 * RECENT_MINUTES
        out["recent_labels_per_min"] = round(int(recent.sum()) / RECENT_MINUTES, 3)
        rate = float(cost[recent].sum()) / RECENT_MINUTES
        out["recent_spend_per_min"] = round(rate, 6)
        if left is not None and rate > 0:
            secs = max(left, 0.0) / rate * 60
            out["runs_out_in_s"] = round(secs, 1)
            out["runs_out_at"] = (now + timedelta(seconds=secs)).isoformat(timespec="seconds")
    return out


# Each label's time and worker, per project, read once: a dashboard refresh reads only the
# labels committed since the last one (ids grow; a project whose labels shrank, or were
# replaced, is read again in full). The cost of a label is its worker's current cost, as in
# the budget spent of ``labelq status``.
_TIMES: dict[int, tuple[int, int, np.ndarray, np.ndarray]] = {}


def _label_times(session: Session, project: Project) -> tuple[np.ndarray, np.ndarray]:
    """(received as Unix seconds, worker id) of every label of ``project``, in id order."""
    n, last = session.exec(select(func.count(col(Label.id)), func.max(col(Label.id)))
                           .where(Label.project_id == project.id)).one()
    n, last = int(n), int(last or 0)
    pid = _pid(project)
    with _LOCK:
        hit = _TIMES.get(pid)
    if hit is not None and hit[0] == n and hit[1] == last:
        return hit[2], hit[3]
    after, t0, w0 = 0, np.zeros(0), np.zeros(0, dtype=np.int64)
    if hit is not None and hit[1] <= last and hit[0] <= n:
        after, t0, w0 = hit[1], hit[2], hit[3]
    rows = session.exec(select(Label.received, Label.worker_id)
                        .where(Label.project_id == pid, col(Label.id) > after,
                               col(Label.id) <= last)
                        .order_by(col(Label.id))).all()
    t = np.concatenate([t0, np.array([as_utc(r).timestamp() for r, _ in rows], dtype=float)])
    w = np.concatenate([w0, np.array([j for _, j in rows], dtype=np.int64)])
    if t.size != n:  # labels were removed below the last one read: read them all again
        with _LOCK:
            _TIMES.pop(pid, None)
        return _label_times(session, project) if hit is not None else (t, w)
    with _LOCK:
        _TIMES[pid] = (n, last, t, w)
    return t, w


# Aggregating is the dashboard's one costly part. The current fit is kept per project and
# redone at most every REFIT_SECONDS while labels arrive (and at once when the label set,
# the tasks or the gold answers change); each point of the curve is kept for good, as a
# prefix of the labels never changes: the points sit at multiples of a round step.
REFIT_SECONDS = 10.0
_FITS: dict[int, tuple[float, tuple[Any, ...], dict[str, Any]]] = {}
_CURRENT: dict[int, tuple[str, int, np.ndarray, np.ndarray, str | None]] = {}
_POINTS: dict[tuple[Any, ...], dict[str, Any]] = {}
_LOCK = threading.Lock()


def quality(session: Session, project: Project) -> dict[str, Any]:
    """Aggregated with the project's method (as ``labelq export`` and ``labelq agreement``):
    agreement, the accuracy estimate — for ``auto``, its estimate with a 95 % interval
    (``estimate_low``/``estimate_high``; ``estimate_basis`` ``gold``: exact, from random
    gold answers held out; ``models``: the models' belief, unchecked, with no interval
    (None) and ``estimate_audit_n`` random answers that would bound it to +-0.03 at that
    belief, ``estimate_audit_n_floor`` at ``estimate_floor``, one label's accuracy;
    labelq/aggregation/guard.py) and ``calibration`` (``calibrated``, on how many random
    ``answers``); for another method the mean posterior confidence of the
    answers of the labelled non-gold tasks — and its curve over label prefixes (labels
    spent so far; mean confidences).
    ``labels`` says how many labels the fit saw (it is redone at most every
    :data:`REFIT_SECONDS` while labels arrive)."""
    pid = _pid(project)
    n, last = session.exec(select(func.count(col(Label.id)), func.max(col(Label.id)))
                           .where(Label.project_id == pid)).one()
    method = project.aggregation
    pl = None
    with _LOCK:
        hit = _FITS.get(pid)
    if hit is not None:
        t, key, out = hit
        if key[:2] == (int(n), last):
            return out
        if time.monotonic() - t < REFIT_SECONDS and key[2:] == (method, tuple(project.labels)):
            pl = load_project_labels(session, project)
            if key[4:] == _view_key(pl):
                return out  # labels arrived within the last few seconds: the fit stands
    pl = pl or load_project_labels(session, project)
    result = aggregate_project(session, project, pl, method)
    with _LOCK:  # the answers gold_suggestions calls current (any method)
        _CURRENT[pid] = (method, pl.view.n_tasks, np.asarray(result.labels_),
                                np.asarray(result.confidence_), getattr(result, "method_", None))
    report = agreement_report(pl, result)
    data = ~pl.view.is_gold
    counts = np.bincount(pl.task, minlength=pl.view.n_tasks)
    # the curve refits on the first k labels; the policy posterior is only kept for all of
    # them, so its curve is drawn with majority vote (said in curve_method)
    curve_method = "mv" if method == "policy" else method
    view_key = _view_key(pl)
    total = int(pl.task.size)
    curve = []
    if total:
        step = _round_step(total / CURVE_POINTS)
        from .exporting import ProjectLabels
        for k in [*range(step, total, step), total]:
            pkey = (pid, k, curve_method, tuple(project.labels), *view_key)
            with _LOCK:
                point = _POINTS.get(pkey) if k < total else None
            if point is None:
                if k == total and curve_method == method:
                    res = result
                else:
                    sub = ProjectLabels(pl.view, pl.external_ids, pl.handles, pl.task[:k],
                                        pl.worker[:k], pl.label[:k], pl.marked,
                                        pl.random_gold,
                                        None if pl.suggested is None else pl.suggested[:k])
                    res = aggregate_project(session, project, sub, curve_method)
                c = np.bincount(pl.task[:k], minlength=pl.view.n_tasks)
                point = {"labels": k, "tasks_labelled": int(np.sum(data & (c > 0))),
                         "estimate": _mean_conf(res, data & (c > 0))}
                if k < total:
                    with _LOCK:
                        if len(_POINTS) > 10_000:
                            _POINTS.clear()
                        _POINTS[pkey] = point
            curve.append(point)
    acc = getattr(result, "accuracy_", None)  # auto: the estimate with its interval
    out = {"method": method, "chosen": getattr(result, "method_", method),
           "curve_method": curve_method, "labels": total,
           "estimate": (round(acc.estimate, 6) if acc is not None and acc.n_tasks
                        else _mean_conf(result, data & (counts > 0))),
           "estimate_low": (round(acc.low, 6) if acc is not None and acc.low is not None
                            else None),
           "estimate_high": (round(acc.high, 6) if acc is not None and acc.high is not None
                             else None),
           "estimate_basis": acc.basis if acc is not None and acc.n_tasks else None,
           "estimate_gold": acc.n_gold if acc is not None else 0,
           "estimate_audit_n": acc.audit_n if acc is not None else None,
           "estimate_audit_n_floor": acc.audit_n_floor if acc is not None else None,
           "estimate_floor": (round(acc.floor, 4) if acc is not None and acc.floor is not None
                              else None),
           "calibration": getattr(result, "calibration_", None),
           "tasks_labelled": int(np.sum(data & (counts > 0))),
           "curve": curve, "agreement": report,
           # the project's models as the export measures them (issue 42): per version its
           # accuracy per class with the 95 % interval and the answers it rests on, beside
           # the annotators' gold accuracy; None without a model
           "models": model_report(pl, result)}
    with _LOCK:
        _FITS[pid] = (time.monotonic(),
                             (int(n), last, method, tuple(project.labels), *view_key), out)
    return out


def _view_key(pl: ProjectLabels) -> tuple[int, int, int, int, int]:
    """What besides the labels changes a fit: the tasks, their categories, gold answers,
    the models' versions (a predictions load or remove)."""
    v = pl.view
    return (v.n_tasks, v.n_workers, hash(v.gold_answer.tobytes()),
            hash(v.task_category.tobytes()), hash(tuple(sorted(v.predictions or ()))))


def _round_step(x: float) -> int:
    """The smallest of 1, 2, 5, 10, 20, 50, ... at least ``x``."""
    step = 1
    while True:
        for m in (1, 2, 5):
            if step * m >= x:
                return step * m
        step *= 10


def dashboard(session: Session, project: Project, *, live_labels: int | None = None,
              wait_s: float | None = None) -> dict[str, Any]:
    """Everything the dashboard page shows of ``project``. ``status`` is exactly
    :func:`status_report` (``labelq status -o json``, from the counters); ``gold`` (each
    annotator's :func:`gold_summary`), ``throughput`` and ``quality`` are the figures the
    beat computes in the background (:func:`refresh_figures`), as last stored: ``quality``
    and ``throughput`` say when (``computed``, ISO 8601 UTC), how old they are (``age_s``),
    how many labels arrived since (``behind_labels``) and ``source`` (``background``), or
    ``pending`` when none are stored yet (they are being computed); ``gold`` is of the same computation. The projection of
    ``throughput`` (when the budget runs out) is redone with the budget left now at the
    stored spending rate.

    A request never computes the figures (they read every label): for a project of at most
    ``live_labels`` (:data:`LIVE_LABELS`) labels and :data:`LIVE_TASKS` tasks whose stored
    figures are behind (or missing), it has them computed in a thread of this process
    (:func:`refresh_in_background`; one per project, and none while another process holds
    the claim) and waits ``wait_s`` (:data:`FIGURES_WAIT_S`) at most for them; larger
    projects' the beat computes. Either way it answers with the figures stored then."""
    st = status_report(session, project)
    now = datetime.now(timezone.utc)
    key = _figures_key(session, project, st)
    row = _stored(session, project)
    if (row is None or row.computed is None or row.key != key) and \
            _small(st, LIVE_LABELS if live_labels is None else live_labels):
        engine = session.get_bind().engine
        done = refresh_in_background(engine, _pid(project))
        if done.wait(FIGURES_WAIT_S if wait_s is None else wait_s):
            row = _stored_now(engine, project)  # (this session's snapshot predates them)
        now = datetime.now(timezone.utc)
    if row is None or row.computed is None:
        wait = {"computed": None, "age_s": None, "behind_labels": st["labels"],
                "source": None, "pending": True}
        return {"status": st, "gold": {},
                "throughput": {**_empty_throughput(), **wait},
                "quality": {**_empty_quality(project), **wait},
                "pauses": pauses(session, project)}
    computed = as_utc(row.computed)
    meta = {"computed": computed.isoformat(timespec="seconds"),
            "age_s": round(max(0.0, (now - computed).total_seconds()), 1),
            "behind_labels": st["labels"] - row.labels, "source": "background",
            "pending": False}
    body = row.body
    return {"status": st, "gold": body.get("gold", {}),
            "throughput": {**_projected(body.get("throughput") or _empty_throughput(),
                                        st, now), **meta},
            "quality": {**(body.get("quality") or _empty_quality(project)), **meta},
            "pauses": pauses(session, project)}


def pauses(session: Session, project: Project) -> dict[str, dict[str, Any]]:
    """By handle, the trail of each paused annotator's pause (:mod:`.record.pauses`): the
    annotator table shows it; one small query, read with every request."""
    from .record.pauses import last_pauses, pause_trail
    paused = {w.id: w.handle for w in session.exec(
        select(Worker).where(Worker.project_id == project.id, Worker.status == "paused"))}
    events = last_pauses(session, [i for i in paused if i is not None])
    return {paused[i]: pause_trail(e) for i, e in events.items()}


# --- the heavy figures, computed in the background --------------------------------------
#
# Agreement, the accuracy estimate and its curve, gold per annotator, throughput and the
# gold suggestions read every label (aggregations: seconds to minutes at millions of
# labels). The beat (workers/tasks.py ``labelq.maintain``) asks :func:`figures_due` of
# each project with hot state and enqueues ``labelq.figures``, which runs
# :func:`refresh_figures`: computed from the labels and stored in ``dashboard_figures``
# (one row per project), which the dashboard serves with their age.

FIGURES_EVERY_S = 30.0   # stored figures are recomputed at most this often while labels arrive
FIGURES_SHARE = 4.0      # ... and at most every this many times the last computation's length
FIGURES_CLAIM_S = 60.0   # a claim not renewed for this long is of a dead computation ...
FIGURES_BEAT_S = 15.0    # ... which renews it this often while its thread is alive
FIGURES_WAIT_S = 0.5     # a request waits this long for figures computed for it
LIVE_LABELS = 20_000     # a project with at most this many labels ...
LIVE_TASKS = 100_000     # ... and tasks is computed in the request when its figures are behind
SUGGEST_KEEP = 50        # gold suggestions stored (the API serves at most 50)

log = logging.getLogger(__name__)


def _small(st: dict[str, Any], live_labels: int) -> bool:
    return bool(st["labels"] <= live_labels and sum(st["tasks"].values()) <= LIVE_TASKS)


def _figures_key(session: Session, project: Project, st: dict[str, Any]) -> str:
    """What the figures were computed from: labels, tasks, gold questions, method, labels,
    and the models' latest versions (a predictions load or remove changes the fit)."""
    t = st["tasks"]
    models = model_sources(session, project)
    return json.dumps([st["labels"], sum(t.values()), t["gold"], project.aggregation,
                       list(project.labels), *([models] if models else [])])


def _pid(project: Project) -> int:
    assert project.id is not None, "a project read from the database has its id"
    return project.id


def _stored(session: Session, project: Project) -> DashboardFigures | None:
    """The project's stored figures (None, also on a database whose schema predates them:
    ``labelq init`` adds the table)."""
    from .record.tally import schema_current

    if not schema_current(session):
        return None
    return session.get(DashboardFigures, _pid(project))


def _empty_quality(project: Project) -> dict[str, Any]:
    return {"method": project.aggregation, "chosen": None, "curve_method": None, "labels": 0,
            "estimate": None, "estimate_low": None, "estimate_high": None,
            "estimate_basis": None, "estimate_gold": 0, "estimate_audit_n": None,
            "estimate_audit_n_floor": None, "estimate_floor": None, "calibration": None, "tasks_labelled": 0, "curve": [],
            "agreement": {"krippendorff_alpha": None, "fleiss_kappa": None, "labels": 0,
                          "workers": []}, "models": None}


def _empty_throughput() -> dict[str, Any]:
    return {"bucket_minutes": None, "points": [], "recent_minutes": RECENT_MINUTES,
            "recent_labels_per_min": 0.0, "recent_spend_per_min": 0.0,
            "runs_out_in_s": None, "runs_out_at": None}


def _projected(th: dict[str, Any], st: dict[str, Any], now: datetime) -> dict[str, Any]:
    """``th`` with its projection redone for status ``st`` now, at its spending rate,
    counting only what can still be spent (``st["spendable"]``: nothing when the project
    is finished or stalled; at most what the open tasks' missing labels cost). When that
    is less than the budget left, the budget is not what runs out: ``runs_out_in_s`` is
    None and ``work_ends_in_s`` says when the open tasks' labels are paid at this rate
    (``budget_outlasts``)."""
    out = {**th, "runs_out_in_s": None, "runs_out_at": None, "work_ends_in_s": None,
           "budget_outlasts": False}
    rate = float(th.get("recent_spend_per_min") or 0.0)
    left, can = st["left"], st.get("spendable", st["left"])
    if left is None:
        return out
    can = max(left if can is None else min(can, left), 0.0)
    out["budget_outlasts"] = can + 1e-9 < left
    if rate > 0 and can > 0:
        secs = round(can / rate * 60, 1)
        if out["budget_outlasts"]:
            out["work_ends_in_s"] = secs
        else:
            out["runs_out_in_s"] = secs
            out["runs_out_at"] = (now + timedelta(seconds=secs)).isoformat(timespec="seconds")
    return out


def _claim_s(row: DashboardFigures | None) -> float:
    """How long a claim on ``row`` holds without renewal: a computation whose claim is older
    died (a live one renews it every :data:`FIGURES_BEAT_S`, :func:`refresh_figures`)."""
    return FIGURES_CLAIM_S


def _due(row: DashboardFigures | None, key: str, now: datetime, *,
         behind: bool = False) -> bool:
    """Whether to compute: nobody is (no live claim), and none are stored, or they are
    behind ``key`` — and, unless ``behind`` (a small project a request waits for), old
    enough."""
    if row is None:
        return True
    if row.claimed is not None and (now - as_utc(row.claimed)).total_seconds() < _claim_s(row):
        return False  # being computed
    if row.computed is None:
        return True
    if row.key == key:
        return False
    if behind:
        return True
    age = (now - as_utc(row.computed)).total_seconds()
    return age >= max(FIGURES_EVERY_S, FIGURES_SHARE * row.took_s)


def figures_due(engine: Engine, project_id: int) -> bool:
    """Whether the beat should have ``project_id``'s figures computed now: none stored, or
    the labels, tasks or gold changed since and the stored ones are older than
    :data:`FIGURES_EVERY_S` (and :data:`FIGURES_SHARE` times their computation), and
    nobody is computing them. Reads the counters, not the labels."""
    from .record.db import session_scope

    with session_scope(engine) as session:
        project = session.get(Project, project_id)
        if project is None:
            return False
        st = status_report(session, project)
        return _due(_stored(session, project), _figures_key(session, project, st), utcnow())


def compute_figures(session: Session, project: Project) -> dict[str, Any]:
    """The heavy figures of ``project`` from its labels: ``quality`` (:func:`quality`),
    ``gold`` (:func:`worker_gold`), ``throughput`` (:func:`throughput`, its projection
    made when served) and ``suggestions`` (the :data:`SUGGEST_KEEP` best gold
    suggestions, ``current`` from this fit)."""
    q = quality(session, project)
    out: dict[str, Any] = _plain({"quality": q, "gold": worker_gold(session, project),
                   "throughput": throughput(session, project, left=None),
                   "suggestions": project_gold_suggestions(session, project, n=SUGGEST_KEEP,
                                                           current="cached")})
    return out


def refresh_figures(engine: Engine, project_id: int, *, force: bool = False,
                    behind: bool = False) -> bool:
    """Compute and store ``project_id``'s figures if they are due (:func:`figures_due`;
    ``behind``: whenever they are behind the labels; ``force``: whatever their age, and
    whoever holds the claim): claims the row first, so two workers never compute one
    project's at once, and renews the claim every :data:`FIGURES_BEAT_S` while computing
    (a thread beside this one), so that a claim of a killed process lapses after
    :data:`FIGURES_CLAIM_S`; True if it stored new ones. The beat's ``labelq.figures``
    task, and :func:`refresh_in_background`."""
    from sqlalchemy import or_, update
    from sqlalchemy.exc import IntegrityError

    from .record.db import session_scope

    t = getattr(DashboardFigures, "__table__")
    started = utcnow()
    try:
        with session_scope(engine) as session:
            project = session.get(Project, project_id)
            if project is None:
                return False
            row = _stored(session, project)
            if not force and not _due(row, _figures_key(session, project, status_report(
                    session, project)), started, behind=behind):
                return False
            if row is None:
                session.add(DashboardFigures(project_id=project_id, claimed=started))
            elif session.connection().execute(
                    update(t).where(t.c.project_id == project_id,
                                    or_(t.c.claimed.is_(None), t.c.claimed < started
                                        - timedelta(seconds=_claim_s(row))))
                    .values(claimed=started)).rowcount == 0 and not force:
                return False
    except IntegrityError:
        return False  # another worker claimed it first
    t0 = time.monotonic()
    stop = threading.Event()
    threading.Thread(target=_renew_claim, args=(engine, project_id, stop),
                     name=f"labelq-figures-claim-{project_id}", daemon=True).start()
    try:
        with session_scope(engine) as session:
            project = session.get(Project, project_id)
            if project is None:
                return False
            st = status_report(session, project)
            key = _figures_key(session, project, st)
            body = compute_figures(session, project)
        took = time.monotonic() - t0
        stop.set()
        with session_scope(engine) as session:
            session.connection().execute(
                update(t).where(t.c.project_id == project_id)
                .values(body=body, computed=started, took_s=round(took, 3),
                        labels=int(st["labels"]), key=key, claimed=None))
    except BaseException:
        stop.set()
        with session_scope(engine) as session:  # give the claim back
            session.connection().execute(update(t).where(t.c.project_id == project_id)
                                         .values(claimed=None))
        raise
    finally:
        stop.set()
    log.info("dashboard figures of project %s: %d labels in %.1f s", project_id,
             st["labels"], took)
    return True


def _renew_claim(engine: Engine, project_id: int, stop: threading.Event) -> None:
    """The heartbeat of a computation: ``claimed`` set to now every :data:`FIGURES_BEAT_S`
    until ``stop`` (the computation ended, however). It dies with its process, and the
    claim then lapses :data:`FIGURES_CLAIM_S` later."""
    from sqlalchemy import update

    from .record.db import session_scope

    t = getattr(DashboardFigures, "__table__")
    while not stop.wait(FIGURES_BEAT_S):
        try:
            with session_scope(engine) as session:
                session.connection().execute(
                    update(t).where(t.c.project_id == project_id, t.c.claimed.is_not(None))
                    .values(claimed=utcnow()))
        except Exception:  # noqa: BLE001 - the next beat tries again (the claim may lapse)
            log.warning("claim on the dashboard figures of project %s not renewed",
                        project_id, exc_info=True)


# (engine, project id) -> set when this process's background computation of the project's
# figures ends (refresh_in_background)
_running: dict[tuple[int, int], threading.Event] = {}
_running_lock = threading.Lock()


def refresh_in_background(engine: Engine, project_id: int) -> threading.Event:
    """Have ``project_id``'s figures computed in a thread of this process if they are behind
    the labels and nobody is computing them (:func:`refresh_figures` with ``behind``: it
    claims them, and gives up at once if another process holds the claim); one thread per
    project and process. Returns an event set when that computation ends (the one already
    running, if any): a request waits for it a little, never for long."""
    key = (id(engine), int(project_id))
    with _running_lock:
        done = _running.get(key)
        if done is not None:
            return done
        done = _running[key] = threading.Event()

    def run() -> None:
        try:
            refresh_figures(engine, project_id, behind=True)
        except Exception:  # noqa: BLE001 - logged; the next request or the beat asks again
            log.exception("dashboard figures of project %s not computed", project_id)
        finally:
            with _running_lock:
                _running.pop(key, None)
            done.set()

    threading.Thread(target=run, name=f"labelq-figures-{project_id}", daemon=True).start()
    return done


def _stored_now(engine: Engine, project: Project) -> DashboardFigures | None:
    """The project's stored figures as committed now (a new session)."""
    from .record.db import session_scope

    with session_scope(engine) as session:
        row = _stored(session, project)
        if row is not None:
            session.expunge(row)
        return row


def _plain(x: Any) -> Any:
    """``x`` with numpy scalars and arrays as Python values (stored as JSON)."""
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, np.ndarray):
        return _plain(x.tolist())
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, float) and x != x:
        return None  # NaN: JSON has none
    return x


def _mean_conf(result: _Fit, mask: np.ndarray) -> float | None:
    if not mask.any():
        return None
    return round(float(np.asarray(result.confidence_)[mask].mean()), 6)


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=timezone.utc).isoformat(timespec="seconds")


# --- gold suggestions -----------------------------------------------------------------------

#: the columns of ``labelq gold suggest`` (CSV): ``id`` and ``answer`` (empty, for the expert)
#: are what ``labelq gold mark --file`` reads; it ignores the others
SUGGESTION_COLUMNS = ["id", "answer", "category", "current", "confidence", "current_method",
                      "candidates", "labels", "n_labels", "score", "reason"]
SUGGEST_TOP = 10


def project_gold_suggestions(session: Session, project: Project, *, n: int = 30,
                             seed: int = 0, current: str = "fit") -> list[dict[str, Any]]:
    """The at most ``n`` loaded, labelled, non-gold tasks of ``project`` whose expert answer
    would teach the most, best first, from the labels as ``labelq export`` reads them
    (:func:`labelq.exporting.load_project_labels`), one row each: ``id``, ``answer``
    (empty: the expert's), ``category``, ``current`` — the project's aggregation's answer,
    as the export gives it — with its ``confidence`` and ``current_method``, the committee's
    ``candidates`` (most members first), the ``labels`` given (answer -> count),
    ``n_labels``, ``score`` (bits) and ``reason``.

    ``current``: ``"fit"`` fits the project's method when it is not one of the committee's
    (``auto``, ``glad``, ``kos``, ``policy``: the cost of an export); ``"cached"`` takes
    the dashboard's last fit of it, or else the committee's mean posterior
    (``current_method`` says ``committee``)."""
    from .gold.suggest import suggest_gold

    pl = load_project_labels(session, project)
    v, classes = pl.view, pl.classes
    s = suggest_gold(pl.task, pl.worker, pl.label, n_tasks=v.n_tasks,
                     n_workers=max(v.n_workers, 1), n_classes=len(classes), n=n,
                     categories=v.task_category, gold=v.gold_answer, exclude=v.is_gold,
                     seed=seed, classes=classes)
    if not len(s):
        return []
    method = project.aggregation
    if method in s.methods:
        probas = s.member_posterior[:, s.methods.index(method)]
        cur = probas.argmax(axis=1)
        conf = probas[np.arange(len(s)), cur]
        by = method
    else:
        hit: tuple[str, int, np.ndarray, np.ndarray, str | None] | None = None
        if current == "fit":
            result = aggregate_project(session, project, pl, method)
            hit = (method, v.n_tasks, np.asarray(result.labels_),
                   np.asarray(result.confidence_), getattr(result, "method_", None))
        else:
            with _LOCK:
                hit = _CURRENT.get(_pid(project))
        if hit is not None and hit[0] == method and hit[1] == v.n_tasks:
            cur, conf = hit[2][s.tasks], hit[3][s.tasks]
            by = f"{method} ({hit[4]})" if hit[4] else method
        else:
            cur = s.posterior.argmax(axis=1)
            conf = s.posterior[np.arange(len(s)), cur]
            by = "committee"
    K = len(classes)
    given = np.bincount(pl.task * K + pl.label, minlength=v.n_tasks * K).reshape(-1, K)
    rows = []
    for r, seq in enumerate(s.tasks.tolist()):
        rows.append({
            "id": pl.external_ids[seq], "answer": "", "category": v.category_of(seq),
            "current": classes[int(cur[r])], "confidence": round(float(conf[r]), 4),
            "current_method": by,
            "candidates": [classes[a] for a in s.candidates[r]],
            "labels": {classes[k]: int(c) for k, c in enumerate(given[seq]) if c},
            "n_labels": int(given[seq].sum()), "score": round(float(s.score[r]), 4),
            "reason": s.reason[r]})
    return rows


def suggestion_csv_row(row: dict[str, Any]) -> dict[str, Any]:
    """A row of :func:`project_gold_suggestions` as CSV cells: candidates ``pos,neg``,
    labels ``pos:2,neg:1`` (a label holds no comma: the label set is written with them)."""
    return {**row, "candidates": ",".join(row["candidates"]),
            "labels": ",".join(f"{k}:{c}" for k, c in row["labels"].items())}


def gold_suggestions(session: Session, project: Project, *, n: int = SUGGEST_TOP,
                     live_labels: int | None = None, wait_s: float | None = None
                     ) -> dict[str, Any]:
    """The dashboard's list: the best ``n`` of the gold suggestions stored with the
    dashboard's figures (:func:`refresh_figures`: ``current`` from that fit), with
    ``labels`` (how many the computation saw) and ``computed`` (ISO time; ``""``: none
    stored yet, being computed). Never computed in the request: a small project
    (:data:`LIVE_LABELS`) whose stored list is behind (labels, tasks, gold — ``labelq gold
    mark`` —, the label set or the method changed) has the figures computed in the
    background as :func:`dashboard` does, and the request waits ``wait_s``
    (:data:`FIGURES_WAIT_S`) at most for them."""
    st = status_report(session, project)
    row = _stored(session, project)
    fresh = row is not None and row.computed is not None and row.key == _figures_key(session, project, st)
    if not fresh and _small(st, LIVE_LABELS if live_labels is None else live_labels):
        engine = session.get_bind().engine
        if refresh_in_background(engine, _pid(project)).wait(
                FIGURES_WAIT_S if wait_s is None else wait_s):
            row = _stored_now(engine, project)
    if row is None or row.computed is None:
        return {"labels": 0, "computed": "", "refresh_seconds": FIGURES_EVERY_S, "tasks": []}
    return {"labels": row.labels,
            "computed": as_utc(row.computed).isoformat(timespec="seconds"),
            "refresh_seconds": FIGURES_EVERY_S,
            "tasks": list(row.body.get("suggestions", []))[:n]}
