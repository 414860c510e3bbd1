"""Unique k-best in Python: the reference the compiled search is tested against.

The best derivation of each of the ``k`` best distinct target strings (Huang & Chiang 2005,
Algorithm 3, through :class:`~service.forest.kbest.lazy.LazyKBest`): derivations of the goal
are taken in score order and one whose string was already produced is skipped, as n-best lists
for tuning, PSQ and translation retrieval need (Hieber & Riezler 2015, §3). The obviously
correct version: a set of the strings seen, one derivation after the other. With
``max_derivations`` it returns the same lists as the compiled engine (:mod:`.compiled`), scores,
ties and trees included (tests/forest/test_kbest_kernel.py). Chosen by
``unique_kbest(..., engine="reference")``; serving never imports it.
"""

from __future__ import annotations

import time

from service.forest.hypergraph import Derivation, Hypergraph
from service.forest.inference import Weights
from service.forest.kbest.candidates import CLOCK_EVERY, UNIQUE_KBEST_TIME_BUDGET_S
from service.forest.kbest.lazy import LazyKBest


def unique_kbest_reference(
    hg: Hypergraph,
    weights: Weights,
    k: int,
    max_derivations: int | None = None,
    time_budget: float | None = None,
) -> list[Derivation]:
    """:func:`service.forest.kbest.unique_kbest` in Python over :class:`LazyKBest`.

    The clock is read once every :data:`~.candidates.CLOCK_EVERY` derivations.
    """
    extractor = LazyKBest(hg, weights)
    if max_derivations is None and time_budget is None:
        time_budget = UNIQUE_KBEST_TIME_BUDGET_S
    deadline = None if time_budget is None else time.perf_counter() + time_budget
    goal = hg.goal
    seen: set[tuple[int, ...]] = set()
    picked: list[tuple[int, float]] = []
    j = 0
    while len(picked) < k and (max_derivations is None or j < max_derivations):
        if deadline is not None and j and j % CLOCK_EVERY == 0 and time.perf_counter() >= deadline:
            break
        entry = extractor.entry(j)
        if entry is None:
            break
        ids = extractor.yield_ids(goal, j)
        if ids not in seen:
            seen.add(ids)
            picked.append((j, entry[0]))
        j += 1
    return [hg.derivation(extractor.tree(goal, r), score) for r, score in picked]
