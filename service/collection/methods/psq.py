"""PSQ over a collection: the structured query built once, from the n-best list (Hieber &
Riezler 2015, §5)."""

from __future__ import annotations

from typing import Any

from service.collection.methods.base import (
    Method,
)
from service.retrieval.base import (
    DecodedQuery,
    Ranking,
    Scorer,
)
from service.retrieval.psq import ProbabilisticStructuredQuery


class PsqMethod(Method):
    """PSQ: the structured query is built once, from the n-best list."""

    def plan(self, scorer: Scorer, query: DecodedQuery) -> Any:
        assert isinstance(scorer, ProbabilisticStructuredQuery)
        return scorer.structured(query)

    def ranking(
        self, scorer: Scorer, query: DecodedQuery, plan: Any, depth: int, explain: bool
    ) -> Ranking:
        assert isinstance(scorer, ProbabilisticStructuredQuery)
        hits, info = scorer.rank_structured(plan, depth, explain)
        return Ranking(query.qid, hits, scorer.signature(query), info)
