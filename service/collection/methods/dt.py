"""DT over a collection: the 1-best translation once per query, each segment's top list by
sequence number (Hieber & Riezler 2015, §5)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from service.collection.methods.base import (
    Method,
    Partial,
    uncounted,
)
from service.collection.reader import SegmentView
from service.retrieval.base import (
    DecodedQuery,
    Ranking,
    Relation,
    Scorer,
    one_best,
)
from service.retrieval.dt import DirectTranslation


class DtMethod(Method):
    """DT: the 1-best translation found once per query; a segment's partial is its top list
    by sequence number, without ids (only the final top ``k``'s are looked up)."""

    def plan(self, scorer: Scorer, query: DecodedQuery) -> Any:
        return tuple(one_best(query))

    def merge(self, parts: Sequence[Partial]) -> Partial:
        """The union's top list; its ``candidates`` is that list's length, as one index's
        (the documents the ranking holds — what bounds a feedback mix's count — not a sum
        over segments)."""
        merged = super().merge(parts)
        merged.info["candidates"] = len(merged.seqs)
        return merged

    def ranking(
        self, scorer: Scorer, query: DecodedQuery, plan: Any, depth: int, explain: bool
    ) -> Ranking:
        assert isinstance(scorer, DirectTranslation)
        hits, info = scorer.rank_translation(plan, depth, explain)
        return Ranking(query.qid, hits, scorer.signature(query), info)

    def partial(
        self,
        scorer: Scorer,
        view: SegmentView,
        query: DecodedQuery,
        plan: Any,
        depth: int,
        bound: Partial | None = None,
        count: bool = True,
        own: Partial | None = None,
    ) -> tuple[Partial, Any]:
        assert isinstance(scorer, DirectTranslation)
        tokens = [t for sentence in plan for t in sentence]
        top, reached = scorer.index.bm25_topk_counted(tokens, depth)
        relation: Relation = "eq"  # the documents holding a weighted term, counted in one pass
        n = reached
        if not count:
            n, relation = uncounted(len(top.docs), depth)
        info = {"translation": " ".join(" ".join(s) for s in plan), "candidates": len(top.docs)}
        part = Partial(
            view.seq[top.docs].astype(np.int64), top.scores.astype(np.float64), (), n,
            relation, info, depth=depth,
        )  # fmt: skip
        return part, (query, plan, depth)
