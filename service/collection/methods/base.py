"""The shape every method takes over a collection: a :class:`Partial` per set of segments,
merged into the partial of their union and finished into the collection's ranking (the
package's docstring says how each method merges exactly)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from service.collection.reader import SegmentView, Snapshot
from service.errors import ConfigurationError
from service.retrieval.base import (
    DecodedQuery,
    Hit,
    Ranking,
    Relation,
    Scorer,
)
from service.retrieval.bowfd.ranking import SentenceRanking
from service.retrieval.explain import Explanation
from service.retrieval.tr import Candidate

Int64Array = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Partial:
    """A method's result over some segments (see the module docstring)."""

    seqs: Int64Array  # best first
    scores: npt.NDArray[np.float64]
    ids: tuple[str, ...]
    retrieved: int
    relation: Relation
    info: dict[str, Any] = field(default_factory=dict)
    sentences: tuple[SentenceRanking, ...] = ()  # BOW-FD: each sentence's list, by seq
    depth: int = 0
    # TR: the translations, each one's top-M candidates (by seq), the final explanations
    translations: tuple[tuple[tuple[str, ...], float], ...] = ()
    candidates: tuple[tuple[Candidate, ...], ...] = ()
    explanations: tuple[Explanation | None, ...] = ()


def uncounted(n: int, depth: int) -> tuple[int, Relation]:
    """``n`` hits at ``depth``, not counted beyond: all of them, or a lower bound."""
    return n, "eq" if n < depth else "gte"


def top_order(seqs: Int64Array, scores: npt.NDArray[np.float64], depth: int) -> Int64Array:
    return np.lexsort((seqs, -scores))[:depth].astype(np.int64)


class Method:
    """How one retrieval method runs over segments and merges (one per method name).

    :meth:`plan` does once per query what does not depend on the documents (PSQ's structured
    query from the n-best list); :meth:`partial` runs the method over one segment."""

    def plan(self, scorer: Scorer, query: DecodedQuery) -> Any:
        """What every segment's :meth:`partial` reads of the query (default: nothing)."""
        return None

    def segments_plan(
        self,
        scorer: Scorer,
        views: Sequence[SegmentView],
        query: DecodedQuery,
        plan: Any,
        depth: int,
        slots: int,
    ) -> Any:
        """``plan`` with what the segments ``views`` share beyond it, done once for them in
        the process that searches them (default: nothing more; ``slots``: the shards that may
        search at once). Given its own result, it returns it unchanged."""
        return plan

    def remote_plan(self, plan: Any, slots: int) -> Any:
        """``plan`` as sent to the ``slots`` shard workers in other processes (default:
        unchanged)."""
        return plan

    def release(self, plan: Any) -> None:
        """Free what :meth:`segments_plan` took for a search that is done (default: none)."""

    def ranking(
        self, scorer: Scorer, query: DecodedQuery, plan: Any, depth: int, explain: bool
    ) -> Ranking:
        """The segment's own ranking (default: the scorer's :meth:`~Scorer.rank`)."""
        return scorer.rank(query, depth, explain=explain)

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
        """The partial of one segment, and what :meth:`explain` needs later (kept by the
        caller, never merged). ``bound``: the merged partial of the segments ranked before
        (a method may skip what cannot enter it; BOW-FD does). ``count``: whether to count the
        documents retrieved beyond ``depth`` (a cascade's first stage does not need it).
        ``own``: the merged partial of the segments of the same shard ranked before (part of
        ``bound``; BOW-FD shares it with shards searched at the same time)."""
        ranking = self.ranking(scorer, query, plan, depth, False)
        if count:
            n, relation = scorer.retrieved(ranking, depth, query)
        else:
            n, relation = uncounted(len(ranking.hits), depth)
        docs = np.asarray([h.docno for h in ranking.hits], dtype=np.int64)
        part = Partial(
            seqs=view.seq[docs].astype(np.int64),
            scores=np.asarray([h.score for h in ranking.hits], dtype=np.float64),
            ids=tuple(h.doc_id for h in ranking.hits),
            retrieved=n,
            relation=relation,
            info=ranking.info,
            depth=depth,
        )
        return part, (query, plan, depth)

    def merge(self, parts: Sequence[Partial]) -> Partial:
        """The partial of the union of the parts' segments."""
        depth = max(p.depth for p in parts)
        seqs = np.concatenate([p.seqs for p in parts])
        scores = np.concatenate([p.scores for p in parts])
        ids = [i for p in parts for i in p.ids]  # none if a part has none (DT's)
        pos = top_order(seqs, scores, depth)
        relation: Relation = "eq" if all(p.relation == "eq" for p in parts) else "gte"
        info = dict(parts[0].info)
        cands = [p.info.get("candidates") for p in parts]
        if all(isinstance(c, int) for c in cands):
            info["candidates"] = sum(c for c in cands if isinstance(c, int))
        with_ids = all(len(p.ids) == len(p.seqs) for p in parts)
        return Partial(
            seqs[pos], scores[pos], tuple(ids[i] for i in pos.tolist()) if with_ids else (),
            sum(p.retrieved for p in parts), relation, info, depth=depth,
        )  # fmt: skip

    def finish(self, part: Partial, k: int) -> Partial:
        """The collection's top ``k`` from its merged partial."""
        n = min(k, len(part.seqs))
        return replace(part, seqs=part.seqs[:n], scores=part.scores[:n], ids=part.ids[:n])

    def restricted(self, seqs: Int64Array) -> Any:
        """The plan of a search of only the documents ``seqs`` (ascending): what the rerank
        feedback forms search (:meth:`SnapshotSearcher.reranker`)."""
        raise ConfigurationError(f"{type(self).__name__} cannot search a set of documents")

    def explain(
        self, scorer: Scorer, kept: Any, docno: int, final: Partial, view: SegmentView
    ) -> Explanation | None:
        """The explanation of the segment's document ``docno`` in the final ranking (``kept``:
        what :meth:`partial` returned for the segment): by default the segment ranks again
        with explanations (DT, PSQ: a few ms) and takes the document's."""
        query, plan, depth = kept
        for hit in self.ranking(scorer, query, plan, depth, True).hits:
            if hit.docno == docno:
                return hit.explanation
        return None


def final_ranking(
    snapshot: Snapshot,
    query: DecodedQuery,
    final: Partial,
    signature: str,
    info: dict[str, Any],
    explained: Mapping[int, Explanation | None],
) -> Ranking:
    """The ranking of a collection's merged and finished partial (documents by sequence
    number; their ids looked up where the partial has none)."""
    seqs: list[int] = final.seqs.tolist()
    ids = final.ids or snapshot.doc_ids(seqs)
    hits = [
        Hit(seq, doc_id, float(score), explained.get(seq))
        for seq, doc_id, score in zip(seqs, ids, final.scores.tolist(), strict=True)
    ]
    return Ranking(query.qid, hits, signature, {**final.info, **info})
