"""Aggregated export and agreement of a project, from the durable record.

The labels of a project become the aggregation package's dense arrays (task seq, worker seq,
class index). Gold questions take part in the fit with their answers clamped — they teach
the model how reliable each worker is — but are never exported as data, except tasks marked
gold after loading (``labelq gold mark``), which are data with a known answer. ``method="policy"``
uses the project's own policy posterior (Opt-KG's Beta/Dirichlet, BBTA's weighted vote),
folded from SQL exactly as the live pipeline folds it — the labels its applier has not
reached yet included, in the order it will take them.
"""

from __future__ import annotations

import csv
import json
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlmodel import Session, col, select

from .aggregation import (
    AutoAggregator,
    PosteriorAggregator,
    aggregate,
    evidence,
    fleiss_kappa,
    krippendorff_alpha,
    worker_accuracy,
)
from .aggregation.base import BaseAggregator, check_labels
from .aggregation.guard import AUDIT_HALF_WIDTH, AccuracyEstimate
from .errors import InputError
from .exportfiles import FORMATS, atomic_output, payload_schema, task_details, write_rows
from .policies._model_source import gold_reading
from .record.models import Label, Project, Task, Worker, random_gold
from .record.problem import ProjectView, load_view
from .record.projects import METHODS, check_method

#: what an aggregation's fit is: an aggregator, or the policy's own posterior
Fitted = BaseAggregator | PosteriorAggregator

__all__ = ["ProjectLabels", "load_project_labels", "aggregate_project", "aggregation_notes",
           "aggregated_rows", "answer_columns", "answer_evidence", "answer_source", "SOURCES",
           "accuracy_note", "calibration_note", "audit_note",
           "model_report", "model_notes", "saved_labels", "saved_line",
           "agreement_report", "METHODS", "atomic_output", "write_rows", "write_dataset",
           "export_file", "RAW_TYPES", "FORMATS"]



@dataclass
class ProjectLabels:
    view: ProjectView
    external_ids: list[str]
    handles: list[str]
    task: np.ndarray
    worker: np.ndarray
    label: np.ndarray
    # bool (n_tasks,): tasks marked gold after loading (exported with their answer)
    marked: np.ndarray | None = None
    # bool (n_tasks,): gold whose answer is a random sample (kinds loaded, audit): the
    # gold that calibrates the confidences and the accuracy estimate (None: all gold)
    random_gold: np.ndarray | None = None
    # bool per label: given with the model's answer shown (``show_suggestions``; issue 42)
    suggested: np.ndarray | None = None

    @property
    def classes(self) -> list[str]:
        return list(self.view.project.labels)


def load_project_labels(session: Session, project: Project, *,
                        exclude_paused: bool = False) -> ProjectLabels:
    """All labels of ``project`` as dense arrays; ``exclude_paused`` drops the labels of
    workers who are paused or removed now."""
    view = load_view(session, project)
    ext = list(session.exec(select(Task.external_id).where(Task.project_id == project.id)
                            .order_by(Task.seq)))
    workers = session.exec(select(Worker.handle, Worker.status)
                           .where(Worker.project_id == project.id).order_by(Worker.seq)).all()
    from sqlalchemy import select as sa_select

    q = (sa_select(col(Task.seq), col(Worker.seq), col(Label.value), col(Worker.status),
                   col(Label.suggested))
         .join(Task, col(Task.id) == col(Label.task_id))
         .join(Worker, col(Worker.id) == col(Label.worker_id))
         .where(col(Label.project_id) == project.id).order_by(col(Label.id)))
    rows = session.execute(q).all()
    if exclude_paused:
        rows = [r for r in rows if r[3] == "active"]
    index = {v: i for i, v in enumerate(project.labels)}
    marked = np.zeros(view.n_tasks, dtype=bool)
    marked[list(session.exec(select(Task.seq).where(Task.project_id == project.id,
                                                    col(Task.marked).is_not(None))))] = True
    random = np.zeros(view.n_tasks, dtype=bool)
    random[list(session.exec(select(Task.seq).where(
        Task.project_id == project.id, col(Task.is_gold).is_(True), random_gold())))] = True
    return ProjectLabels(
        view, ext, [w[0] for w in workers],
        np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows)),
        np.fromiter((r[1] for r in rows), dtype=np.int64, count=len(rows)),
        np.fromiter((index[r[2]] for r in rows), dtype=np.int64, count=len(rows)), marked,
        random, np.fromiter((bool(r[4]) for r in rows), dtype=bool, count=len(rows)))


def aggregate_project(session: Session, project: Project, pl: ProjectLabels, method: str
                      ) -> Fitted:
    """Fit ``method`` on the project's labels; the result has ``labels_``, ``probas_``,
    ``confidence_`` over all tasks (gold included, clamped)."""
    check_method(project, method)  # unknown, or one the project's labels cannot run
    if method == "policy":
        from .live.hotstate import fold_from_sql

        hot = fold_from_sql(session, project, unapplied=True)
        return PosteriorAggregator(hot.policy.predict_proba(hot.state))
    v = pl.view
    # a project routed by the auto policy is exported with the worker model it was routed
    # with (one estimate from routing to export), guarded by majority vote as any other
    params: dict[str, Any] = {"model": "shrunk"} if method == "auto" and \
        (project.policy or {}).get("name") == "auto" else {}
    # only random gold (loaded, audit) calibrates; chosen gold (suggested, reviewed: picked
    # for being doubtful) chooses the method but does not calibrate it
    # (labelq/aggregation/guard.py)
    calibration = pl.random_gold
    suggested = pl.suggested if pl.suggested is not None and pl.suggested.any() else None
    # the latest version of each model (issue 42): one more source, its reliability
    # measured against the labels and gold (docs/models.md); read with the view
    return aggregate(pl.task, pl.worker, pl.label, method, n_tasks=v.n_tasks,
                     n_classes=len(project.labels), n_workers=max(v.n_workers, 1),
                     categories=v.task_category, gold=v.gold_answer,
                     calibration=calibration, predictions=v.predictions,
                     suggested=suggested, **params)


def aggregation_notes(pl: ProjectLabels, method: str, result: Fitted
                      ) -> tuple[str, str | None]:
    """What to tell the person exporting: which method made the answers (for ``auto``, the
    one it chose and why) and, when the confidences rest on too few checkable labels per
    worker and no gold calibrated them, a warning (else ``None``)."""
    rule = result if isinstance(result, AutoAggregator) else AutoAggregator()
    if isinstance(result, AutoAggregator):
        note = f"aggregation: auto chose {result.method_} ({result.reason_})"
        note += "\n" + accuracy_note(result)
        dis = result.disagreement_
        if result.guarded_ and dis["overruled"]:
            note += (f"\nmajority vote and {result.method_} disagree on {dis['differ']} of "
                     f"{dis['tasks']} tasks (mean difference in probability "
                     f"{dis['mean_abs_diff']:.3f}); gold answers settle which is right: "
                     f"`labelq gold suggest` lists the tasks to ask an expert")
        ev, trusted = result.evidence_, result.trustworthy_
        note += "".join("\n" + line for line in model_notes(pl, result))
    else:
        note = f"aggregation: {method}"
        v = pl.view
        d = check_labels(pl.task, pl.worker, pl.label, v.n_tasks, max(v.n_workers, 1),
                         len(pl.classes))
        ev = evidence(d, v.gold_answer)
        trusted = ev.support >= rule.min_support
        note += "".join("\n" + line for line in model_notes(pl, result))
    if trusted:
        return note, None
    return note, (
        f"warning: confidences are not trustworthy yet: the typical label's worker has "
        f"{ev.labels_per_worker:g} labels that another label or a gold answer can check "
        f"({ev.support:.1f} per confusion cell of {ev.n_classes} classes, "
        f"{rule.min_support:g} wanted) and {ev.n_gold} gold answers "
        f"({rule.trust_gold} calibrate); add gold answers or labels per task "
        f"before trusting the confidence column")


def accuracy_note(result: AutoAggregator) -> str:
    """The accuracy estimate of ``auto``'s answers as one line: with random gold answers
    (gold questions, audit answers) its exact 95 % interval; without them the models'
    belief, said to be unchecked, and the audit that would bound it
    (labelq/aggregation/guard.py). A second line says whether the confidences are
    calibrated and on how many random answers."""
    a = result.accuracy_
    if a.n_tasks == 0:
        return "estimated accuracy: - (no labelled task)"
    if a.basis == "gold" and a.low is not None and a.high is not None:
        line = (f"estimated accuracy {a.estimate:.3f} (95% interval {a.low:.3f}-{a.high:.3f}; "
                f"exact, from {a.n_right} of {a.n_gold} random gold answers right, each "
                f"held out)")
    else:
        k = int(result.calibration_["answers"])
        why = ("no random gold answers" if k == 0 else
               f"{k} random gold answers, too few to hold out: {result.min_gold} gold "
               f"answers are needed")
        line = (f"estimated accuracy {a.estimate:.3f}: the models' belief, unchecked ({why}); "
                f"{audit_note(a)}")
    return line + "\n" + calibration_note(result)


def audit_note(a: AccuracyEstimate) -> str:
    """How many random answers (`labelq gold audit`) would bound the models' belief."""
    at = (f"`labelq gold audit NAME --n {a.audit_n}` would bound it to "
          f"+-{AUDIT_HALF_WIDTH:g} if it is near this belief" if a.audit_n is not None else
          f"no audit of these {a.n_tasks} tasks bounds the rest to +-{AUDIT_HALF_WIDTH:g}")
    if a.floor is not None and a.audit_n_floor != a.audit_n:
        at += (f" ({'--n ' + str(a.audit_n_floor) if a.audit_n_floor is not None else 'more'}"
               f" if it is as low as one label's accuracy, {a.floor:.2f})")
    return at


def calibration_note(result: AutoAggregator) -> str:
    """Whether ``auto``'s confidences are calibrated, and on how many random answers."""
    c = result.calibration_
    if c["calibrated"]:
        return (f"confidences: calibrated on {c['answers']} random gold answers, held out "
                f"(temperature {c['temperature']:g}, then shrunk bins)")
    return (f"confidences: not calibrated (the models' own): {c['answers']} random gold "
            f"answers, {result.calibrate_gold} calibrate")


#: what an exported answer is (the ``source`` column): the aggregate of the labels (and
#: models), an expert's answer (gold marked ``suggested`` or ``reviewed``), a random gold
#: answer (``loaded``, ``audit``), a model's alone, or none (no label, no prediction)
SOURCES = ("aggregated", "expert", "gold", "model", "none")


def answer_evidence(pl: ProjectLabels, result: Fitted) -> list[str]:
    """Per task what its answer rests on (the ``evidence`` column, issue 42): ``humans``,
    ``humans+model``, ``model`` (the model alone), ``none`` (no answer), ``gold`` (a gold
    question: its answer is known). The fit's ``source_`` with the project's models;
    without any, from the labels."""
    got = getattr(result, "source_", None)
    if got is None:
        counts = np.bincount(pl.task, minlength=pl.view.n_tasks)
        got = np.where(counts > 0, "humans", "none").tolist()
    return ["gold" if g >= 0 else s
            for s, g in zip(got, pl.view.gold_answer.tolist(), strict=True)]


def answer_source(pl: ProjectLabels, evidence: list[str]) -> list[str]:
    """Per task what its answer is (the ``source`` column, one of :data:`SOURCES`): a gold
    task's known answer is ``gold`` when it is a random one (kinds ``loaded``, ``audit``)
    and ``expert`` when an expert answered it on review (``suggested``, ``reviewed``); a
    task the model alone settled is ``model``; one with no answer ``none``; any other
    ``aggregated``. ``evidence``: :func:`answer_evidence`."""
    rand = pl.random_gold if pl.random_gold is not None else pl.view.is_gold
    out = []
    for seq, ev in enumerate(evidence):
        if ev == "gold":
            out.append("gold" if rand[seq] else "expert")
        else:
            out.append(ev if ev in ("model", "none") else "aggregated")
    return out


def aggregated_rows(pl: ProjectLabels, result: Fitted,
                    details: Iterable[tuple[int, dict[str, Any], list[dict[str, Any]]]]
                    | None = None) -> Iterator[dict[str, Any]]:
    """One row per non-gold task (and per task marked gold after loading, with its known
    answer, confidence 1): id, category, label, confidence, labels, source (what the
    answer is: :func:`answer_source`), evidence (what it rests on: :func:`answer_evidence`),
    per-class probabilities; with ``details`` (:func:`labelq.exportfiles.task_details`,
    the same tasks in the same order) also ``payload`` (the task's object) and ``labels``
    (its per-annotator labels).

    A task with neither a label nor a model's prediction has no label (``None``: an empty
    CSV field, JSON null; source ``none``); its confidence and probabilities are the
    method's prior guess, so that a consumer who reads only ``label`` never takes a guess
    for an answer. A task a model predicted and no one labelled has the model's answer
    as the fit reads it (source ``model``)."""
    counts = np.bincount(pl.task, minlength=pl.view.n_tasks)
    classes = pl.classes
    evidence = answer_evidence(pl, result)
    sources = answer_source(pl, evidence)
    data = ~pl.view.is_gold if pl.marked is None else ~pl.view.is_gold | pl.marked
    more = iter(details) if details is not None else None
    for seq in np.flatnonzero(data).tolist():
        known = int(pl.view.gold_answer[seq])
        label: str | None
        if known >= 0:  # marked gold: the answer is known, whatever the method says
            probas = np.zeros(len(classes))
            probas[known] = 1.0
            label, confidence = classes[known], 1.0
        else:
            probas = result.probas_[seq]
            label = classes[result.labels_[seq]] if evidence[seq] != "none" else None
            confidence = float(result.confidence_[seq])
        row = {"task": pl.external_ids[seq], "category": pl.view.category_of(seq),
               "label": label, "confidence": round(confidence, 6),
               "n_labels": int(counts[seq]), "source": sources[seq],
               "evidence": evidence[seq]}
        for k, c in enumerate(classes):
            row[f"p_{c}"] = round(float(probas[k]), 6)
        if more is not None:
            got = next(more, None)
            if got is None or got[0] != seq:  # tasks added or removed between the reads
                raise InputError(f"the tasks of project {pl.view.project.name!r} changed "
                                 "during the export; export again", field="task")
            row["payload"], row["labels"] = got[1], got[2]
        yield row


#: the fixed columns' kinds (Parquet: :func:`labelq.exportfiles.write_parquet`); the
#: per-class probabilities are ``float``
ANSWER_TYPES = {"task": "str", "category": "str", "label": "str", "confidence": "float",
                "n_labels": "int", "source": "str", "evidence": "str", "labels": "labels"}


def answer_columns(pl: ProjectLabels) -> tuple[list[str], dict[str, str]]:
    """The fixed columns of an answers file and their kinds (Parquet's types)."""
    probas = [f"p_{c}" for c in pl.classes]
    cols = ["task", "category", "label", "confidence", "n_labels", "source", "evidence",
            *probas]
    return cols, {**ANSWER_TYPES, **{p: "float" for p in probas}}


def model_report(pl: ProjectLabels, result: Fitted) -> dict[str, Any] | None:
    """The project's models as the export measured them (None without any): per source
    (``MODEL@vN``) its accuracy per class with the 95 % interval and the answers it rests
    on (:class:`~labelq.policies._model_source.ModelAccuracy`, keyed by class name), and
    how many exported answers rest on each kind of evidence, the model alone included."""
    measured = getattr(result, "model_accuracy_", None)
    if not pl.view.predictions or measured is None:
        return None
    classes = pl.classes
    data = ~pl.view.is_gold if pl.marked is None else ~pl.view.is_gold | pl.marked
    sources = np.asarray(answer_evidence(pl, result))[data]
    models: dict[str, Any] = {}
    g = np.asarray(pl.view.gold_answer, np.int64)
    random = g if pl.random_gold is None else np.where(pl.random_gold, g, -1)
    for name, acc in measured.items():
        per_class: dict[str, dict[str, Any]] = {}
        # the reading to show (docs/models.md): on random gold alone where the class has
        # any, else the EM's (agreement with the annotators), labelled as such
        r_acc, r_low, r_high, r_n = gold_reading(pl.view.predictions[name], random)
        for k, c in enumerate(classes):
            per_class[c] = {"accuracy": _num(acc.accuracy[k]), "low": _num(acc.low[k]),
                            "high": _num(acc.high[k]),
                            "answers": round(float(acc.answers[k]), 2),
                            "gold": int(acc.gold[k])}
            if acc.gold_accuracy is not None:
                per_class[c].update(
                    gold_accuracy=_num(acc.gold_accuracy[k]),
                    gold_low=_num(acc.gold_low[k]) if acc.gold_low is not None else None,
                    gold_high=_num(acc.gold_high[k]) if acc.gold_high is not None else None)
            on_gold = bool(r_n[k] > 0)
            per_class[c]["reading"] = {
                "basis": "random gold" if on_gold else "agreement",
                "accuracy": _num(r_acc[k] if on_gold else acc.accuracy[k]),
                "low": _num(r_low[k] if on_gold else acc.low[k]),
                "high": _num(r_high[k] if on_gold else acc.high[k]),
                "answers": int(r_n[k]) if on_gold else round(float(acc.answers[k]), 2)}
        models[name] = {"classes": per_class, "overall": _num(acc.overall),
                        "overall_low": _num(acc.overall_low),
                        "overall_high": _num(acc.overall_high)}
    kinds = ("humans", "humans+model", "model", "none", "gold")
    return {"models": models,
            "answers": {kd: int(np.count_nonzero(sources == kd)) for kd in kinds},
            "model_alone": int(np.count_nonzero(sources == "model")),
            "saved": saved_labels(pl)}


_SAVED: dict[tuple[Any, ...], tuple[int, dict[str, Any] | None]] = {}
#: the saving is computed again once the labels grew by this share since (a twin run takes
#: seconds: the dashboard's figures, refreshed as labels arrive, reuse it in between)
SAVED_REFRESH = 0.1


def saved_labels(pl: ProjectLabels) -> dict[str, Any] | None:
    """How many human labels the project's models saved (:mod:`labelq.modelsavings`: the
    labels ``auto`` without them needs on simulated twins of the project to reach the
    accuracy it reaches with them), as a dict; None without a model or a label. Kept per
    project, model versions and policy, and computed again once the labels grew by
    :data:`SAVED_REFRESH` (its ``labels`` says at how many it was)."""
    v = pl.view
    n = int(pl.task.size)
    if not v.predictions or n == 0:
        return None
    # (the first labels stand for the database: labels are only appended, and two
    # databases' projects may share an id)
    key = (v.project.id, v.n_tasks, hash(pl.task[:1000].tobytes() + pl.label[:1000].tobytes()),
           tuple(sorted(v.predictions)), json.dumps(v.project.policy or {}, sort_keys=True))
    got = _SAVED.get(key)
    if got is not None and got[0] <= n <= got[0] * (1.0 + SAVED_REFRESH):
        return got[1]
    from .modelsavings import labels_saved

    est = labels_saved(pl.task, pl.worker, pl.label, n_tasks=v.n_tasks,
                       n_workers=max(v.n_workers, 1), n_classes=len(pl.classes),
                       predictions=v.predictions, gold=v.gold_answer,
                       categories=v.task_category, policy=v.project.policy,
                       random_gold=pl.random_gold)
    out = None if est is None else est.to_dict()
    if len(_SAVED) > 256:
        _SAVED.clear()
    _SAVED[key] = (n, out)
    return out


def model_notes(pl: ProjectLabels, result: Fitted) -> list[str]:
    """:func:`model_report` as lines for the person exporting (none without a model):
    each model's measured accuracy per class with its interval and the answers it rests
    on, and how many answers rest on the model alone -- whose accuracy only random gold
    checks (``labelq gold audit``)."""
    report = model_report(pl, result)
    if report is None:
        return []
    lines = []
    for name, m in report["models"].items():
        reads = [f"{c} {_pct(r['accuracy'])} ({_pct(r['low'])}-{_pct(r['high'])}, "
                 f"{r['basis']}, {r['answers']:g} answers)"
                 for c, v in m["classes"].items() for r in [v["reading"]]]
        lines.append(f"model {name}: reading per class (95% interval; on random gold "
                     f"where there is any, else on agreement with the annotators, which "
                     f"leans where their errors lean): {'; '.join(reads)}")
        parts = [f"{c} {_pct(v['accuracy'])} ({_pct(v['low'])}-{_pct(v['high'])}, "
                 f"{v['answers']:g} answers, {v['gold']} gold"
                 + (f"; on gold alone {_pct(v['gold_accuracy'])} ({_pct(v['gold_low'])}-"
                    f"{_pct(v['gold_high'])})" if v.get("gold_accuracy") is not None else "")
                 + ")" for c, v in m["classes"].items()]
        lines.append(f"model {name}: measured accuracy per class (95% interval, the "
                     f"answers it rests on): {'; '.join(parts)}; overall "
                     f"{_pct(m['overall'])} ({_pct(m['overall_low'])}-"
                     f"{_pct(m['overall_high'])})")
    alone, n = report["model_alone"], sum(report["answers"].values())
    lines.append(f"answers resting on the model alone: {alone} of {n}")
    if report.get("saved") is not None:
        lines.append(saved_line(report["saved"]))
    if alone:
        lines.append(f"note: the {alone} answers resting on the model alone are checked "
                     f"only by random gold: `labelq gold audit {pl.view.project.name}` "
                     f"draws tasks to ask an expert")
    return lines


def saved_line(sv: dict[str, Any]) -> str:
    """The labels the models saved, as one line (docs/models.md says how it is read)."""
    more = "at least " if sv["at_least"] else ""
    return (f"human labels the models saved: {more}{sv['saved']:.0f} ± {sv['saved_se']:.0f} "
            f"(auto without them would need {more}{sv['labels_without']:.0f} labels to reach "
            f"the accuracy {sv['accuracy_with']:.3f} it reaches with them at this project's "
            f"{sv['labels']}; {sv['seeds']} simulated twins of {sv['twin_tasks']} tasks)")


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def agreement_report(pl: ProjectLabels, result: Fitted) -> dict[str, Any]:
    """Krippendorff's alpha, Fleiss' kappa (non-gold tasks) and a per-worker table of
    accuracy against gold (on the gold answered without a model's suggestion shown) and
    against the aggregate."""
    v = pl.view
    if pl.task.size == 0:  # nothing to agree on yet
        return {"krippendorff_alpha": None, "fleiss_kappa": None, "labels": 0,
                "workers": [{"worker": h, "labels": 0, "gold_n": 0, "gold_accuracy": None,
                             "aggregate_n": 0, "aggregate_accuracy": None}
                            for h in pl.handles]}
    data = ~v.is_gold[pl.task]
    n_classes = len(pl.classes)
    alpha = krippendorff_alpha(pl.task[data], pl.label[data], v.n_tasks, n_classes)
    kappa = fleiss_kappa(pl.task[data], pl.label[data], v.n_tasks, n_classes)
    n_w = max(v.n_workers, 1)
    # gold scores on the answers given without a model's suggestion shown (issue 42,
    # docs/models.md): a label marked ``suggested`` on a task a model predicted is left out
    scored = np.ones(pl.task.size, dtype=bool)
    if pl.suggested is not None and pl.suggested.any() and v.predictions:
        predicted = np.zeros(v.n_tasks, dtype=bool)
        for arr in v.predictions.values():
            predicted |= ~np.isnan(arr).any(axis=1)
        scored = ~(pl.suggested & predicted[pl.task])
    vs_gold = worker_accuracy(pl.task[scored], pl.worker[scored], pl.label[scored],
                              v.gold_answer, n_w)
    reference = np.where(v.is_gold, -1, result.labels_)
    vs_agg = worker_accuracy(pl.task, pl.worker, pl.label, reference, n_w)
    workers = []
    for j, handle in enumerate(pl.handles):
        workers.append({
            "worker": handle, "labels": int(np.sum(pl.worker == j)),
            "gold_n": int(vs_gold.n[j]), "gold_accuracy": _num(vs_gold.accuracy[j]),
            "aggregate_n": int(vs_agg.n[j]), "aggregate_accuracy": _num(vs_agg.accuracy[j])})
    return {"krippendorff_alpha": _num(alpha), "fleiss_kappa": _num(kappa),
            "labels": int(pl.task.size), "workers": workers}


def _num(x: float) -> float | None:
    x = float(x)
    return None if np.isnan(x) else round(x, 6)


#: the kinds of the raw export's columns (Parquet's types)
RAW_TYPES = {"task": "str", "worker": "str", "label": "str", "received": "time",
             "is_gold": "bool", "category": "str", "assignment": "str"}


def export_file(session: Session, project: Project, out: str, fmt: str, *,
                raw: bool = False, pl: ProjectLabels | None = None,
                result: Fitted | None = None, exclude_paused: bool = False,
                progress: Callable[[int], None] | None = None, every: int = 5000) -> int:
    """Write ``project``'s export to ``out`` (``-``: standard output) atomically, in ``fmt``
    (:data:`~labelq.exportfiles.FORMATS`): with ``raw`` every label
    (:data:`~labelq.reporting.RAW_COLUMNS`), else one row per exported task from ``pl``
    and its fit ``result`` with the task's payload (CSV and Parquet: ``payload.<field>``
    columns; JSONL: the object) and, in JSONL and Parquet, its per-annotator labels
    (:mod:`labelq.exportfiles`). Returns the number of rows."""
    from .exportfiles import require_pyarrow, write_parquet
    from .reporting import RAW_COLUMNS, iter_raw_labels

    if fmt not in FORMATS:
        raise InputError(f"unknown export format {fmt!r}; use {', '.join(FORMATS)}",
                         field="format")
    if fmt == "parquet":
        require_pyarrow()
        if out == "-":
            raise InputError("the parquet format is binary: give --out FILE",
                             field="out")
    schema = None
    if raw:
        rows = iter_raw_labels(session, project)
        if exclude_paused:
            active = {h for h, st in session.exec(
                select(Worker.handle, Worker.status).where(
                    Worker.project_id == project.id)) if st == "active"}
            rows = (r for r in rows if r["worker"] in active)
        columns, types = list(RAW_COLUMNS), RAW_TYPES
    else:
        if pl is None or result is None:
            raise TypeError("an answers export needs the project's labels and their fit")
        schema = payload_schema(session, project)
        rows = aggregated_rows(pl, result, task_details(session, project,
                                                        exclude_paused=exclude_paused))
        columns, types = answer_columns(pl)
    with atomic_output(out, binary=fmt == "parquet") as fh:
        if fmt == "parquet":
            return write_parquet(rows, fh, columns=columns, types=types, schema=schema,
                                 after=() if raw else ("labels",), progress=progress,
                                 every=every)
        return write_rows(rows, fh, fmt, columns=columns, schema=schema, progress=progress,
                          every=every)


def write_dataset(session: Session, project: Project, directory: str | os.PathLike[str], *,
                  truth: str = "gold") -> dict[str, int]:
    """Write the project as a data set the simulator replays (``labelq simulate --data``):
    ``labels.csv`` (task, worker, label: every label, gold included), ``truth.csv`` and,
    when tasks have categories, ``task_types.csv``. ``truth="gold"``: the gold answers only
    (the simulator then scores on the gold tasks); ``truth="ds"``: also Dawid-Skene's answer
    for every labelled task, from all the project's labels — a reference to ask how close a
    policy gets with fewer. The folder must not exist or be empty; files are written to a
    temporary folder beside it and moved in at the end."""
    import shutil
    from pathlib import Path

    if truth not in ("gold", "ds"):
        raise InputError(f"truth must be gold or ds, got {truth!r}", field="truth")
    target = Path(directory)
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise InputError(f"{target} exists and is not an empty folder", path=str(target))
    pl = load_project_labels(session, project)
    v = pl.view
    if pl.task.size == 0:
        raise InputError(f"project {project.name!r} has no labels to write",
                         project=project.name)
    classes, ext = pl.classes, pl.external_ids
    labelled = np.unique(pl.task)
    reference: dict[int, str] = {int(t): classes[int(v.gold_answer[t])]
                                 for t in np.flatnonzero(v.is_gold) if v.gold_answer[t] >= 0}
    if truth == "ds":
        result = aggregate_project(session, project, pl, "ds")
        for t in labelled[~v.is_gold[labelled]]:
            reference[int(t)] = classes[int(result.labels_[t])]
    typed = [t for t in labelled if v.category_of(t)]
    parent = target.resolve().parent
    parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=parent))
    try:
        _write_csv(tmp / "labels.csv", ["task", "worker", "label"],
                   ((ext[t], pl.handles[j], classes[k])
                    for t, j, k in zip(pl.task, pl.worker, pl.label, strict=True)))
        _write_csv(tmp / "truth.csv", ["task", "truth"],
                   ((ext[t], c) for t, c in sorted(reference.items())))
        if typed:
            _write_csv(tmp / "task_types.csv", ["task", "type"],
                       ((ext[t], v.category_of(t)) for t in labelled))
        if target.exists():
            target.rmdir()
        os.replace(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return {"labels": int(pl.task.size), "tasks": int(labelled.size),
            "truth": len(reference), "categorised": len(typed)}


def _write_csv(path: str | os.PathLike[str], header: list[str],
               rows: Iterable[Iterable[object]]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
