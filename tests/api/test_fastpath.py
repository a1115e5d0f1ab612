"""The hot path (labelq.api.fastpath.HotPath) answers exactly as the FastAPI endpoints do:
the same request, once plainly well-formed (taken by the hot path) and once with a
``charset`` in its content type (left to FastAPI), gives the same answer."""

from __future__ import annotations

from .conftest import make_project

_JSON = {"Content-Type": "application/json"}
_JSON_CHARSET = {"Content-Type": "application/json; charset=utf-8"}


def test_hot_path_answers_as_the_application_does(stack):
    # Given a project of four tasks and a signed-in annotator
    make_project(stack, "hot", n_tasks=4)
    token = stack.enroll("hot", "ann-hot")
    with stack.client(token) as c:
        assert c.get("/api/v1/me").status_code == 200  # signed in (cached)
        held = c.post("/api/v1/assignments/next").json()
        assert held == c.post("/api/v1/assignments/next").json()  # the same lease again
        assert set(held) == {"assignment", "message"} and held["message"] is None
        answers = []
        # When one label goes by each path, with ?next=true and without
        a = held["assignment"]
        for headers, query in ((_JSON, "?next=true"), (_JSON_CHARSET, "?next=true"),
                               (_JSON, ""), (_JSON_CHARSET, "")):
            r = c.post(f"/api/v1/assignments/{a['assignment_id']}/label{query}",
                       content=b'{"label": "pos"}', headers=headers)
            assert r.status_code == 200, r.text
            assert r.headers["content-type"] == "application/json"
            body = r.json()
            answers.append(body)
            if query:
                a = body["next"]["assignment"]
            else:
                a = c.post("/api/v1/assignments/next").json()["assignment"]
        # Then the answers have the same shape, and replays are idempotent by both paths
        assert {tuple(sorted(x)) for x in answers} == {("assignment_id", "duplicate", "label",
                                                        "next")}
        assert answers[0]["next"].keys() == answers[1]["next"].keys() == {"assignment",
                                                                          "message"}
        assert answers[2]["next"] is None and answers[3]["next"] is None
        for headers in (_JSON, _JSON_CHARSET):
            again = c.post(f"/api/v1/assignments/{answers[0]['assignment_id']}/label",
                           content=b'{"label": "pos"}', headers=headers)
            assert again.json() == {**answers[0], "duplicate": True, "next": None}
            # and a conflicting label is the same 409, an unknown id the same 404
            other = c.post(f"/api/v1/assignments/{answers[0]['assignment_id']}/label",
                           content=b'{"label": "neg"}', headers=headers)
            assert other.status_code == 409 and other.json()["code"] == "duplicate_submission"
            gone = c.post("/api/v1/assignments/nope/label", content=b'{"label": "pos"}',
                          headers=headers)
            assert gone.status_code == 404, gone.text
        # and a body the hot path does not take is validated by the application (422)
        bad = c.post(f"/api/v1/assignments/{answers[0]['assignment_id']}/label",
                     content=b'{"label": "pos", "x": 1}', headers=_JSON)
        assert bad.status_code == 422 and bad.json()["code"] == "validation_error"


def test_a_paused_annotators_label_with_next_is_recorded_alike_by_both_paths(stack):
    """A submit whose next assignment is not asked of the engine (the annotator was paused
    while holding an assignment) is finished in the thread pool, and both paths answer it
    the same: the label recorded, ``next`` null with the reason, and its replay a
    duplicate with the same ``next``."""
    import time

    from labelq.record.db import session_scope
    from labelq.record.projects import set_worker_status

    # Given an annotator holding an assignment, whom the operator then pauses
    make_project(stack, "hot-paused", n_tasks=4)
    token = stack.enroll("hot-paused", "ann-hot-paused")
    with stack.client(token) as c:
        a = c.post("/api/v1/assignments/next").json()["assignment"]
        with session_scope(stack.engine) as s:
            set_worker_status(s, "ann-hot-paused", "paused")
        time.sleep(1.2)  # past the server's worker cache (1 s): the pause is seen
        # When they submit it with ?next=true by the hot path, then again by FastAPI's
        path = f"/api/v1/assignments/{a['assignment_id']}/label?next=true"
        first = c.post(path, content=b'{"label": "pos"}', headers=_JSON)
        again = c.post(path, content=b'{"label": "pos"}', headers=_JSON_CHARSET)
    # Then the label is recorded, with no next assignment and the reason why, by both
    reason = "you are paused: no new assignments until the operator resumes you"
    assert first.status_code == 200, first.text
    assert first.json() == {"assignment_id": a["assignment_id"], "label": "pos",
                            "duplicate": False,
                            "next": {"assignment": None, "message": reason}}
    assert again.status_code == 200, again.text
    assert again.json() == {**first.json(), "duplicate": True}
