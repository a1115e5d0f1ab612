"""A model in the loop (issue 42, docs/models.md): each round, annotators label what the
``auto`` policy asks of them, the project is exported, a scikit-learn model is retrained on
the export's answers and its predictions for every task are loaded as the model's next
version -- which the running pipeline takes at once (a new epoch) to route the next round.

The data: scikit-learn's bundled digits (8x8 images), the classes ``3``, ``5`` and ``8``
(the most confused ones), their true labels hidden from everything but the simulated
annotators and the report. The annotators are simulated: each answers right with its own
accuracy, else a wrong class at random.

    python docs/examples/model_loop.py --redis-url redis://127.0.0.1:6379/0

(a throw-away SQLite database in a temporary folder; Redis database of your choice: the
example writes only its project's keys). ``tests/pipeline/test_model_loop.py`` runs it.
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

CLASSES = ["3", "5", "8"]
ACCURACY = {"ann": 0.9, "bob": 0.8, "cat": 0.7, "dan": 0.65}  # the simulated annotators


@dataclass
class Round:
    """One round's figures, each against the hidden truth over every task."""

    number: int
    labels: int  # human labels given so far
    model: float | None  # the model retrained on this round's export (None: too few
    # classes among its answers yet), its answer on every task
    export: float  # the export's answers (a task without one counts as wrong)
    answered: int  # tasks with an answer in the export
    model_alone: int  # of them, resting on the model alone
    labelled: int  # tasks with a human label
    export_labelled: float  # the export's answers on them
    majority: float  # the human majority on them (ties at random)


@dataclass
class Loop:
    rounds: list[Round] = field(default_factory=list)
    # the final export, after the last round's model was loaded (no new label): the
    # answers a user takes away, against the last model and the human majority
    final: Round | None = None


def digits() -> tuple[np.ndarray, np.ndarray]:
    """The images of ``CLASSES`` (features scaled to 0..1) and their true class index."""
    from sklearn.datasets import load_digits

    data = load_digits()
    keep = np.isin(data.target, [int(c) for c in CLASSES])
    truth = np.searchsorted([int(c) for c in CLASSES], data.target[keep])
    return data.data[keep] / 16.0, truth


def run(redis_url: str, *, rounds: int = 4, labels_per_round: int = 120, seed: int = 0,
        folder: str | Path | None = None, echo: bool = True) -> Loop:
    """Run the loop (see the module docstring); returns each round's figures."""
    import redis as redis_lib
    from sklearn.linear_model import LogisticRegression

    from labelq.exporting import aggregate_project, aggregated_rows, load_project_labels
    from labelq.live.applier import Applier
    from labelq.live.home import claim_home
    from labelq.live.hotstate import StateCache, bump_epoch
    from labelq.live.redis.keys import Keys
    from labelq.record.db import engine_for, init_schema, session_scope
    from labelq.record.loading import load_tasks
    from labelq.record.predictions import load_predictions
    from labelq.record.projects import create_project, enroll_worker, get_project
    from labelq.record.settings import Settings
    from labelq.service import Service

    rng = np.random.default_rng(seed)
    x, truth = digits()
    ids = [f"d{i}" for i in range(truth.size)]
    with tempfile.TemporaryDirectory(prefix="labelq-model-loop-") as tmp:
        base = Path(folder or tmp)
        url = f"sqlite:///{base / 'loop.db'}"
        engine = engine_for(url)
        init_schema(engine)
        (base / "tasks.csv").write_text("id\n" + "".join(f"{t}\n" for t in ids))
        with session_scope(engine) as s:
            project = create_project(s, "digits", ",".join(CLASSES), policy="auto")
            load_tasks(s, project, base / "tasks.csv")
            for handle in ACCURACY:
                enroll_worker(s, project, handle, cost=1)
            pid = int(project.id or 0)
        r = redis_lib.Redis.from_url(redis_url)
        service = Service(engine, r, settings=Settings(database_url=url), worker_max_age=0,
                          state_max_age=0)
        applier = Applier(engine, r, cache=StateCache())
        keys = Keys(pid, claim_home(engine, r))
        loop, given = Loop(), 0

        def export() -> tuple[np.ndarray, list[str], Any]:
            """The export's answers (class index, -1: none), what each rests on (its
            ``evidence``: humans, humans+model, model, none), its labels."""
            with session_scope(engine) as s:
                project = get_project(s, "digits")
                pl = load_project_labels(s, project)
                rows = list(aggregated_rows(pl, aggregate_project(s, project, pl, "auto")))
            answer = np.array([CLASSES.index(row["label"]) if row["label"] else -1
                               for row in rows])
            return answer, [row["evidence"] for row in rows], pl

        def figures(number: int, model_acc: float | None, answer: np.ndarray,
                    sources: list[str], majority: np.ndarray) -> Round:
            lab = majority >= 0
            got = Round(number, given, model_acc, float(np.mean(answer == truth)),
                        int(np.sum(answer >= 0)), sum(src == "model" for src in sources),
                        int(lab.sum()), float(np.mean(answer[lab] == truth[lab])),
                        float(np.mean(majority[lab] == truth[lab])))
            if echo:
                shown = "-" if model_acc is None else f"{model_acc:.3f}"
                what = f"round {number}" if number <= rounds else "final export"
                print(f"{what}: {given} labels; export {got.export:.3f} on all "
                      f"{truth.size} tasks ({got.answered} answered, {got.model_alone} by "
                      f"the model alone); on the {got.labelled} labelled: export "
                      f"{got.export_labelled:.3f}, human majority {got.majority:.3f}; "
                      f"model {'retrained on the export' if number <= rounds else 'in it'} "
                      f"{shown}")
            return got

        for number in range(1, rounds + 1):
            # 1. the annotators label what the policy asks of them
            for i in range(labels_per_round):
                handle = list(ACCURACY)[i % len(ACCURACY)]
                issued = service.next_assignment(handle)
                if issued is None:
                    continue
                y = int(truth[int(issued.task[1:])])
                if rng.random() >= ACCURACY[handle]:  # wrong: another class at random
                    y = int(rng.choice([k for k in range(len(CLASSES)) if k != y]))
                service.submit(handle, issued.assignment_id, CLASSES[y])
                given += 1
                if i % 20 == 19:
                    applier.apply_pending(pid, refill=False)
            applier.apply_pending(pid, refill=False)
            # 2. the export's answers (the project's default method, auto)
            answer, sources, pl = export()
            votes = np.zeros((truth.size, len(CLASSES)))
            np.add.at(votes, (pl.task, pl.label), 1.0)
            tie_break = rng.random(votes.shape) * 1e-3  # ties at random
            majority = np.where(votes.sum(axis=1) > 0, (votes + tie_break).argmax(axis=1), -1)
            # 3. the model retrained on the answers that rest on human labels
            train = np.array([src in ("humans", "humans+model") for src in sources])
            model_acc: float | None = None
            if len(set(answer[train].tolist())) == len(CLASSES):
                clf = LogisticRegression(max_iter=2000)
                clf.fit(x[train], answer[train])
                probs = clf.predict_proba(x)
                model_acc = float(np.mean(probs.argmax(axis=1) == truth))
                # 4. its predictions for every task, loaded as the model's next version;
                # a new epoch makes the running pipeline route the next round with them
                path = base / f"preds{number}.csv"
                path.write_text("id," + ",".join(f"p_{c}" for c in CLASSES) + "\n" + "".join(
                    f"{t}," + ",".join(f"{p:.6f}" for p in row) + "\n"
                    for t, row in zip(ids, probs, strict=True)))
                with session_scope(engine) as s:
                    load_predictions(s, get_project(s, "digits"), path, model="logreg",
                                     normalise=True)
                bump_epoch(r, keys)
            loop.rounds.append(figures(number, model_acc, answer, sources, majority))
        # the final export, with the last model's predictions
        answer, sources, _ = export()
        loop.final = figures(rounds + 1, loop.rounds[-1].model, answer, sources, majority)
        r.close()
        engine.dispose()
    return loop


def main(argv: Sequence[str] | None = None) -> Any:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--labels-per-round", type=int, default=120)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    return run(args.redis_url, rounds=args.rounds, labels_per_round=args.labels_per_round,
               seed=args.seed)


if __name__ == "__main__":
    main()
