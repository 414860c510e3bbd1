"""Segments: immutable pieces of a collection, each an index directory in the index format.

A segment (Lucene's unit of a live index) holds a batch of documents as
:mod:`service.index.build` indexes them — sorted vocabulary, term-major postings with term
frequencies, document lengths, ids, titles, texts — but no statistics of its own: its BM25
weights are computed when read from the collection's N, average length and df
(:class:`service.index.inverted.ScoringStats`; Robertson & Zaragoza 2009, §3, the BM25 of
Hieber & Riezler 2015, §3). So an add writes only the new documents and never rewrites a
weight already on disk. Beside the index arrays a segment stores

* ``gid``: the global term id (:mod:`service.collection.terms`) of each of its terms, and
* ``seq``: each document's sequence number in the collection (ascending within a segment),
  the order a single index built from the same documents would number them in: ties between
  equal scores go to the smaller one everywhere, so a collection ranks exactly like one index;
* ``id_hash``/``id_hash_docno``: a 64-bit hash of each document's id, sorted, and the document
  it belongs to (:class:`IdTable`), so finding a document by id (a replace, a delete, a
  document view) is a binary search in a memory-mapped array, not a dictionary of every id
  of the collection in memory.

Deleted documents are not removed from a segment; the commit lists them (tombstones) and
:meth:`Segment.view` leaves them out of every posting. :func:`merge_segments` writes one
segment from several without their deleted documents, from the arrays (nothing is
tokenised again), and their dense vectors (``dense/``, :mod:`service.dense.vectors`) when
every one has them from one encoder with one passage cutting: the live documents' rows
copied in the merged order (nothing is embedded again; the documents of a merge in which a
segment had none yet are embedded by the next ``clir embed``).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from functools import cached_property, partial
from hashlib import blake2b
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from service.collection.terms import TermDictionary
from service.core.csr import ptr_from_counts
from service.dense.vectors import (
    DENSE_DIR,
    gather_vectors,
    index_fingerprint,
    open_vectors,
    write_vectors,
)
from service.errors import ClirError, DataFormatError
from service.index.build import BuildParams, build_arrays
from service.index.inverted import InvertedIndex, ScoringStats, blob_string
from service.index.storage import load_arrays, read_manifest, write_index_dir
from service.index.tokenizers import TokenizeFn, get_index_tokenizer
from service.index.vocab import Vocabulary, encode_terms
from service.records import Doc

Int64Array = npt.NDArray[np.int64]
_NOT_STORED = ("rsj", "post_weight")  # statistics of the segment alone: never used
WHOLE_SEGMENT = "index"  # the name of an index built whole, as a collection's one segment


def id_hash(doc_id: bytes) -> int:
    """A document id's 64-bit hash (BLAKE2b: stable across processes and machines)."""
    return int.from_bytes(blake2b(doc_id, digest_size=8).digest(), "little")


def id_hashes(ids: Iterable[bytes]) -> npt.NDArray[np.uint64]:
    return np.fromiter((id_hash(i) for i in ids), dtype=np.uint64)


def _blob_items(blob: np.ndarray, offsets: np.ndarray) -> list[bytes]:
    raw, off = bytes(blob), offsets.tolist()
    return [raw[off[i] : off[i + 1]] for i in range(len(off) - 1)]


@dataclass(frozen=True)
class IdTable:
    """Documents by id: their ids' hashes sorted, the document of each, and the id of a
    document (to tell two ids with one hash apart)."""

    hashes: npt.NDArray[np.uint64]
    docnos: npt.NDArray[np.int64]
    id_of: Callable[[int], str]

    @classmethod
    def of(cls, ids: Sequence[bytes], id_of: Callable[[int], str]) -> IdTable:
        hashes = id_hashes(ids)
        order = np.argsort(hashes, kind="stable")
        return cls(hashes[order], order.astype(np.int64), id_of)

    def find(
        self, ids: Sequence[str], hashes: npt.NDArray[np.uint64] | None = None
    ) -> list[tuple[int, int]]:
        """``(i, docno)`` for each of ``ids`` held here (``hashes``: their :func:`id_hash`)."""
        if hashes is None:
            hashes = id_hashes(i.encode("utf-8") for i in ids)
        left = np.searchsorted(self.hashes, hashes, side="left")
        right = np.searchsorted(self.hashes, hashes, side="right")
        out: list[tuple[int, int]] = []
        for i in np.flatnonzero(right > left).tolist():
            for pos in range(int(left[i]), int(right[i])):
                docno = int(self.docnos[pos])
                if self.id_of(docno) == ids[i]:
                    out.append((i, docno))
        return out


def index_documents(
    docs: Sequence[Doc], params: BuildParams, tokenize: TokenizeFn | None = None
) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """The arrays of a segment of ``docs`` before global term ids and sequence numbers (the
    expensive part, tokenising: run in a worker process by a parallel writer)."""
    fn = tokenize if tokenize is not None else get_index_tokenizer(params.tokenizer)
    arrays, counts = build_arrays(
        docs, fn, k1=params.k1, b=params.b, rsj_policy=params.rsj,
        keep_tokens=params.keep_tokens, analysis=params.analysis,
        where=params.source_name or "<documents>", title_weight=params.title_weight,
    )  # fmt: skip
    for key in _NOT_STORED:
        arrays.pop(key)
    return arrays, counts


def store_segment(
    target: Path,
    indexed: tuple[dict[str, np.ndarray], dict[str, Any]],
    params: BuildParams,
    terms: TermDictionary,
    seqs: Sequence[int],
    *,
    name: str,
    shard: int,
) -> int:
    """Write an :func:`index_documents` result as the segment ``target`` (atomically), its
    terms given global ids and its documents the sequence numbers ``seqs`` (ascending); the
    number of documents."""
    arrays, counts = indexed
    vocab = Vocabulary(arrays["vocab_blob"], arrays["vocab_offsets"], str(target))
    arrays["gid"] = terms.ids(vocab.terms())
    n = int(counts["n_docs"])
    arrays["seq"] = np.asarray(seqs, dtype=np.int64)
    if len(arrays["seq"]) != n:
        raise ValueError(f"{len(arrays['seq'])} sequence numbers for {n} documents")
    _write(target, arrays, params, counts, name, shard)
    return n


def _write(
    target: Path,
    arrays: dict[str, np.ndarray],
    params: BuildParams,
    counts: dict[str, Any],
    name: str,
    shard: int,
) -> None:
    table = IdTable.of(_blob_items(arrays["id_blob"], arrays["id_offsets"]), str)
    arrays["id_hash"], arrays["id_hash_docno"] = table.hashes, table.docnos
    manifest = {
        "build": asdict(params),
        "counts": counts,
        "segment": {"name": name, "shard": shard},
    }
    write_index_dir(target, arrays, manifest)


def copy_segment(
    target: Path,
    source: Segment,
    params: BuildParams,
    terms: TermDictionary,
    seq_offset: int,
    *,
    name: str,
    shard: int,
) -> int:
    """Write ``source`` (a segment of another collection, or of an older generation) as the
    segment ``target``: its terms given this collection's global ids, its sequence numbers
    shifted by ``seq_offset``, its dense vectors copied (they belong to the same documents);
    the number of documents. Nothing is tokenised or embedded again."""
    arrays = {k: np.asarray(v) for k, v in source.arrays.items()}
    arrays["gid"] = terms.ids(source.terms())
    arrays["seq"] = source.seq + seq_offset
    _write(target, arrays, params, dict(source.manifest["counts"]), name, shard)
    vectors = source.path / DENSE_DIR
    if vectors.is_dir():
        tmp = target / f".{DENSE_DIR}.tmp"
        shutil.copytree(vectors, tmp)
        tmp.rename(target / DENSE_DIR)
    return source.n_docs


class Segment:
    """One segment's arrays, memory-mapped; :meth:`view` scores them with global statistics."""

    #: the index built whole this segment is (:meth:`of_index`), which finds its documents
    #: by id itself; None for a segment of a collection
    whole: InvertedIndex | None = None

    def __init__(self, path: Path, verify: bool = False) -> None:
        self.path = path
        self.manifest = read_manifest(path)
        self.arrays = {
            k: np.asarray(v) for k, v in load_arrays(path, self.manifest, verify).items()
        }
        self._read_fields()

    @classmethod
    def of_index(cls, index: InvertedIndex) -> Segment:
        """An index built whole as the one segment of a collection: its terms are the
        collection's (global id = term id), its documents numbered in their order (sequence
        number = document number); nothing is copied."""
        seg = cls.__new__(cls)
        seg.path, seg.manifest = index.path, dict(index.manifest)
        seg.manifest["segment"] = {"name": WHOLE_SEGMENT, "shard": 0}
        seg.arrays = dict(index.arrays)
        seg.arrays["gid"] = np.arange(index.n_terms, dtype=np.int64)
        seg.arrays["seq"] = np.arange(index.n_docs, dtype=np.int64)
        seg.whole = index
        seg._read_fields()
        return seg

    def _read_fields(self) -> None:
        path = self.path
        try:
            info = self.manifest["segment"]
            self.name: str = str(info["name"])
            self.shard: int = int(info["shard"])
            self.n_docs: int = int(self.manifest["counts"]["n_docs"])
            self.gid: Int64Array = self.arrays["gid"]
            self.seq: Int64Array = self.arrays["seq"]
        except (KeyError, TypeError, ValueError) as exc:
            raise DataFormatError(path / "manifest.json", None, f"not a segment ({exc})") from exc
        if len(self.seq) != self.n_docs or np.any(np.diff(self.seq) <= 0):
            raise DataFormatError(path / "seq.npy", None, "sequence numbers must ascend")
        self.doc_len: npt.NDArray[np.int32] = self.arrays["doc_len"]
        self.df: npt.NDArray[np.int32] = self.arrays["df"]
        if len(self.gid) != len(self.df):
            raise DataFormatError(path / "gid.npy", None, "one global id per term expected")

    def posting_terms(self) -> npt.NDArray[np.int32]:
        """The local term of every posting (term-major CSR expanded; 4 bytes a posting, so
        computed when needed, never kept)."""
        off = self.arrays["post_offsets"]
        return np.repeat(np.arange(len(off) - 1, dtype=np.int32), np.diff(off))

    def live_df(self, deleted: npt.NDArray[np.integer[Any]] | None) -> npt.NDArray[np.int64]:
        """The df of each local term over the documents not ``deleted``."""
        df = self.df.astype(np.int64)
        if deleted is None or len(deleted) == 0:
            return df
        dead = np.zeros(self.n_docs, dtype=np.bool_)
        dead[deleted] = True
        gone = dead[self.arrays["post_docs"]]
        return df - np.bincount(self.posting_terms()[gone], minlength=len(df))

    def live_length(self, deleted: npt.NDArray[np.integer[Any]] | None) -> int:
        """The total length of the documents not ``deleted``."""
        total = int(self.doc_len.sum(dtype=np.int64))
        if deleted is not None and len(deleted):
            total -= int(self.doc_len[deleted].sum(dtype=np.int64))
        return total

    def view(
        self,
        n_docs: int,
        avdl: float,
        global_df: npt.NDArray[np.integer[Any]],
        deleted: npt.NDArray[np.integer[Any]] | None,
    ) -> InvertedIndex:
        """This segment as an index scoring with the collection's statistics (N ``n_docs``,
        ``avdl``, df by global id) without its ``deleted`` documents."""
        live = None
        if deleted is not None and len(deleted):
            live = np.ones(self.n_docs, dtype=np.bool_)
            live[deleted] = False
        stats = ScoringStats(n_docs, avdl, global_df[self.gid], live)
        return InvertedIndex(self.path, self.manifest, self.arrays, stats=stats)

    def doc_id(self, docno: int) -> str:
        return blob_string(self.arrays, "id", docno)

    @cached_property
    def ids(self) -> IdTable:
        """The segment's documents by id (deleted documents included). Its id reader holds
        the arrays, not the segment: no reference cycle keeps a dropped segment's memory maps
        open until the garbage collector's next full pass."""
        id_of = partial(blob_string, self.arrays, "id")
        if "id_hash" in self.arrays:  # memory-mapped
            return IdTable(self.arrays["id_hash"], self.arrays["id_hash_docno"], id_of)
        items = _blob_items(self.arrays["id_blob"], self.arrays["id_offsets"])
        return IdTable.of(items, id_of)  # a segment written before the table was stored

    def find(self, doc_id: str) -> int | None:
        """The document number of ``doc_id`` here (deleted or not), or None."""
        if self.whole is not None:  # the index's own table (no id hashed again)
            return self.whole.find(doc_id)
        found = self.ids.find([doc_id])
        return found[0][1] if found else None

    def terms(self) -> list[str]:
        return Vocabulary(self.arrays["vocab_blob"], self.arrays["vocab_offsets"]).terms()


# --- merging ----------------------------------------------------------------------------------


def _gather_blob(
    parts: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]],
) -> tuple[npt.NDArray[np.uint8], Int64Array]:
    """Concatenate the strings ``rows`` of each ``(blob, offsets, rows)`` into one blob."""
    chunks: list[bytes] = []
    lengths: list[int] = []
    for blob, off, rows in parts:
        o = off.tolist()
        raw = bytes(blob)
        for r in rows.tolist():
            chunks.append(raw[o[r] : o[r + 1]])
            lengths.append(o[r + 1] - o[r])
    data = b"".join(chunks)
    return np.frombuffer(data, dtype=np.uint8).copy(), ptr_from_counts(
        np.asarray(lengths, dtype=np.int64)
    )


def _live_order(
    segments: Sequence[Segment], deleted: Sequence[npt.NDArray[np.integer[Any]] | None]
) -> tuple[list[Int64Array], Int64Array, Int64Array, list[npt.NDArray[np.int32]]]:
    """The live rows of each segment, their sequence numbers (segment by segment), the order
    that sorts those by sequence, and each source row's new document number (−1: deleted)."""
    keep_rows: list[Int64Array] = []
    for seg, dead in zip(segments, deleted, strict=True):
        live = np.ones(seg.n_docs, dtype=np.bool_)
        if dead is not None and len(dead):
            live[dead] = False
        keep_rows.append(np.flatnonzero(live).astype(np.int64))
    seqs = np.concatenate([s.seq[r] for s, r in zip(segments, keep_rows, strict=True)])
    order = np.argsort(seqs, kind="stable")
    inverse = np.empty(len(seqs), dtype=np.int64)
    inverse[order] = np.arange(len(seqs), dtype=np.int64)
    new_docno: list[npt.NDArray[np.int32]] = []
    base = 0
    for seg, rows in zip(segments, keep_rows, strict=True):
        m = np.full(seg.n_docs, -1, dtype=np.int32)
        m[rows] = inverse[base : base + len(rows)]
        new_docno.append(m)
        base += len(rows)
    return keep_rows, seqs, order, new_docno


@dataclass
class _MergedTerms:
    """The merged vocabulary and postings: ``final`` terms (those a live document holds),
    their global ids, and per source segment the map of its term ids to merged ones."""

    final: list[str]
    gid: npt.NDArray[np.int64]
    remap: list[npt.NDArray[np.int32]]  # source term id -> merged id (before dropping unused)
    renum: npt.NDArray[np.int32]  # merged id -> final id
    arrays: dict[str, np.ndarray]


def _merge_postings(
    segments: Sequence[Segment], new_docno: list[npt.NDArray[np.int32]]
) -> _MergedTerms:
    """Postings of the live documents under merged term ids, sorted by (term, document); in
    32-bit arrays, freed as soon as they are used (a merge's memory is its postings). The
    vocabulary is the union of the terms that still occur in a live document."""
    source_terms = [seg.terms() for seg in segments]
    term_gid: dict[str, int] = {}
    for seg, terms in zip(segments, source_terms, strict=True):
        for t, g in zip(terms, seg.gid.tolist(), strict=True):
            term_gid.setdefault(t, g)
    merged_terms = sorted(term_gid)
    local_of = {t: i for i, t in enumerate(merged_terms)}
    p_terms, p_docs, p_tfs, remaps = [], [], [], []
    for seg, terms, m32 in zip(segments, source_terms, new_docno, strict=True):
        remap = np.asarray([local_of[t] for t in terms], dtype=np.int32)
        docs = m32[seg.arrays["post_docs"]]
        alive = docs >= 0
        p_terms.append(remap[seg.posting_terms()[alive]])
        p_docs.append(docs[alive])
        p_tfs.append(seg.arrays["post_tf"][alive].astype(np.int32))
        remaps.append(remap)
    terms_all = np.concatenate(p_terms)
    docs_all = np.concatenate(p_docs)
    tfs_all = np.concatenate(p_tfs)
    del p_terms, p_docs, p_tfs
    # drop terms no live document holds
    used = np.zeros(len(merged_terms), dtype=np.bool_)
    used[terms_all] = True
    renum = (np.cumsum(used) - 1).astype(np.int32)
    final_terms = [t for t, u in zip(merged_terms, used.tolist(), strict=True) if u]
    terms_all = renum[terms_all]
    post_order = np.lexsort((docs_all, terms_all))
    terms_all, docs_all, tfs_all = terms_all[post_order], docs_all[post_order], tfs_all[post_order]
    del post_order
    n_terms = len(final_terms)
    vocab_blob, vocab_offsets = encode_terms(final_terms)
    tf_dtype = np.uint16 if tfs_all.size == 0 or tfs_all.max() <= 0xFFFF else np.int32
    counts = np.bincount(terms_all, minlength=n_terms)
    arrays: dict[str, np.ndarray] = {
        "vocab_blob": vocab_blob,
        "vocab_offsets": vocab_offsets,
        "df": counts.astype(np.int32),
        "post_offsets": ptr_from_counts(counts),
        "post_docs": docs_all.astype(np.int32),
        "post_tf": tfs_all.astype(tf_dtype),
    }
    gid = np.asarray([term_gid[t] for t in final_terms], dtype=np.int64)
    return _MergedTerms(final_terms, gid, remaps, renum, arrays)


def _merge_doc_arrays(
    segments: Sequence[Segment], keep_rows: list[Int64Array], order: Int64Array
) -> tuple[dict[str, np.ndarray], list[str]]:
    """The per-document arrays of the live documents in sequence order: lengths, sources
    (one table, every document's index into it) and the id, title and text blobs."""
    sources: list[str] = []
    src_parts = []
    for seg in segments:
        ids = []
        for s in (str(x) for x in seg.manifest["counts"]["sources"]):
            if s not in sources:
                sources.append(s)
            ids.append(sources.index(s))
        src_parts.append(np.asarray(ids, dtype=np.uint16))
    pairs = list(zip(segments, keep_rows, strict=True))
    doc_source = np.concatenate(
        [src_parts[i][s.arrays["doc_source"][r]] for i, (s, r) in enumerate(pairs)]
    )[order]
    arrays: dict[str, np.ndarray] = {
        "doc_len": np.concatenate([s.arrays["doc_len"][r] for s, r in pairs])[order].astype(
            np.int32
        ),
        "doc_source": doc_source.astype(np.uint16),
    }
    for field in ("id", "title", "text"):
        blob, off = _gather_blob([(s.arrays[f"{field}_blob"], s.arrays[f"{field}_offsets"], r)
                                  for s, r in pairs])  # fmt: skip
        # the blob was gathered segment by segment: reorder to sequence order
        lengths = np.diff(off)[order]
        starts = off[:-1][order]
        arrays[f"{field}_blob"] = (
            np.concatenate(
                [blob[a : a + n_] for a, n_ in zip(starts.tolist(), lengths.tolist(), strict=True)]
            )
            if len(order)
            else blob
        )
        arrays[f"{field}_offsets"] = ptr_from_counts(lengths)
    return arrays, sources


def _merge_tokens(
    segments: Sequence[Segment], keep_rows: list[Int64Array], order: Int64Array, t: _MergedTerms
) -> dict[str, np.ndarray]:
    """Every live document's token ids (kept for feedback), under the final term ids."""
    seq_tokens: list[np.ndarray] = []
    for seg, rows, remap in zip(segments, keep_rows, t.remap, strict=True):
        off = seg.arrays["tokens_offsets"]
        toks = seg.arrays["tokens"]
        for r in rows.tolist():
            seq_tokens.append(t.renum[remap[toks[off[r] : off[r + 1]]]])
    seq_tokens = [seq_tokens[i] for i in order.tolist()]
    return {
        "tokens_offsets": ptr_from_counts([len(x) for x in seq_tokens]),
        "tokens": (
            np.concatenate(seq_tokens).astype(np.int32) if seq_tokens else np.zeros(0, np.int32)
        ),
    }


def merge_segments(
    target: Path,
    segments: Sequence[Segment],
    deleted: Sequence[npt.NDArray[np.integer[Any]] | None],
    *,
    name: str,
    shard: int,
) -> int:
    """Write the live documents of ``segments`` (in sequence order) as one segment at
    ``target``; the number of documents written."""
    params = BuildParams(**segments[0].manifest["build"])
    keep_rows, seqs, order, new_docno = _live_order(segments, deleted)
    n = len(seqs)
    terms = _merge_postings(segments, new_docno)
    docs, sources = _merge_doc_arrays(segments, keep_rows, order)
    arrays = {**terms.arrays, **docs}
    if params.keep_tokens:
        arrays.update(_merge_tokens(segments, keep_rows, order, terms))
    arrays["gid"] = terms.gid
    arrays["seq"] = seqs[order].astype(np.int64)
    lengths_all = arrays["doc_len"]
    counts = {
        "n_docs": n,
        "n_terms": len(terms.final),
        "n_postings": int(arrays["post_docs"].size),
        "n_tokens": int(lengths_all.sum()),
        "avdl": float(lengths_all.sum()) / n if n else 0.0,
        "sources": sources,
    }
    _write(target, arrays, params, counts, name, shard)
    merge_vectors(target, segments, keep_rows, order)
    return n


def merge_vectors(
    target: Path,
    segments: Sequence[Segment],
    keep_rows: Sequence[Int64Array],
    order: Int64Array,
) -> bool:
    """Write the dense vectors of the merged segment at ``target`` from its sources' —
    the rows of the documents ``keep_rows`` of each, taken in ``order`` (as the merge took
    the documents) — when every source has vectors from one encoder with one passage
    cutting; whether it did (else the merged segment has none: it is embedded later)."""
    found = []
    for seg in segments:
        try:
            vectors = open_vectors(seg.path)
        except ClirError:
            return False  # made for other documents or damaged: embedded again, later
        if vectors is None:
            return False
        found.append(vectors)
    first = found[0]
    if any((v.encoder, v.params) != (first.encoder, first.params) for v in found):
        return False
    if len({v.codes.shape[1] for v in found}) > 1:
        return False
    codes, scales, doc_ptr = gather_vectors(list(zip(found, keep_rows, strict=True)), order)
    write_vectors(
        target, encoder=first.encoder, params=first.params, index=index_fingerprint(target),
        codes=codes, scales=scales, doc_ptr=doc_ptr,
    )  # fmt: skip
    return True
