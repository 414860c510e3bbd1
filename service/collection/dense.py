"""The dense reader over a collection: each segment's passage vectors, merged exactly.

A segment is an index directory, so its vectors are ``dense/`` inside it
(:mod:`service.dense.vectors`), written after the segment by ``clir embed``
(:func:`embed_collection`; ``clir docs add --embed`` runs it after its commit) or by ``clir
build-index``, and kept by a merge whose segments all have them
(:func:`service.collection.segment.merge_vectors`: copied, not embedded again). A dense score —
a document's best passage, MaxP (Dai & Callan 2019, §3.2) — depends on the query and the
document only (no collection statistics), so each segment's top list, by sequence number,
merges into the collection's exactly as one index over the same documents ranks them: score
descending, then sequence number ascending. Deleted documents are left out; a segment whose
vectors are not written yet (or were made by another encoder or with other passages than
most documents': their scores do not compare) is read lexically only, and
:meth:`CollectionDense.status` (and :func:`dense_status`, what ``clir docs status`` prints)
counts its documents as pending.
"""

from __future__ import annotations

import threading
import time
import weakref
from pathlib import Path
from typing import Any

import numpy as np

from service.collection.reader import Collection, SegmentView, Snapshot
from service.collection.segment import Segment
from service.dense.encoders import Encoder
from service.dense.passages import PassageParams
from service.dense.sketch import SketchParams
from service.dense.source import NO_VECTORS, DenseSource
from service.dense.vectors import DenseVectors, Progress, open_vectors
from service.errors import ClirError

# kept as long as the segment is open: a segment merged away and let go by every snapshot
# takes its vectors' memory maps with it (the files' space is freed)
_CACHE: weakref.WeakKeyDictionary[Segment, DenseVectors] = weakref.WeakKeyDictionary()
_CACHE_LOCK = threading.Lock()


def segment_vectors(view: SegmentView) -> DenseVectors | None:
    """The vectors of a segment, or None while they are not written (or unusable)."""
    with _CACHE_LOCK:
        found = _CACHE.get(view.segment)
    if found is not None:
        return found
    try:
        vectors = open_vectors(view.index.path)
    except ClirError:
        return None
    if vectors is None or vectors.n_docs != view.segment.n_docs:
        return None
    with _CACHE_LOCK:
        _CACHE[view.segment] = vectors
    return vectors


class CollectionDense(DenseSource):
    """The collection's current snapshot read densely (documents numbered by sequence)."""

    def __init__(self, collection: Collection, snapshot: Snapshot | None = None) -> None:
        """Read the vectors made as most of the live documents' were (one encoder, one
        passage cutting: scores of others do not compare); a segment embedded otherwise is
        pending, as one not embedded yet. ``snapshot``: the commit read (default: the
        collection's current one)."""
        # the snapshot only, not the collection: the cache of readers (:func:`collection_dense`)
        # is weak in the collection, and lets it (and its memory maps) go when it is closed
        self.snapshot = collection.snapshot if snapshot is None else snapshot
        live: dict[tuple[str, PassageParams], int] = {}
        for view in self.snapshot.views():
            vectors = segment_vectors(view)
            if vectors is not None:
                key = (vectors.encoder, vectors.params)
                live[key] = live.get(key, 0) + view.n_live
        self.made = min(live, key=lambda k: (-live[k], k[0], k[1].signature())) if live else None
        self.encoder_signature = self.made[0] if self.made else ""
        self.passages_signature = self.made[1].signature() if self.made else ""

    def _parts(self) -> tuple[list[tuple[SegmentView, DenseVectors]], int]:
        parts, pending = [], 0
        for view in self.snapshot.views():
            vectors = segment_vectors(view)
            if vectors is None or (vectors.encoder, vectors.params) != self.made:
                pending += view.n_live
            else:
                parts.append((view, vectors))
        return parts, pending

    def top(
        self,
        query: np.ndarray,
        depth: int,
        sketch: SketchParams | None = None,
        later: float = 0.0,
    ) -> list[tuple[int, str, float]]:
        seqs, scores, owners = [], [], []
        parts, _ = self._parts()
        for i, (view, vectors) in enumerate(parts):
            live = view.index.live
            docs, s = vectors.top(query, depth, live, sketch=sketch, later=later)
            seqs.append(view.seq[docs].astype(np.int64))
            scores.append(s.astype(np.float32))
            owners.append(np.column_stack([np.full(len(docs), i), docs]))
        if not seqs:
            return []
        all_seqs = np.concatenate(seqs)
        all_scores = np.concatenate(scores)
        owner = np.concatenate(owners)
        order = np.lexsort((all_seqs, -all_scores))[:depth]
        out = []
        for j in order.tolist():
            view = parts[int(owner[j, 0])][0]
            out.append(
                (int(all_seqs[j]), view.index.doc_id(int(owner[j, 1])), float(all_scores[j]))
            )
        return out

    def status(self) -> dict[str, Any]:
        parts, pending = self._parts()
        return {
            "encoder": self.encoder_signature,
            "passages": self.passages_signature,
            "documents": sum(view.n_live for view, _ in parts),
            "pending": pending,
        }


# the reader of each open collection's snapshot: made again when a commit changes the
# snapshot, or (while documents are pending) every few seconds, to find vectors written since
_READERS: weakref.WeakKeyDictionary[Collection, tuple[Any, CollectionDense, bool, float, str]] = (
    weakref.WeakKeyDictionary()
)
RECHECK_S = 5.0  # how often a store with documents not read densely is looked at again


def collection_dense(
    collection: Collection, snapshot: Snapshot | None = None
) -> tuple[DenseSource | None, str]:
    """The collection's dense reader of ``snapshot`` (default: its current commit), or None
    and why (no segment has vectors yet); made once per snapshot (searches call this), not
    once per search."""
    if snapshot is None:
        collection.refresh()
    snap, now = collection.snapshot if snapshot is None else snapshot, time.monotonic()
    with _CACHE_LOCK:
        cached = _READERS.get(collection)
    if cached is not None and cached[0] is snap and (not cached[2] or now - cached[3] < RECHECK_S):
        source, why = cached[1], cached[4]
    else:
        source = CollectionDense(collection, snap)
        pending = bool(source._parts()[1])
        why = "on" if source.encoder_signature else _why_none(snap)
        with _CACHE_LOCK:
            _READERS[collection] = (snap, source, pending, now, why)
    return (source, why) if source.encoder_signature else (None, why)


def _why_none(snapshot: Snapshot) -> str:
    """Why no segment is read densely: none has vectors, or their build is under way (``clir
    build-index`` or ``clir embed`` writing them while the service runs)."""
    from service.dense.vectors import vectors_status

    done = sum(int(vectors_status(v.index.path).get("embedded") or 0) for v in snapshot.views())
    if not done:
        return NO_VECTORS
    return f"vectors being written ({done} of {snapshot.n_docs} documents embedded)"


def dense_status(collection: Collection) -> dict[str, Any]:
    """The dense counts of the collection's current commit: the encoder of its vectors (""
    before any segment has some), the live documents with vectors, and those ``pending``
    (in segments not embedded yet: searched lexically only until ``clir embed`` writes them)."""
    collection.refresh()
    return CollectionDense(collection).status()


def embed_collection(
    collection: Collection,
    encoder: Encoder,
    params: PassageParams,
    *,
    progress: Progress | None = None,
    force: bool = False,
) -> dict[str, int]:
    """Write the vectors of every segment of the collection's current commit that has none
    (``force``: every segment), largest first; a segment merged away meanwhile is skipped
    (its documents are in the merged one, embedded by the next run). Counts of segments
    embedded, skipped and already done."""
    from service.dense.vectors import build_vectors

    counts = {"embedded": 0, "vanished": 0, "had_vectors": 0}
    collection.refresh()  # the segments committed since it was opened too
    views = sorted(collection.snapshot.views(), key=lambda v: -v.segment.n_docs)
    todo = [v for v in views if force or segment_vectors(v) is None]
    counts["had_vectors"] = len(views) - len(todo)
    total = sum(v.segment.n_docs for v in todo)
    done = 0
    for view in todo:
        offset = done

        def report(n: int, _total: int, seconds: float, offset: int = offset) -> None:
            if progress is not None:
                progress(offset + n, total, seconds)

        try:
            build_vectors(view.index, encoder, params, progress=report, force=force)
        except (ClirError, FileNotFoundError):
            if Path(view.index.path).is_dir():
                raise
            counts["vanished"] += 1  # merged away while it was embedded
        else:
            counts["embedded"] += 1
        done += view.segment.n_docs
    return counts
