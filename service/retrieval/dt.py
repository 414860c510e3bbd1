"""Direct translation (DT): the 1-best translation as a monolingual BM25 query
(Hieber & Riezler 2015, §5).

The baseline of Hieber & Riezler 2015, §5 ("Data and Systems"; Chin et al. 2008): each sentence of
the query is translated by its Viterbi derivation in the +LM forest (the forest the decoder built,
with the weights it was pruned with), the translations are concatenated, and the resulting English
token list is a BM25 query against the index (every occurrence of a token adds its weight,
like rank_bm25; :meth:`~service.index.inverted.InvertedIndex.bm25_topk`). The explanation of a
hit (:class:`~service.retrieval.explain.DtExplanation`) is the translation and the query terms
the document contains.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from service.index.inverted import InvertedIndex
from service.retrieval.base import (
    DecodedQuery,
    Hit,
    Ranking,
    Relation,
    Scorer,
    one_best,
    register,
)
from service.retrieval.explain import DtExplanation
from service.retrieval.partials import Method, Partial, SegmentTask, uncounted

__all__ = ["DirectTranslation", "DtMethod", "matched_terms", "one_best"]


def matched_terms(index: InvertedIndex, terms: list[str], docno: int) -> list[str]:
    """The distinct ``terms`` (in first-seen order) that occur in document ``docno``."""
    return [t for t in dict.fromkeys(terms) if index.contains(t, docno)]


class DtMethod(Method["DirectTranslation"]):
    """DT: the 1-best translation found once per query; a segment's partial is its top list
    by sequence number, without ids (only the final top ``k``'s are looked up)."""

    def plan(self, scorer: DirectTranslation, query: DecodedQuery) -> Any:
        return tuple(one_best(query))

    def merge(self, parts: Sequence[Partial]) -> Partial:
        """The union's top list; its ``candidates`` is that list's length, as one index's
        (the documents the ranking holds — what bounds a feedback mix's count — not a sum
        over segments)."""
        merged = super().merge(parts)
        merged.info["candidates"] = len(merged.seqs)
        return merged

    def ranking(
        self, scorer: DirectTranslation, query: DecodedQuery, plan: Any, depth: int, explain: bool
    ) -> Ranking:
        hits, info = scorer.rank_translation(plan, depth, explain)
        return Ranking(query.qid, hits, scorer.signature(query), info)

    def partial(self, scorer: DirectTranslation, task: SegmentTask) -> tuple[Partial, Any]:
        plan, depth = task.plan, task.depth
        tokens = [t for sentence in plan for t in sentence]
        top, reached = scorer.index.bm25_topk_counted(tokens, depth)
        relation: Relation = "eq"  # the documents holding a weighted term, counted in one pass
        n = reached
        if not task.count:
            n, relation = uncounted(len(top.docs), depth)
        info = {"translation": " ".join(" ".join(s) for s in plan), "candidates": len(top.docs)}
        part = Partial(
            task.view.seq[top.docs].astype(np.int64), top.scores.astype(np.float64), (), n,
            relation, info, depth=depth,
        )  # fmt: skip
        return part, (task.query, plan, depth)


@register("dt")
class DirectTranslation(Scorer):
    """BM25 with the concatenated 1-best translations of the query's sentences."""

    segments = DtMethod()  # how it runs over a collection's segments

    def signature_parts(self) -> dict[str, Any]:
        return {"translation": "1best"}

    def _rank(self, query: DecodedQuery, k: int, explain: bool) -> tuple[list[Hit], dict[str, Any]]:
        return self.rank_translation(one_best(query), k, explain)

    def rank_translation(
        self, translations: Sequence[tuple[str, ...]], k: int, explain: bool = False
    ) -> tuple[list[Hit], dict[str, Any]]:
        """The top ``k`` hits of the sentences' 1-best ``translations`` (:func:`one_best`)."""
        tokens = [t for sentence in translations for t in sentence]
        hits, reached = self.index.bm25_topk_counted(tokens, k)
        text = " ".join(" ".join(s) for s in translations)
        out: list[Hit] = []
        for d, s in zip(hits.docs.tolist(), hits.scores.tolist(), strict=True):
            expl = None
            if explain:
                expl = DtExplanation(text, tuple(matched_terms(self.index, tokens, d)))
            out.append(Hit(d, self.index.doc_id(d), float(s), expl))
        info = {"translation": text, "candidates": len(out), "reached": reached}
        return out, info

    def _query_terms(self, query: DecodedQuery, ranking: Ranking) -> set[str]:
        """The 1-best translation's tokens."""
        return set(_translation_tokens(query))

    def _retrieved(self, ranking: Ranking, depth: int, query: DecodedQuery) -> tuple[int, Relation]:
        """Exact: the documents holding a weighted term of the translation (those BM25
        reaches; a term with rsj 0 adds nothing)."""
        reached = ranking.info.get("reached")
        if isinstance(reached, int):  # counted by the ranking's own pass
            return reached, "eq"
        return self.count_retrieved(_translation_tokens(query), len(ranking.hits), depth)

    def count_retrieved(self, tokens: Sequence[str], n: int, depth: int) -> tuple[int, Relation]:
        """:meth:`retrieved` of the translation ``tokens`` given ``n`` hits at ``depth``."""
        if n < depth:
            return n, "eq"
        ids = self.index.term_ids(tokens)
        return max(n, len(self.index.docs_containing_any(ids))), "eq"


def _translation_tokens(query: DecodedQuery) -> list[str]:
    """The tokens of the 1-best translation DT searches with (read from the query, not from
    a ranking: a sharded search that no shard answered has no ranking to read it from)."""
    return [t for sentence in one_best(query) for t in sentence]
