"""Predictions load as a stream (issue 42): memory that does not grow with the file (the rows
go through a temporary table; the ids are checked in SQL). The test loads 25,000 and then
125,000 rows and compares the peaks (a million rows under tracemalloc took 7.5 minutes of the
suite; docs/models.md has the million-row figure)."""

import tracemalloc

import numpy as np
import pytest
from sqlalchemy import func
from sqlmodel import select

from labelq.record.db import engine_for, session_scope
from labelq.record.loading import load_tasks
from labelq.record.models import Prediction
from labelq.record.predictions import load_predictions, read_predictions
from labelq.record.problem import load_view
from labelq.record.projects import create_project, get_project

ROWS = 125_000
SMALL = 25_000


@pytest.fixture
def eng(db_url, tmp_path):
    engine = engine_for(db_url)
    tasks = tmp_path / "tasks.csv"
    with tasks.open("w") as fh:
        fh.write("id,text\n")
        fh.writelines(f"task-{i:07d},t\n" for i in range(ROWS))
    with session_scope(engine) as s:
        create_project(s, "p", "pos,neg,neutral")
    with session_scope(engine) as s:
        load_tasks(s, get_project(s, "p"), tasks)
    return engine


def _peak(eng, path, model):
    with session_scope(eng) as s:
        project = get_project(s, "p")
        tracemalloc.start()
        try:
            result = load_predictions(s, project, path, model=model)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    return result.rows, peak


@pytest.mark.slow  # (125,000 tasks loaded first)
def test_predictions_load_in_memory_that_does_not_grow_with_the_file(eng, tmp_path):
    small = tmp_path / "small.csv"
    with small.open("w") as fh:
        fh.write("id,p_pos,p_neg,p_neutral\n")
        fh.writelines(f"task-{i:07d},0.{i % 10}25,0.{9 - i % 10}75,0\n"
                      for i in range(SMALL - 1, -1, -1))
    path = tmp_path / "predictions.csv"
    with path.open("w") as fh:
        fh.write("id,p_pos,p_neg,p_neutral\n")
        # every task, backwards: the file's order is not the tasks'
        fh.writelines(f"task-{i:07d},0.{i % 10}25,0.{9 - i % 10}75,0\n"
                      for i in range(ROWS - 1, -1, -1))
    size = path.stat().st_size  # about 3.3 MiB
    rows_small, peak_small = _peak(eng, small, "small")
    rows, peak = _peak(eng, path, "m")
    assert (rows_small, rows) == (SMALL, ROWS)
    # a batch of rows (5,000) and the reader's chunk, whatever the file's length (7.0 MiB
    # at 250,000 rows, 6.9 MiB for 100,000): read whole, or with a dict of its ids (a million
    # strings alone are some 60 MiB), it would be several times the file
    assert peak < 12 * 2**20, f"peak {peak / 2**20:.1f} MiB for a {size / 2**20:.1f} MiB file"
    # five times the rows, the same peak (within a batch's noise)
    assert peak < 1.25 * peak_small + 2**20, (peak_small, peak)
    with session_scope(eng) as s:
        assert s.exec(select(func.count()).select_from(Prediction)).one() == ROWS + SMALL
        p = get_project(s, "p")
        got = read_predictions(s, p, task_index=load_view(s, p).task_id)["m@v1"]
    assert got.shape == (ROWS, 3) and not np.isnan(got).any()
    i = np.arange(ROWS)
    np.testing.assert_allclose(got[:, 0], 0.025 + 0.1 * (i % 10), rtol=1e-6)
