"""The document store, whichever kind it is: an index built whole
(:class:`~service.index.inverted.InvertedIndex`) or a live collection of shards
(:class:`~service.collection.reader.Collection`). This module is the one place that tells the
two apart; the layers above (the search pipeline's backends, the API, the runs) take a
:data:`Store` and ask it here what it can do — be written to, report its shards, give a
segment to probe weights on.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from service.collection.manifest import is_collection
from service.collection.reader import Collection
from service.collection.searcher import CollectionScorer
from service.errors import ConflictError
from service.index.inverted import InvertedIndex
from service.mt.bundle import ModelBundle
from service.retrieval.base import Scorer, get_scorer
from service.retrieval.runner import load_index

Store = InvertedIndex | Collection


def open_store(path: str | Path) -> Store:
    """The index or the collection at ``path`` (an index whose tokenizer changed is refused,
    :func:`~service.retrieval.runner.load_index`)."""
    return Collection(path) if is_collection(path) else load_index(path)


def store_scorer(
    store: Store, method: str, bundle: ModelBundle | None = None, *, threads: int = 0, **params: Any
) -> Scorer:
    """The scorer ``method`` over an index or a collection (a
    :class:`~service.collection.searcher.CollectionScorer`, which searches the collection's
    current commit; ``threads``: its shards searched at once): what the service's searches and
    the commands' runs rank with, whichever the store. Every scorer gets the bundle and takes
    from it what it needs."""
    if isinstance(store, Collection):
        return CollectionScorer(store, method, bundle=bundle, threads=threads, **params)
    return get_scorer(method, store, bundle=bundle, **params)


def live_collection(store: Store | None) -> Collection | None:
    """The collection, when the store is one (it has commits, shards and segments to report);
    None for an index built whole."""
    return store if isinstance(store, Collection) else None


def whole_index(store: Store | None) -> InvertedIndex | None:
    """The index, when the store is one built whole; None for a collection."""
    return store if isinstance(store, InvertedIndex) else None


def writable(store: Store) -> Collection:
    """The store as a collection that documents are added to and deleted from; an index built
    whole is a :class:`~service.errors.ConflictError` naming the command that makes one."""
    if not isinstance(store, Collection):
        raise ConflictError(
            f"the document index {store.path} is one index built whole: documents cannot be "
            "added to it; build a collection (clir build-index --docs F --out DIR --shards S) "
            "and serve it (CLIR_DOC_INDEXES)"
        )
    return store


def probe_index(store: Store | None) -> InvertedIndex | None:
    """The index a weights version is probed on: the index, or a collection's first segment
    (every segment scores with the same statistics)."""
    if isinstance(store, Collection):
        views = store.snapshot.views()
        return views[0].index if views else None
    return store
