"""The collection manifest: which segments, tombstones and statistics make up a commit.

A collection directory holds ``collection.json`` (the current commit), ``terms.txt`` (the
global term dictionary, :mod:`service.collection.terms`), ``segments/<name>/`` (immutable
segments, :mod:`service.collection.segment`), ``deletes/<segment>.<generation>.npy`` (each
segment's deleted document numbers, sorted) and ``stats-<generation>/`` (the global df by
term id). A commit writes every new file first (each fsynced, directories renamed into place
whole), then replaces ``collection.json`` with a rename: the rename is the commit, so a crash
before it leaves the previous commit and some unreferenced files (removed by the next writer),
and a crash after it loses nothing. The manifest also holds what a single index's manifest
holds — the build parameters — and the global statistics N and the total length, so that
every shard scores with the collection's N, average length and df (Hieber & Riezler 2015, §3;
as Elasticsearch's ``dfs_query_then_fetch`` gathers them, but kept current at each commit).

Documents go to shard ``hash(id) mod S`` (BLAKE2b of the UTF-8 id: stable across processes
and machines, unlike Python's ``hash``).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from service.core.arraydir import fsync_dir, read_json_manifest, write_file
from service.errors import DataFormatError

FORMAT_NAME = "clir-collection"
FORMAT_VERSION = 1
MANIFEST = "collection.json"
_HINT = "rebuild it with clir build-index --shards S"


def shard_of(doc_id: str, shards: int) -> int:
    """The shard a document id belongs to (stable across processes and machines)."""
    digest = hashlib.blake2b(doc_id.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little") % shards


@dataclass(frozen=True)
class SegmentEntry:
    """One segment of a commit: its directory name, shard, size and tombstones."""

    name: str
    shard: int
    n_docs: int
    deleted: str | None = None  # file of deleted document numbers, relative to the collection
    n_deleted: int = 0


@dataclass(frozen=True)
class CommitManifest:
    """One commit of a collection (``collection.json``)."""

    generation: int
    shards: int
    build: dict[str, Any]
    next_seq: int
    next_segment: int
    n_terms: int
    terms_bytes: int
    n_docs: int  # live documents: N of BM25
    total_len: int  # their total length: avdl = total_len / n_docs
    stats_dir: str | None
    segments: tuple[SegmentEntry, ...] = field(default_factory=tuple)

    @property
    def avdl(self) -> float:
        return float(self.total_len) / self.n_docs if self.n_docs else 0.0

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["segments"] = [asdict(s) for s in self.segments]
        return {"format": FORMAT_NAME, "format_version": FORMAT_VERSION, **out}


def is_collection(path: str | Path) -> bool:
    """Whether ``path`` is a collection directory (it has a ``collection.json``)."""
    return (Path(path) / MANIFEST).is_file()


def read_commit(path: Path) -> CommitManifest:
    """The current commit of the collection at ``path``."""
    file = path / MANIFEST
    raw = read_json_manifest(
        file, what="collection", format_name=FORMAT_NAME, version_key="format_version",
        version=FORMAT_VERSION, hint=_HINT,
    )  # fmt: skip
    try:
        fields = {k: v for k, v in raw.items() if k not in ("format", "format_version")}
        fields["segments"] = tuple(SegmentEntry(**s) for s in fields["segments"])
        return CommitManifest(**fields)
    except (KeyError, TypeError) as exc:
        raise DataFormatError(file, None, f"missing or bad field ({exc}); {_HINT}") from exc


def write_commit(path: Path, commit: CommitManifest) -> None:
    """Make ``commit`` the current one: write it beside, fsync, rename over the manifest."""
    tmp = path / f".{MANIFEST}.tmp"
    body = json.dumps(commit.to_json(), indent=1, sort_keys=True) + "\n"
    write_file(tmp, body.encode("utf-8"))
    tmp.replace(path / MANIFEST)
    fsync_dir(path)
