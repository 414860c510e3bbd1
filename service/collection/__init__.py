"""Collections: an index as shards of immutable segments with global statistics, documents
added, replaced and deleted without a rebuild, searched shard by shard and merged exactly.

The BM25 of Hieber & Riezler 2015, §3 reads the collection's N, average length and df; a
collection keeps them current at every commit (:mod:`~service.collection.writer`) and every
segment scores with them (:mod:`~service.collection.segment`), so S shards rank exactly like
one index (:mod:`~service.collection.searcher`). The layout on disk is in
:mod:`~service.collection.manifest`.
"""

from service.collection.manifest import is_collection, shard_of
from service.collection.reader import Collection, Snapshot
from service.collection.searcher import SnapshotSearcher
from service.collection.writer import (
    CollectionWriter,
    WriteSummary,
    build_collection,
    create_collection,
)

__all__ = [
    "Collection",
    "CollectionWriter",
    "Snapshot",
    "SnapshotSearcher",
    "WriteSummary",
    "build_collection",
    "create_collection",
    "is_collection",
    "shard_of",
]
