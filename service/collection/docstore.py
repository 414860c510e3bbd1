"""The document store: a :class:`~service.collection.reader.Collection`, whether written by
commits (shards of segments) or built whole (one index, read as the collection of its one
segment, :meth:`~service.collection.reader.Collection.of_index`) — as Lucene's
``IndexSearcher`` searches every index as leaves and merges their top lists. One type, opened
by :func:`open_store` and ranked by the collection's per-segment partials and exact merge
whichever it is; what tells the two apart is only what they can do — be written to, hold the
vectors of a pool as one file — asked here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from service.collection.reader import Collection, open_collection
from service.collection.searcher import CollectionScorer
from service.errors import ConflictError
from service.index.inverted import InvertedIndex
from service.mt.bundle import ModelBundle
from service.retrieval.base import Scorer

Store = Collection


def open_store(path: str | Path) -> Store:
    """The collection at ``path``, or the index built whole there as a collection of one
    segment (an index whose tokenizer changed is refused,
    :func:`~service.index.inverted.load_index`)."""
    return open_collection(path)


def store_scorer(
    store: Store, method: str, bundle: ModelBundle | None = None, *, threads: int = 0, **params: Any
) -> Scorer:
    """The scorer ``method`` over a store (a :class:`~service.collection.searcher.CollectionScorer`,
    which searches the store's current commit; ``threads``: its shards searched at once): what
    the service's searches and the commands' runs rank with. Every scorer gets the bundle and
    takes from it what it needs."""
    return CollectionScorer(store, method, bundle=bundle, threads=threads, **params)


def whole_index(store: Store | None) -> InvertedIndex | None:
    """The index, when the store is one built whole; None for a collection written by
    commits (a pool's vectors are read from one index's directory)."""
    if store is None or not store.built_whole:
        return None
    return store.snapshot.views()[0].index


def writable(store: Store) -> Collection:
    """The store as a collection that documents are added to and deleted from; an index built
    whole is a :class:`~service.errors.ConflictError` naming the command that makes one."""
    if store.built_whole:
        raise ConflictError(
            f"the document index {store.path} is one index built whole: documents cannot be "
            "added to it; build a collection (clir build-index --docs F --out DIR --shards S) "
            "and serve it (CLIR_DOC_INDEXES)"
        )
    return store


def probe_index(store: Store | None) -> InvertedIndex | None:
    """The index a weights version is probed on: the store's first segment (every segment
    scores with the same statistics); None without a store or documents."""
    if store is None:
        return None
    views = store.snapshot.views()
    return views[0].index if views else None
