"""Which labelled tasks an expert should answer to teach the model the most (``labelq gold
suggest``). Pure numpy; no I/O.

A gold answer on a loaded task does two things (``labelq gold mark``): it settles the
task's answer, which is evidence for or against each way of aggregating the labels (``auto``
chooses its method by held-out likelihood on gold), and it scores every annotator who
labelled the task. :func:`suggest_gold` ranks the candidate tasks by the expected
information, in bits, a true answer gives about both:

* **committee** -- query by committee (Seung, Opper & Sompolinsky 1992; McCallum & Nigam
  1998): fit the aggregations labelq has (``mv``, ``wmv``, ``onecoin``, ``ds``, and
  ``ds-category`` when the tasks have two or more categories; the EM ones with the known
  gold clamped) and take the generalized Jensen-Shannon divergence of their posteriors on the
  task, ``H(mean_m p_m) - mean_m H(p_m)``: the mutual information between the true answer and
  which candidate is right, i.e. what the answer tells about which model to believe. Zero
  where the candidates agree, however uncertain they are together.
* **trusted** -- the split among the trusted workers: each label of the task, from worker
  ``j``, is right or wrong; before the answer is known the candidates' mean posterior gives
  it probability ``p`` of being right, so the answer resolves ``H_b(p)`` bits about that
  label. The term is the mean of those bits over the task's labellers weighted by their
  trust ``v_j = min(1, c_j / c_typ)`` (divided by ``max(1, sum v_j)``: a task whose
  labellers together weigh less than one trusted worker gets less): ``c_j`` is the
  worker's *checkable* labels (on tasks with another label or a gold answer) and ``c_typ``
  the typical label's worker's (the label-weighted median, as
  :func:`labelq.aggregation.evidence` reads it), so the heavily-labelling workers, whose
  labels the model will weigh by the trust it gives them, count fully and a one-label
  passer-by hardly. Where trusted workers disagree at least one of them is wrong and the
  posterior cannot make both of them sure, so the term is large exactly there (with two
  classes it is the entropy of the mean posterior, scaled down where few trusted workers
  labelled). A mean, not a sum: at most ``log2 K`` bits like the committee term, so a task
  with many labels does not win on its label count alone (how many workers the list
  teaches about is the spreading's job, below).

``score = committee + trusted`` (bits; both are information the same answer gives, on
the same scale, so they add). The picks are then spread greedily: a task's worth to the list is its score with each
worker's part divided by ``1 + k_j``, ``k_j`` being how many tasks already picked that
worker labelled (the k-th check of a worker's accuracy narrows it less than the first), the
trusted term label by label and the committee term by the mean over its labels (candidates
disagree over how to weigh a task's labellers: a second task of the same labellers mostly
repeats the same disagreement). So 30 tasks labelled by the same two workers do not crowd
out a task nearly as good that teaches about others. Ties go by a permutation drawn from
``seed``: the result is deterministic given it.

Only labelled tasks are suggested (a task nobody labelled teaches about no worker), never a
gold task (``gold >= 0``) nor an ``exclude``-d one, and only tasks with a positive score. A
task with one label can be suggested when the candidates disagree on it. Cost: the four or
five fits (the EM ones are vectorised; ~1 s for 88k labels of trec2010) and a few
``bincount`` per pick.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike

from ..aggregation.base import check_gold, check_labels
from ..aggregation.registry import aggregate
from ..errors import InputError

__all__ = ["Suggestions", "suggest_gold", "COMMITTEE"]

#: the committee, simplest first (``ds-category`` joins when tasks have 2+ categories)
COMMITTEE = ("mv", "wmv", "onecoin", "ds")


@dataclass(frozen=True, eq=False)
class Suggestions:
    """The suggested tasks, best first (the order of the greedy picks).

    ``tasks`` int task indices; ``score`` each task's own score (bits, ``committee +
    trusted``); ``gain`` its worth when it was picked (its score discounted for the workers
    already covered; non-increasing); ``committee`` and ``trusted`` the two terms;
    ``reason`` a short text per task; ``candidates`` per task the distinct answers of the
    committee (class indices, most members first); ``answers`` (n, members) each member's
    answer, in the order of ``methods``; ``posterior`` (n, n_classes) the members' mean
    posterior and ``member_posterior`` (n, members, n_classes) each one's; ``trust`` the
    trust weight of every worker."""

    tasks: np.ndarray
    score: np.ndarray
    gain: np.ndarray
    committee: np.ndarray
    trusted: np.ndarray
    reason: tuple[str, ...]
    candidates: tuple[tuple[int, ...], ...]
    answers: np.ndarray
    methods: tuple[str, ...]
    posterior: np.ndarray
    member_posterior: np.ndarray = field(repr=False)  # (n, members, n_classes)
    trust: np.ndarray = field(repr=False)  # v_j per worker

    def __len__(self) -> int:
        return int(self.tasks.size)


def _entropy_bits(p: np.ndarray) -> np.ndarray:
    """Entropy (bits) over the last axis."""
    q = np.clip(p, 1e-300, 1.0)
    out: np.ndarray = -(p * np.log2(q)).sum(axis=-1)
    return out


def _binary_entropy_bits(p: np.ndarray) -> np.ndarray:
    q = np.clip(p, 1e-12, 1 - 1e-12)
    out: np.ndarray = -(q * np.log2(q) + (1 - q) * np.log2(1 - q))
    return out


def suggest_gold(task: ArrayLike, worker: ArrayLike, label: ArrayLike, *, n_tasks: int,
                 n_workers: int, n_classes: int, n: int = 30,
                 categories: ArrayLike | None = None, gold: ArrayLike | None = None,
                 exclude: ArrayLike | None = None, seed: int = 0,
                 classes: Sequence[str] | None = None) -> Suggestions:
    """The at most ``n`` labelled, non-gold, non-excluded tasks whose expert answer would
    teach the most (see the module docstring for the ranking).

    ``task``/``worker``/``label``: int arrays, one entry per label (the aggregation
    package's contract); ``categories``: int per task (``ds-category`` joins the committee
    when there are two or more); ``gold``: class index or -1 per task (clamped by the EM
    members; such tasks are never suggested); ``exclude``: bool per task never to suggest;
    ``classes``: class names for the ``reason`` texts (default the indices)."""
    if n < 0:
        raise InputError(f"n must be >= 0, got {n}", field="n")
    d = check_labels(task, worker, label, n_tasks, max(n_workers, 1), n_classes)
    T, K = d.n_tasks, d.n_classes
    g = check_gold(gold, T, K)
    if exclude is None:
        excl = np.zeros(T, dtype=bool)
    else:
        excl = np.asarray(exclude, dtype=bool)
        if excl.shape != (T,):
            raise InputError(f"exclude must have one entry per task ({T}), got shape "
                             f"{excl.shape}", field="exclude")
    cat = None
    if categories is not None:
        cat = np.asarray(categories, dtype=np.int64)
        if cat.shape != (T,):
            raise InputError(f"categories must have one entry per task ({T}), got shape "
                             f"{cat.shape}", field="categories")
    names = [str(c) for c in classes] if classes is not None else [str(k) for k in range(K)]

    per_task = np.bincount(d.task, minlength=T)
    eligible = (per_task > 0) & (g < 0) & ~excl
    methods = COMMITTEE + (("ds-category",) if cat is not None and np.unique(cat).size > 1
                           else ())
    if not eligible.any() or n == 0:
        return _empty(methods, K, n_workers)

    # the committee's posteriors on the eligible tasks
    idx = np.flatnonzero(eligible)
    P = np.empty((len(methods), idx.size, K))
    for m, method in enumerate(methods):
        fit = aggregate(d.task, d.worker, d.label, method, n_tasks=T, n_workers=d.n_workers,
                        n_classes=K, gold=g, categories=cat)
        P[m] = np.asarray(fit.probas_)[idx]
    mean = P.mean(axis=0)
    committee_e = np.maximum(_entropy_bits(mean) - _entropy_bits(P).mean(axis=0), 0.0)

    # trust weight per worker: checkable labels against the typical label's worker's
    checkable_task = (per_task >= 2) | (g >= 0)
    checkable = checkable_task[d.task]
    c = np.bincount(d.worker[checkable], minlength=d.n_workers).astype(float)
    c_typ = float(np.median(c[d.worker[checkable]])) if checkable.any() else 0.0
    trust = np.minimum(1.0, c / c_typ) if c_typ > 0 else np.zeros(d.n_workers)

    # the labels of the eligible tasks, with what the answer resolves about each
    pos = np.full(T, -1, dtype=np.int64)
    pos[idx] = np.arange(idx.size)
    on = eligible[d.task]
    lt, lw, ly = pos[d.task[on]], d.worker[on], d.label[on]
    bits = trust[lw] * _binary_entropy_bits(mean[lt, ly])
    # per trusted labeller (a trust-weighted mean; below one trusted labeller, the sum)
    per = 1.0 / np.maximum(1.0, np.bincount(lt, weights=trust[lw], minlength=idx.size))
    trusted_e = np.bincount(lt, weights=bits, minlength=idx.size) * per
    n_lab = per_task[idx].astype(float)
    score = committee_e + trusted_e

    # greedy spread: each worker's part worth 1 / (1 + picks already labelled by them)
    rng = np.random.default_rng(seed)
    rank = rng.permutation(idx.size)  # tie-break
    covered = np.zeros(d.n_workers)
    alive = score > 1e-12
    picks: list[int] = []
    gains: list[float] = []
    while len(picks) < n and alive.any():
        disc = 1.0 / (1.0 + covered[lw])
        gain = (committee_e * np.bincount(lt, weights=disc, minlength=idx.size) / n_lab
                + np.bincount(lt, weights=bits * disc, minlength=idx.size) * per)
        gain = np.where(alive, gain, -np.inf)
        top = gain.max()
        tied = np.flatnonzero(gain >= top - 1e-12 * max(1.0, abs(top)))
        i = int(tied[np.argmin(rank[tied])])
        picks.append(i)
        gains.append(float(top))
        alive[i] = False
        covered[np.unique(lw[lt == i])] += 1

    sel = np.array(picks, dtype=np.int64)
    answers = P[:, sel, :].argmax(axis=2).T  # (n, members); ties to the lowest class
    reasons, cands = [], []
    for r, i in enumerate(sel):
        votes: dict[int, list[str]] = {}
        for m, a in enumerate(answers[r]):
            votes.setdefault(int(a), []).append(methods[m])
        order = sorted(votes, key=lambda a: (-len(votes[a]), -mean[i, a], a))
        cands.append(tuple(order))
        mine = lt == i
        reasons.append(_reason(committee_e[i], trusted_e[i], votes, order, names,
                               ly[mine], trust[lw[mine]], int(per_task[idx[i]])))
    return Suggestions(tasks=idx[sel], score=score[sel], gain=np.array(gains),
                       committee=committee_e[sel], trusted=trusted_e[sel],
                       reason=tuple(reasons), candidates=tuple(cands), answers=answers,
                       methods=methods, posterior=mean[sel],
                       member_posterior=P[:, sel, :].transpose(1, 0, 2), trust=trust)


def _reason(committee: float, trusted: float, votes: dict[int, list[str]], order: list[int],
            names: list[str], labels: np.ndarray, trust: np.ndarray, n_labels: int) -> str:
    """E.g. ``candidates disagree (mv,wmv: pos | onecoin,ds: neg); trusted workers split
    2-1``, the larger term first."""
    parts = []
    if len(order) > 1:
        parts.append((committee, "candidates disagree (" + " | ".join(
            f"{','.join(votes[a])}: {names[a]}" for a in order) + ")"))
    elif committee > 0.01:
        parts.append((committee, f"candidates unsure how far to trust ({names[order[0]]})"))
    heavy = labels[trust >= 0.5]
    if heavy.size >= 2 and np.unique(heavy).size > 1:
        counts = sorted(np.bincount(heavy).tolist(), reverse=True)
        split = "-".join(str(k) for k in counts if k)
        parts.append((trusted, f"trusted workers split {split}"))
    elif trusted > 0.01:
        parts.append((trusted, "trusted workers' labels uncertain"
                      + (" (one label)" if n_labels == 1 else "")))
    if not parts:
        return "small expected information"
    parts.sort(key=lambda p: -p[0])
    return "; ".join(text for _v, text in parts)


def _empty(methods: tuple[str, ...], n_classes: int, n_workers: int) -> Suggestions:
    z = np.zeros(0)
    return Suggestions(tasks=np.zeros(0, dtype=np.int64), score=z, gain=z, committee=z,
                       trusted=z, reason=(), candidates=(),
                       answers=np.zeros((0, len(methods)), dtype=np.int64), methods=methods,
                       posterior=np.zeros((0, n_classes)),
                       member_posterior=np.zeros((0, len(methods), n_classes)),
                       trust=np.zeros(n_workers))
