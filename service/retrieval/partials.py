"""How a retrieval method runs over the segments and shards of a collection, merged exactly:
the base class :class:`Method` and its :class:`Partial`. Each method declares its own in its
own module, as its scorer's ``segments`` (DT's :mod:`~service.retrieval.dt`, PSQ's
:mod:`~service.retrieval.psq`, TR's :mod:`~service.retrieval.tr`, BOW-FD's
:mod:`~service.retrieval.bowfd.scorer`); the one registry of methods is the scorers'
(:data:`~service.retrieval.base.SCORERS`), which :func:`get_method` reads.

A segment is read through :class:`SegmentPart` (what a method needs of one: its index scoring
with the collection's statistics, its documents' sequence numbers, its name and shard), which
the collection's segment views (:class:`service.collection.reader.SegmentView`) are; an index
built whole is a collection of one such segment.

Each segment scores with the collection's statistics (:mod:`service.collection.segment`), so
a document's score does not depend on where it is stored; what remains is to merge top lists
so that the result is the one a single index over the same documents gives. A method's work
on a set of segments is a :class:`Partial`, partials of disjoint sets merge into a partial of
their union (so segments merge into a shard's partial, shards into the collection's), and
:meth:`Method.finish` turns the collection's partial into the ranking:

* DT and PSQ score each document independently: a partial is a top-``depth`` list, the merge
  keeps the best ``depth`` of the union (score descending, then sequence number ascending —
  the document numbers a single index gives the same documents), and the count of documents
  retrieved adds up.
* BOW-FD (Hieber & Riezler 2015, §3) ranks each sentence of a query to depth ``K'`` and
  combines the lists by a product of experts in which a document missing from a list takes
  that list's minimum: the minimum of the *collection's* list. So its partial keeps each
  sentence's list (merged to depth ``K'``) and candidate count, and only :meth:`finish`
  combines them, with the same function the scorer uses.

What does not depend on the documents is done once per query, not per segment: DT's 1-best
translation, PSQ's structured query and BOW-FD's prepared forests (the words the segments
together call weighted terms: :class:`~service.retrieval.bowfd.scorer.SegmentsWeighting`),
each joined with every segment's postings. Shards in one process are searched one after
another, each bounding the next, or at once in threads (``threads``; the compiled passes
release the GIL), sharing BOW-FD's boards (:mod:`service.retrieval.bowfd.boards`).

Results carry the document's sequence number as ``docno``
(:meth:`service.collection.reader.Collection.doc` resolves it) and the external id.
Explanations are made by the segment holding the document, after the merge (BOW-FD's need
to know whether the document made the collection's list of each sentence).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from service.errors import ConfigurationError
from service.index.inverted import InvertedIndex
from service.retrieval.base import (
    DecodedQuery,
    Hit,
    Ranking,
    Relation,
    Scorer,
    scorer_class,
)
from service.retrieval.explain import Candidate, Explanation

if TYPE_CHECKING:
    from service.retrieval.bowfd.ranking import SentenceRanking

Int64Array = npt.NDArray[np.int64]


class SegmentName(Protocol):
    """A segment's name and shard."""

    @property
    def name(self) -> str: ...

    @property
    def shard(self) -> int: ...


class SegmentPart(Protocol):
    """A segment of one commit as a method reads it: the segment (its name and shard), its
    index scoring with the collection's statistics (N, avdl, df of every term), and the
    sequence number of each of its documents (ascending)."""

    @property
    def segment(self) -> SegmentName: ...

    @property
    def index(self) -> InvertedIndex: ...

    @property
    def seq(self) -> Int64Array: ...


class DocumentIds(Protocol):
    """The documents of a commit by sequence number."""

    def doc_ids(self, seqs: Sequence[int]) -> list[str]: ...


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


@dataclass(frozen=True)
class SegmentTask:
    """One segment's part of a search (:meth:`Method.partial`): the segment, the query, what
    every segment reads of it (the method's plan) and the depth. ``bound``: the merged partial
    of the segments ranked before (a method may skip what cannot enter it; BOW-FD does).
    ``count``: whether to count the documents retrieved beyond ``depth`` (a cascade's first
    stage does not need it). ``own``: the merged partial of the segments of the same shard
    ranked before (part of ``bound``; BOW-FD shares it with shards searched at the same
    time)."""

    view: SegmentPart
    query: DecodedQuery
    plan: Any
    depth: int
    bound: Partial | None = None
    count: bool = True
    own: Partial | None = None


def uncounted(n: int, depth: int) -> tuple[int, Relation]:
    """``n`` hits at ``depth``, not counted beyond: all of them, or a lower bound."""
    return n, "eq" if n < depth else "gte"


def top_order(seqs: Int64Array, scores: npt.NDArray[np.float64], depth: int) -> Int64Array:
    return np.lexsort((seqs, -scores))[:depth].astype(np.int64)


S = TypeVar("S", bound=Scorer)


class Method(Generic[S]):
    """How one retrieval method runs over segments and merges (one per method name), over
    its scorers of type ``S``.

    :meth:`plan` does once per query what does not depend on the documents (PSQ's structured
    query from the n-best list); :meth:`partial` runs the method over one segment."""

    def plan(self, scorer: S, query: DecodedQuery) -> Any:
        """What every segment's :meth:`partial` reads of the query (default: nothing)."""
        return None

    def search_plan(
        self, scorer: S, query: DecodedQuery, first_stage: Callable[[str, int], Ranking]
    ) -> Any:
        """The plan of a search of the whole collection (default: :meth:`plan`); a cascade
        (BOW-FD's) ranks the collection with its first stage (``first_stage(method,
        depth)``) and plans the search of those documents."""
        return self.plan(scorer, query)

    def segments_plan(
        self,
        scorer: S,
        views: Sequence[SegmentPart],
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
        self, scorer: S, query: DecodedQuery, plan: Any, depth: int, explain: bool
    ) -> Ranking:
        """The segment's own ranking (default: the scorer's :meth:`~Scorer.rank`)."""
        return scorer.rank(query, depth, explain=explain)

    def partial(self, scorer: S, task: SegmentTask) -> tuple[Partial, Any]:
        """The partial of one segment, and what :meth:`explain` needs later (kept by the
        caller, never merged)."""
        query, plan, depth = task.query, task.plan, task.depth
        ranking = self.ranking(scorer, query, plan, depth, False)
        if task.count:
            n, relation = scorer.retrieved(ranking, depth, query)
        else:
            n, relation = uncounted(len(ranking.hits), depth)
        docs = np.asarray([h.docno for h in ranking.hits], dtype=np.int64)
        part = Partial(
            seqs=task.view.seq[docs].astype(np.int64),
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

    def restricted(self, seqs: Int64Array, prepared: Any = None) -> Any:
        """The plan of a search of only the documents ``seqs`` (ascending): what the rerank
        feedback forms search (:meth:`SnapshotSearcher.reranker`); ``prepared``: what an
        earlier search of the query over the same commit left to reuse (:meth:`reusable`)."""
        raise ConfigurationError(f"{type(self).__name__} cannot search a set of documents")

    def reusable(self, plan: Any) -> Any:
        """What of a search's :meth:`segments_plan` a later search of the same query over the
        same commit may reuse (:meth:`restricted`; BOW-FD: its prepared forests), or None."""
        return None

    def explain(
        self, scorer: S, kept: Any, docno: int, final: Partial, view: SegmentPart
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
    snapshot: DocumentIds,
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


def get_method(name: str) -> Method[Any]:
    """How the method ``name`` runs over segments: the ``segments`` its scorer class declares
    (an unknown name lists the valid ones)."""
    method = getattr(scorer_class(name), "segments", None)
    if not isinstance(method, Method):
        raise ConfigurationError(f"method {name!r} does not run over a collection")
    return method
