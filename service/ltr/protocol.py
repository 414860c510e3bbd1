"""Held-out measurement of learning to rank: folds grouped by page, pooled held-out rankings,
and the paired test against the starting weights.

Hieber & Riezler 2015, §5, report learning-to-rank gains of a few thousandths of MAP that are
significant on test sets of thousands of queries; a dev set of a few hundred queries cannot
resolve them. So learned weights are judged on held-out *training* queries:

* :func:`page_groups` / :func:`linked_groups` — the unit that must not straddle a split: a
  query's page (the document it judges highest, on the LibreOffice sets the page judged 3),
  or a connected set of pages that judge each other (a page whose query judges another
  query's page at ``min_level`` or above joins its group).
* :func:`grouped_folds` — K folds of whole groups, balanced by size and fixed by a salted hash.
* :func:`cv_rounds` — round ``j`` trains on all folds but ``j`` and ``j + 1``, stops early on
  ``j + 1`` and ranks ``j``; pooling the ranked folds gives every query one held-out ranking.
* :func:`holdout_split` — one held-out share of the groups (what the admin job keeps back).
* :func:`compare_runs` — the pooled (or held-out) rankings against the starting weights':
  mean MAP/NDCG/PRES of both, the two-sided paired randomization test of each metric, and the
  smallest MAP difference the queries could show (:func:`service.evaluation.detectable_difference`,
  power .8, at α = .05 and .01).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from service.errors import InvalidInputError
from service.evaluation import detectable_difference, evaluate, randomization_test
from service.records import QrelsDict, RunDict

DEPTH = 1000
METRICS = {"map": "map", "ndcg": "ndcg", "pres": "pres"}  # NDCG and PRES at DEPTH


def _hash(salt: str, key: str) -> str:
    return hashlib.sha1(f"{salt}:{key}".encode()).hexdigest()


def page_groups(qrels: QrelsDict) -> dict[str, str]:
    """Each query's group: its page — the document it judges highest (the smallest id among
    ties; on the LibreOffice sets the page judged 3), or the query itself if it judges none
    relevant."""
    out = {}
    for qid, judged in qrels.items():
        top = max((rel for rel in judged.values()), default=0)
        pages = sorted(d for d, rel in judged.items() if rel == top and rel > 0)
        out[qid] = pages[0] if pages else f"query:{qid}"
    return out


def linked_groups(qrels: QrelsDict, min_level: int = 2) -> dict[str, str]:
    """Each query's group when linked pages stay together: queries ``a`` and ``b`` share a
    group if ``a`` judges ``b``'s page at ``min_level`` or above (or ``b`` judges ``a``'s), and
    transitively. The group is named by its smallest page."""
    pages = page_groups(qrels)
    parent = {p: p for p in pages.values()}

    def find(p: str) -> str:
        while parent[p] != p:
            parent[p] = parent[parent[p]]
            p = parent[p]
        return p

    for qid, judged in qrels.items():
        mine = pages[qid]
        for doc, rel in judged.items():
            if rel >= min_level and doc in parent and doc != mine:
                a, b = find(mine), find(doc)
                if a != b:
                    parent[max(a, b)] = min(a, b)
    return {qid: find(p) for qid, p in pages.items()}


def grouped_folds(groups: Mapping[str, str], k: int, salt: str = "ltr-folds") -> list[list[str]]:
    """``k`` folds of queries (sorted ids) such that a group's queries share a fold. Groups are
    placed largest first (ties in salted-hash order), each into the fold with the fewest
    queries so far (ties: the lowest fold), so fold sizes differ by at most the largest group."""
    if k < 2:
        raise InvalidInputError(f"cross-validation needs at least 2 folds, got {k}")
    members: dict[str, list[str]] = {}
    for qid, group in groups.items():
        members.setdefault(group, []).append(qid)
    if len(members) < k:
        raise InvalidInputError(f"{len(members)} groups cannot fill {k} folds")
    folds: list[list[str]] = [[] for _ in range(k)]
    for group in sorted(members, key=lambda g: (-len(members[g]), _hash(salt, g))):
        smallest = min(range(k), key=lambda j: (len(folds[j]), j))
        folds[smallest].extend(members[group])
    return [sorted(f) for f in folds]


@dataclass(frozen=True)
class Round:
    """One round of cross-validation: what is trained on, stopped on and ranked."""

    train: tuple[str, ...]
    stop: tuple[str, ...]
    test: tuple[str, ...]


def cv_rounds(folds: Sequence[Sequence[str]]) -> list[Round]:
    """Round ``j``: test fold ``j``, stopping fold ``j + 1`` (cyclically), training on the
    rest (needs 3 folds or more, so that something is left to train on)."""
    k = len(folds)
    if k < 3:
        raise InvalidInputError(f"train/stop/test rounds need at least 3 folds, got {k}")
    out = []
    for j in range(k):
        stop = (j + 1) % k
        train = tuple(q for i, f in enumerate(folds) if i not in (j, stop) for q in f)
        out.append(Round(train, tuple(folds[stop]), tuple(folds[j])))
    return out


def holdout_split(
    groups: Mapping[str, str], fraction: float, salt: str = "ltr-holdout"
) -> tuple[list[str], list[str]]:
    """(kept, held out): whole groups in salted-hash order are held out until at least
    ``fraction`` of the queries are; at least one group is kept and one held out."""
    if not 0.0 < fraction < 1.0:
        raise InvalidInputError(f"the held-out fraction must lie in (0, 1), got {fraction}")
    members: dict[str, list[str]] = {}
    for qid, group in groups.items():
        members.setdefault(group, []).append(qid)
    if len(members) < 2:
        raise InvalidInputError(
            f"holding out needs queries of at least 2 groups (pages), got {len(members)}"
        )
    order = sorted(members, key=lambda g: _hash(salt, g))
    held: list[str] = []
    target = fraction * len(groups)
    for n, group in enumerate(order):
        if held and (len(held) >= target or n == len(order) - 1):
            break
        held.extend(members[group])
    held_set = set(held)
    return sorted(q for q in groups if q not in held_set), sorted(held)


def compare_runs(
    learned: RunDict,
    default: RunDict,
    qrels: QrelsDict,
    queries: Iterable[str] | None = None,
    *,
    permutations: int = 10_000,
    seed: int = 0,
) -> dict[str, Any]:
    """Learned against default rankings on ``queries`` (default: those of ``default``): the
    means of both, learned − default, the randomization test's p of each metric and the
    detectable MAP difference. A query missing from a run scores 0 in it."""
    qids = sorted(default if queries is None else queries)
    if len(qids) < 2:
        raise InvalidInputError(f"comparing rankings needs at least 2 queries, got {len(qids)}")
    sub = {q: qrels.get(q, {}) for q in qids}
    a = evaluate({q: learned.get(q, {}) for q in qids}, sub, METRICS, depth=DEPTH)
    b = evaluate({q: default.get(q, {}) for q in qids}, sub, METRICS, depth=DEPTH)
    out: dict[str, Any] = {"queries": len(qids)}
    for name in METRICS:
        out[f"{name}_default"] = b.means[name]
        out[f"{name}_learned"] = a.means[name]
        out[f"{name}_gain"] = a.means[name] - b.means[name]
        out[f"p_{name}"] = randomization_test(
            a.per_query[name], b.per_query[name], permutations=permutations, seed=seed
        )
    ap_a, ap_b = a.per_query["map"], b.per_query["map"]
    out["detectable"] = detectable_difference(ap_a, ap_b)
    out["detectable_p01"] = detectable_difference(ap_a, ap_b, alpha=0.01)
    return out
