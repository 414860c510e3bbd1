"""Dense vectors beside an index's postings: the on-disk format, the resumable build, search.

An index directory (a whole index, or a segment of a collection) may hold a ``dense/``
directory: the int8 vectors of its documents' passages (:mod:`service.dense.passages`), one
scale per row, and ``doc_ptr`` (the passages of document ``i`` are rows
``doc_ptr[i]:doc_ptr[i+1]``), written atomically as every array directory here
(:mod:`service.core.arraydir`). Its manifest names the encoder that made them
(:meth:`~service.dense.encoders.Encoder.signature`), the passage parameters and the
fingerprint of the index's documents (the SHA-256 of its ids): vectors of other documents are
never searched. An index without them serves lexically.

Embedding is the slow part (a few documents a second on two cores), so the build writes one
chunk of documents at a time under ``dense.partial/`` (each chunk renamed into place when
complete) and a build that stops — killed, interrupted, out of power — starts again where the
last complete chunk ends; only when every chunk is there are they assembled into ``dense/``.

Vectors are never made twice for one document: an index built from others' documents — a
collection's merged segment — takes their rows as they are (:func:`gather_vectors`, the int8
codes and scales copied, the passage table rebuilt) and writes them with
:func:`write_vectors`, the one writer of the format.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from service.core import arraydir
from service.core.csr import gather_rows
from service.core.jit import Engine
from service.dense.encoders import Encoder
from service.dense.kernels import doc_scores, quantize, top_docs
from service.dense.passages import PassageParams, passages
from service.dense.sketch import (
    Sketch,
    SketchParams,
    build_sketch,
    candidates,
    sketch_scores,
)
from service.errors import ConfigurationError, DataFormatError
from service.index.inverted import InvertedIndex
from service.index.storage import read_manifest as read_index_manifest

FORMAT_NAME = "clir-dense-vectors"
FORMAT_VERSION = 1
DENSE_DIR = "dense"
PARTIAL_DIR = "dense.partial"
CHUNK_DOCS = 128
_HINT = "embed the index again (clir embed --index ... --force)"

Progress = Callable[[int, int, float], None]  # docs done, docs in all, seconds so far


def index_fingerprint(index_dir: str | Path) -> str:
    """What identifies an index's documents: the SHA-256 of its id array (from its manifest)."""
    manifest = read_index_manifest(index_dir)
    spec = manifest["arrays"].get("id_blob", {})
    return f"{manifest['arrays'].get('id_offsets', {}).get('shape')}:{spec.get('sha256')}"


@dataclass(frozen=True)
class DenseVectors:
    """The passage vectors of one index's documents (memory-mapped)."""

    path: Path
    encoder: str  # the encoder's signature
    params: PassageParams
    codes: npt.NDArray[np.int8]
    scales: npt.NDArray[np.float32]
    doc_ptr: npt.NDArray[np.int64]

    @property
    def n_docs(self) -> int:
        return len(self.doc_ptr) - 1

    @property
    def n_passages(self) -> int:
        return len(self.codes)

    def signature(self) -> str:
        return f"enc:{self.encoder}|passages:{self.params.signature()}|int8"

    def scores(
        self, query: npt.NDArray[np.float32], engine: Engine = "compiled", later: float = 0.0
    ) -> Any:
        """Every document's best-passage score for the query vector (each passage after a
        document's first less ``later``)."""
        return doc_scores(self.codes, self.scales, self.doc_ptr, query, engine, later=later)

    def scores_of(self, query: npt.NDArray[np.float32], docs: npt.NDArray[np.int64]) -> Any:
        """The best-passage scores of the documents ``docs`` (in their order)."""
        return doc_scores(self.codes, self.scales, self.doc_ptr, query, docs=docs)

    @cached_property
    def sketch(self) -> Sketch:
        """The sign sketch of the passages (made on first use, kept in memory: an eighth of
        the int8 rows)."""
        return build_sketch(self.codes, self.scales)

    def top(
        self,
        query: npt.NDArray[np.float32],
        depth: int,
        live: npt.NDArray[np.bool_] | None = None,
        engine: Engine = "compiled",
        sketch: SketchParams | None = None,
        later: float = 0.0,
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        """The ``depth`` documents (numbers, best first; ties by number) nearest the query,
        among those ``live``, each scored by its best passage, every passage after its first
        less ``later``: exact, or — when ``sketch`` applies to vectors this large — the exact
        scores of the documents its first pass keeps (the first pass ranks by the best
        passage: a penalty only lowers a document's score, below its best passage's)."""
        if sketch is None or not sketch.applies(self.n_passages, self.n_docs, depth):
            return top_docs(self.scores(query, engine, later), depth, live)
        first = sketch_scores(self.sketch, self.doc_ptr, query, engine)
        kept = candidates(first, sketch.oversample * depth, live)  # in document order
        exact = doc_scores(
            self.codes, self.scales, self.doc_ptr, query, engine, docs=kept, later=later
        )
        best, scores = top_docs(exact, depth)
        return kept[best], scores


def open_vectors(index_dir: str | Path, *, verify: bool = False) -> DenseVectors | None:
    """The vectors of the index at ``index_dir``, or None when it has none. Vectors made for
    other documents (the index was rebuilt since) or damaged are a DataFormatError."""
    index_dir = Path(index_dir)
    path = index_dir / DENSE_DIR
    if not path.is_dir():
        return None
    manifest = arraydir.read_manifest(
        path, what="dense vectors", format_name=FORMAT_NAME, version_key="format_version",
        version=FORMAT_VERSION, hint=_HINT, required=("encoder", "passages", "index"),
    )  # fmt: skip
    if manifest["index"] != index_fingerprint(index_dir):
        raise DataFormatError(
            path / arraydir.MANIFEST, None,
            f"these vectors were made for other documents than the index's; {_HINT}",
        )  # fmt: skip
    arrays = arraydir.load_arrays(path, manifest, verify=verify, hint=_HINT)
    params = PassageParams(**manifest["passages"])
    vectors = DenseVectors(
        path, str(manifest["encoder"]), params, arrays["codes"], arrays["scales"],
        arrays["doc_ptr"],
    )  # fmt: skip
    if vectors.doc_ptr[-1] != vectors.n_passages or np.any(np.diff(vectors.doc_ptr) < 1):
        raise DataFormatError(path / "doc_ptr.npy", None, f"inconsistent passage table; {_HINT}")
    return vectors


def vectors_status(index_dir: str | Path) -> dict[str, Any]:
    """What a build of the index's vectors has done: ``complete``, and when not, the
    documents embedded so far of the documents in all (from the partial chunks)."""
    index_dir = Path(index_dir)
    if (index_dir / DENSE_DIR / arraydir.MANIFEST).is_file():
        return {"complete": True}
    partial = index_dir / PARTIAL_DIR
    done = 0
    if partial.is_dir():
        for f in partial.glob("chunk-*.npz"):
            with np.load(f) as z:
                done += len(z["counts"])
    return {"complete": False, "embedded": done}


def _chunk_file(partial: Path, i: int) -> Path:
    return partial / f"chunk-{i:06d}.npz"


def _partial_params(partial: Path, wanted: dict[str, Any]) -> bool:
    """Whether the partial build at ``partial`` was started with ``wanted``."""
    try:
        return bool(json.loads((partial / "params.json").read_text("utf-8")) == wanted)
    except (OSError, ValueError):
        return False


def build_vectors(
    index: InvertedIndex,
    encoder: Encoder,
    params: PassageParams | None = None,
    *,
    batch: int = 16,
    progress: Progress | None = None,
    force: bool = False,
    limit_seconds: float | None = None,
) -> DenseVectors | None:
    """Embed every document of ``index`` (its titles and texts as stored) and write
    ``dense/`` beside its arrays; resumes a partial build made with the same encoder and
    parameters. ``force``: embed again even when vectors exist. ``limit_seconds``: stop after
    the chunk that passes this time (the build resumes later) and return None."""
    params = params or PassageParams()
    index_dir = Path(index.path)
    target = index_dir / DENSE_DIR
    if target.is_dir() and not force:
        existing = open_vectors(index_dir)
        if (
            existing is not None
            and existing.encoder == encoder.signature()
            and existing.params == params
        ):
            return existing
        made = f"{existing.encoder}, passages {existing.params.signature()}" if existing else ""
        raise ConfigurationError(
            f"{target} holds vectors made otherwise ({made}); embed with --force to replace them"
        )
    wanted = {
        "encoder": encoder.signature(),
        "passages": params.to_json(),
        "index": index_fingerprint(index_dir),
        "chunk_docs": CHUNK_DOCS,
    }
    partial = index_dir / PARTIAL_DIR
    if partial.exists() and (force or not _partial_params(partial, wanted)):
        shutil.rmtree(partial)  # another encoder, other passages or other documents
    partial.mkdir(exist_ok=True)
    (partial / "params.json").write_text(json.dumps(wanted, sort_keys=True), "utf-8")
    n = index.n_docs
    n_chunks = (n + CHUNK_DOCS - 1) // CHUNK_DOCS
    start = time.perf_counter()
    done_before = sum(
        min(CHUNK_DOCS, n - i * CHUNK_DOCS)
        for i in range(n_chunks)
        if _chunk_file(partial, i).is_file()
    )
    done = done_before
    for i in range(n_chunks):
        file = _chunk_file(partial, i)
        if file.is_file():
            continue
        docs = range(i * CHUNK_DOCS, min(n, (i + 1) * CHUNK_DOCS))
        texts: list[str] = []
        counts = np.zeros(len(docs), dtype=np.int64)
        for j, docno in enumerate(docs):
            doc = index.doc(docno)
            pieces = passages(doc.title, doc.text, params)
            counts[j] = len(pieces)
            texts.extend(pieces)
        rows = np.concatenate(
            [encoder.encode_passages(texts[b : b + batch]) for b in range(0, len(texts), batch)]
        )
        tmp = file.with_name(f".{file.name}.tmp")
        with open(tmp, "wb") as fh:
            np.savez(fh, rows=rows, counts=counts)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, file)  # a chunk is there whole or not at all
        done += len(docs)
        elapsed = time.perf_counter() - start
        if progress is not None:
            progress(done - done_before, n - done_before, elapsed)
        if limit_seconds is not None and elapsed > limit_seconds and done < n:
            return None
    return _assemble(index_dir, partial, wanted, n_chunks)


def _assemble(
    index_dir: Path, partial: Path, wanted: dict[str, Any], n_chunks: int
) -> DenseVectors:
    codes: list[np.ndarray] = []
    scales: list[np.ndarray] = []
    counts: list[np.ndarray] = []
    for i in range(n_chunks):
        with np.load(_chunk_file(partial, i)) as z:
            c, s = quantize(z["rows"])
            codes.append(c)
            scales.append(s)
            counts.append(z["counts"])
    all_counts = np.concatenate(counts) if counts else np.zeros(0, np.int64)
    doc_ptr = np.zeros(len(all_counts) + 1, dtype=np.int64)
    np.cumsum(all_counts, out=doc_ptr[1:])
    dim = codes[0].shape[1] if codes else 0
    out = write_vectors(
        index_dir,
        encoder=wanted["encoder"],
        params=PassageParams(**wanted["passages"]),
        index=wanted["index"],
        codes=np.concatenate(codes) if codes else np.zeros((0, dim), np.int8),
        scales=np.concatenate(scales) if scales else np.zeros(0, np.float32),
        doc_ptr=doc_ptr,
    )
    shutil.rmtree(partial)
    return out


def write_vectors(
    index_dir: str | Path,
    *,
    encoder: str,
    params: PassageParams,
    index: str,
    codes: npt.NDArray[np.int8],
    scales: npt.NDArray[np.float32],
    doc_ptr: npt.NDArray[np.int64],
) -> DenseVectors:
    """Write ``dense/`` in the index at ``index_dir`` (atomically): int8 ``codes`` with their
    ``scales``, the passages of document ``i`` rows ``doc_ptr[i]:doc_ptr[i+1]``, made by
    ``encoder`` (its signature) with ``params``, for the documents whose fingerprint
    (:func:`index_fingerprint`) is ``index``; the vectors, opened."""
    manifest = {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "encoder": encoder,
        "passages": params.to_json(),
        "index": index,
        "quantization": "int8 per row, symmetric",
    }
    arraydir.write_array_dir(
        Path(index_dir) / DENSE_DIR,
        {"codes": codes, "scales": scales, "doc_ptr": doc_ptr},
        manifest,
        indent=2,
        sort_keys=True,
    )
    out = open_vectors(index_dir)
    assert out is not None
    return out


def gather_vectors(
    parts: Sequence[tuple[DenseVectors, npt.NDArray[np.int64]]],
    order: npt.NDArray[np.int64] | None = None,
) -> tuple[npt.NDArray[np.int8], npt.NDArray[np.float32], npt.NDArray[np.int64]]:
    """The passage rows of the documents ``rows`` of each part's ``vectors`` — the parts'
    documents one after another, then taken in ``order`` (positions in that sequence) when
    given — as ``(codes, scales, doc_ptr)``: codes and scales copied as they are, the passage
    table rebuilt. The parts' vectors must have one dimension."""
    dims = {v.codes.shape[1] for v, _ in parts}
    if len(dims) > 1:
        raise ValueError(f"vectors of different dimensions: {sorted(dims)}")
    # the parts' passage tables as one over their rows laid end to end
    ptrs: list[npt.NDArray[np.int64]] = []
    picked: list[npt.NDArray[np.int64]] = []
    row_base = doc_base = 0
    for vectors, rows in parts:
        ptrs.append(np.asarray(vectors.doc_ptr[:-1], dtype=np.int64) + row_base)
        picked.append(np.asarray(rows, dtype=np.int64) + doc_base)
        row_base += vectors.n_passages
        doc_base += vectors.n_docs
    ptr = np.concatenate([*ptrs, np.asarray([row_base], dtype=np.int64)])
    docs = np.concatenate(picked) if picked else np.zeros(0, np.int64)
    if order is not None:
        docs = docs[order]
    doc_ptr, positions = gather_rows(ptr, docs)
    codes = np.empty((len(positions), dims.pop() if dims else 0), dtype=np.int8)
    scales = np.empty(len(positions), dtype=np.float32)
    start = 0
    for vectors, _ in parts:  # each part's rows copied from its (memory-mapped) arrays
        end = start + vectors.n_passages
        mine = np.flatnonzero((positions >= start) & (positions < end))
        codes[mine] = vectors.codes[positions[mine] - start]
        scales[mine] = vectors.scales[positions[mine] - start]
        start = end
    return codes, scales, doc_ptr
