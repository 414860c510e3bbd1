"""Writing a collection: adds, replacements and deletes as new segments and tombstones.

One :class:`CollectionWriter` at a time holds a collection's ``LOCK`` (``flock``; a second
writer waits, then fails naming the lock). Documents added go to their shard's buffer; a
buffer is written as a new immutable segment when the buffered text reaches
``buffer_mb`` (so building or adding a million documents needs memory for one buffer, not for
the collection), and at :meth:`CollectionWriter.commit`. A document whose id is already in the
collection replaces it (the old one is deleted, the new one gets a new sequence number, as a
rebuild that appends it would number it); the old one is looked up when its buffer is
written, for the whole buffer at once, in each segment's table of id hashes
(:class:`~service.collection.segment.IdTable`), so the writer never holds the collection's ids.
Deletes are tombstones: the segment keeps the document and the commit lists it as deleted.

:meth:`CollectionWriter.commit` writes the tombstones and the global statistics (df summed
over the segments' live documents, N and total length) and then the manifest
(:mod:`service.collection.manifest`): nothing is visible before, everything after.
:meth:`CollectionWriter.rollback` (and an exception inside ``with``) removes what an
uncommitted add wrote, so a failed add changes nothing; a writer killed mid-add leaves files
that the next writer removes. :meth:`CollectionWriter.merge` replaces the smallest segments of
a shard by one without their deleted documents (Lucene's tiered merging, simplified), with
their dense vectors when every one has them
(:func:`~service.collection.segment.merge_vectors`; else the merged segment's documents are
pending vectors until ``clir embed`` writes them).
"""

from __future__ import annotations

import fcntl
import multiprocessing
import os
import shutil
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np
import numpy.typing as npt

from service.collection.manifest import (
    CommitManifest,
    SegmentEntry,
    is_collection,
    read_commit,
    shard_of,
    write_commit,
)
from service.collection.reader import SEGMENTS_DIR, Snapshot, read_deleted, write_stats
from service.collection.segment import (
    IdTable,
    Segment,
    copy_segment,
    id_hashes,
    index_documents,
    merge_segments,
    store_segment,
)
from service.collection.terms import TERMS_FILE, TermDictionary
from service.core.arraydir import atomic_directory, fsync_dir, remove_leftovers, save_array
from service.core.processes import exit_with
from service.errors import ConfigurationError, ConflictError, InvalidInputError
from service.index.bm25 import RsjPolicy
from service.index.build import BuildParams, replaced_generation
from service.index.tokenizers import TokenizeFn
from service.records import Doc

LOCK_FILE = "LOCK"
DELETES_DIR = "deletes"
DEFAULT_BUFFER_MB = 32.0
DEFAULT_MAX_MERGE_DOCS = 100_000  # a merged segment's size, bounding a merge's memory
_STALE_BUILD_S = 24 * 3600.0  # a temporary build directory this old, whoever made it, is left over


@dataclass(frozen=True)
class WriteSummary:
    """What a commit changed."""

    generation: int
    added: int
    replaced: int
    deleted: int
    n_docs: int
    segments: int
    seconds: float


def _doc_bytes(doc: Doc) -> int:
    return len(doc.id) + len(doc.title) + len(doc.text) + 64


def _die_with_writer(writer_pid: int) -> None:
    """In a worker process: exit as soon as the writer that started it is gone (killed with
    SIGKILL, it cannot stop its workers; a worker left behind would keep the fork server, and
    with it the pool, alive)."""
    exit_with(writer_pid, "writer-watch")


def worker_pool(workers: int) -> ProcessPoolExecutor:
    """Processes that index documents for a writer. Started by a fork server (a clean process
    started with ``exec``), not forked from the writer: a forked worker would inherit the
    writer's open ``LOCK`` and hold the collection locked after the writer died. Each worker
    exits when the writer does, and the fork server when its last worker has."""
    ctx = multiprocessing.get_context("forkserver")
    return ProcessPoolExecutor(
        max_workers=workers, mp_context=ctx, initializer=_die_with_writer,
        initargs=(os.getpid(),),
    )  # fmt: skip


@contextmanager
def _locked(path: Path, timeout: float) -> Iterator[int]:
    fd = os.open(path / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise ConflictError(
                        f"{path}: another writer holds {path / LOCK_FILE} (an add, a delete or "
                        "a merge in progress); try again when it has finished"
                    ) from None
                time.sleep(0.05)
        yield fd
    finally:
        os.close(fd)  # releases the lock


def _check_layout(params: BuildParams, shards: int) -> None:
    if shards < 1:
        raise InvalidInputError(f"a collection needs at least one shard, got {shards}")
    if RsjPolicy(params.rsj) is RsjPolicy.DROP:
        raise ConfigurationError(
            "a collection cannot use the rsj policy 'drop' (which postings are dropped "
            "depends on the whole collection); use floor or keep"
        )


def create_collection(path: Path, params: BuildParams, shards: int, generation: int = 0) -> None:
    """An empty collection at ``path`` (which must not exist) with ``shards`` shards, at
    ``generation`` (its first commit is the next)."""
    _check_layout(params, shards)
    path.mkdir(parents=True, exist_ok=False)
    (path / SEGMENTS_DIR).mkdir()
    (path / DELETES_DIR).mkdir()
    (path / TERMS_FILE).touch()
    commit = CommitManifest(
        generation=generation, shards=shards, build=asdict(params), next_seq=0,
        next_segment=0, n_terms=0, terms_bytes=0, n_docs=0, total_len=0, stats_dir=None,
        segments=(),
    )  # fmt: skip
    write_commit(path, commit)


class CollectionWriter:
    """The one writer of a collection (use as a context manager: commit explicitly; leaving
    the block by an exception rolls back)."""

    def __init__(
        self,
        path: str | Path,
        *,
        buffer_mb: float = DEFAULT_BUFFER_MB,
        tokenize: TokenizeFn | None = None,
        lock_timeout: float = 30.0,
        workers: int = 1,
    ) -> None:
        """``workers`` > 1 indexes buffers in that many processes (the named tokenizer only)."""
        self.path = Path(path)
        if workers < 1:
            raise InvalidInputError(f"workers must be at least 1, got {workers}")
        if workers > 1 and tokenize is not None:
            raise InvalidInputError("worker processes use the collection's named tokenizer")
        self.workers = workers
        self._pool: ProcessPoolExecutor | None = None
        self._inflight: list[tuple[Future[Any], list[int], str, int]] = []
        self._pending: dict[str, tuple[int, IdTable]] = {}  # in flight: shard, ids
        if buffer_mb <= 0:
            raise InvalidInputError(f"the segment buffer must be positive, got {buffer_mb} MB")
        self.buffer_bytes = int(buffer_mb * 1e6)
        self._segments: dict[str, Segment] = {}
        self._live_df: dict[tuple[str, int], npt.NDArray[np.int64]] = {}
        self._dead_cache: dict[str, set[int]] = {}
        self._lock_cm = _locked(self.path, lock_timeout)
        self._lock_cm.__enter__()
        try:
            self.commit_manifest = read_commit(self.path)
            self.terms = TermDictionary(
                self.path, self.commit_manifest.n_terms, self.commit_manifest.terms_bytes
            )
            self._remove_unreferenced()
        except BaseException:
            self._lock_cm.__exit__(None, None, None)
            raise
        self._custom_tokenize = tokenize
        if workers > 1:
            self._pool = worker_pool(workers)
        self._closed = False
        self._reset()

    # --- state ------------------------------------------------------------------------------

    def _reset(self) -> None:
        c = self.commit_manifest
        self.params = BuildParams(**c.build)
        self._shards = c.shards
        self._replacing = False  # replace_all: the commit drops every document before it
        self._entries: dict[str, SegmentEntry] = {e.name: e for e in c.segments}
        self._deleted: dict[str, set[int]] = {}  # new tombstones by segment
        self._new: list[str] = []  # segments written since the commit
        self._buffers: list[list[tuple[int, Doc]]] = [[] for _ in range(c.shards)]
        self._buffered: dict[str, tuple[int, int]] = {}  # id -> shard, add call: buffered
        self._call = 0  # the add call, numbered
        self._call_written: set[str] = set()  # segments written by this add call
        self._buffer_size = 0
        self._next_seq = c.next_seq
        self._next_segment = c.next_segment
        self._added = self._replaced = self._deleted_count = 0

    def segment(self, name: str) -> Segment:
        seg = self._segments.get(name)
        if seg is None:
            seg = self._segments[name] = Segment(self.path / SEGMENTS_DIR / name)
        return seg

    def _committed_tombstones(self, entry: SegmentEntry) -> set[int]:
        key = entry.deleted or ""
        dead = self._dead_cache.get(key)
        if dead is None:
            old = read_deleted(self.path, entry.deleted)
            dead = self._dead_cache[key] = set() if old is None else set(old.tolist())
        return dead

    def _tombstones(self, entry: SegmentEntry) -> set[int]:
        return self._committed_tombstones(entry) | self._deleted.get(entry.name, set())

    def _is_deleted(self, name: str, docno: int) -> bool:
        """Whether document ``docno`` of segment ``name`` (written, or being indexed) is
        deleted, by this writer or by a commit."""
        entry = self._entries.get(name)
        return docno in self._deleted.get(name, ()) or (
            entry is not None and docno in self._committed_tombstones(entry)
        )

    def _written(
        self, shard: int, ids: list[str], hashes: npt.NDArray[np.uint64]
    ) -> list[tuple[str, int]]:
        """The segment and document number of each of ``ids`` (of ``shard``) that is live in
        a written segment, or in one being indexed by a worker process."""
        tables = [(e.name, self.segment(e.name).ids) for e in self._entries.values()
                  if e.shard == shard]  # fmt: skip
        tables += [(name, t) for name, (sh, t) in self._pending.items() if sh == shard]
        return [
            (name, docno)
            for name, table in tables
            for _, docno in table.find(ids, hashes)
            if not self._is_deleted(name, docno)
        ]

    # --- changes ------------------------------------------------------------------------------

    def add(self, docs: Iterable[Doc]) -> int:
        """Add (or replace) ``docs``; the number read. Nothing is visible before commit.
        An id that occurs twice in ``docs`` is an error (as in one index's documents); one
        added by an earlier call, or committed, is replaced."""
        n = 0
        self._call += 1
        try:
            for doc in docs:
                if not doc.id or not doc.id.strip():
                    raise InvalidInputError("a document needs a non-empty id")
                if doc.id in self._buffered:
                    if self._buffered[doc.id][1] == self._call:
                        raise InvalidInputError(f"document id {doc.id!r} occurs more than once")
                    self._unbuffer(doc.id)
                    self._replaced += 1
                shard = shard_of(doc.id, self._shards)
                # numbered as they arrive: the order one index built from them would give
                self._buffers[shard].append((self._next_seq, doc))
                self._next_seq += 1
                self._buffered[doc.id] = (shard, self._call)
                self._buffer_size += _doc_bytes(doc)
                n += 1
                self._added += 1
                if self._buffer_size >= self.buffer_bytes:
                    self.flush()
            if self._call_written:  # the rest checked against this call's segments too
                self.flush()
        finally:
            self._call_written.clear()
        return n

    def _unbuffer(self, doc_id: str) -> None:
        shard, _ = self._buffered.pop(doc_id)
        self._buffers[shard] = [(q, d) for q, d in self._buffers[shard] if d.id != doc_id]

    def _delete_written(self, ids: list[str], shard: int) -> int:
        """Tombstone the written documents among ``ids``; how many there were (an id
        written earlier in the same :meth:`add` call occurs twice there: an error)."""
        found = self._written(shard, ids, id_hashes(i.encode("utf-8") for i in ids))
        for name, docno in found:
            if name in self._call_written:
                table = (
                    self._pending[name][1] if name in self._pending else (self.segment(name).ids)
                )
                doc_id = table.id_of(docno)
                raise InvalidInputError(f"document id {doc_id!r} occurs more than once")
            self._deleted.setdefault(name, set()).add(docno)
        return len(found)

    def delete(self, doc_ids: Iterable[str]) -> list[str]:
        """Delete documents by id; the ids that were not in the collection."""
        missing: list[str] = []
        self._drain()  # a document being indexed by a worker is written first
        for doc_id in doc_ids:
            buffered = doc_id in self._buffered
            if buffered:  # never written; an earlier copy may be (it is replaced at a flush)
                self._unbuffer(doc_id)
                self._added -= 1
            shard = shard_of(doc_id, self._shards)
            if self._delete_written([doc_id], shard) or buffered:
                self._deleted_count += 1
            else:
                missing.append(doc_id)
        return missing

    def flush(self) -> None:
        """Write every non-empty buffer as a new segment (not yet committed). With worker
        processes, the buffers are indexed there and written when they come back (at most
        ``workers`` in flight, so memory stays bounded)."""
        for shard, buf in enumerate(self._buffers):
            if not buf:
                continue
            name = f"s{self._next_segment:07d}"
            self._next_segment += 1
            self._new.append(name)
            docs, seqs = [d for _, d in buf], [q for q, _ in buf]
            self._buffers[shard] = []
            # the documents these replace, before this buffer's own segment can be found
            self._replaced += self._delete_written([d.id for d in docs], shard)
            self._call_written.add(name)
            if self._pool is None:
                indexed = index_documents(docs, self.params, self._custom_tokenize)
                self._store(indexed, seqs, name, shard)
                continue
            while len(self._inflight) >= self.workers:
                self._drain_one()
            future = self._pool.submit(index_documents, docs, self.params)
            self._inflight.append((future, seqs, name, shard))
            ids = [d.id for d in docs]
            self._pending[name] = (shard, IdTable.of([i.encode() for i in ids], ids.__getitem__))
        self._buffered.clear()
        self._buffer_size = 0

    def _store(
        self, indexed: tuple[dict[str, Any], dict[str, Any]], seqs: list[int], name: str, shard: int
    ) -> None:
        target = self.path / SEGMENTS_DIR / name
        n = store_segment(target, indexed, self.params, self.terms, seqs, name=name, shard=shard)
        self._entries[name] = SegmentEntry(name, shard, n)

    def _drain_one(self) -> None:
        future, seqs, name, shard = self._inflight.pop(0)
        self._store(future.result(), seqs, name, shard)
        del self._pending[name]

    def _drain(self) -> None:
        """Write the segments indexed in worker processes (their errors raise here)."""
        while self._inflight:
            self._drain_one()

    # --- commit --------------------------------------------------------------------------------

    def _live_df_of(self, entry: SegmentEntry, deleted: npt.NDArray[np.int32] | None) -> Any:
        key = (entry.name, 0 if deleted is None else len(deleted))
        df = self._live_df.get(key)
        if df is None:
            df = self._live_df[key] = self.segment(entry.name).live_df(deleted)
        return df

    def commit(self) -> WriteSummary:
        """Make every change since the last commit visible at once."""
        t0 = time.perf_counter()
        self.flush()
        self._drain()
        old = self.commit_manifest
        if not (self._new or self._deleted or self._replacing):
            # nothing changed (an empty file, ids none of which were there): no new commit
            return WriteSummary(
                old.generation, self._added, self._replaced, self._deleted_count, old.n_docs,
                len(old.segments), time.perf_counter() - t0,
            )  # fmt: skip
        gen = old.generation + 1
        entries: list[SegmentEntry] = []
        deleted_of: dict[str, npt.NDArray[np.int32] | None] = {}
        for entry in self._entries.values():
            if entry.name in self._deleted:
                dead = np.asarray(sorted(self._tombstones(entry)), dtype=np.int32)
                if len(dead) == entry.n_docs:  # nothing left: the segment leaves the commit
                    continue
                rel = f"{DELETES_DIR}/{entry.name}.{gen}.npy"
                save_array(self.path / rel, dead)
                entry = replace(entry, deleted=rel, n_deleted=len(dead))
            entries.append(entry)
            deleted_of[entry.name] = read_deleted(self.path, entry.deleted)
        n_terms = len(self.terms)
        df = np.zeros(n_terms, dtype=np.int64)
        n_docs = total_len = 0
        for entry in entries:
            seg, tomb = self.segment(entry.name), deleted_of[entry.name]
            df[seg.gid] += self._live_df_of(entry, tomb)  # a segment's global ids are distinct
            n_docs += entry.n_docs - entry.n_deleted
            total_len += seg.live_length(tomb)
        fsync_dir(self.path / DELETES_DIR)
        stats_dir = f"stats-{gen}"
        write_stats(self.path / stats_dir, df)
        entries.sort(key=lambda e: e.name)
        commit = CommitManifest(
            generation=gen, shards=self._shards, build=asdict(self.params), next_seq=self._next_seq,
            next_segment=self._next_segment, n_terms=n_terms, terms_bytes=self.terms.n_bytes,
            n_docs=n_docs, total_len=total_len, stats_dir=stats_dir, segments=tuple(entries),
        )  # fmt: skip
        write_commit(self.path, commit)
        summary = WriteSummary(
            gen, self._added, self._replaced, self._deleted_count, n_docs, len(entries),
            time.perf_counter() - t0,
        )  # fmt: skip
        self.commit_manifest = commit
        self._reset()
        self._remove_unreferenced()
        return summary

    def replace_all(self, params: BuildParams | None = None, shards: int | None = None) -> None:
        """Drop every committed document (Lucene's ``deleteAll``): the next commit holds only
        what is added after this call, indexed with ``params`` into ``shards`` shards (default:
        the collection's). It is one more commit, with segment names and sequence numbers
        never used before, so a reader searching the previous commit goes on undisturbed and
        switches at its next refresh; nothing is visible before :meth:`commit`, and
        :meth:`rollback` (or an exception in ``with``) keeps the collection as it was."""
        if self._new or self._deleted or any(self._buffers) or self._inflight:
            raise ConflictError("commit or roll back the pending changes before replacing all")
        params = self.params if params is None else params
        shards = self._shards if shards is None else shards
        _check_layout(params, shards)
        self.params, self._shards, self._replacing = params, shards, True
        self._entries = {}
        self._buffers = [[] for _ in range(shards)]

    def import_segments(self, snapshot: Snapshot) -> int:
        """Add the segments of ``snapshot`` (another collection's commit, e.g. a backup) as
        they are, with their tombstones and dense vectors, after :meth:`replace_all` with its
        build parameters and shards; the live documents imported. Visible at commit."""
        if not self._replacing or (self.params, self._shards) != (
            BuildParams(**snapshot.commit.build), snapshot.commit.shards,
        ):  # fmt: skip
            raise ConflictError("import_segments follows replace_all with the snapshot's layout")
        offset = self._next_seq
        for view in snapshot.views():
            name = f"s{self._next_segment:07d}"
            self._next_segment += 1
            self._new.append(name)
            seg = view.segment
            n = copy_segment(self.path / SEGMENTS_DIR / name, seg, self.params, self.terms,
                             offset, name=name, shard=seg.shard)  # fmt: skip
            self._entries[name] = SegmentEntry(name, seg.shard, n)
            if view.deleted is not None and len(view.deleted):
                self._deleted[name] = set(view.deleted.tolist())
        self._next_seq = offset + snapshot.commit.next_seq
        self._added += snapshot.n_docs
        return snapshot.n_docs

    def rollback(self) -> None:
        """Drop every change since the last commit (and the segments it wrote)."""
        for future, *_ in self._inflight:
            future.cancel()
        self._inflight = []
        self._pending = {}
        self._reset()
        self._remove_unreferenced()

    def _remove_unreferenced(self) -> None:
        """Remove what no commit refers to: segments, tombstones and statistics of writes
        that did not commit or were replaced (readers keep files they opened: POSIX)."""
        c = self.commit_manifest
        keep = {e.name for e in c.segments}
        seg_dir = self.path / SEGMENTS_DIR
        for p in seg_dir.iterdir() if seg_dir.is_dir() else ():
            if p.name not in keep:
                shutil.rmtree(p, ignore_errors=True)
        for name in set(self._segments) - keep:
            del self._segments[name]
        for key in [k for k in self._live_df if k[0] not in keep]:
            del self._live_df[key]
        dels = {e.deleted for e in c.segments if e.deleted}
        for p in (self.path / DELETES_DIR).iterdir():
            if f"{DELETES_DIR}/{p.name}" not in dels:
                p.unlink(missing_ok=True)
        for p in self.path.iterdir():
            stale_stats = p.name.startswith("stats-") and p.name != c.stats_dir
            if stale_stats or p.name.startswith(".stats-"):
                shutil.rmtree(p, ignore_errors=True)

    # --- merging -------------------------------------------------------------------------------

    def merge(
        self,
        *,
        max_segments: int = 8,
        factor: int = 4,
        max_merge_docs: int | None = DEFAULT_MAX_MERGE_DOCS,
    ) -> list[str]:
        """Merge segments of every shard holding more than ``max_segments``: the ``factor``
        smallest into one (deleted documents dropped), until at most ``max_segments`` are
        left or no two of the smallest fit in ``max_merge_docs`` live documents (a merge holds
        its segments in memory: the cap bounds it, as Lucene's maximum merged segment size
        does; None: no cap); commits. The names of the segments written."""
        if self._new or self._deleted or any(self._buffers) or self._inflight:
            raise ConflictError("commit or roll back the pending changes before merging")
        if max_segments < 1 or factor < 2:
            raise InvalidInputError("merge needs max_segments >= 1 and factor >= 2")
        written: list[str] = []
        for shard in range(self._shards):
            while True:
                entries = [e for e in self._entries.values() if e.shard == shard]
                if len(entries) <= max_segments:
                    break
                entries.sort(key=lambda e: (e.n_docs - e.n_deleted, e.name))
                group: list[SegmentEntry] = []
                total = 0
                for e in entries[: min(factor, len(entries) - max_segments + 1)]:
                    live = e.n_docs - e.n_deleted
                    if group and max_merge_docs is not None and total + live > max_merge_docs:
                        break
                    group.append(e)
                    total += live
                if len(group) < 2:
                    break  # the smallest segments are too large to merge under the cap
                written.append(self._merge_group(shard, group))
                # committed one merge at a time: the sources' files, and their pages, go now
                self.commit()
        return written

    def merge_all(self) -> list[str]:
        """Merge each shard into one segment, whatever its size; commits."""
        return self.merge(max_segments=1, factor=1 << 30, max_merge_docs=None)

    def _merge_group(self, shard: int, group: list[SegmentEntry]) -> str:
        name = f"s{self._next_segment:07d}"
        self._next_segment += 1
        segs = [self.segment(e.name) for e in group]
        dead = [read_deleted(self.path, e.deleted) for e in group]
        n = merge_segments(self.path / SEGMENTS_DIR / name, segs, dead, name=name, shard=shard)
        self._new.append(name)
        for e in group:
            del self._entries[e.name]
            self._segments.pop(e.name, None)
        self._entries[name] = SegmentEntry(name, shard, n)
        return name

    # --- context manager ----------------------------------------------------------------------

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            if self._pool is not None:
                self._pool.shutdown(cancel_futures=True)
            self._lock_cm.__exit__(None, None, None)

    def __enter__(self) -> CollectionWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            if exc_type is not None:
                self.rollback()
        finally:
            self.close()


def build_collection(
    docs: Iterable[Doc],
    out: str | Path,
    params: BuildParams,
    *,
    shards: int,
    buffer_mb: float = DEFAULT_BUFFER_MB,
    tokenize: TokenizeFn | None = None,
    merge: bool = True,
    workers: int = 1,
    max_segments: int = 8,
    force: bool = False,
) -> WriteSummary:
    """Build a collection of ``docs`` at ``out``; with ``merge``, each shard's smallest
    segments are merged until at most ``max_segments`` are left (1: one segment a shard; a
    merge holds the segments it merges in memory, so a bound keeps the build's memory bounded
    too).

    A new ``out`` is written beside and renamed into place (a failed build leaves nothing).
    Over an existing collection the build is refused unless ``force``; with it, the documents
    replace the collection's in one new commit (:meth:`CollectionWriter.replace_all`): a
    service searching the collection switches to it at its next refresh and never sees a
    directory swapped under it (readers keep their open segments; segment names are never
    reused), and a build that fails, or reads no document, leaves the collection as it was.
    Any other existing ``out`` (a single index) is replaced only with ``force``, by a
    collection whose first commit is the generation after the index's."""
    out = Path(out)
    if is_collection(out):
        if not force:
            commit = read_commit(out)
            raise ConflictError(
                f"{out} is a collection ({commit.n_docs} documents, generation "
                f"{commit.generation}); rebuilding it replaces every document, including "
                "those added since it was built: --force rebuilds it as a new generation"
            )
        return _rebuild(docs, out, params, shards, buffer_mb, tokenize, merge, workers,
                        max_segments)  # fmt: skip
    if out.exists() and not force and (not out.is_dir() or any(out.iterdir())):
        raise ConflictError(f"{out} exists and is not a collection; --force replaces it")
    remove_leftovers(out, stale_seconds=_STALE_BUILD_S)  # what a killed build left
    # over an index built whole, the generation after it: a service searching the path (and
    # its shard workers) tells the collection from the index it replaces
    replaced = replaced_generation(out)
    with atomic_directory(out) as tmp:
        coll = tmp / "c"
        create_collection(coll, params, shards, 0 if replaced is None else replaced)
        with CollectionWriter(coll, buffer_mb=buffer_mb, tokenize=tokenize, workers=workers) as w:
            w.add(docs)
            summary = w.commit()
            if merge:
                w.merge(max_segments=max_segments, factor=max(2, max_segments))
        for p in coll.iterdir():
            p.rename(tmp / p.name)
        coll.rmdir()
    return summary


def _rebuild(
    docs: Iterable[Doc],
    out: Path,
    params: BuildParams,
    shards: int,
    buffer_mb: float,
    tokenize: TokenizeFn | None,
    merge: bool,
    workers: int,
    max_segments: int,
) -> WriteSummary:
    with CollectionWriter(out, buffer_mb=buffer_mb, tokenize=tokenize, workers=workers) as w:
        w.replace_all(params, shards)
        if w.add(docs) == 0:
            raise InvalidInputError(
                f"no documents read: {out} was left as it was (a rebuild from an empty "
                "source would delete every document)"
            )
        summary = w.commit()
        if merge:
            w.merge(max_segments=max_segments, factor=max(2, max_segments))
    return summary
