"""The dashboard's background figures (labelq/dashboard.py): computed when due, claimed so
that two computations never run for one project, served with their age, and never
recomputed by a request for a large project."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import sqlalchemy

from labelq import dashboard as dash
from labelq.record.db import engine_for, session_scope
from labelq.record.models import DashboardFigures, utcnow
from labelq.record.projects import get_project

from .test_dashboard import project_with_labels


def test_figures_due_claimed_stored_and_served(tmp_path):
    url = f"sqlite:///{tmp_path / 'f.db'}"
    project_with_labels(url, list(np.linspace(60, 1, 30)))
    eng = engine_for(url)
    with session_scope(eng) as s:
        pid = get_project(s, "p").id
    assert dash.figures_due(eng, pid)
    # a computation claimed (or its claim renewed) by another process half a claim's
    # length ago: not due, not computed here
    with session_scope(eng) as s:
        s.add(DashboardFigures(project_id=pid, claimed=utcnow() - timedelta(
            seconds=dash.FIGURES_CLAIM_S / 2)))
    assert not dash.figures_due(eng, pid) and not dash.refresh_figures(eng, pid)
    with session_scope(eng) as s:  # one not renewed for over a claim's length: taken over
        s.get(DashboardFigures, pid).claimed = utcnow() - timedelta(
            seconds=dash.FIGURES_CLAIM_S + 1)
    assert dash.figures_due(eng, pid) and dash.refresh_figures(eng, pid)
    assert not dash.figures_due(eng, pid)  # nothing changed since
    assert not dash.refresh_figures(eng, pid)
    with session_scope(eng) as s:
        row = s.get(DashboardFigures, pid)
        assert row.claimed is None and row.labels == 30 and row.took_s > 0
        assert row.body["quality"]["labels"] == 30 and len(row.body["suggestions"]) <= 50
    # served with its age to a request that may not compute (as for a large project)
    statements = []
    sqlalchemy.event.listen(eng, "before_cursor_execute",
                            lambda *a: statements.append(a[2]))
    with session_scope(eng) as s:
        d = dash.dashboard(s, get_project(s, "p"), live_labels=0)
    assert d["quality"]["source"] == "background" and d["quality"]["age_s"] >= 0
    assert d["quality"]["behind_labels"] == 0 and d["gold"]["cheap"]["gold"] > 0
    # (labels of two days ago: nothing spent lately, no projection)
    assert d["throughput"]["recent_spend_per_min"] == 0 and d["throughput"]["runs_out_in_s"] is None
    # no statement read the labels themselves (the counters and the stored row only)
    assert not [q for q in statements if "FROM label" in q and "label.task_id IN" not in q
                and "applied_seq" not in q]
    # force: computed again whatever its age
    assert dash.refresh_figures(eng, pid, force=True)
    eng.dispose()


def test_the_projection_is_redone_with_the_budget_left_now():
    now = utcnow()
    th = dash._projected({"recent_spend_per_min": 2.0, "runs_out_in_s": 5.0},
                         {"left": 60.0, "spendable": 60.0}, now)
    assert th["runs_out_in_s"] == 1800.0 and not th["budget_outlasts"]
    assert th["runs_out_at"] == (now + timedelta(seconds=1800)).isoformat(timespec="seconds")
    assert dash._projected({"recent_spend_per_min": 2.0}, {"left": None, "spendable": None},
                           now)["runs_out_in_s"] is None


def test_the_projection_counts_only_what_can_still_be_spent():
    # issue 41: a stalled (or finished) project spends nothing more: no "budget runs out in
    # 4 min"; open tasks that need less than the budget left end before it does
    now = utcnow()
    rate = {"recent_spend_per_min": 2.0}
    stalled = dash._projected(rate, {"left": 60.0, "spendable": 0.0}, now)
    assert stalled["runs_out_in_s"] is None and stalled["work_ends_in_s"] is None
    assert stalled["budget_outlasts"] is True
    short = dash._projected(rate, {"left": 60.0, "spendable": 10.0}, now)
    assert short["runs_out_in_s"] is None and short["work_ends_in_s"] == 300.0
    assert short["budget_outlasts"] is True
