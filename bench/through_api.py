"""End-to-end labels/s through the HTTP API, as annotators' clients see it.

    python bench/through_api.py --servers 1,2 --seconds 15

``bench/pipeline.py`` calls the service in-process (one service per load process, like one
API process); this one puts ``labelq serve`` (uvicorn, FastAPI) in between: ``--servers`` API
processes, ``--annotators`` simulated annotators spread over ``--load-procs`` client processes,
each a thread with one kept-alive HTTP connection that signs in with its token and then
loops ``POST /api/v1/assignments/{id}/label?next=true`` — one request per label, the label
committed to the record before the answer — while a Celery worker (``--procs`` processes)
applies the labels and refills the inboxes. labels/s is counted from the first request to
the moment the last label is folded into the posterior. Clients, servers, Celery and Redis
share the machine's cores: the CPU columns say who used what.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._procs import groups_cpu, stop_groups  # noqa: E402
from bench._report import command_line, machine, write_section  # noqa: E402
from bench.pipeline import (  # noqa: E402
    cpu_seconds,
    fresh_database,
    project,
    start_celery,
    wait_applied,
)


def _client(port_tokens, seconds, ready, go, out):
    """One client process: a thread per annotator, each with its own connection."""
    import http.client
    counts, errors, lat = {}, [], []

    def one(i, port, token):
        conn = http.client.HTTPConnection("127.0.0.1", port)
        hdr = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

        def post(path, body=b""):
            conn.request("POST", path, body=body, headers=hdr)
            resp = conn.getresponse()
            data = resp.read()
            if resp.status != 200:
                raise RuntimeError(f"{path}: {resp.status} {data[:200]!r}")
            return json.loads(data)
        ready.put(i)
        go.wait()
        n, stop = 0, time.monotonic() + seconds
        try:
            a = post("/api/v1/assignments/next").get("assignment")
            while a is not None and time.monotonic() < stop:
                t = time.perf_counter()
                got = post(f"/api/v1/assignments/{a['assignment_id']}/label?next=true",
                           b'{"label": "a"}')
                lat.append(time.perf_counter() - t)
                a = (got.get("next") or {}).get("assignment")
                n += 1
        except Exception as exc:  # noqa: BLE001 - reported by the parent
            errors.append(repr(exc))
        counts[i] = n
    ts = [threading.Thread(target=one, args=(i, port, tok))
          for i, (port, tok) in enumerate(port_tokens)]
    [t.start() for t in ts]
    go.wait()
    cpu0 = time.process_time()
    [t.join() for t in ts]
    out.put((sum(counts.values()), time.process_time() - cpu0, errors, lat))


def warm(port, token):
    """One ``POST /api/v1/assignments/next`` (its assignment kept: the client's first next
    returns it again)."""
    import http.client
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    conn.request("POST", "/api/v1/assignments/next",
                 headers={"Authorization": f"Bearer {token}"})
    resp = conn.getresponse()
    resp.read()
    conn.close()
    if resp.status != 200:
        raise RuntimeError(f"warm-up next: {resp.status}")


def next_latencies(port, token, n):
    """``n`` sequential ``POST /api/v1/assignments/next`` by one annotator on an otherwise
    idle server (each assignment declined again), their latencies sorted (s)."""
    import http.client
    conn = http.client.HTTPConnection("127.0.0.1", port)
    hdr = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    out = []
    for _ in range(n):
        t = time.perf_counter()
        conn.request("POST", "/api/v1/assignments/next", headers=hdr)
        got = json.loads(conn.getresponse().read())
        out.append(time.perf_counter() - t)
        if got.get("assignment"):
            conn.request("POST", f"/api/v1/assignments/{got['assignment']['assignment_id']}"
                                 "/decline", headers=hdr)
            conn.getresponse().read()
    conn.close()
    return sorted(out)


def wait_idle(server_cpu, quiet: float = 0.05, limit: float = 120.0) -> float:
    """Seconds until the server side (``server_cpu()``: CPU seconds of Celery, the API
    processes and Redis) used less than ``quiet`` s of CPU in one second — the applier's
    refills and snapshots after the run done; at most ``limit``."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit:
        c0 = server_cpu()
        time.sleep(1.0)
        if server_cpu() - c0 < quiet:
            break
    return time.monotonic() - t0


def wait_http(url: str, proc, deadline: float) -> None:
    while True:
        try:
            with urllib.request.urlopen(url, timeout=1) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{url} did not answer")
        time.sleep(0.1)


def run(redis_url, servers, procs, n_tasks, seconds, annotators, load_procs,
        database="sqlite", port0=18600, api_workers=1, tree=ROOT, probe=0):
    """One run; the API servers run the code of ``tree`` (a checkout of this repository;
    the clients, Celery and Redis are this tree's in every run)."""
    import multiprocessing as mp

    import redis

    from labelq.record.db import session_scope
    from labelq.record.models import Project
    from labelq.record.projects import enroll_worker
    r = redis.Redis.from_url(redis_url)
    r.flushdb()
    d = tempfile.mkdtemp()
    url, cleanup = fresh_database(database, d)
    eng, pid = project(url, n_tasks, workers=0)
    with session_scope(eng) as s:
        p = s.get(Project, pid)
        tokens = [enroll_worker(s, p, f"h{j}")[1] for j in range(annotators)]
        prober = enroll_worker(s, p, "probe")[1]
    env = {**os.environ, "LABELQ_DATABASE_URL": url, "LABELQ_REDIS_URL": redis_url,
           "LABELQ_CELERY_QUEUE": "labelq-bench", "PYTHONPATH": str(ROOT)}
    started = [start_celery(env, procs, Path(d) / "celery.log")]
    ports = [port0 + i for i in range(servers)]
    try:
        for port in ports:
            started.append(subprocess.Popen(
                [sys.executable, "-m", "cli.main", "serve", "--port", str(port),
                 "--log-level", "warning", "--workers", str(api_workers)], cwd=tree,
                env={**env, "PYTHONPATH": str(tree)}, start_new_session=True,
                stdout=open(Path(d) / f"api{port}.log", "wb"), stderr=subprocess.STDOUT))
        deadline = time.monotonic() + 120
        for port, proc in zip(ports, started[1:], strict=True):
            wait_http(f"http://127.0.0.1:{port}/healthz", proc, deadline)
        for port, tok in [(ports[j % servers], tok) for j, tok in enumerate(tokens)]:
            warm(port, tok)  # each annotator's first next (and at 1M tasks the first
            # request's set-up of the project's hot state) before the clock starts
        ctx = mp.get_context("spawn")
        q, ready, go = ctx.Queue(), ctx.Queue(), ctx.Event()
        assigned = [(ports[j % servers], tok) for j, tok in enumerate(tokens)]
        ps = [ctx.Process(target=_client, args=(assigned[i::load_procs], seconds, ready, go, q))
              for i in range(load_procs)]
        [p_.start() for p_ in ps]
        for _ in tokens:
            ready.get(timeout=300)
        redis_pid = int(r.info("server")["process_id"])
        api_groups = [proc.pid for proc in started[1:]]  # each serve's process group
        def api_cpu():
            return groups_cpu(api_groups)
        c0 = {"celery": cpu_seconds(pgid=started[0].pid), "api": api_cpu(),
              "redis": cpu_seconds(pids={redis_pid})}
        t0 = time.time()
        go.set()
        got = [q.get() for _ in ps]
        t_sub = time.time() - t0
        wait_applied(eng)
        t_all = time.time() - t0
        [p_.join() for p_ in ps]
        cpu = {"clients": sum(g[1] for g in got),
               "api": api_cpu() - c0["api"],
               "celery": cpu_seconds(pgid=started[0].pid) - c0["celery"],
               "redis": cpu_seconds(pids={redis_pid}) - c0["redis"]}
        errors = [e for g in got for e in g[2]]
        lat = sorted(x for g in got for x in g[3])
        probes = []
        if probe:
            probes.append(("right after the run", next_latencies(ports[0], prober, probe)))
            waited = wait_idle(lambda: cpu_seconds(pgid=started[0].pid) + api_cpu()
                               + cpu_seconds(pids={redis_pid}))
            probes.append((f"once idle ({waited:.0f} s later)",
                           next_latencies(ports[0], prober, probe)))
        return (sum(g[0] for g in got), t_sub, t_all, cpu, errors, lat, probes)
    finally:
        stop_groups(started)
        eng.dispose()
        cleanup()


def _pct(xs, q):
    return 1000 * xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def _row(name, servers, api_workers, total, t_sub, t_all, cpu, lat):
    per = {k: 1000 * v / max(total, 1) for k, v in cpu.items()}
    server = per["api"] + per["celery"] + per["redis"]
    return {"name": name, "config": f"{servers} × {api_workers}", "labels": total,
            "t_sub": t_sub, "t_all": t_all, "rate": total / t_all, "per": per,
            "server": server, "p50": _pct(lat, 0.5), "p99": _pct(lat, 0.99),
            "load": os.getloadavg()[0]}


def _probe_summary(p99s: list[tuple[str, float]], bar_ms: float) -> str:
    """How many probes' p99 were within ``bar_ms``, by when the probe ran."""
    parts = []
    for when in dict.fromkeys(w for w, _ in p99s):
        got = sorted(v for w, v in p99s if w == when)
        parts.append(f"{when}: {sum(v <= bar_ms for v in got)} of {len(got)} "
                     f"(p99 {got[0]:.2f}–{got[-1]:.2f} ms)")
    return f"Probes with p99 ≤ {bar_ms:g} ms: " + "; ".join(parts) + "."


def _line(r, with_name=False):
    per = r["per"]
    return ((f"| {r['name']} " if with_name else "")
            + f"| {r['config']} | {r['labels']} | {r['t_sub']:.1f} | {r['t_all']:.1f} "
            f"| {r['rate']:.0f} | {r['p50']:.2f} / {r['p99']:.2f} | {per['clients']:.2f} "
            f"| {per['api']:.2f} | {per['celery']:.2f} | {per['redis']:.2f} "
            f"| {r['server']:.2f} | {r['load']:.1f} |")


_HEAD = ("| `labelq serve` × `--workers` | labels | submit phase (s) | until all applied (s) "
         "| labels/s | request p50 / p99 (ms) | CPU ms/label: clients | API | Celery | Redis "
         "| server side (API + Celery + Redis) | load avg (1 min) |")
_RULE = "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--servers", default="1,2", help="numbers of `labelq serve` to try")
    ap.add_argument("--workers", default="1",
                    help="numbers of processes per `labelq serve` (--workers) to try")
    ap.add_argument("--procs", type=int, default=2, help="Celery processes")
    ap.add_argument("--seconds", type=float, default=15.0)
    ap.add_argument("--tasks", type=int, default=20_000, help="tasks in the project")
    ap.add_argument("--annotators", type=int, default=16)
    ap.add_argument("--load-procs", type=int, default=2)
    ap.add_argument("--port", type=int, default=18600, help="first API port")
    ap.add_argument("--database", default="sqlite",
                    help="sqlite (a file, WAL) or a postgresql:// URL (a fresh schema there)")
    ap.add_argument("--redis-url", default=os.environ.get("LABELQ_REDIS_URL",
                                                          "redis://127.0.0.1:6379/14"))
    ap.add_argument("--compare", metavar="REF",
                    help="A/B: also run the API servers from git commit REF (a temporary "
                         "worktree), alternating REF and this tree --rounds times; writes "
                         "the section `http-ab` instead of `http`")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--section", help="the section of docs/benchmarks.md to write (default: "
                                      "http, or http-ab with --compare)")
    ap.add_argument("--probe", type=int, default=0, metavar="N",
                    help="after each run, one more annotator asks N times for its next "
                         "assignment on the idle server (declining it); its latency p50/p99")
    ap.add_argument("--runs", type=int, default=1,
                    help="runs of each configuration (without --compare); with --probe, "
                         "the section also says in how many probes p99 was within --bar-ms")
    ap.add_argument("--bar-ms", type=float, default=5.0,
                    help="the probe's p99 target counted in the summary (issue 23: 5 ms)")
    args = ap.parse_args()
    configs = [(int(s_), int(w)) for s_ in args.servers.split(",") if s_
               for w in args.workers.split(",") if w]
    intro = [f"Command: `{command_line()}`", "",
             f"Machine: {machine()}; clients, API servers, the Celery worker ({args.procs} "
             "processes) and Redis all share its cores.", "",
             f"{args.tasks:,} tasks; {args.annotators} annotators' clients in "
             f"{args.load_procs} processes, one kept-alive connection each, one request per "
             "label (`POST /api/v1/assignments/{id}/label?next=true`, which also issues the "
             "next assignment), each label committed to "
             f"{'SQLite' if args.database == 'sqlite' else 'PostgreSQL'} before the answer; "
             "labels/s from the first request until the last label is folded into the "
             "posterior; request latency as the client sees it:", ""]

    probes: list[str] = []
    probe_p99: list[tuple[str, float]] = []
    probe_lines = ["", f"Next-assignment latency after the run, {args.tasks:,} tasks "
                   f"pending or labelled: one annotator, {args.probe} sequential "
                   "`POST /api/v1/assignments/next` (each declined again), with no other "
                   "client; right after the last label was applied, and again once the "
                   "server side (Celery, the API processes, Redis) used under 5 % of a "
                   "core for a second (the applier's refills and snapshots done), ms:", "",
                   "| code | `labelq serve` × `--workers` | when | requests | p50 | p99 "
                   "| max |", "|---|---:|---|---:|---:|---:|---:|"]

    def one(name, tree, servers, api_workers):
        total, t_sub, t_all, cpu, errors, lat, probe = run(
            args.redis_url, servers, args.procs, args.tasks, args.seconds, args.annotators,
            args.load_procs, args.database, port0=args.port, api_workers=api_workers,
            tree=tree, probe=args.probe)
        if errors:
            raise SystemExit(f"client errors ({name}): {errors[:3]}")
        row = _row(name, servers, api_workers, total, t_sub, t_all, cpu, lat)
        for when, lats in probe:
            probe_p99.append((when.split(" (")[0], _pct(lats, 0.99)))
            probes.append(f"| {name or 'this tree'} | {row['config']} | {when} | {len(lats)} "
                          f"| {_pct(lats, 0.5):.2f} | {_pct(lats, 0.99):.2f} "
                          f"| {1000 * lats[-1]:.2f} |")
            print(probes[-1], flush=True)
        return row

    if not args.compare:
        size = "" if args.tasks == 20_000 else f", {args.tasks:,} tasks"
        lines = [f"## Through the HTTP API (`bench/through_api.py`{size})", "", *intro, _HEAD,
                 _RULE]
        for servers, api_workers in configs:
            for _ in range(args.runs):
                lines.append(_line(one("", ROOT, servers, api_workers)))
                print(lines[-1], flush=True)
        if probes:
            lines += probe_lines + probes + ["", _probe_summary(probe_p99, args.bar_ms)]
            print(lines[-1], flush=True)
        write_section(args.section or "http", "\n".join(lines))
        return
    import statistics
    sha = subprocess.run(["git", "rev-parse", "--short", args.compare], cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout.strip()
    here = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, check=True,
                          capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                           capture_output=True, text=True).stdout.strip()
    here += " + changes" if dirty else ""
    base = Path(tempfile.mkdtemp(prefix="labelq-base-")) / "tree"
    subprocess.run(["git", "worktree", "add", "--detach", str(base), args.compare], cwd=ROOT,
                   check=True, capture_output=True)
    rows = []
    try:
        for rnd in range(args.rounds):
            for name, tree in ((f"before ({sha})", base), (f"after ({here})", ROOT)):
                for servers, api_workers in configs:
                    rows.append(one(name, tree, servers, api_workers))
                    print(f"round {rnd + 1}: " + _line(rows[-1], True), flush=True)
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(base)], cwd=ROOT)
        base.parent.rmdir()
    lines = ["## Through the HTTP API, A/B (`bench/through_api.py --compare`)", "", *intro,
             f"The API servers run the code of the commit before ({sha}) and of this tree "
             f"({here}), alternated {args.rounds} times in one run (Celery, Redis and the "
             "clients are the same code in both). Every run:", "",
             "| code " + _HEAD, "|---" + _RULE]
    lines += [_line(r, True) for r in rows]
    lines += ["", "Medians over the rounds, and after/before:", "",
              "| `labelq serve` × `--workers` | labels/s before → after (×) | API CPU ms/label "
              "before → after (×) | request p99 (ms) before → after |", "|---|---:|---:|---:|"]
    for servers, api_workers in configs:
        cfg = f"{servers} × {api_workers}"
        med = {}
        for key, pick in (("rate", lambda r: r["rate"]), ("api", lambda r: r["per"]["api"]),
                          ("p99", lambda r: r["p99"])):
            for side in ("before", "after"):
                med[key, side] = statistics.median(
                    pick(r) for r in rows if r["config"] == cfg and r["name"].startswith(side))
        lines.append(f"| {cfg} | {med['rate', 'before']:.0f} → {med['rate', 'after']:.0f} "
                     f"({med['rate', 'after'] / med['rate', 'before']:.2f}×) "
                     f"| {med['api', 'before']:.2f} → {med['api', 'after']:.2f} "
                     f"({med['api', 'after'] / med['api', 'before']:.2f}×) "
                     f"| {med['p99', 'before']:.1f} → {med['p99', 'after']:.1f} |")
        print(lines[-1], flush=True)
    if probes:
        lines += probe_lines + probes
    write_section(args.section or "http-ab", "\n".join(lines))


if __name__ == "__main__":
    main()
