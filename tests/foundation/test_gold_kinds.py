"""Gold of kinds in the durable record (issue 41), on SQLite and PostgreSQL: ``labelq init``
upgrades an older database (loaded -> ``loaded``, marked -> ``reviewed``), an audit draws
labelled non-gold tasks uniformly (stratified by category as documented), a marked task's
kind (audit if drawn by an audit, suggested if suggested, else reviewed; ``kind`` given
wins), and which answers score (random) or calibrate; ``labelq aggregate --gold-kind``."""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime

import numpy as np
import pytest
from click.testing import CliRunner
from scipy import stats
from sqlalchemy import text
from sqlmodel import Session, col, select

from cli.main import cli
from labelq.errors import InputError
from labelq.exporting import load_project_labels
from labelq.record.db import engine_for, init_schema, session_scope
from labelq.record.golddraw import audit_draw, mark_kind, proportional_allocation, record_draw
from labelq.record.goldstats import gold_scores
from labelq.record.models import Assignment, GoldDraw, Label, Project, Task, Worker, utcnow
from labelq.record.projects import GoldMark, create_project, enroll_worker, mark_gold

# categories: how many tasks each has, and how many of those are labelled
SIZES = {"a": (12, 9), "b": (6, 4), "c": (20, 17)}


def _label(s: Session, project: Project, task: Task, worker: Worker, value: str) -> None:
    aid = f"a{task.id}-{worker.id}"
    s.add(Assignment(id=aid, project_id=project.id, task_id=task.id, worker_id=worker.id,
                     expires=utcnow(), state="submitted"))
    s.flush()
    s.add(Label(assignment_id=aid, project_id=project.id, task_id=task.id,
                worker_id=worker.id, value=value, is_gold=task.is_gold))


def _project(url: str, with_gold: int = 4) -> tuple[int, dict[str, Task]]:
    """Project ``p`` (labels x, y): per category of :data:`SIZES` its tasks, the first ones
    labelled by w0 ('x') and w1 ('y'), and ``with_gold`` loaded gold questions (answer x),
    labelled too."""
    eng = engine_for(url)
    with session_scope(eng) as s:
        p = create_project(s, "p", "x,y")
        w0, _ = enroll_worker(s, p, "w0")
        w1, _ = enroll_worker(s, p, "w1")
        seq, tasks = 0, {}
        for cat, (n, labelled) in SIZES.items():
            for i in range(n):
                t = Task(project_id=p.id, seq=seq, external_id=f"{cat}{i}", category=cat)
                s.add(t)
                s.flush()
                seq += 1
                tasks[t.external_id] = t
                if i < labelled:
                    _label(s, p, t, w0, "x")
                    _label(s, p, t, w1, "y")
        for i in range(with_gold):
            t = Task(project_id=p.id, seq=seq, external_id=f"g{i}", category="a",
                     is_gold=True, gold_answer="x", gold_kind="loaded")
            s.add(t)
            s.flush()
            seq += 1
            tasks[t.external_id] = t
            _label(s, p, t, w0, "x")
            _label(s, p, t, w1, "y")
        return int(p.id or 0), tasks


def _eligible() -> set[str]:
    return {f"{c}{i}" for c, (_n, labelled) in SIZES.items() for i in range(labelled)}


def test_init_upgrades_an_old_database_to_gold_kinds(db_url):
    # Given a database of an earlier labelq: no gold_kind nor gold_source column, no
    # gold_draw table, with a gold question loaded as gold, a task marked gold, and an
    # ordinary task
    eng = engine_for(db_url)
    pid, tasks = _project(db_url, with_gold=1)
    with eng.begin() as conn:
        conn.execute(text("UPDATE task SET is_gold = :t, gold_answer = 'y', marked = :m "
                          "WHERE external_id = 'a0'"), {"t": True, "m": datetime(2026, 1, 1)})
        conn.execute(text("UPDATE label SET is_gold = :t WHERE task_id = :a"),
                     {"t": True, "a": tasks["a0"].id})
        conn.execute(text("DROP TABLE gold_draw"))
        conn.execute(text("ALTER TABLE task DROP COLUMN gold_kind"))
        conn.execute(text("ALTER TABLE task DROP COLUMN gold_source"))
    eng.dispose()
    # When labelq init runs (twice: it is safe to repeat)
    init_schema(engine_for(db_url))
    init_schema(engine_for(db_url))
    # Then gold loaded as gold is of kind loaded, the marked task reviewed, the rest none;
    # and the table of draws is there; every source is unknown (NULL: nothing recorded
    # who gave those answers, and nothing guesses)
    with session_scope(eng) as s:
        kinds = {t.external_id: t.gold_kind for t in s.exec(select(Task))}
        assert s.exec(select(GoldDraw)).all() == []
        assert set(s.exec(select(Task.gold_source))) == {None}
        assert s.exec(select(Task.gold_source).where(Task.external_id == "g0")).one() is None
    assert kinds.pop("g0") == "loaded" and kinds.pop("a0") == "reviewed"
    assert set(kinds.values()) == {None}
    # and the scores follow the kinds: g0 scores (w0 right, w1 wrong), a0 does not
    with session_scope(eng) as s:
        sc = gold_scores(s, pid, [0, 1], [""])
        chosen = gold_scores(s, pid, [0, 1], [""], chosen=True)
    assert sc.total.sum(axis=1).tolist() == [1, 1] and sc.correct.sum(axis=1).tolist() == [1, 0]
    assert chosen.total.sum(axis=1).tolist() == [1, 1]
    assert chosen.correct.sum(axis=1).tolist() == [0, 1]


def test_an_audit_draws_labelled_non_gold_tasks_stratified_without_duplicates(db_url):
    # Given 30 eligible tasks (labelled, not gold) of 38 (and 4 gold), in three categories
    pid, tasks = _project(db_url)
    eng = engine_for(db_url)
    rng = np.random.default_rng(0)
    eligible = _eligible()
    # When an audit of 10 is drawn
    with session_scope(eng) as s:
        first = audit_draw(s, s.get(Project, pid), 10, rng)
    ids = [t.external_id for t in first.tasks]
    # Then: 10 distinct eligible tasks, each category floor or ceil of its share
    assert len(ids) == len(set(ids)) == 10 and set(ids) <= eligible
    assert first.eligible == 30 and first.inclusion == pytest.approx(10 / 30)
    per_cat = Counter(i[0] for i in ids)
    for c, (_n, labelled) in SIZES.items():
        share = 10 * labelled / 30
        assert int(np.floor(share)) <= per_cat[c] <= int(np.ceil(share)), (c, per_cat)
        assert first.by_category[c] == (labelled, per_cat[c])
    # and it is recorded: a second audit draws only from the tasks not drawn yet, and one
    # asking for more than are left gets them all
    with session_scope(eng) as s:
        second = audit_draw(s, s.get(Project, pid), 50, rng)
        rows = s.exec(select(GoldDraw.task_id, GoldDraw.kind, GoldDraw.draw)).all()
    rest = {t.external_id for t in second.tasks}
    assert rest == eligible - set(ids) and len(second.tasks) == 20
    assert len(rows) == 30 and {k for _t, k, _d in rows} == {"audit"}
    assert {d for _t, _k, d in rows} == {first.draw, second.draw}
    with session_scope(eng) as s, pytest.raises(InputError, match="--n must be at least 1"):
        audit_draw(s, s.get(Project, pid), 0, rng)


def test_an_audit_draw_is_uniform(tmp_path):
    # Given the same 30 eligible tasks, and 1,500 audits of 7 (each rolled back: a fresh
    # draw every time)
    sqlite_url = f"sqlite:///{tmp_path / 'labelq.db'}"
    init_schema(engine_for(sqlite_url))
    pid, _tasks = _project(sqlite_url)
    eng = engine_for(sqlite_url)
    rng = np.random.default_rng(1)
    seen: Counter[str] = Counter()
    draws = 1500
    with Session(eng) as s:
        project = s.get(Project, pid)
        for _ in range(draws):
            seen.update(t.external_id for t in audit_draw(s, project, 7, rng).tasks)
            s.rollback()
    # Then every eligible task was drawn, and as often as any other: chi-square against
    # the uniform 7/30 per draw (p = 0.95 for this seed; below 0.001 would fail)
    eligible = sorted(_eligible())
    assert set(seen) == set(eligible)
    observed = np.array([seen[t] for t in eligible])
    expected = np.full(len(eligible), draws * 7 / 30)
    assert stats.chisquare(observed, expected).pvalue > 0.001


def test_proportional_allocation_is_exact_in_expectation():
    rng = np.random.default_rng(2)
    sizes = [7, 3, 50, 1, 0, 39]
    total = np.zeros(len(sizes))
    for _ in range(20000):
        n_c = proportional_allocation(sizes, 17, rng)
        share = 17 * np.array(sizes) / 100
        assert n_c.sum() == 17
        assert np.all(n_c >= np.floor(share)) and np.all(n_c <= np.ceil(share))
        total += n_c
    # E[n_c] = 17 N_c / 100: each task's chance 17/100 in every stratum (4 s.e.)
    mean, share = total / 20000, 17 * np.array(sizes) / 100
    se = np.sqrt(share % 1 * (1 - share % 1) / 20000) + 1e-12
    assert np.all(np.abs(mean - share) <= 4 * se)
    assert proportional_allocation(sizes, 100, rng).tolist() == sizes
    with pytest.raises(ValueError):
        proportional_allocation(sizes, 101, rng)


def test_a_marked_task_gets_its_kind_and_only_random_answers_score(db_url):
    # Given an audit's draw of a1 and a2, a suggestion listing a2 and b0
    pid, tasks = _project(db_url)
    eng = engine_for(db_url)
    with session_scope(eng) as s:
        p = s.get(Project, pid)
        record_draw(s, p, [tasks["a1"].id, tasks["a2"].id], "audit", "audit test")
        record_draw(s, p, [tasks["a2"].id, tasks["b0"].id], "suggested", "suggest test")
        # When the operator marks them and c0 (never drawn), with no kind, and c1 as audit
        out = mark_gold(s, p, [GoldMark("a1", "x"), GoldMark("a2", "x"), GoldMark("b0", "x"),
                               GoldMark("c0", "x")])
        forced = mark_gold(s, p, [GoldMark("c1", "x")], kind="audit")
        with pytest.raises(InputError, match="unknown gold kind 'loaded'"):
            mark_gold(s, p, [GoldMark("c2", "x")], kind="loaded")
    # Then a1, a2 (audit wins over suggested) are audit, b0 suggested, c0 reviewed, c1 audit
    assert out.kinds == {"audit": 2, "suggested": 1, "reviewed": 1}
    assert forced.kinds == {"audit": 1} and forced.random_workers == [0, 1]
    with session_scope(eng) as s:
        kinds = {t.external_id: t.gold_kind for t in s.exec(select(Task).where(
            col(Task.is_gold).is_(True)))}
        sc = gold_scores(s, pid, [0, 1], [""])
        chosen = gold_scores(s, pid, [0, 1], [""], chosen=True)
        pl = load_project_labels(s, s.get(Project, pid))
    assert kinds == {"a1": "audit", "a2": "audit", "b0": "suggested", "c0": "reviewed",
                     "c1": "audit", "g0": "loaded", "g1": "loaded", "g2": "loaded",
                     "g3": "loaded"}
    # and the scores count the random answers only: 4 loaded + 3 audit per worker (w0
    # answered x: right on all), the 2 chosen apart
    assert sc.total.sum(axis=1).tolist() == [7, 7] and sc.correct.sum(axis=1).tolist() == [7, 0]
    assert chosen.total.sum(axis=1).tolist() == [2, 2]
    # and only random gold calibrates an export's confidences
    random = {pl.external_ids[i] for i in np.flatnonzero(pl.random_gold)}
    assert random == {"a1", "a2", "c1", "g0", "g1", "g2", "g3"}
    assert mark_kind(None) == "reviewed" and mark_kind({"suggested"}) == "suggested"


def test_aggregate_gold_kind_says_whether_the_truth_calibrates(tmp_path):
    # Given labels of 60 tasks by 5 workers (accuracy 0.75) and the truth of 20 of them
    rng = np.random.default_rng(3)
    truth = rng.integers(2, size=60)
    labels = tmp_path / "labels.csv"
    rows = ["task,worker,label"]
    for t in range(60):
        for w in range(5):
            v = truth[t] if rng.random() < 0.75 else 1 - truth[t]
            rows.append(f"t{t},w{w},{'ab'[v]}")
    labels.write_text("\n".join(rows) + "\n")
    tf = tmp_path / "truth.csv"
    tf.write_text("task,truth\n" + "".join(f"t{t},{'ab'[truth[t]]}\n" for t in range(20)))

    def run(*extra: str) -> dict:
        res = CliRunner().invoke(cli, ["aggregate", str(labels), "--truth", str(tf),
                                       "-o", "json", *extra])
        assert res.exit_code == 0, res.output
        return json.loads(res.stdout)

    # When the truth is given as gold, random (the default) or chosen
    random, chosen = run("--gold"), run("--gold", "--gold-kind", "chosen")
    # Then a random sample calibrates the accuracy estimate; chosen answers calibrate
    # nothing (the estimate rests on the models), though both are clamped
    assert random["gold_kind"] == "random" and chosen["gold_kind"] == "chosen"
    assert random["accuracy_estimate"]["basis"] == "gold"
    assert random["accuracy_estimate"]["n_gold"] > 0
    assert chosen["accuracy_estimate"]["basis"] == "models"
    assert chosen["accuracy_estimate"]["n_gold"] == 0
    assert random["accuracy"] == chosen["accuracy"] == 1.0  # (clamped: the truth itself)
    # and --gold-kind without --gold is refused, naming the option
    res = CliRunner().invoke(cli, ["aggregate", str(labels), "--truth", str(tf),
                                   "--gold-kind", "chosen"])
    assert res.exit_code == 3 and "--gold-kind is for --gold" in res.output
