"""Labelling throughput with no webhook vs a webhook whose receiver sleeps 5 s per delivery.

    python bench/hooks.py --rounds 3 --seconds 15

Each round runs both cases, one after the other (alternating which goes first), on a
fresh SQLite record and a flushed Redis: ``--annotators`` simulated annotators in
``--load-procs`` processes pull and submit (``bench/pipeline.py``'s load, one call per
label) while a Celery worker applies the labels (queue ``labelq-bench``, with the beat,
``--beat-seconds``: labelq's default 5)
and a hooks process serves ``labelq-bench.hooks`` as ``labelq run-worker`` starts it
(threads pool, 4 threads). In both cases an operator thread pauses and resumes one more
annotator (not labelling) every ``--churn`` seconds, so events are written in those
transactions all along; in the *slow hook* case the project has a hook subscribed to every
event, whose receiver (an ``http.server`` thread here) sleeps ``--sleep`` seconds before
answering 200 — deliveries pile up, and the beat's watch reads the project's status every
beat. labels/s is counted from the first request until the last label is folded into the
posterior; the table gives each round and the medians, and the ratio slow/none, with the
CPU time per label of the label path (load processes and label worker) and the hooks
process's CPU time (what it takes from a shared machine).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._procs import cpu_seconds, start_celery, start_load, stop_groups  # noqa: E402
from bench._report import command_line, machine, write_section  # noqa: E402
from bench.pipeline import project, wait_applied  # noqa: E402

QUEUE = "labelq-bench"


def _receiver(sleep: float) -> tuple[ThreadingHTTPServer, list[float]]:
    got: list[float] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            self.rfile.read(int(self.headers["Content-Length"]))
            time.sleep(sleep)
            got.append(time.time())
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, got


def run(redis_url: str, hook_url: str | None, seconds: float, annotators: int,
        load_procs: int, churn: float, beat: float) -> dict[str, float]:

    import redis

    from labelq.record.db import session_scope
    from labelq.record.hooks import EVENTS, add_hook
    from labelq.record.models import HookEvent
    from labelq.record.projects import enroll_worker, get_project, set_worker_status

    r = redis.Redis.from_url(redis_url)
    r.flushdb()
    d = Path(tempfile.mkdtemp())
    url = f"sqlite:///{d}/b.db"
    eng, _pid = project(url, 20_000, workers=annotators)
    with session_scope(eng) as s:
        p = get_project(s, "bench")
        enroll_worker(s, p, "churn")
        if hook_url:
            add_hook(s, p, "slow", hook_url, [e for e in EVENTS if e != "budget.below"])
    env = {**os.environ, "LABELQ_DATABASE_URL": url, "LABELQ_REDIS_URL": redis_url,
           "LABELQ_CELERY_QUEUE": QUEUE, "LABELQ_BEAT_SECONDS": str(beat),
           "LABELQ_HOOK_ALLOW_NETWORKS": "127.0.0.1/32",  # (the receiver: loopback)
           "PYTHONPATH": str(ROOT)}
    labels = start_celery(env, d / "celery.log", queue=QUEUE,
                          extra=["--beat", "--schedule", str(d / "beat")])
    hooks = start_celery({**env, "LABELQ_WORKER_LONG": "1"}, d / "hooks.log", procs=4,
                         queue=f"{QUEUE}.hooks", extra=["-P", "threads", "-n", "hooks@%h"])
    stop = threading.Event()

    def operator() -> None:  # pauses and resumes: events written in both cases
        paused = False
        while not stop.wait(churn):
            with session_scope(eng) as s:
                set_worker_status(s, "churn", "active" if paused else "paused")
            paused = not paused
    try:
        load = start_load(url, redis_url, [f"b{j}" for j in range(annotators)], seconds,
                          load_procs)
        churner = threading.Thread(target=operator, daemon=True)
        c_labels, c_hooks = cpu_seconds(pgid=labels.pid), cpu_seconds(pgid=hooks.pid)
        t0 = time.time()
        load.go.set()
        churner.start()
        got = load.results()
        stop.set()
        wait_applied(eng)
        t_all = time.time() - t0
        cpu_labels = cpu_seconds(pgid=labels.pid) - c_labels
        cpu_hooks = cpu_seconds(pgid=hooks.pid) - c_hooks
        load.join()
        churner.join()
        total = sum(g[0] for g in got)
        from sqlalchemy import func
        from sqlmodel import select
        with session_scope(eng) as s:
            events = s.exec(select(func.count()).select_from(HookEvent)).one()
            delivered = s.exec(select(func.count()).select_from(HookEvent)
                               .where(HookEvent.state == "delivered")).one()
        return {"labels": total, "seconds": t_all, "rate": total / t_all,
                "events": int(events), "delivered": int(delivered),
                "cpu_label_ms": 1000 * (sum(g[1] for g in got) + cpu_labels) / max(total, 1),
                "cpu_hooks": cpu_hooks,
                "load": os.getloadavg()[0]}
    finally:
        stop.set()
        stop_groups([hooks, labels])
        eng.dispose()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=15.0)
    ap.add_argument("--annotators", type=int, default=8)
    ap.add_argument("--load-procs", type=int, default=2)
    ap.add_argument("--sleep", type=float, default=5.0,
                    help="seconds the slow receiver sleeps before answering")
    ap.add_argument("--churn", type=float, default=0.5,
                    help="seconds between the operator's pauses and resumes")
    ap.add_argument("--beat-seconds", type=float, default=5.0,
                    help="LABELQ_BEAT_SECONDS of the worker (labelq's default: 5)")
    ap.add_argument("--redis-url", default=os.environ.get("LABELQ_REDIS_URL",
                                                          "redis://127.0.0.1:6379/14"))
    args = ap.parse_args()
    server, _got = _receiver(args.sleep)
    hook_url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    rows, rates = [], {"none": [], "slow": []}
    for i in range(args.rounds):
        order = ["none", "slow"] if i % 2 == 0 else ["slow", "none"]
        for case in order:
            out = run(args.redis_url, hook_url if case == "slow" else None, args.seconds,
                      args.annotators, args.load_procs, args.churn, args.beat_seconds)
            rates[case].append(out["rate"])
            rows.append(f"| {i + 1} | {'slow hook' if case == 'slow' else 'no hook'} "
                        f"| {out['labels']} | {out['seconds']:.1f} | {out['rate']:.0f} "
                        f"| {out['cpu_label_ms']:.1f} | {out['cpu_hooks']:.1f} "
                        f"| {out['events']} | {out['delivered']} | {out['load']:.1f} |")
            print(rows[-1], flush=True)
    server.shutdown()
    none, slow = statistics.median(rates["none"]), statistics.median(rates["slow"])
    spread = {c: (min(v), max(v)) for c, v in rates.items()}
    lines = ["## Webhooks and labelling throughput (`bench/hooks.py`)", "",
             f"Command: `{command_line()}`", "",
             f"Machine: {machine()}; shared with other jobs while it ran (load average, "
             "1 min, in the last column; it includes the benchmark's own processes).", "",
             f"{args.annotators} simulated annotators in {args.load_procs} load processes "
             "(submit-and-next, each label committed to SQLite before the OK), a Celery "
             f"worker (1 process, beat every {args.beat_seconds:g} s) applying labels, a "
             "hooks process "
             f"(4 threads, `<queue>.hooks`); an operator pauses and resumes one more "
             f"annotator every {args.churn} s in both cases (events written either way). "
             f"*Slow hook*: a hook on every event whose receiver sleeps {args.sleep} s "
             "before answering. labels/s from the first request until the last label is "
             "applied; events: written during the run (the slow hook's), delivered: by "
             "its end.", "",
             "| round | case | labels | until all applied (s) | labels/s "
             "| CPU ms/label (load procs + label worker) | hooks process CPU (s) | events "
             "| delivered | load avg |",
             "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|", *rows, "",
             f"Medians: no hook {none:.0f} labels/s (range {spread['none'][0]:.0f}–"
             f"{spread['none'][1]:.0f}), slow hook {slow:.0f} labels/s (range "
             f"{spread['slow'][0]:.0f}–{spread['slow'][1]:.0f}); ratio slow/none "
             f"{slow / none:.2f}."]
    write_section("hooks", "\n".join(lines))
    print(lines[-1])


if __name__ == "__main__":
    main()
