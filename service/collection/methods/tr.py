"""Translation retrieval over a sentence pool held as a collection: the translations planned
once, each one's top candidates merged across segments."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import numpy.typing as npt

from service.collection.methods.base import (
    Method,
    Partial,
)
from service.collection.reader import SegmentView
from service.retrieval.base import (
    DecodedQuery,
    Scorer,
)
from service.retrieval.explain import Explanation, TrExplanation
from service.retrieval.tr import Candidate, Keep, TranslationRetrieval, combine_candidates


def _tr_keep(before: Sequence[Candidate], m: int, seq: npt.NDArray[np.int64]) -> Keep | None:
    """Whether a segment's candidate (its docno, cosine) can enter the top ``m`` that
    :meth:`TrMethod.merge` keeps, given the candidates ``before`` it of the segments searched
    already: only if it sorts before their ``m``-th (cosine down, sequence number up). None
    when fewer than ``m`` came before (anything can enter)."""
    if len(before) < m:
        return None
    last = sorted(before, key=lambda c: (-c.cosine, c.docno))[m - 1]
    floor = (-last.cosine, last.docno)
    return lambda docno, cosine: (-cosine, int(seq[docno])) < floor


class TrMethod(Method):
    """Translation retrieval (TR paper, Algorithm 1): each translation's top-M candidates by
    cosine are merged to the collection's top M, then combined once."""

    def plan(self, scorer: Scorer, query: DecodedQuery) -> Any:
        assert isinstance(scorer, TranslationRetrieval)
        return tuple((tuple(t), p) for t, p in scorer.translations(query))

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
        assert isinstance(scorer, TranslationRetrieval)
        keep = None
        if bound is not None and bound.candidates:
            keep = [_tr_keep(cands, scorer.max_candidates, view.seq) for cands in bound.candidates]
        lists = scorer.candidate_lists(plan, keep)
        seq = view.seq
        by_seq = tuple(
            tuple(Candidate(int(seq[c.docno]), c.cosine, c.levenshtein, c.prob) for c in cands)
            for cands in lists
        )
        info = {"max_candidates": scorer.max_candidates}
        empty = np.zeros(0, np.int64)
        part = Partial(empty, np.zeros(0), (), 0, "eq", info, depth=depth, translations=plan,
                       candidates=by_seq)  # fmt: skip
        return part, None

    def merge(self, parts: Sequence[Partial]) -> Partial:
        m = int(parts[0].info["max_candidates"])
        lists = []
        for i in range(len(parts[0].candidates)):
            cands = sorted((c for p in parts for c in p.candidates[i]),
                           key=lambda c: (-c.cosine, c.docno))  # fmt: skip
            lists.append(tuple(cands[:m]))
        return replace(parts[0], candidates=tuple(lists), depth=max(p.depth for p in parts))

    def finish(self, part: Partial, k: int) -> Partial:
        result = combine_candidates(part.translations, part.candidates)
        ranked = sorted(result.scores.items(), key=lambda ds: (-ds[1], ds[0]))[:k]
        info = {
            "translations": [{"text": " ".join(t), "pr_t": p} for t, p in part.translations],
            "candidates": len(result.scores),
        }
        return replace(
            part,
            seqs=np.asarray([d for d, _ in ranked], dtype=np.int64),
            scores=np.asarray([s for _, s in ranked], dtype=np.float64),
            retrieved=len(ranked),
            relation="eq" if len(ranked) < k else "gte",
            info=info,
            explanations=tuple(TrExplanation(tuple(result.found_by[d])) for d, _ in ranked),
        )

    def explain(
        self, scorer: Scorer, kept: Any, docno: int, final: Partial, view: SegmentView
    ) -> Explanation | None:
        seqs: list[int] = final.seqs.tolist()
        return final.explanations[seqs.index(int(view.seq[docno]))]
