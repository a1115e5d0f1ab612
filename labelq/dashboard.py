"""What an operator watches of a project: the numbers behind ``labelq status``, ``labelq
workers list``, ``labelq agreement`` and the dashboard page (``GET /dashboard``), computed
once here and shared by the CLI and the API.

* :func:`status_report` (:mod:`labelq.reporting`) is ``labelq status -o json`` (tasks by state, per category, labels,
  budget, workers, gold warnings) and the API's ``/projects/{name}/status``.
* :func:`worker_gold` is each annotator's gold accuracy: raw (right / answered) and smoothed
  (the Beta posterior mean the quality rule reads) with its 95% credible interval.
* :func:`throughput` buckets labels over time (labels/min) and projects when the budget
  runs out at the recent spending rate.
* :func:`quality` aggregates the labels with the project's method: agreement (as
  ``labelq agreement``), the current accuracy estimate (the mean posterior confidence of
  the aggregated answers) and its curve against labels spent.
* :func:`dashboard` is all of them, the body of ``/api/v1/projects/{name}/dashboard``.
* :func:`project_gold_suggestions` is ``labelq gold suggest``: the labelled tasks whose
  expert answer would teach the most (:func:`labelq.gold.suggest.suggest_gold`), as rows an
  expert fills in for ``labelq gold mark --file``; :func:`gold_suggestions` is its top ten
  for the dashboard (``/api/v1/projects/{name}/gold-suggestions``), computed on request
  and kept per project for :data:`SUGGEST_SECONDS` while labels arrive, never inside the
  dashboard request itself.
"""

from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone
from typing import Any

import numpy as np
from sqlalchemy import case, func
from sqlmodel import Session, select

from .exporting import aggregate_project, agreement_report, load_project_labels
from .record.goldstats import project_gold_scores
from .record.models import Label, Project, Task, Worker, as_utc
from .reporting import status_report

__all__ = ["status_report", "worker_gold", "gold_summary", "throughput", "quality",
           "dashboard", "project_gold_suggestions", "gold_suggestions", "suggestion_csv_row",
           "SUGGESTION_COLUMNS",
           "RECENT_MINUTES", "CURVE_POINTS", "SUGGEST_SECONDS"]

RECENT_MINUTES = 15  # the spending rate of the projection: over the last this many minutes
CURVE_POINTS = 10    # points of the accuracy-estimate curve (each one aggregation)
MAX_BUCKETS = 60     # at most this many points of labels/min


def gold_summary(pg, seq: int) -> dict[str, Any]:
    """Annotator ``seq``'s gold: answers, right ones, raw accuracy (right / answered),
    smoothed accuracy (Beta posterior mean) and its 95% credible interval, pooled over
    categories, and per category (those with an answer)."""
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
    """:func:`gold_summary` of every annotator of ``project``, by handle."""
    pg = project_gold_scores(session, project)
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
    n, last = session.exec(select(func.count(Label.id), func.max(Label.id))
                           .where(Label.project_id == project.id)).one()
    n, last = int(n), int(last or 0)
    with _LOCK:
        hit = _TIMES.get(project.id)
    if hit is not None and hit[0] == n and hit[1] == last:
        return hit[2], hit[3]
    after, t0, w0 = 0, np.zeros(0), np.zeros(0, dtype=np.int64)
    if hit is not None and hit[1] <= last and hit[0] <= n:
        after, t0, w0 = hit[1], hit[2], hit[3]
    rows = session.exec(select(Label.received, Label.worker_id)
                        .where(Label.project_id == project.id, Label.id > after,
                               Label.id <= last)
                        .order_by(Label.id)).all()
    t = np.concatenate([t0, np.array([as_utc(r).timestamp() for r, _ in rows], dtype=float)])
    w = np.concatenate([w0, np.array([j for _, j in rows], dtype=np.int64)])
    if t.size != n:  # labels were removed below the last one read: read them all again
        with _LOCK:
            _TIMES.pop(project.id, None)
        return _label_times(session, project) if hit is not None else (t, w)
    with _LOCK:
        _TIMES[project.id] = (n, last, t, w)
    return t, w


# Aggregating is the dashboard's one costly part. The current fit is kept per project and
# redone at most every REFIT_SECONDS while labels arrive (and at once when the label set,
# the tasks or the gold answers change); each point of the curve is kept for good, as a
# prefix of the labels never changes: the points sit at multiples of a round step.
REFIT_SECONDS = 10.0
_FITS: dict[int, tuple[float, tuple, dict[str, Any]]] = {}
_CURRENT: dict[int, tuple[str, int, np.ndarray, np.ndarray, str | None]] = {}
_POINTS: dict[tuple, dict[str, Any]] = {}
_LOCK = threading.Lock()


def quality(session: Session, project: Project) -> dict[str, Any]:
    """Aggregated with the project's method (as ``labelq export`` and ``labelq agreement``):
    agreement, the accuracy estimate — for ``auto``, its estimate with a 95 % interval
    (``estimate_low``/``estimate_high``; ``estimate_basis`` ``gold``: prediction-powered on
    held-out gold questions, ``models``: the range of the models' beliefs without them,
    labelq/aggregation/guard.py); for another method the mean posterior confidence of the
    answers of the labelled non-gold tasks — and its curve over label prefixes (labels
    spent so far; mean confidences).
    ``labels`` says how many labels the fit saw (it is redone at most every
    :data:`REFIT_SECONDS` while labels arrive)."""
    import time

    n, last = session.exec(select(func.count(Label.id), func.max(Label.id))
                           .where(Label.project_id == project.id)).one()
    method = project.aggregation
    pl = None
    with _LOCK:
        hit = _FITS.get(project.id)
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
        _CURRENT[project.id] = (method, pl.view.n_tasks, np.asarray(result.labels_),
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
            pkey = (project.id, k, curve_method, tuple(project.labels), *view_key)
            with _LOCK:
                point = _POINTS.get(pkey) if k < total else None
            if point is None:
                if k == total and curve_method == method:
                    res = result
                else:
                    sub = ProjectLabels(pl.view, pl.external_ids, pl.handles, pl.task[:k],
                                        pl.worker[:k], pl.label[:k])
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
           "estimate_low": round(acc.low, 6) if acc is not None and acc.n_tasks else None,
           "estimate_high": round(acc.high, 6) if acc is not None and acc.n_tasks else None,
           "estimate_basis": acc.basis if acc is not None and acc.n_tasks else None,
           "estimate_gold": acc.n_gold if acc is not None else 0,
           "tasks_labelled": int(np.sum(data & (counts > 0))),
           "curve": curve, "agreement": report}
    with _LOCK:
        _FITS[project.id] = (time.monotonic(),
                             (int(n), last, method, tuple(project.labels), *view_key), out)
    return out


def _view_key(pl) -> tuple:
    """What besides the labels changes a fit: the tasks, their categories, gold answers."""
    v = pl.view
    return (v.n_tasks, v.n_workers, hash(v.gold_answer.tobytes()),
            hash(v.task_category.tobytes()))


def _round_step(x: float) -> int:
    """The smallest of 1, 2, 5, 10, 20, 50, ... at least ``x``."""
    step = 1
    while True:
        for m in (1, 2, 5):
            if step * m >= x:
                return step * m
        step *= 10


def dashboard(session: Session, project: Project) -> dict[str, Any]:
    """Everything the dashboard page shows of ``project``. ``status`` is exactly
    :func:`status_report` (``labelq status -o json``); each worker of it also gets its
    :func:`gold_summary` in ``gold``."""
    st = status_report(session, project)
    return {"status": st, "gold": worker_gold(session, project),
            "throughput": throughput(session, project, left=st["left"]),
            "quality": quality(session, project)}


def _mean_conf(result, mask: np.ndarray) -> float | None:
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
SUGGEST_SECONDS = 60.0  # the dashboard's list is recomputed at most this often
SUGGEST_TOP = 10
_SUGGESTED: dict[tuple[int, int], tuple[float, tuple, dict[str, Any]]] = {}


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
                hit = _CURRENT.get(project.id)
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


def gold_suggestions(session: Session, project: Project, *, n: int = SUGGEST_TOP
                     ) -> dict[str, Any]:
    """The dashboard's list: :func:`project_gold_suggestions` (``current`` from the
    dashboard's own last fit) with ``labels`` (how many the computation saw) and
    ``computed`` (ISO time). Kept per project: recomputed at once when the tasks, the
    gold (``labelq gold mark``), the label set or the method changed; when only labels
    arrived, once the kept list is older than :data:`SUGGEST_SECONDS` — one computation a
    minute at most while labels arrive (~1 s per 100k labels)."""
    import time

    n_labels, last = session.exec(select(func.count(Label.id), func.max(Label.id))
                                  .where(Label.project_id == project.id)).one()
    n_tasks, n_gold = session.exec(
        select(func.count(Task.id), func.coalesce(func.sum(case((Task.is_gold, 1), else_=0)), 0))
        .where(Task.project_id == project.id)).one()
    key = (int(n_labels), last, int(n_tasks), int(n_gold), tuple(project.labels),
           project.aggregation)
    with _LOCK:
        hit = _SUGGESTED.get((project.id, n))
    if hit is not None and (hit[1] == key or (hit[1][2:] == key[2:]
                                              and time.monotonic() - hit[0] < SUGGEST_SECONDS)):
        return hit[2]  # unchanged, or only labels arrived within the last minute
    rows = project_gold_suggestions(session, project, n=n, current="cached")
    out = {"labels": int(n_labels), "computed": _iso(time.time()),
           "refresh_seconds": SUGGEST_SECONDS, "tasks": rows}
    with _LOCK:
        if len(_SUGGESTED) > 1000:
            _SUGGESTED.clear()
        _SUGGESTED[(project.id, n)] = (time.monotonic(), key, out)
    return out
