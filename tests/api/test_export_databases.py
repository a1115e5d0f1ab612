"""Export jobs through the API are their database's (issue 45): with database B's operator
token, B's API answered database A's job and its file. Now B's API answers 404 for it,
and A's files are in A's own folder. Two real `labelq serve` processes (A on PostgreSQL,
the package's stack; B on SQLite) sharing one Redis, and the stack's real Celery worker."""

from __future__ import annotations

import time
from pathlib import Path

from labelq.record.db import database_id, engine_for, init_schema

from .conftest import Server, make_project


def test_another_databases_operator_gets_404_for_a_job(stack, tmp_path):
    # Given database A's export job, run to the end by A's worker
    make_project(stack, "exp-a", n_tasks=3)
    with stack.operator() as op:
        started = op.post("/api/v1/projects/exp-a/exports", json={"method": "mv"})
        assert started.status_code == 202, started.text
        job = started.json()
        deadline = time.monotonic() + 60
        while job["state"] not in ("done", "failed"):
            assert time.monotonic() < deadline, job
            time.sleep(0.2)
            job = op.get(f"/api/v1/exports/{job['id']}").json()
        assert job["state"] == "done"
        assert op.get(f"/api/v1/exports/{job['id']}/result").status_code == 200
    # its file is in A's folder of the export directory
    ours = database_id(stack.engine)
    files = list((stack.tmp / "exports").glob("*/*.csv"))
    assert files and {f.parent.name for f in files} == {ours}
    # and database B, on the same Redis, with its own operator token and a project of the
    # same name
    b_url = f"sqlite:///{tmp_path / 'b.db'}"
    init_schema(engine_for(b_url))
    assert database_id(engine_for(b_url)) != ours
    env = {**stack.env, "LABELQ_DATABASE_URL": b_url,
           "LABELQ_OPERATOR_TOKEN": "b-operator-token-b-operator-token"}
    b = Server(env, tmp_path, tmp_path / "b-serve.log").start()
    try:
        import httpx
        with httpx.Client(base_url=b.base, timeout=30, headers={
                "Authorization": "Bearer b-operator-token-b-operator-token"}) as op_b:
            # When B's operator asks for A's job and its file
            got = op_b.get(f"/api/v1/exports/{job['id']}")
            result = op_b.get(f"/api/v1/exports/{job['id']}/result")
        # Then both are 404, as for a job that does not exist
        assert got.status_code == 404 and got.json()["code"] == "not_found"
        assert result.status_code == 404 and result.json()["code"] == "not_found"
        assert Path(files[0]).read_bytes() not in (got.content, result.content)
    finally:
        b.stop()
    # and A's operator still has it
    with stack.operator() as op:
        assert op.get(f"/api/v1/exports/{job['id']}").json()["state"] == "done"
