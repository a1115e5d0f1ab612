"""Every command that prints data, walked with `-o json` against the API test stack
(PostgreSQL, Redis, a Celery worker, `labelq serve`): its stdout is one JSON document —
an object for one record, a list for a collection, the API's own body where the command
mirrors an endpoint (issue 35). `--json` is the same as `-o json` everywhere. A new
command with `-o` must be added here (the walk checks it covers them all)."""

from __future__ import annotations

import json
import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

from cli.main import cli

from .conftest import ROOT, Stack

# commands without -o: they run (a server, a worker, the demo) and print no data
RUNNING = {"demo", "serve", "run-worker", "worker"}
# export's -o is the format too, of the data it writes: csv or jsonl (one document a line)
NOT_WALKED = RUNNING | {"export"}


def all_commands() -> dict[str, click.Command]:
    out = {}

    def walk(group: click.Group, path: list[str]) -> None:
        for name, cmd in group.commands.items():
            if isinstance(cmd, click.Group):
                walk(cmd, [*path, name])
            else:
                out[" ".join([*path, name])] = cmd
    walk(cli, [])
    return out


def test_every_command_prints_data_with_o():
    # every command takes -o/--output and --json, but those that run or write files
    have = {name for name, cmd in all_commands().items()
            if any("-o" in p.opts for p in cmd.params if isinstance(p, click.Option))}
    assert set(all_commands()) - have == RUNNING
    for name in have - {"export"}:
        opts = {o for p in all_commands()[name].params for o in getattr(p, "opts", [])}
        assert {"-o", "--output", "--json"} <= opts, name


@pytest.mark.timeout(300)
def test_walk_every_command_with_o_json(stack: Stack, tmp_path):
    runner = CliRunner()
    env = {k: v for k, v in stack.env.items() if k != "PYTHONPATH"}
    seen: dict[str, object] = {}

    def run(*args: str, flag: str = "-o"):
        argv = [*args, "-o", "json"] if flag == "-o" else [*args, "--json"]
        res = runner.invoke(cli, argv, env=env, catch_exceptions=False)
        assert res.exit_code == 0, (argv, res.stdout, res.stderr)
        try:
            doc = json.loads(res.stdout)
        except json.JSONDecodeError as exc:
            raise AssertionError(f"{argv}: stdout is not one JSON document: {exc}\n"
                                 f"{res.stdout!r}") from None
        words = [a for a in args if not a.startswith("-")]
        for n in (2, 1):
            if " ".join(words[:n]) in all_commands():
                seen[" ".join(words[:n])] = doc
                break
        return doc

    tasks = tmp_path / "tasks.csv"
    tasks.write_text("id,category,text\n" + "".join(f"w{i},c{i % 2},text {i}\n"
                                                     for i in range(6)))
    gold = tmp_path / "gold.csv"
    gold.write_text("id,category,text,answer\ngw0,c0,gold zero,a\ngw1,c1,gold one,b\n")
    run("init")
    run("project", "create", "walk", "--labels", "a,b", "--policy", "uniform",
        "--max-labels", "2", "--label-names", 'a="Alpha",b="Beta"')
    run("project", "update", "walk", "--budget", "100")
    assert [p["name"] for p in run("project", "list") if p["name"] == "walk"] == ["walk"]
    run("project", "show", "walk", flag="--json")
    assert run("tasks", "load", "walk", str(tasks))["inserted"] == 6
    assert run("gold", "load", "walk", str(gold))["inserted"] == 2
    tok = run("workers", "enroll", "walk", "walk-w1")["token"]
    run("workers", "enroll", "walk", "walk-w2")
    tok2 = run("workers", "reset-token", "walk-w2")["token"]
    run("workers", "list", "--project", "walk")
    got = run("next", "walk-w1", "--token", tok)
    assert set(got) == {"assignment", "message"}  # POST /assignments/next's body
    a = got["assignment"]
    sub = run("submit", "walk-w1", a["assignment_id"], "a", "--next", "--token", tok)
    assert sub["label"] == "a" and set(sub["next"]) == {"assignment", "message"}
    b = sub["next"]["assignment"] or run("next", "walk-w1", "--token", tok)["assignment"]
    run("decline", "walk-w1", b["assignment_id"], "--token", tok)
    api = ("--token", tok2, "--api-url", stack.base)
    assert run("annotate", "current", *api) == {"assignments": []}
    assert run("annotate", "projects", *api)["current"] == "walk"
    c = run("annotate", "next", *api)["assignment"]
    held = run("annotate", "current", *api)["assignments"]
    assert [h["assignment_id"] for h in held] == [c["assignment_id"]]
    one = run("annotate", "submit", c["assignment_id"], "b", "--next", *api)
    d = one["next"]["assignment"] or run("annotate", "next", *api)["assignment"]
    # the same shapes whether the command asks the API or the service: submit's keys, and
    # an assignment's keys
    assert set(one) == set(sub) and set(d) == set(a)
    run("annotate", "decline", d["assignment_id"], *api)
    progress = run("annotate", "progress", *api, flag="--json")
    assert isinstance(progress["gold"], dict)  # nested as GET /me/progress has it
    preds = tmp_path / "preds.csv"
    preds.write_text("id,p_a,p_b\nw0,0.9,0.1\nw1,0.2,0.8\n")
    assert run("predictions", "load", "walk", str(preds), "--model", "m")["source"] == "m@v1"
    assert [v["source"] for v in run("predictions", "list", "walk")] == ["m@v1"]
    assert run("predictions", "remove", "walk", "--model", "m")["sources"] == ["m@v1"]
    run("status", "walk")
    run("agreement", "walk")
    run("tasks", "show", "walk", "w0")
    assert [t["id"] for t in run("tasks", "list", "walk", "--limit", "2")] == ["w0", "w1"]
    assert run("workers", "default", "walk-w1", "walk") == {"handle": "walk-w1",
                                                            "default": "walk"}
    run("gold", "correct", "walk", "gw0", "b")
    assert run("gold", "mark", "walk", "w5", "a")["marked"] == 1
    run("gold", "suggest", "walk", "--n", "3")
    assert run("workers", "show", "walk-w1")["handle"] == "walk-w1"
    assert [t["answer"] for t in run("gold", "audit", "walk", "--n", "2")] == [""]  # 1 left
    run("rebuild", "walk")
    run("check")
    out = tmp_path / "answers.csv"
    # (in a process of its own: the Celery client is configured when first imported, and
    # another test of the session may have imported it with another broker)
    job_id = subprocess.run([sys.executable, "-m", "cli.main", "export", "walk",
                             "--background", "--wait", "--out", str(out)], cwd=ROOT,
                            env=stack.env, capture_output=True, text=True,
                            timeout=120).stdout.strip()
    job = run("job", job_id)
    assert job["state"] == "done" and job["created"].endswith("+00:00")  # ISO 8601
    with stack.operator() as op:  # the API's GET /exports/{id}, and where the file went
        assert {**op.get(f"/api/v1/exports/{job_id}").json(), "out": str(out)} == job
    run("export-dataset", "walk", str(tmp_path / "ds"))
    agg = run("aggregate", str(tmp_path / "ds" / "labels.csv"))
    assert agg["n_labels"] >= 1
    agg_flag = run("aggregate", str(tmp_path / "ds" / "labels.csv"), flag="--json")
    assert agg_flag == agg
    run("simulate", "--synthetic", "tasks=10,workers=3,model=one-coin,p=0.8",
        "--policy", "uniform", "--budget-per-task", "1", "--runs", "1")
    run("workers", "pause", "walk-w2")
    shown = run("workers", "show", "walk-w2")
    assert shown["pause"]["rule"] == "operator" and len(shown["pauses"]) == 1
    run("workers", "resume", "walk-w2")
    run("workers", "remove", "walk-w2")
    added = run("reviewers", "add", "walk-expert", "--project", "walk")
    assert added["projects"] == ["walk"] and added["token"]
    assert [r["name"] for r in run("reviewers", "list")] == ["walk-expert"]
    assert run("reviewers", "remove", "walk-expert") == {"removed": "walk-expert"}
    # webhooks (docs/hooks.md): a receiver answering 204 for `hooks test`
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Ok(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass
    import threading
    receiver = ThreadingHTTPServer(("127.0.0.1", 0), Ok)
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    hook_url = f"http://127.0.0.1:{receiver.server_address[1]}/in"
    assert run("hooks", "add", "walk", hook_url, "--events", "all",
               "--name", "ops")["name"] == "ops"
    assert [h["name"] for h in run("hooks", "list", "walk")] == ["ops"]
    assert run("hooks", "test", "walk", "ops")["status"] == 204
    assert [d["type"] for d in run("hooks", "deliveries", "walk", "ops")] == ["ping"]
    assert run("hooks", "remove", "walk", "ops")["removed"] is True
    receiver.shutdown()
    run("project", "delete", "walk", "--yes")
    assert set(seen) == {n for n in all_commands() if n not in NOT_WALKED}
    # one record is an object, a collection a list (never a list of one record)
    collections = {"project list", "workers list", "check", "gold suggest", "gold audit",
                   "predictions list", "reviewers list", "tasks list", "hooks list",
                   "hooks deliveries"}
    for name, doc in seen.items():
        assert isinstance(doc, list if name in collections else dict), (name, doc)


def test_o_is_the_format_and_a_file_name_there_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    # `aggregate -o json` once wrote a file named json: -o is the format in every command,
    # and a file name given to it says where files go
    labels = tmp_path / "labels.csv"
    labels.write_text("task,worker,label\nt1,w1,a\nt1,w2,a\nt2,w1,b\n")
    res = CliRunner().invoke(cli, ["aggregate", str(labels), "-o", "answers.csv"])
    assert res.exit_code == 2 and "--out FILE" in res.stderr
    assert not (tmp_path / "answers.csv").exists()
    res = CliRunner().invoke(cli, ["aggregate", str(labels), "-o", "json"])
    assert res.exit_code == 0 and json.loads(res.stdout)["n_tasks"] == 2
    assert not (tmp_path / "json").exists()
