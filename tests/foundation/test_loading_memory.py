"""Loading streams: the memory a load takes does not grow with the file's rows' contents
(issue 36: a 50 MB file peaked at ~720 MB, 14x the file, when it was read whole)."""

import json
import tracemalloc

import pytest
from sqlalchemy import func
from sqlmodel import select

from labelq.record.db import engine_for, init_schema, session_scope
from labelq.record.loading import load_tasks
from labelq.record.models import Task
from labelq.record.projects import create_project, get_project

ROWS = 200_000
TEXT = "a sentence to label and long enough for the file to outweigh its ids " * 2


@pytest.fixture
def eng(db_url):
    engine = engine_for(db_url)
    init_schema(engine)
    with session_scope(engine) as s:
        create_project(s, "p", "0,1")
    return engine


def _peak_of_load(eng, path) -> int:
    with session_scope(eng) as s:
        project = get_project(s, "p")
        tracemalloc.start()
        try:
            result = load_tasks(s, project, path)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert result.inserted == ROWS
    return peak


@pytest.mark.parametrize("kind", ["csv", "jsonl"])
def test_loading_uses_bounded_memory(eng, tmp_path, kind):
    path = tmp_path / f"t.{kind}"
    with path.open("w") as fh:
        if kind == "csv":
            fh.write("id,category,text\n")
            for i in range(ROWS):
                fh.write(f"t{i},c{i % 5},{TEXT}{i}\n")
        else:
            for i in range(ROWS):
                fh.write(json.dumps({"id": f"t{i}", "category": f"c{i % 5}",
                                     "text": f"{TEXT}{i}"}) + "\n")
    size = path.stat().st_size  # about 28 MB
    peak = _peak_of_load(eng, path)
    # read whole (the text, then every row parsed) it was several times the file; streamed
    # it is the ids' hashes (~50 bytes a row here) and a batch of rows
    assert peak < size / 2, f"peak {peak / 2**20:.1f} MiB for a {size / 2**20:.1f} MiB file"
    assert peak < 20 * 2**20, f"peak {peak / 2**20:.1f} MiB"
    with session_scope(eng) as s:
        assert s.exec(select(func.count()).select_from(Task)).one() == ROWS
        t = s.exec(select(Task).where(Task.external_id == "t7")).one()
        assert (t.category, t.payload, t.seq) == ("c2", {"text": f"{TEXT}7"}, 7)
