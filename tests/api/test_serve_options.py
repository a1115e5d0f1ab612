"""``labelq serve --database-url --redis-url`` (issue 43): the options mean what
LABELQ_DATABASE_URL and LABELQ_REDIS_URL mean, and win over them — in every API process
of ``--workers``, which read their settings when they start."""

from __future__ import annotations

import httpx
from pipeline.conftest import ROOT

from .conftest import Server, make_project


def test_serve_options_win_over_the_variables_in_every_process(stack, tmp_path):
    # Given the variables naming a database that does not exist and a Redis nobody runs
    make_project(stack, "opts", n_tasks=4)
    token = stack.enroll("opts", "ann-opts")
    env = {**stack.env, "LABELQ_DATABASE_URL": f"sqlite:///{tmp_path / 'nowhere.db'}",
           "LABELQ_REDIS_URL": "redis://127.0.0.1:1/0"}
    # When `labelq serve --workers 2` is given the stack's database and Redis by options
    srv = Server(env, ROOT, tmp_path / "serve-opts.log",
                 args=("--workers", "2", "--database-url", stack.database_url,
                       "--redis-url", stack.redis_url)).start()
    try:
        # Then it serves that database's annotator from both processes (new connections),
        # with the hot state of that Redis
        auth = {"Authorization": f"Bearer {token}"}
        for _ in range(6):
            me = httpx.get(srv.base + "/api/v1/me", headers=auth)
            assert me.status_code == 200 and me.json()["handle"] == "ann-opts"
        nxt = httpx.post(srv.base + "/api/v1/assignments/next", headers=auth)
        assert nxt.status_code == 200 and nxt.json()["assignment"] is not None
    finally:
        srv.stop()
    assert not (tmp_path / "nowhere.db").exists()
