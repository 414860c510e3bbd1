"""Every method run per segment and shard of a collection, merged exactly: one module per
method, registered here (:data:`METHODS`).

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
together call weighted terms: :class:`SegmentsWeighting`), each joined with every segment's
postings. Shards in one process are searched one after another, each bounding the next, or at
once in threads (``threads``; the compiled passes release the GIL), sharing BOW-FD's boards
(:mod:`service.collection.boards`).

Results carry the document's sequence number as ``docno``
(:meth:`service.collection.reader.Collection.doc` resolves it) and the external id.
Explanations are made by the segment holding the document, after the merge (BOW-FD's need
to know whether the document made the collection's list of each sentence).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from service.collection.methods.base import Method, Partial, final_ranking
from service.collection.methods.bowfd import BowFdMethod, SegmentsWeighting
from service.collection.methods.dt import DtMethod
from service.collection.methods.psq import PsqMethod
from service.collection.methods.tr import TrMethod
from service.errors import ConfigurationError
from service.retrieval.base import DecodedQuery, Ranking, Scorer
from service.retrieval.bowfd.scorer import BowFdScorer

__all__ = [
    "METHODS", "Method", "Partial", "SegmentsWeighting", "final_ranking", "get_method",
    "search_plan",
]  # fmt: skip


METHODS: dict[str, Method] = {
    "dt": DtMethod(), "psq": PsqMethod(), "bowfd": BowFdMethod(), "tr": TrMethod(),
}  # fmt: skip


def get_method(name: str) -> Method:
    method = METHODS.get(name)
    if method is None:
        valid = ", ".join(sorted(METHODS))
        raise ConfigurationError(
            f"method {name!r} does not run over a collection; choose one of: {valid}"
        )
    return method


def search_plan(
    method: str,
    scorer: Scorer | None,
    query: DecodedQuery,
    first_stage: Callable[[str, int], Ranking],
) -> Any:
    """What every segment reads of the query, planned once: the method's plan, or for
    BOW-FD with a cascade the sequence numbers of the collection's first-stage top documents
    (``first_stage(method, depth)`` ranks the whole collection). ``scorer``: any segment's
    scorer of the method (None: an empty collection)."""
    if isinstance(scorer, BowFdScorer) and scorer.cascade is not None:
        ranking = first_stage(scorer.first_stage, scorer.cascade)
        return np.sort(np.asarray([h.docno for h in ranking.hits], dtype=np.int64))
    return get_method(method).plan(scorer, query) if scorer is not None else None
