"""Reading a collection: the current commit as shards of segment views.

:class:`Collection` opens a collection directory and keeps a :class:`Snapshot` of its current
commit: per shard, the segments as indexes that score with the collection's statistics
(:meth:`service.collection.segment.Segment.view`). :meth:`Collection.refresh` reads the
manifest again and swaps in a new snapshot when a writer has committed (segments already
open are reused: only their statistics are new), so a search holds one consistent snapshot
from start to end while adds commit beside it. A commit is visible to the first search that
starts after a refresh; the service refreshes before each search when the manifest changed
(one ``stat`` call).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from service.collection.manifest import (
    MANIFEST,
    CommitManifest,
    SegmentEntry,
    is_collection,
    read_commit,
    shard_of,
)
from service.collection.segment import Segment
from service.collection.terms import TERMS_FILE
from service.core.arraydir import MANIFEST as INDEX_MANIFEST
from service.core.arraydir import load_array, load_npy, read_manifest, write_array_dir
from service.errors import ClirError, DataFormatError, NotFoundError
from service.index.bm25 import RsjPolicy, rsj
from service.index.inverted import InvertedIndex, load_index
from service.records import Doc

SEGMENTS_DIR = "segments"


@dataclass(frozen=True)
class SegmentView:
    """A segment of one commit: the segment, its deleted documents, the scoring index, and
    the scorers searchers made over it (:meth:`SnapshotSearcher.scorer`), which live and die
    with the view: a commit's views are let go with its snapshot, and their scorers and
    memory maps with them."""

    segment: Segment
    deleted: npt.NDArray[np.int32] | None
    index: InvertedIndex
    scorers: dict[Any, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def seq(self) -> npt.NDArray[np.int64]:
        return self.segment.seq

    @property
    def n_live(self) -> int:
        """Documents of the segment not deleted."""
        return self.segment.n_docs - (0 if self.deleted is None else len(self.deleted))


class GlobalTerms:
    """The collection's term dictionary (``terms.txt``, append-only) as read so far: a term's
    global id, for the terms no opened segment holds — a shard worker opens its own shards
    only, and a term of other shards still has the collection's df (PSQ's expected df sums
    its alternatives' dfs, Darwish & Oard 2003). One per collection; each commit's snapshot
    reads only the terms appended since (:meth:`at`)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._ids: dict[str, int] = {}
        self._bytes = 0
        self._lock = threading.Lock()

    def at(self, commit: CommitManifest) -> Callable[[str], int | None]:
        """The lookup of ``commit``'s terms (read on its first use)."""

        def lookup(term: str) -> int | None:
            if self._bytes < commit.terms_bytes:
                self._read_to(commit.terms_bytes)
            gid = self._ids.get(term)
            return gid if gid is not None and gid < commit.n_terms else None

        return lookup

    def _read_to(self, n_bytes: int) -> None:
        with self._lock:
            if self._bytes >= n_bytes:
                return
            with (self.path / TERMS_FILE).open("rb") as fh:
                fh.seek(self._bytes)
                data = fh.read(n_bytes - self._bytes).decode("utf-8")
            for term in data.split("\n")[:-1]:
                self._ids[term] = len(self._ids)
            self._bytes = n_bytes


class CollectionDf:
    """The collection's df of a token's index term, from any segment that holds it (every
    segment maps its terms to the global ids the df is kept by), else from the collection's
    term dictionary (``terms``, when some shards are not opened here); each token looked up
    once. It holds the segments' term dictionaries, not their scoring views, so a view that
    answers its :meth:`~service.index.inverted.InvertedIndex.collection_df` with it makes no
    reference cycle: a dropped snapshot releases its memory maps (one file descriptor each)
    at once, not at the garbage collector's next full pass."""

    def __init__(
        self,
        views: Sequence[SegmentView],
        global_df: npt.NDArray[np.int64],
        terms: Callable[[str], int | None] | None,
    ) -> None:
        self._dicts = [(v.index.vocab, v.segment.gid) for v in views]
        self._analyzer = views[0].index.analyzer if views else None
        self._global_df = global_df
        self._terms = terms
        self._cache: dict[str, int] = {}

    def __call__(self, token: str) -> int:
        df = self._cache.get(token)
        if df is None:  # every segment asks for the query's terms: look each up once
            df = 0
            term = None if self._analyzer is None else self._analyzer.term(token)
            gid = None
            if term is not None:
                gid = next(
                    (int(g[i]) for v, g in self._dicts if (i := v.id(term)) is not None), None
                )
                if gid is None and self._terms is not None:  # held by the shards not opened
                    gid = self._terms(term)
            if gid is not None and gid < len(self._global_df):
                df = int(self._global_df[gid])
            self._cache[token] = df
        return df


@dataclass(frozen=True)
class Snapshot:
    """The segments of one commit, by shard (``terms``: the collection's term dictionary,
    when some shards are not opened here)."""

    commit: CommitManifest
    shards: tuple[tuple[SegmentView, ...], ...]
    global_df: npt.NDArray[np.int64]
    terms: Callable[[str], int | None] | None = field(default=None, compare=False, repr=False)

    @property
    def generation(self) -> int:
        return self.commit.generation

    @property
    def n_docs(self) -> int:
        return self.commit.n_docs

    @cached_property
    def collection_df(self) -> CollectionDf:
        """The collection's df of a token's index term: ``snapshot.collection_df(token)``."""
        return CollectionDf(self.views(), self.global_df, self.terms)

    @cached_property
    def _policy(self) -> RsjPolicy:
        return RsjPolicy(self.commit.build.get("rsj", RsjPolicy.FLOOR))

    def weighted(self, token: str) -> bool:
        """Whether the index term of ``token`` is in the collection with a non-zero RSJ
        weight under the build's policy (what a single index's ``rsj[term_id] != 0`` says)."""
        df = self.collection_df(token)
        return df > 0 and float(rsj(df, self.n_docs, self._policy)) != 0

    def weighted_ids(self, view: SegmentView, term_ids: npt.ArrayLike) -> npt.NDArray[np.bool_]:
        """:meth:`weighted` of the terms ``term_ids`` of the segment ``view``, at once."""
        df = self.global_df[view.segment.gid[np.asarray(term_ids, dtype=np.int64)]]
        return np.asarray((df > 0) & (rsj(df, self.n_docs, self._policy) != 0), dtype=np.bool_)

    def views(self) -> list[SegmentView]:
        return [v for shard in self.shards for v in shard]

    def locate(self, doc_id: str) -> tuple[SegmentView, int]:
        """The segment view and document number of the live document ``doc_id``."""
        for view in self.shards[shard_of(doc_id, self.commit.shards)]:
            docno = view.segment.find(doc_id)
            if docno is not None and (view.index.live is None or view.index.live[docno]):
                return view, docno
        raise NotFoundError(f"no document {doc_id!r} in the collection")

    def by_segment(
        self, seqs: Sequence[int] | npt.ArrayLike
    ) -> list[tuple[SegmentView, npt.NDArray[np.int64], npt.NDArray[np.int64]]]:
        """The documents with sequence numbers ``seqs``, found at once (one vectorised binary
        search a segment): for each segment holding some, ``(view, at, docnos)`` — their
        positions in ``seqs`` (ascending) and their document numbers there. A number no
        segment holds is refused."""
        want = np.asarray(seqs, dtype=np.int64).ravel()
        left = np.ones(len(want), dtype=np.bool_)
        out = []
        for view in self.views():
            if not left.any():
                break
            pos = np.searchsorted(view.seq, want)
            found = left & (pos < len(view.seq))
            found[found] = view.seq[pos[found]] == want[found]
            if found.any():
                at = np.flatnonzero(found)
                out.append((view, at, pos[at].astype(np.int64)))
                left &= ~found
        if left.any():
            raise NotFoundError(f"no document number {int(want[left][0])} in the collection")
        return out

    def doc_ids(self, seqs: Sequence[int]) -> list[str]:
        """The external ids of the documents with sequence numbers ``seqs``."""
        out: list[str] = [""] * len(seqs)
        for view, at, docnos in self.by_segment(seqs):
            for i, docno in zip(at.tolist(), docnos.tolist(), strict=True):
                out[i] = view.index.doc_id(docno)
        return out

    def locate_seq(self, seq: int) -> tuple[SegmentView, int]:
        """The segment view and document number of the document with sequence number ``seq``."""
        [(view, _, docnos)] = self.by_segment([seq])
        return view, int(docnos[0])


def read_deleted(path: Path, entry_deleted: str | None) -> npt.NDArray[np.int32] | None:
    if entry_deleted is None:
        return None
    file = path / entry_deleted
    try:
        arr = load_npy(file)
    except (OSError, ValueError) as exc:
        raise DataFormatError(file, None, f"unreadable tombstones ({exc})") from exc
    return np.asarray(arr, dtype=np.int32)


def load_snapshot(
    path: Path,
    commit: CommitManifest,
    cache: dict[str, Segment] | None = None,
    only: frozenset[int] | None = None,
    terms: GlobalTerms | None = None,
) -> Snapshot:
    """The snapshot of ``commit``, opening segments not in ``cache`` (which is updated);
    ``only``: the shards to open (a shard worker's), the others are left empty."""
    cache = {} if cache is None else cache
    global_df = read_stats(path, commit)
    shards: list[list[SegmentView]] = [[] for _ in range(commit.shards)]
    for entry in commit.segments:
        if only is not None and entry.shard not in only:
            continue
        seg = cache.get(entry.name)
        if seg is None:
            seg = cache[entry.name] = Segment(path / SEGMENTS_DIR / entry.name)
        deleted = read_deleted(path, entry.deleted)
        index = seg.view(commit.n_docs, commit.avdl, global_df, deleted)
        shards[entry.shard].append(SegmentView(seg, deleted, index))
    for name in set(cache) - {e.name for e in commit.segments}:
        del cache[name]
    if only is not None and terms is None:
        terms = GlobalTerms(path)
    lookup = None if only is None or terms is None else terms.at(commit)
    snap = Snapshot(commit, tuple(tuple(s) for s in shards), global_df, lookup)
    for view in snap.views():
        view.index.use_collection_df(snap.collection_df)
    return snap


def whole_snapshot(index: InvertedIndex) -> Snapshot:
    """An index built whole as the one commit of a collection of one shard and one segment
    (:meth:`Segment.of_index`), scoring with its own statistics — the collection's, as it is
    the whole collection: the segment is the index itself, its precomputed weights read as
    they are."""
    segment = Segment.of_index(index)
    commit = CommitManifest(
        generation=index.generation, shards=1, build=dict(index.manifest["build"]),
        next_seq=index.n_docs, next_segment=1, n_terms=index.n_terms, terms_bytes=0,
        n_docs=index.n_docs, total_len=int(index.doc_lengths.sum(dtype=np.int64)), stats_dir=None,
        segments=(SegmentEntry(segment.name, 0, index.n_docs),),
    )  # fmt: skip
    view = SegmentView(segment, None, index)
    return Snapshot(commit, ((view,),), np.asarray(index.df, dtype=np.int64))


STATS_FORMAT = "clir-collection-stats"
#: what a collection's path holds ("collection" or "index") and its manifest's mtime and inode
Stamp = tuple[str, int, int]


def write_stats(target: Path, df: npt.NDArray[np.int64]) -> None:
    """Write the global df (by term id) as an array directory, atomically."""
    write_array_dir(target, {"df": df}, {"format": STATS_FORMAT, "format_version": 1}, indent=1)


def read_stats(path: Path, commit: CommitManifest) -> npt.NDArray[np.int64]:
    """The global df of ``commit`` (by global term id)."""
    if commit.stats_dir is None:
        return np.zeros(0, dtype=np.int64)
    target = path / commit.stats_dir
    hint = "the collection is damaged; rebuild it"
    manifest = read_manifest(
        target, what="statistics", format_name=STATS_FORMAT, version_key="format_version",
        version=1, hint=hint,
    )  # fmt: skip
    df = np.asarray(load_array(target, "df", manifest, verify=False, hint=hint))
    if len(df) != commit.n_terms:
        raise DataFormatError(target, None, f"{len(df)} df entries for {commit.n_terms} terms")
    return df


class Collection:
    """A collection directory, read: the current snapshot, refreshed after commits. An index
    built whole is a collection too (:meth:`of_index`): one shard of one segment, never
    written to, refreshed when it is rebuilt. A path may change from one to the other under a
    reader (``clir build-index --force``, with or without ``--shards``): the reader switches
    at its next refresh, to a later generation."""

    def __init__(
        self,
        path: str | Path,
        shards: Iterable[int] | None = None,
        *,
        whole: InvertedIndex | None = None,
    ) -> None:
        """Open the collection at ``path`` (``shards``: open only these, as a shard worker
        does; documents of the others are then not found here); or, given the index built
        whole there, show it as the collection of its one segment (:func:`whole_snapshot`)."""
        self.path = Path(path)
        self.only = None if shards is None else frozenset(shards)
        self._segments: dict[str, Segment] = {}
        # the term dictionary, read once and extended by each commit (shards opened alone)
        self._terms: GlobalTerms | None = None
        self._lock = threading.Lock()
        self._stamp: Stamp | None = None
        self.built_whole = whole is not None  # no commit to write (set by each load)
        if whole is None:
            self._snapshot = self._load()
        else:
            self._stamp = self._source_stamp()
            self._snapshot = whole_snapshot(whole)

    @classmethod
    def of_index(cls, index: InvertedIndex) -> Collection:
        """The index built whole ``index`` as the collection of its one segment: searched by
        the per-segment code every collection is searched by; :attr:`built_whole` says
        documents cannot be added to it."""
        return cls(index.path, whole=index)

    def _source_stamp(self) -> Stamp | None:
        """What the path holds and when it was written (its manifest's mtime and inode): a
        collection, else an index built whole; None while it holds neither (a build is
        renaming its directory into place)."""
        for kind, name in (("collection", MANIFEST), ("index", INDEX_MANIFEST)):
            try:
                st = (self.path / name).stat()
            except (FileNotFoundError, NotADirectoryError):
                continue
            return kind, st.st_mtime_ns, st.st_ino
        return None

    def _load(self) -> Snapshot:
        """The snapshot of what the path holds now; :attr:`built_whole` says which kind."""
        for attempt in range(3):
            stamp = self._source_stamp()
            try:
                if stamp is None or stamp[0] == "collection":
                    if self.only is not None and self._terms is None:
                        self._terms = GlobalTerms(self.path)
                    commit = read_commit(self.path)  # names the path when it holds nothing
                    snap = load_snapshot(self.path, commit, self._segments, self.only, self._terms)
                else:
                    snap = whole_snapshot(load_index(self.path))
                    self._segments.clear()
                    self._terms = None
            except ClirError:
                # a writer may have committed (and removed what the commit read refers to),
                # or a build replaced the directory, between reading the manifest and opening
                # its files: read it again
                if attempt == 2 or self._source_stamp() == stamp:
                    raise
                continue
            self._stamp = stamp
            self.built_whole = stamp is not None and stamp[0] == "index"
            return snap
        raise AssertionError("unreachable")

    @property
    def snapshot(self) -> Snapshot:
        return self._snapshot

    def refresh(self) -> bool:
        """Load what the path holds if a writer or a build replaced it (a commit, a rebuild,
        an index built whole again); whether the generation changed. While a build renames
        its directory into place the current snapshot stays."""
        stamp = self._source_stamp()
        if stamp is None or stamp == self._stamp:
            return False
        with self._lock:
            if self._source_stamp() in (None, self._stamp):
                return False
            snap = self._load()
            changed = snap.generation != self._snapshot.generation
            self._snapshot = snap
            return changed

    def doc(self, key: str | int) -> Doc:
        """A live document by external id, or by sequence number."""
        snap = self._snapshot
        view, docno = snap.locate(key) if isinstance(key, str) else snap.locate_seq(int(key))
        return view.index.doc(docno)


def open_collection(path: str | Path, shards: Iterable[int] | None = None) -> Collection:
    """The collection at ``path`` (``shards``: only these opened), or the index built whole
    there as the collection of its one segment (:meth:`Collection.of_index`; an index whose
    tokenizer changed since it was built is refused, :func:`~service.index.inverted.load_index`)."""
    if is_collection(path):
        return Collection(path, shards)
    return Collection.of_index(load_index(path))
