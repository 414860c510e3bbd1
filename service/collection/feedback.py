"""Pseudo-relevance feedback over a collection (RM3: Lavrenko & Croft 2001, §3; Abdul-Jaleel
et al. 2004, §2), ranking exactly as :mod:`service.retrieval.feedback` does over one index of
the same documents.

The method's first ranking comes from the collection's searcher. The feedback documents' term
vectors are read from the segments that hold them (each segment's postings transposed once,
:meth:`~service.index.inverted.InvertedIndex.doc_vectors`), their terms kept by the
collection's RSJ weight (:meth:`~service.collection.reader.Snapshot.weighted`); the expanded
query ranks every segment with the collection's statistics and the segments' top lists merge
by score, then by sequence number — a single index's document order. Segments number their
terms differently, so the relevance model is keyed by the term itself; a single index's term
ids follow the terms' sorted order, so both cut and order the terms alike
(:func:`service.retrieval.feedback.combine`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from collections.abc import Set as AbstractSet

import numpy as np
import numpy.typing as npt

from service.collection.reader import Snapshot
from service.index.inverted import Hits
from service.retrieval.base import DecodedQuery, Hit, Ranking, Relation, one_best
from service.retrieval.explain import Explanation
from service.retrieval.feedback import (
    Expansion,
    FeedbackParams,
    build_expansion,
    feedback_documents,
    feedback_stage,
)

#: Ranks the given documents (sequence numbers, ascending) again with an expansion's relevance
#: model as extra weight: the method's search restricted to them, its top ``depth``.
Rerank = Callable[[Expansion, FeedbackParams, "npt.NDArray[np.int64]", int], Ranking]


def relevance_model(
    snapshot: Snapshot, seqs: Sequence[int], weights: Sequence[float], top: int | None = None
) -> dict[str, float]:
    """P(w | R) by term: Σ_d P(d|q) · tf(w, d) / |d| over the documents ``seqs``, for terms
    weighted in the collection (:meth:`~service.collection.reader.Snapshot.weighted`); each
    segment's documents read at once, the sums kept by global term id and added in the order
    of ``seqs`` — the same sums, in the same order, as the single index's
    :func:`service.retrieval.feedback.relevance_model`, so an index built whole gets its
    model to the last bit. ``top``: only the terms that can be among the ``top`` most
    probable (every term tied with the ``top``-th kept: RM3's cut breaks ties by the term,
    :func:`~service.retrieval.feedback.cut_relevance`), the others never named."""
    w = np.asarray(weights, dtype=np.float64)
    found = snapshot.by_segment(seqs)
    at, gids, lids, where, shares = [], [], [], [], []
    for number, (view, pos, docnos) in enumerate(found):
        ptr, ids, tfs = view.index.doc_vectors(docnos)
        rows = np.diff(ptr)
        totals = np.maximum(view.index.doc_lengths[docnos], 1)  # as the single index's model
        share = np.repeat(w[pos] / totals, rows) * tfs
        keep = snapshot.weighted_ids(view, ids)
        at.append(np.repeat(pos, rows)[keep])
        lids.append(ids[keep])
        gids.append(view.segment.gid[ids[keep]])
        where.append(np.full(int(keep.sum()), number, dtype=np.int64))
        shares.append(share[keep])
    if not at:
        return {}
    order = np.argsort(np.concatenate(at), kind="stable")  # the documents' order in ``seqs``
    key, first, inverse = np.unique(
        np.concatenate(gids)[order], return_index=True, return_inverse=True
    )
    mass = np.zeros(len(key), dtype=np.float64)
    np.add.at(mass, inverse, np.concatenate(shares)[order])
    pick = np.arange(len(key))
    if top is not None and 0 < top < len(key):
        pick = np.flatnonzero(mass >= np.partition(mass, len(key) - top)[len(key) - top])
    lid, view_at = np.concatenate(lids)[order][first], np.concatenate(where)[order][first]
    return {
        found[int(view_at[i])][0].index.term(int(lid[i])): float(mass[i]) for i in pick.tolist()
    }


def query_model(snapshot: Snapshot, tokens: Sequence[str]) -> tuple[dict[str, float], int]:
    """P(w | q) by term: the tokens' index terms weighted in the collection, count / number;
    and that number ``n``."""
    views = snapshot.views()
    if not views:
        return {}, 0
    terms = [t for t in views[0].index.analyzer.terms(tokens) if snapshot.weighted(t)]
    if not terms:
        return {}, 0
    counts = Counter(terms)
    return {t: c / len(terms) for t, c in counts.items()}, len(terms)


def expand(
    snapshot: Snapshot,
    tokens: Sequence[str],
    first: Sequence[tuple[int, float]],
    params: FeedbackParams,
) -> Expansion:
    """RM3's expanded query from the first ranking's top ``params.docs`` documents."""
    seqs, weights = feedback_documents(first, params)
    rm = relevance_model(snapshot, seqs, weights, params.terms) if seqs else {}
    original, n = query_model(snapshot, tokens)
    return build_expansion(original, n, rm, params, seqs, str)


def rank_expanded(snapshot: Snapshot, expansion: Expansion, k: int) -> tuple[Hits, int]:
    """The collection's top ``k`` for the expanded query (documents by sequence number), and
    how many documents hold an expansion term (segments hold disjoint documents); none for
    ``k`` = 0."""
    seqs, scores = [], []
    reached = 0
    for view in snapshot.views() if k > 0 else ():
        pairs = [(view.index.vocab.id(t), w) for t, w in expansion.terms]
        kept = [(i, w) for i, w in pairs if i is not None]
        if not kept:
            continue
        hits, n = view.index.rank_counted([i for i, _ in kept], [w for _, w in kept], k)
        reached += n
        seqs.append(view.seq[hits.docs])
        scores.append(hits.scores)
    if not seqs:
        return Hits(np.zeros(0, np.int32), np.zeros(0, np.float32)), 0
    all_seqs, all_scores = np.concatenate(seqs), np.concatenate(scores)
    order = np.lexsort((all_seqs, -all_scores))[:k]
    return Hits(all_seqs[order].astype(np.int32), all_scores[order].astype(np.float32)), reached


class SnapshotFeedback:
    """:class:`~service.retrieval.feedback.FeedbackReader` over a collection's snapshot
    (documents by sequence number)."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot

    def expand(
        self, translation: Sequence[str], own: Sequence[tuple[int, float]], params: FeedbackParams
    ) -> Expansion:
        return expand(self.snapshot, translation, own, params)

    def rank_expanded(self, expansion: Expansion, k: int) -> tuple[Hits, int]:
        return rank_expanded(self.snapshot, expansion, k)

    def usable(self, words: AbstractSet[str]) -> set[str]:
        views = self.snapshot.views()
        terms = views[0].index.analyzer.terms(words) if views else []
        return {t for t in terms if self.snapshot.weighted(t)}

    def holds(self, term: str, doc: int) -> bool:
        view, docno = self.snapshot.locate_seq(doc)
        return view.index.contains(term, docno)


def feedback_ranking(
    snapshot: Snapshot,
    query: DecodedQuery,
    first: Ranking,
    retrieved: tuple[int, Relation],
    k: int,
    params: FeedbackParams,
    *,
    explain: bool = False,
    rerank: Rerank | None = None,
) -> tuple[Ranking, tuple[int, Relation]]:
    """The feedback stage after the collection's ``first`` ranking (at least
    ``params.first_depth(k)`` deep, with the count the method ``retrieved``): the expanded
    query's ranking, mixed with the first in the ``interpolate`` form; a hit's explanation
    names the expansion terms its document holds, with the method's own explanation when
    the first ranking (explained) held it. In the rerank forms, ``rerank(expansion, params,
    seqs, depth)`` ranks the first ranking's documents again with the relevance model's extra
    weights (:meth:`~service.collection.searcher.SnapshotSearcher.reranker`); without it (a
    method with no forest) the ``interpolate`` form runs (:meth:`FeedbackParams.for_method`).
    A first ranking with no document (every shard down, or nothing found) has no feedback
    documents: it stands, unexpanded, as on one index."""
    if not first.hits:
        return first, retrieved
    params = params.for_method(rerank is not None)

    def again(
        expansion: Expansion, params: FeedbackParams, own: Sequence[tuple[int, float]]
    ) -> tuple[list[tuple[int, float]], Callable[[int], Explanation | None]]:
        assert rerank is not None
        seqs = np.unique(np.asarray([d for d, _ in own], dtype=np.int64))
        ranked = rerank(expansion, params, seqs, len(own))
        return [(h.docno, h.score) for h in ranked.hits], {
            h.docno: h.explanation for h in ranked.hits
        }.get

    stage = feedback_stage(
        SnapshotFeedback(snapshot), [t for sentence in one_best(query) for t in sentence],
        query.target_words(), [(h.docno, h.score) for h in first.hits], k, params,
        own_retrieved=retrieved, own_candidates=first.info.get("candidates"), explain=explain,
        own_explanation={h.docno: h.explanation for h in first.hits}.get,
        rerank=again if params.reranks else None,
    )  # fmt: skip
    hits = [Hit(seq, _doc_id(snapshot, seq), s, e) for seq, s, e in stage.hits]
    rest = {key: v for key, v in first.info.items() if key not in ("candidates", "reached")}
    info = {**rest, **stage.info, "retrieved": list(stage.retrieved)}
    signature = f"{first.signature}|fb:{params.signature()}"
    return Ranking(query.qid, hits, signature, info), stage.retrieved


def _doc_id(snapshot: Snapshot, seq: int) -> str:
    view, docno = snapshot.locate_seq(seq)
    return view.index.doc_id(docno)
