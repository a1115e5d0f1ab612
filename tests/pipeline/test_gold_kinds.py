"""Gold of kinds (issue 41): random samples (gold loaded as gold, audits) score annotators,
chosen answers (``gold suggest`` -> ``gold mark``, other reviews) never do. The new
operator's loop end to end through the service, a real applier and the real quality rule;
the audit's answers coming back as kind audit; ``gold mark --kind``. Real Redis."""

from __future__ import annotations

import csv
import json
import re

import numpy as np
import pytest
from click.testing import CliRunner
from sqlalchemy import func
from sqlmodel import col, select

from cli.main import cli
from labelq.errors import Forbidden
from labelq.live.applier import Applier
from labelq.record.db import engine_for, init_schema, session_scope
from labelq.record.goldstats import gold_scores
from labelq.record.loading import load_tasks
from labelq.record.models import Label, Task, Worker
from labelq.record.projects import create_project, enroll_worker
from labelq.record.settings import Settings
from labelq.service import Service

# the workforce: three skilled annotators and one answering at random (yes/no)
ACCURACY = {"ann-92": 0.92, "ann-85": 0.85, "ann-80": 0.80, "ann-rnd": 0.5}
# the fair rule of docs/gold.md: with the answers fixed as below, the chance that it ever
# pauses the 0.80 annotator is 0.03 % (simulated, every gold answer looked at; 0.7 % for the
# posterior rule), while it catches the random one about 70 % of the time
QUALITY = {"threshold": 0.7, "min_gold": 10, "confidence": 0.95, "rule": "sequential"}


def _write(path, rows, answer: bool) -> None:
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "category", "text", *(["answer"] if answer else [])])
        for r in rows:
            w.writerow(r)


def _setup(url: str, tmp_path, rng: np.random.Generator, *, n_tasks: int, n_gold: int,
           gold_schedule: str | None, quality: dict | None):
    """A yes/no project (two categories) with tasks t0.. and gold g0.. loaded from files as
    ``labelq tasks load`` / ``gold load`` do, and the four annotators; returns (engine,
    project id, truth by task id)."""
    eng = engine_for(url)
    init_schema(eng)
    truth = {}
    tasks, gold = [], []
    for i in range(n_tasks):
        truth[f"t{i}"] = str(rng.choice(["yes", "no"]))
        tasks.append((f"t{i}", f"c{i % 2}", f"item {i}"))
    for i in range(n_gold):
        truth[f"g{i}"] = str(rng.choice(["yes", "no"]))
        gold.append((f"g{i}", f"c{i % 2}", f"gold item {i}", truth[f"g{i}"]))
    _write(tmp_path / "tasks.csv", tasks, answer=False)
    _write(tmp_path / "gold.csv", gold, answer=True)
    with session_scope(eng) as s:
        p = create_project(s, "p", "yes,no", max_labels=3, gold_schedule=gold_schedule,
                           quality=quality)
        load_tasks(s, p, tmp_path / "tasks.csv")
        if n_gold:
            load_tasks(s, p, tmp_path / "gold.csv", gold=True)
        for h in ACCURACY:
            enroll_worker(s, p, h)
        return eng, p.id, truth


def _answers(truth: dict[str, str], rng: np.random.Generator) -> dict[str, dict[str, str]]:
    """What each annotator answers to each task, fixed up front (the service decides the
    order in which they meet the tasks, with timing in it; the answers do not depend on
    it): right with probability their accuracy on a task, and on the gold pool right on
    exactly round(accuracy x pool) questions, so that their accuracy on the gold they can
    be asked *is* their true accuracy."""
    gold = [t for t in truth if t.startswith("g")]
    out: dict[str, dict[str, str]] = {}
    for h, acc in ACCURACY.items():
        right = {t: bool(rng.random() < acc) for t in truth if t.startswith("t")}
        on_gold = np.zeros(len(gold), dtype=bool)
        on_gold[rng.permutation(len(gold))[:round(acc * len(gold))]] = True
        right.update(zip(gold, on_gold.tolist(), strict=True))
        out[h] = {t: truth[t] if ok else ("no" if truth[t] == "yes" else "yes")
                  for t, ok in right.items()}
    return out


def _label(svc: Service, applier: Applier, pid: int, answers: dict[str, dict[str, str]], *,
           limit: int, apply_every: int = 40) -> int:
    """The annotators take turns through the service, each answering as ``answers`` says
    (gold questions alike: they cannot tell them apart) until ``limit`` labels or nothing is
    left; the applier folds the labels every ``apply_every`` (judging gold answers as it
    does live). A paused annotator gets no more work. Returns the labels given."""
    given, active = 0, list(ACCURACY)
    while active and given < limit:
        for h in list(active):
            try:
                a = svc.next_assignment(h)
            except Forbidden:  # paused by the quality rule
                active.remove(h)
                continue
            if a is None:
                active.remove(h)
                continue
            svc.submit(h, a.assignment_id, answers[h][a.task])
            given += 1
            if given % apply_every == 0:
                applier.apply_pending(pid)
    applier.apply_pending(pid)
    return given


@pytest.mark.timeout(600)
def test_suggested_gold_marked_by_the_documented_loop_scores_no_one(r, redis_url, sqlite_url,
                                                                    tmp_path):
    # Given a project with a gold schedule, loaded gold and the quality rule, and four
    # annotators (true accuracy 0.92 / 0.85 / 0.80 / random) labelling through the service
    rng = np.random.default_rng(41)
    eng, pid, truth = _setup(sqlite_url, tmp_path, rng, n_tasks=400, n_gold=60,
                             gold_schedule="fixed:rate=0.15", quality=QUALITY)
    answers = _answers(truth, rng)
    settings = Settings(database_url=sqlite_url, decision_seed=7)  # (the same run each time)
    svc = Service(eng, r, settings=settings, worker_max_age=0, state_max_age=0)
    applier = Applier(eng, r, settings=settings)
    _label(svc, applier, pid, answers, limit=700)
    env = {"LABELQ_DATABASE_URL": sqlite_url, "LABELQ_REDIS_URL": redis_url}
    run = CliRunner()
    # When the operator follows the documented loop: 50 suggested tasks, the expert's
    # answers (the truth) filled in, marked with gold mark
    out = tmp_path / "suggest.csv"
    res = run.invoke(cli, ["gold", "suggest", "p", "--n", "50", "--out", str(out)], env=env)
    assert res.exit_code == 0, res.output
    with open(out, newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 50
    for row in rows:
        row["answer"] = truth[row["id"]]
    with open(out, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    res = run.invoke(cli, ["gold", "mark", "p", "--file", str(out), "-o", "json"], env=env)
    assert res.exit_code == 0, res.output
    marked = json.loads(res.stdout)
    assert marked["marked"] == 50 and marked["kinds"] == {"suggested": 50}
    assert marked["paused"] == [] and marked["labels"] > 50
    # and the annotators go on (the marked tasks now served as gold questions too)
    _label(svc, applier, pid, answers, limit=700)
    # Then no annotator of true accuracy >= 0.8 is paused, and each one's shown gold
    # accuracy has the truth within its shown 95 % interval
    res = run.invoke(cli, ["workers", "list", "--project", "p", "-o", "json"], env=env)
    assert res.exit_code == 0, res.output
    shown = {w["handle"]: w for w in json.loads(res.stdout)}
    for h, acc in ACCURACY.items():
        if acc >= 0.8:
            w = shown[h]
            assert w["status"] == "active", (h, w)
            lo, hi = w["gold_interval"]
            assert lo <= acc <= hi, (h, acc, w)
    # they are scored on random gold only: the loaded gold's answers, counted in SQL
    with session_scope(eng) as s:
        n_loaded = {h: int(n) for h, n in s.exec(
            select(col(Worker.handle), func.count())
            .join(Label, col(Label.worker_id) == col(Worker.id))
            .join(Task, col(Task.id) == col(Label.task_id))
            .where(col(Task.gold_kind) == "loaded").group_by(col(Worker.handle))).all()}
        kinds = {k: int(n) for k, n in s.exec(
            select(col(Task.gold_kind), func.count())
            .where(col(Task.project_id) == pid, col(Task.is_gold).is_(True))
            .group_by(col(Task.gold_kind))).all()}
        every = gold_scores(s, pid, [0, 1, 2, 3], [""])
        chosen = gold_scores(s, pid, [0, 1, 2, 3], [""], chosen=True)
    assert kinds == {"loaded": 60, "suggested": 50}
    for h in ACCURACY:
        assert shown[h]["gold"] == n_loaded.get(h, 0), h
    # and the disputed tasks are shown apart: each skilled annotator agrees with the expert
    # there less often than their accuracy (the tasks were chosen for being hard), which is
    # why they must not score anyone
    assert every.total.sum() == sum(n_loaded.values())
    for seq, h in enumerate(ACCURACY):
        assert shown[h]["disputed"] == int(chosen.total[seq].sum())
        if chosen.total[seq].sum():
            assert shown[h]["disputed_agreement"] == round(
                float(chosen.correct[seq].sum() / chosen.total[seq].sum()), 4)
            lo, hi = shown[h]["disputed_interval"]
            assert lo < shown[h]["disputed_agreement"] < hi
    # and those would have misled: on the disputed tasks the skilled annotators agree with
    # the expert less often than their accuracy (together 0.69-0.75 over runs against a
    # mean accuracy of 0.857; some 140 answers, a standard error of about 0.04): counted as
    # gold, they would drag the scores down as the issue saw (0.84 shown 0.59)
    skilled = [seq for seq, h in enumerate(ACCURACY) if ACCURACY[h] >= 0.8]
    pooled = chosen.correct[skilled].sum() / chosen.total[skilled].sum()
    assert pooled < np.mean([ACCURACY[h] for h in ACCURACY if ACCURACY[h] >= 0.8]), pooled


@pytest.mark.timeout(300)
def test_audit_answers_come_back_as_kind_audit_and_score(r, redis_url, sqlite_url, tmp_path):
    # Given a labelled project (the four annotators, no gold yet) and its quality rule
    rng = np.random.default_rng(5)
    eng, pid, truth = _setup(sqlite_url, tmp_path, rng, n_tasks=60, n_gold=0,
                             gold_schedule=None, quality=QUALITY)
    settings = Settings(database_url=sqlite_url, decision_seed=7)
    svc = Service(eng, r, settings=settings, worker_max_age=0, state_max_age=0)
    _label(svc, Applier(eng, r, settings=settings), pid, _answers(truth, rng), limit=120)
    env = {"LABELQ_DATABASE_URL": sqlite_url, "LABELQ_REDIS_URL": redis_url}
    run = CliRunner()
    # When an audit of 12 is drawn to a file, says how, and the expert answers every row
    out = tmp_path / "audit.csv"
    res = run.invoke(cli, ["gold", "audit", "p", "--n", "12", "--seed", "3", "--out", str(out)],
                     env=env)
    assert res.exit_code == 0, res.output
    assert "stratified by category" in res.stderr
    assert re.search(r"by category: c0 \d+ of \d+, c1 \d+ of \d+\n", res.stderr)
    with open(out, newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [list(r) for r in rows[:1]] == [["id", "answer", "category", "text"]]
    assert len(rows) == 12 and all(r["answer"] == "" for r in rows)
    assert all(r["text"] == f"item {r['id'][1:]}" for r in rows)  # the payload, to judge by
    for row in rows:
        row["answer"] = truth[row["id"]]
    with open(out, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    # and two of them are marked first by hand, said to be reviewed (--kind)
    res = run.invoke(cli, ["gold", "mark", "p", rows[0]["id"], rows[0]["answer"], "--kind",
                           "reviewed", "-o", "json"], env=env)
    assert res.exit_code == 0 and json.loads(res.stdout)["kinds"] == {"reviewed": 1}
    res = run.invoke(cli, ["gold", "mark", "p", "--file", str(out), "-o", "json"], env=env)
    # Then the rest come back as kind audit (the draw is in SQL, not in the file), and
    # their labels score the annotators who gave them
    assert res.exit_code == 0, res.output
    got = json.loads(res.stdout)
    assert got["kinds"] == {"audit": 11} and got["skipped"] == 1
    with session_scope(eng) as s:
        kinds = dict(s.exec(select(Task.external_id, Task.gold_kind)
                            .where(col(Task.is_gold).is_(True))).all())
        n = {h: int(c) for h, c in s.exec(
            select(col(Worker.handle), func.count())
            .join(Label, col(Label.worker_id) == col(Worker.id))
            .join(Task, col(Task.id) == col(Label.task_id))
            .where(col(Task.gold_kind) == "audit").group_by(col(Worker.handle))).all()}
    assert kinds == {rows[0]["id"]: "reviewed", **{r["id"]: "audit" for r in rows[1:]}}
    res = run.invoke(cli, ["workers", "list", "--project", "p", "-o", "json"], env=env)
    shown = {w["handle"]: w for w in json.loads(res.stdout)}
    assert sum(n.values()) > 11
    for h in ACCURACY:
        assert shown[h]["gold"] == n.get(h, 0), h
    res = run.invoke(cli, ["workers", "show", "ann-80", "-o", "json"], env=env)
    # the list's row, and every pause's trail (none here)
    assert res.exit_code == 0 and json.loads(res.stdout) == {**shown["ann-80"], "pauses": []}
    # and a second audit never draws them again
    res = run.invoke(cli, ["gold", "audit", "p", "--n", "100", "-o", "json"], env=env)
    again = {t["id"] for t in json.loads(res.stdout)}
    assert again and not again & {r["id"] for r in rows}
