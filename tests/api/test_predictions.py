"""``POST /api/v1/projects/{name}/predictions`` over the real server: a training pipeline
pushes a model's predictions with the operator token; the same checks and answer as
``labelq predictions load``; an annotator's token is refused."""

from __future__ import annotations

import json
import socket

import numpy as np
from sqlalchemy import func
from sqlmodel import select

from labelq.record.db import session_scope
from labelq.record.models import ModelVersion, Prediction
from labelq.record.predictions import read_predictions
from labelq.record.problem import load_view
from labelq.record.projects import get_project

from .conftest import make_project

URL = "/api/v1/projects/{}/predictions"
BODY = "id,p_pos,p_neg,p_neutral\nt0,0.7,0.2,0.1\nt2,0,1,0\n"


def stored(stack, project: str) -> tuple[int, int]:
    with session_scope(stack.engine) as s:
        pid = get_project(s, project).id
        versions = s.exec(select(ModelVersion.id).where(ModelVersion.project_id == pid)).all()
        rows = s.exec(select(func.count()).select_from(Prediction)
                      .where(Prediction.version_id.in_(versions))).one() if versions else 0
        return len(versions), rows


def test_operator_loads_predictions_annotator_refused(stack):
    make_project(stack, "preds", n_tasks=4)
    url = URL.format("preds")
    csv_type = {"Content-Type": "text/csv"}
    # Given an annotator's token, or none: refused, nothing stored
    with stack.client(stack.enroll("preds", "pr-ann")) as annotator, stack.client() as none:
        r = annotator.post(url, params={"model": "m"}, content=BODY, headers=csv_type)
        assert r.status_code == 403 and r.json()["code"] == "forbidden"
        assert none.post(url, params={"model": "m"}, content=BODY,
                         headers=csv_type).status_code == 401
    assert stored(stack, "preds") == (0, 0)
    with stack.operator() as op:
        # When the operator posts a CSV body, Then it is loaded as version 1 (201), the
        # answer that of ``labelq predictions load -o json``
        r = op.post(url, params={"model": "m"}, content=BODY, headers=csv_type)
        assert r.status_code == 201, r.text
        assert r.json() == {"project": "preds", "model": "m", "version": 1, "source": "m@v1",
                            "rows": 2, "normalised": 0}
        # and a JSONL body (format from the parameter) is the next version
        body = "".join(json.dumps({"id": f"t{i}", "label": "neg", "score": 0.6}) + "\n"
                       for i in range(4))
        r = op.post(url, params={"model": "m", "format": "jsonl"}, content=body)
        assert r.status_code == 201 and r.json()["source"] == "m@v2", r.text
        # rows off by more than 1e-6: refused unless normalise=true
        off = "id,p_pos,p_neg,p_neutral\nt1,0.5,0.3,0.1\n"
        r = op.post(url, params={"model": "n"}, content=off, headers=csv_type)
        assert r.status_code == 422 and r.json()["code"] == "file_format"
        assert r.json()["message"].startswith(
            "request body, line 2, field 'p_pos+p_neg+p_neutral': the probabilities sum to 0.9")
        r = op.post(url, params={"model": "n", "normalise": "true"}, content=off,
                    headers=csv_type)
        assert r.status_code == 201 and r.json()["normalised"] == 1
    assert stored(stack, "preds") == (3, 7)
    with session_scope(stack.engine) as s:
        p = get_project(s, "preds")
        got = read_predictions(s, p, task_index=load_view(s, p).task_id, all_versions=True)
    np.testing.assert_allclose(got["m@v1"][0], [0.7, 0.2, 0.1], rtol=1e-6)
    assert np.isnan(got["m@v1"][[1, 3]]).all()
    np.testing.assert_allclose(got["m@v2"][3], [0.2, 0.6, 0.2], rtol=1e-6)
    np.testing.assert_allclose(got["n@v1"][1], [5 / 9, 3 / 9, 1 / 9], rtol=1e-6)


def test_a_bad_body_is_refused_whole(stack):
    make_project(stack, "predsbad", n_tasks=3)
    url = URL.format("predsbad")
    with stack.operator() as op:
        for body, needle in [
            ("id,p_pos,p_neg,p_neutral\nt0,1,0,0\nt9,1,0,0\n",
             "request body, line 3, field 'id': unknown task 't9'"),
            ("id,p_pos,p_neg\nt0,1,0\n", "request body, line 1, field 'p_neutral': missing"),
            ("id,p_pos,p_neg,p_neutral\nt0,1,0,0\nt1,nan,0,1\n",
             "request body, line 3, field 'p_pos': NaN is not a probability"),
            ("id,p_pos,p_neg,p_neutral\nt0,1,0,0\nt1,1.5,0,0\n",
             "request body, line 3, field 'p_pos': probability 1.5 is over 1"),
        ]:
            r = op.post(url, params={"model": "m"}, content=body,
                        headers={"Content-Type": "text/csv"})
            assert r.status_code == 422, r.text
            assert r.json()["message"].startswith(needle), r.json()
        # a body whose format cannot be told, a missing model, a model name with '@'
        r = op.post(url, params={"model": "m"}, content="id\n",
                    headers={"Content-Type": "text/plain"})
        assert r.status_code == 422 and "Content-Type" in r.json()["message"]
        assert op.post(url, content=BODY, headers={"Content-Type": "text/csv"}
                       ).status_code == 422
        r = op.post(url, params={"model": "m@v1"}, content=BODY,
                    headers={"Content-Type": "text/csv"})
        assert r.status_code == 422 and "'@'" in r.json()["message"]
        # an unknown project
        r = op.post(URL.format("nope"), params={"model": "m"}, content=BODY,
                    headers={"Content-Type": "text/csv"})
        assert r.status_code == 404
    assert stored(stack, "predsbad") == (0, 0)


def test_the_body_has_a_larger_limit_of_its_own(stack):
    # Given a body over the 64 KiB limit of every other route
    make_project(stack, "predsbig", n_tasks=5000)
    body = "id,p_pos,p_neg,p_neutral\n" + "".join(
        f"t{i},0.25,0.25,0.5\n" for i in range(5000))
    assert len(body) > 64 * 1024
    with stack.operator() as op:
        r = op.post(URL.format("predsbig"), params={"model": "big"}, content=body,
                    headers={"Content-Type": "text/csv"})
        assert r.status_code == 201 and r.json()["rows"] == 5000, r.text
    # a declared length over its own limit is refused before any of the body is sent
    host, port = stack.base.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as conn:
        conn.sendall((f"POST {URL.format('predsbig')}?model=big HTTP/1.1\r\nHost: {host}\r\n"
                      f"Authorization: Bearer {stack.operator_token}\r\n"
                      f"Content-Type: text/csv\r\nContent-Length: {256 * 2**20 + 1}\r\n"
                      "\r\n").encode())
        # (the status line and the JSON body may come in separate packets: read to the end)
        answer = ""
        while "payload_too_large" not in answer:
            chunk = conn.recv(65536)
            if not chunk:
                break
            answer += chunk.decode()
    assert answer.startswith("HTTP/1.1 413") and "payload_too_large" in answer, answer
    assert stored(stack, "predsbig") == (1, 5000)
