"""People on several projects through the API (issue 43): one token, two projects, the
project named by ``?project=NAME`` or given by the operator's default; and the gold
counter that no longer tells which item was gold."""

from __future__ import annotations

from .conftest import make_project
from .test_annotator import wait_applied


def test_one_token_two_projects(stack):
    # Given a person enrolled in two projects of different label sets, with one token
    pa = make_project(stack, "two-a", n_tasks=3, max_labels=1)
    pb = make_project(stack, "two-b", n_tasks=2, labels="x,y", max_labels=1)
    token = stack.enroll("two-a", "ann-two", capacity=5)
    with stack.operator() as op:
        r = op.post("/api/v1/projects/two-b/workers", json={"handle": "ann-two"})
    assert r.status_code == 201, r.text
    assert r.json()["token"] is None  # the person's token works there too
    with stack.client(token) as c:
        # When they ask which projects they have
        mine = c.get("/api/v1/me/projects").json()
        assert mine == {"handle": "ann-two", "current": None, "projects": [
            {"name": "two-a", "status": "active", "default": False},
            {"name": "two-b", "status": "active", "default": False}]}
        # Then a request naming none is refused, saying what to name
        r = c.get("/api/v1/me")
        assert r.status_code == 422 and "'two-a', 'two-b'" in r.json()["message"], r.text
        assert c.post("/api/v1/assignments/next").status_code == 422
        # and one naming a project works there, with that project's enrolment
        assert c.get("/api/v1/me", params={"project": "two-b"}).json()["labels"] == ["x", "y"]
        me_a = c.get("/api/v1/me", params={"project": "two-a"}).json()
        assert me_a["project"] == "two-a" and me_a["capacity"] == 5
        assert c.get("/api/v1/me", params={"project": "nope"}).status_code == 404
        done = {"two-a": 0, "two-b": 0}
        for name, label in (("two-a", "pos"), ("two-b", "x")):
            while True:
                r = c.post("/api/v1/assignments/next", params={"project": name})
                assert r.status_code == 200, r.text
                a = r.json()["assignment"]
                if a is None:
                    break
                assert a["labels"] == (["x", "y"] if name == "two-b"
                                       else ["pos", "neg", "neutral"])
                # (an assignment of one project is not the enrolment's of the other)
                other = "two-b" if name == "two-a" else "two-a"
                wrong = c.post(f"/api/v1/assignments/{a['assignment_id']}/label",
                               params={"project": other}, json={"label": label})
                assert wrong.status_code in (403, 404, 422), wrong.text
                s = c.post(f"/api/v1/assignments/{a['assignment_id']}/label",
                           params={"project": name}, json={"label": label})
                assert s.status_code == 200 and not s.json()["duplicate"], s.text
                done[name] += 1
        assert done == {"two-a": 3, "two-b": 2}
        # progress is per project
        pr = c.get("/api/v1/me/progress", params={"project": "two-a"}).json()
        assert pr["labels"] == 3 and pr["remaining_capacity"] == 2
        assert c.get("/api/v1/me/progress", params={"project": "two-b"}).json()["labels"] == 2
    wait_applied(stack, pa, 3)
    wait_applied(stack, pb, 2)

    # When the operator pauses them in one project, the other goes on
    make_project(stack, "two-c", n_tasks=2, max_labels=1)
    with stack.operator() as op:
        r = op.post("/api/v1/workers/ann-two/status", json={"status": "paused"})
        assert r.status_code == 422, r.text  # which enrolment? (several)
        r = op.post("/api/v1/workers/ann-two/status",
                    json={"status": "paused", "project": "two-a"})
        assert r.json() == {"handle": "ann-two", "status": "paused", "project": "two-a"}
        # and enrols them in a third project, as their default
        r = op.post("/api/v1/projects/two-c/workers", json={"handle": "ann-two",
                                                             "default": True})
        assert r.status_code == 201 and r.json()["default"] is True, r.text
    with stack.client(token) as c:
        mine = c.get("/api/v1/me/projects").json()
        assert mine["current"] == "two-c"
        assert [(p["name"], p["status"], p["default"]) for p in mine["projects"]] == [
            ("two-a", "paused", False), ("two-b", "active", False), ("two-c", "active", True)]
        # Then a request naming no project works in the default
        assert c.get("/api/v1/me").json()["project"] == "two-c"
        r = c.post("/api/v1/assignments/next")
        assert r.status_code == 200 and r.json()["assignment"] is not None, r.text
        aid = r.json()["assignment"]["assignment_id"]
        assert c.post(f"/api/v1/assignments/{aid}/label?next=true",
                      json={"label": "neg"}).status_code == 200
        # and the paused project refuses work (within the 1 s the rows are cached)
        import time
        deadline = time.monotonic() + 5
        while (r := c.post("/api/v1/assignments/next",
                           params={"project": "two-a"})).status_code != 403:
            assert time.monotonic() < deadline, r.text
            time.sleep(0.3)
        assert c.get("/api/v1/me", params={"project": "two-b"}).json()["status"] == "active"


def test_gold_counter_does_not_tell_which_item_was_gold(stack):
    # Given a project where half the items served are gold
    make_project(stack, "goldtick", n_tasks=14, gold=12, max_labels=1,
                 gold_schedule="fixed:rate=0.5")
    token = stack.enroll("goldtick", "ann-goldtick")
    seen: list[tuple[bool, dict]] = []
    with stack.client(token) as c:
        before = c.get("/api/v1/me/progress").json()
        # When they answer every item (gold right, tasks anything), reading their progress
        # after each answer as the labeling page does
        while (a := c.post("/api/v1/assignments/next").json()["assignment"]) is not None:
            gold = stack.task_of(a["assignment_id"]).startswith("g")
            s = c.post(f"/api/v1/assignments/{a['assignment_id']}/label",
                       json={"label": "pos" if gold else "neg"})
            assert s.status_code == 200, s.text
            assert set(s.json()) == {"assignment_id", "label", "duplicate", "next"}
            seen.append((gold, c.get("/api/v1/me/progress").json()))
    assert len(seen) >= 20  # (at least two catch-ups; the schedule may leave gold unserved)
    n_gold_between = sum(g for i, (g, _) in enumerate(seen, 1) if i % 10)
    # (both kinds answered between the catch-ups)
    assert 0 < n_gold_between < sum(1 for i in range(1, len(seen) + 1) if i % 10)
    # Then after each answer the progress moved the same way, gold or not: one more label,
    # and nothing else, but at every 10th label, where the gold counts catch up
    prev = before
    for i, (_, p) in enumerate(seen, 1):
        assert p["labels"] == prev["labels"] + 1
        if i % 10:
            assert p["gold"] == prev["gold"], (i, p["gold"], prev["gold"])
        else:
            assert p["gold"]["as_of"] == i
            assert p["gold"]["answered"] == sum(g for g, _ in seen[:i])
            assert p["gold"]["correct"] == p["gold"]["answered"]  # all answered right
        # (open_assignments is left out: the hot state's counter of labels and live leases
        # also counts assignments reserved ahead for the annotator (the refill's inbox):
        # seen 2, 4, 3, 2, 1, 0 over the first labels, gold or not, as the applier refilled)
        moving = ("labels", "gold", "open_assignments")
        rest = {k: v for k, v in p.items() if k not in moving}
        assert rest == {k: v for k, v in prev.items() if k not in moving}
        prev = p
    assert seen[-1][1]["gold"]["as_of"] == len(seen) - len(seen) % 10


def test_the_fast_path_takes_a_named_project_and_nothing_else():
    from labelq.api.fastpath import _query

    assert _query(b"project=two-a") == (False, "two-a")
    assert _query(b"project=two%20a&next=true") == (True, "two a")
    assert _query(b"next=false&project=b") == (False, "b")
    for other in (b"project=", b"project=a&project=b", b"project=a&next=yes",
                  b"project=a&x=1", b"next=true", b"project=a%00", b"project"):
        assert _query(other) == (None, None), other


def test_annotate_from_a_shell_in_two_projects(stack):
    from .test_cli import labelq

    # Given a person in two projects, with a default
    make_project(stack, "sh-a", n_tasks=1, max_labels=1)
    make_project(stack, "sh-b", n_tasks=1, labels="x,y", max_labels=1)
    token = stack.enroll("sh-a", "ann-sh")
    with stack.operator() as op:
        assert op.post("/api/v1/projects/sh-b/workers",
                       json={"handle": "ann-sh", "default": True}).status_code == 201
    # When they list their projects and work in each from a shell
    out = labelq(stack, "projects", "-o", "json", token=token)
    assert out.returncode == 0, out.stderr
    import json
    assert json.loads(out.stdout)["current"] == "sh-b"
    got = {}
    for project in (None, "sh-a"):
        args = ("--project", project) if project else ()
        nxt = labelq(stack, "next", "-o", "json", *args, token=token)
        assert nxt.returncode == 0, nxt.stderr
        a = json.loads(nxt.stdout)["assignment"]
        sub = labelq(stack, "submit", a["assignment_id"], a["labels"][0], *args, token=token)
        assert sub.returncode == 0, sub.stderr
        got[project] = a["labels"]
    # Then each went to its project (the default without --project)
    assert got == {None: ["x", "y"], "sh-a": ["pos", "neg", "neutral"]}
    bad = labelq(stack, "next", "--project", "nope", token=token)
    assert bad.returncode == 4 and "not enrolled in project 'nope'" in bad.stderr


def test_the_labeling_page_picks_a_project(stack, browser):
    import json

    from .test_page import sign_in

    # Given a person in two projects, without a default
    make_project(stack, "pk-a", n_tasks=2, max_labels=1)
    make_project(stack, "pk-b", n_tasks=2, labels="x,y", max_labels=1)
    token = stack.enroll("pk-a", "ann-pick")
    stack.enroll("pk-b", "ann-pick")
    b = browser
    # When they sign in, the page asks them to choose (nothing is asked for yet)
    sign_in(b, stack, token)
    b.wait("!document.getElementById('choose').hidden")
    assert b.js("document.getElementById('picker').hidden") is False
    options = json.loads(b.js("JSON.stringify([...document.querySelectorAll("
                              "'#project-picker option')].map(o => o.value))"))
    assert options == ["", "pk-a", "pk-b"]
    assert b.js("document.getElementById('work').hidden") is True

    def choose(name):
        b.js(f"{{ const s = document.getElementById('project-picker'); s.value = '{name}'; "
             "s.dispatchEvent(new Event('change')); } 1")
        b.wait(f"document.getElementById('project').textContent === '{name}' && "
               "!document.getElementById('task').hidden")
        return json.loads(b.js("JSON.stringify([...document.querySelectorAll("
                               "'#answers button')].map(x => x.dataset.label))"))

    # Then choosing a project shows its tasks, with its labels, and a label is saved there
    assert choose("pk-b") == ["x", "y"]
    b.press("2")
    b.wait("document.getElementById('progress-labels').textContent === '1'")
    assert choose("pk-a") == ["pos", "neg", "neutral"]
    assert b.js("document.getElementById('progress-labels').textContent") == "0"
    b.press("1")
    b.wait("document.getElementById('progress-labels').textContent === '1'")
    # and a reload keeps the choice (the tab remembers it)
    b.navigate(stack.base + "/label")
    b.wait("document.getElementById('project').textContent === 'pk-a'")
    assert b.js("document.getElementById('project-picker').value") == "pk-a"
    assert b.exceptions == []
    with stack.client(token) as c:
        for name, label in (("pk-a", "pos"), ("pk-b", "y")):
            p = c.get("/api/v1/me/progress", params={"project": name}).json()
            assert p["labels"] == 1, (name, p)
    from sqlmodel import select

    from labelq.record.db import session_scope
    from labelq.record.models import Label, Project
    with session_scope(stack.engine) as s:
        got = s.exec(select(Project.name, Label.value).join(
            Label, Label.project_id == Project.id).where(
            Project.name.in_(["pk-a", "pk-b"]))).all()
    assert sorted(got) == [("pk-a", "pos"), ("pk-b", "y")]
