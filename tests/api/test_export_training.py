"""Exports ready for training through the API (issue 43): a Parquet export job run by the
stack's real Celery worker reads back with the task's payload, its source and the nested
labels; a method the project's labels cannot run is answered 422 before a job is queued."""

from __future__ import annotations

import io
import time

import pytest

from .conftest import make_project
from .test_operator import label_all

pd = pytest.importorskip("pandas")
pytest.importorskip("pyarrow")


@pytest.mark.timeout(180)
def test_a_parquet_export_through_the_api(stack):
    # Given a labelled 3-class project whose tasks carry payloads
    payloads = [{"text": f"review {i}", "stars": i % 5} for i in range(4)]
    make_project(stack, "train-pq", payloads=payloads, max_labels=1)
    assert label_all(stack, "train-pq", "tr-1", "neg") == 4
    with stack.operator() as op:
        # When the operator asks for a Parquet export
        started = op.post("/api/v1/projects/train-pq/exports",
                          json={"method": "mv", "format": "parquet"})
        assert started.status_code == 202, started.text
        job = started.json()
        deadline = time.monotonic() + 90
        while job["state"] not in ("done", "failed"):
            assert time.monotonic() < deadline, job
            time.sleep(0.2)
            job = op.get(f"/api/v1/exports/{job['id']}").json()
        assert job["state"] == "done", job
        result = op.get(job["result_url"])
    # Then the file is Parquet, and pandas reads it in one call: payload, source, labels
    assert result.status_code == 200
    assert result.headers["content-type"] == "application/vnd.apache.parquet"
    df = pd.read_parquet(io.BytesIO(result.content)).set_index("task")
    assert list(df["payload.text"]) == [p["text"] for p in payloads]
    assert list(df["payload.stars"]) == [p["stars"] for p in payloads]
    assert set(df["source"]) == {"aggregated"} and set(df["label"]) == {"neg"}
    assert [[(x["annotator"], x["label"]) for x in labs] for labs in df["labels"]] == \
        [[("tr-1", "neg")]] * 4


def test_kos_on_three_classes_is_422_before_a_job(stack):
    make_project(stack, "train-kos", n_tasks=2)  # pos, neg, neutral
    with stack.operator() as op:
        got = op.post("/api/v1/projects/train-kos/exports", json={"method": "kos"})
    assert got.status_code == 422, got.text
    body = got.json()
    assert body["field"] == "method" and "kos is for binary labels" in body["message"]
    assert "choose from auto, mv" in body["message"] and "kos," not in body["message"]
