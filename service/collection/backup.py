"""Snapshots of a collection (a consistent copy at one commit) and restoring one.

A commit's files never change once it is written: segments are immutable, tombstones and
statistics are written under new names at each commit, and only ``collection.json`` (replaced
by a rename) and ``terms.txt`` (appended) move on. So :func:`snapshot_collection` copies one
commit while writers go on — each file hard-linked where the copy is on the same file system
(no bytes copied, and the link keeps the file after a writer removes it) or copied, the term
dictionary cut at the commit's length — and starts again from the newer commit if a merge
removed a file before it was reached (Elasticsearch's snapshots copy a commit's immutable
segment files the same way). A snapshot is itself a collection directory: a service can
search it, and :func:`restore_collection` puts it back.

Restoring over a live collection is one more commit of it (:meth:`CollectionWriter.replace_all`
followed by :meth:`CollectionWriter.import_segments`): a service searching the collection
switches to the restored documents at its next refresh, and a restore that fails leaves the
collection as it was; segments, tombstones and dense vectors come back as they were
(nothing is tokenised or embedded again).
"""

from __future__ import annotations

import errno
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from service.collection.manifest import CommitManifest, is_collection, read_commit, write_commit
from service.collection.reader import SEGMENTS_DIR, Collection
from service.collection.terms import TERMS_FILE
from service.collection.writer import CollectionWriter, WriteSummary
from service.core.arraydir import atomic_directory
from service.errors import ClirError, ConflictError, InvalidInputError
from service.index.build import BuildParams

_ATTEMPTS = 5
_SKIPPED = ("dense.partial",)  # vectors being written: not part of a commit


@dataclass(frozen=True)
class SnapshotSummary:
    """What a snapshot holds."""

    path: str
    generation: int
    shards: int
    segments: int
    n_docs: int
    linked: bool  # hard links (same file system) rather than copies


def _copy_file(src: Path, dst: Path, link: bool) -> bool:
    """Link (or, across file systems, copy) ``src`` to ``dst``; whether it was linked."""
    if link:
        try:
            os.link(src, dst)
            return True
        except OSError as exc:
            if exc.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP):
                raise
    shutil.copyfile(src, dst)
    return False


def _copy_tree(src: Path, dst: Path, link: bool) -> bool:
    dst.mkdir()
    linked = True
    for p in sorted(src.iterdir()):
        if p.name.startswith(".") or p.name in _SKIPPED:
            continue
        if p.is_dir():
            linked &= _copy_tree(p, dst / p.name, link)
        else:
            linked &= _copy_file(p, dst / p.name, link)
    return linked


def _copy_commit(src: Path, dst: Path, commit: CommitManifest) -> bool:
    """The files of ``commit`` of the collection ``src`` into the empty directory ``dst``."""
    linked = True
    (dst / SEGMENTS_DIR).mkdir()
    for entry in commit.segments:
        linked &= _copy_tree(src / SEGMENTS_DIR / entry.name, dst / SEGMENTS_DIR / entry.name, True)
        if entry.deleted:
            (dst / entry.deleted).parent.mkdir(exist_ok=True)
            linked &= _copy_file(src / entry.deleted, dst / entry.deleted, True)
    (dst / "deletes").mkdir(exist_ok=True)
    if commit.stats_dir:
        linked &= _copy_tree(src / commit.stats_dir, dst / commit.stats_dir, True)
    with (src / TERMS_FILE).open("rb") as fh:  # appended by writers: the commit's part only
        terms = fh.read(commit.terms_bytes)
    if len(terms) != commit.terms_bytes:
        raise FileNotFoundError(src / TERMS_FILE)  # cut back by a writer: read the commit again
    (dst / TERMS_FILE).write_bytes(terms)
    write_commit(dst, commit)
    return linked


def _clear(directory: Path) -> None:
    for p in directory.iterdir():
        if p.is_dir():
            shutil.rmtree(p)
        else:
            p.unlink()


def snapshot_collection(src: str | Path, out: str | Path) -> SnapshotSummary:
    """Copy the current commit of the collection ``src`` to ``out`` (which must not exist),
    while writers go on; the copy is checked by opening it."""
    src, out = Path(src), Path(out)
    if not is_collection(src):
        raise InvalidInputError(f"{src} is not a collection (no collection.json)")
    if out.exists():
        raise ConflictError(f"{out} exists; a snapshot is written to a new directory")
    with atomic_directory(out) as tmp:
        for attempt in range(_ATTEMPTS):
            commit = read_commit(src)
            try:
                linked = _copy_commit(src, tmp, commit)
                # opens every segment, tombstones and statistics: the copy is whole
                n_docs = Collection(tmp).snapshot.n_docs
                break
            except (FileNotFoundError, ClirError):
                # a writer committed and removed files of this commit before they were
                # linked: copy the newer commit instead (the same commit: really damaged)
                if read_commit(src).generation == commit.generation:
                    raise
                if attempt == _ATTEMPTS - 1:
                    raise ConflictError(
                        f"{src} changed under {_ATTEMPTS} snapshots in a row; try again when "
                        "fewer merges run"
                    ) from None
                _clear(tmp)
        if n_docs != commit.n_docs:
            raise ConflictError(f"the snapshot holds {n_docs} documents, not {commit.n_docs}")
    return SnapshotSummary(
        str(out), commit.generation, commit.shards, len(commit.segments), commit.n_docs, linked
    )


def restore_collection(
    snapshot: str | Path, target: str | Path, *, force: bool = False
) -> WriteSummary | SnapshotSummary:
    """Put the snapshot (or any collection) ``snapshot`` back at ``target``: a copy when
    ``target`` does not exist; over a collection (with ``force``) one new commit of it
    holding exactly the snapshot's documents, which a running service switches to."""
    snapshot, target = Path(snapshot), Path(target)
    if not is_collection(snapshot):
        raise InvalidInputError(f"{snapshot} is not a collection (no collection.json)")
    source = Collection(snapshot)  # refuses a damaged collection, naming the file
    if not target.exists():
        return snapshot_collection(snapshot, target)
    if not is_collection(target):
        raise ConflictError(f"{target} exists and is not a collection; restore to a new path")
    if not force:
        commit = read_commit(target)
        raise ConflictError(
            f"{target} is a collection ({commit.n_docs} documents, generation "
            f"{commit.generation}); restoring replaces every document: --force restores "
            "over it as a new generation"
        )
    commit = source.snapshot.commit
    with CollectionWriter(target) as w:
        w.replace_all(BuildParams(**commit.build), commit.shards)
        w.import_segments(source.snapshot)
        return w.commit()
