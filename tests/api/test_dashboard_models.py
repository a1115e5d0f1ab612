"""The model's measured accuracy per class on the dashboard, beside the annotators' (issue
42): the data (`quality.models`) and the page, after predictions pushed through the API
(which makes the running pipeline fold its state again: a new epoch)."""

from __future__ import annotations

import json
import time

import pytest

from labelq.live.redis.keys import Keys
from labelq.record.db import database_id

from .cdp import Browser
from .conftest import Stack, make_project
from .test_dashboard import label_some, wait_applied

BODY = "id,p_pos,p_neg,p_neutral\n" + "".join(
    f"t{i},{p}\n" for i, p in enumerate(["0.9,0.05,0.05", "0.1,0.8,0.1", "0.7,0.2,0.1",
                                         "0.2,0.2,0.6", "0.85,0.1,0.05", "0.3,0.6,0.1"]))


def dashboard_models(stack: Stack, name: str, timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    with stack.operator() as op:
        while time.monotonic() < deadline:
            q = op.get(f"/api/v1/projects/{name}/dashboard").json()["quality"]
            if not q["pending"] and q["models"] is not None:
                return q["models"]
            time.sleep(0.3)
    raise AssertionError("the dashboard's figures never had the model")


@pytest.mark.timeout(240)
def test_the_dashboard_shows_the_models_accuracy_per_class(stack, browser):
    # Given a project of auto with two annotators at work
    pid = make_project(stack, "dmod", n_tasks=6, max_labels=3, policy="auto")
    alice = stack.enroll("dmod", "dmod-alice")
    bob = stack.enroll("dmod", "dmod-bob")
    label_some(stack, alice, ["pos", "neg", "pos"])
    label_some(stack, bob, ["pos", "neg", "neutral"])
    wait_applied(stack, "dmod")
    k = Keys(pid, database_id(stack.engine))
    epoch = int(stack.redis.hget(k.meta, "epoch") or 0)
    # When a training pipeline pushes a model's predictions through the API
    with stack.operator() as op:
        r = op.post("/api/v1/projects/dmod/predictions", params={"model": "clf"},
                    content=BODY, headers={"Content-Type": "text/csv"})
        assert r.status_code == 201, r.text
    # Then the running pipeline is told to fold its state again (a new epoch)
    assert int(stack.redis.hget(k.meta, "epoch")) == epoch + 1
    # and the dashboard's data has the model's accuracy per class with its interval
    models = dashboard_models(stack, "dmod")
    per_class = models["models"]["clf@v1"]["classes"]
    assert set(per_class) == {"pos", "neg", "neutral"}
    for v in per_class.values():
        assert 0 <= v["low"] <= v["accuracy"] <= v["high"] <= 1
        assert v["answers"] >= 0
    assert sum(models["answers"].values()) == 6
    # and the page shows it beside the annotators, one row a class
    b: Browser = browser
    b.navigate(stack.base + "/dashboard?project=dmod")
    b.wait("document.readyState === 'complete' && !!document.getElementById('token')")
    b.js("document.getElementById('token').focus()")
    b.type_text(stack.operator_token)
    b.js("document.getElementById('signin-button').click()")
    b.wait("document.getElementById('board').dataset.project === 'dmod'")
    b.wait("!document.getElementById('models-part').hidden")
    rows = json.loads(b.js("""JSON.stringify([...document.querySelectorAll('#models tbody tr')]
        .map(tr => ({model: tr.dataset.model, cls: tr.dataset.cls,
                     ...Object.fromEntries([...tr.querySelectorAll('[data-field]')]
                          .map(td => [td.dataset.field, td.textContent]))})))"""))
    assert [(r["model"], r["cls"]) for r in rows] == \
        [("clf@v1", c) for c in ("pos", "neg", "neutral")]
    for r in rows:
        v = per_class[r["cls"]]
        shown = float(r["accuracy"].split(" [")[0])
        assert shown == pytest.approx(v["accuracy"], abs=1e-3)
        assert r["accuracy"].count("[") == 1  # with its interval
        # the reading shown first: no gold here, so the measured one, labelled agreement
        assert v["reading"]["basis"] == "agreement"
        assert r["reading"].endswith(" agreement") and r["reading"].count("[") == 1
    # and how many human labels the model saved (labelq/modelsavings.py), said in words
    sv = models["saved"]
    assert sv is not None and sv["labels"] == 6 and sv["seeds"] == 5
    text = b.js("document.getElementById('model-saved').textContent")
    assert text.startswith("Human labels the models saved: ") and "simulated twins" in text
    assert b.exceptions == []
