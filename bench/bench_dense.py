"""Benchmark of the dense reader's search and of embedding (the two costs of dense retrieval).

**Search** (synthetic int8 vectors, 384 dimensions, 1 to 4 passages per document, seeded): the
exact MaxP top-1000 (:func:`service.dense.kernels.doc_scores` + :func:`top_docs`) at 16 k, 100 k
and 1.2 M documents, p50/p90 over queries, against numpy's float32 matrix–vector product over
the same rows (BLAS; no quantisation, no MaxP: the floor of a plain exact search) timed
alternately in the same process, and the compiled kernel against its Python reference on a
small collection (identical results checked). The 1.2 M case is the scale benchmark's size.

**Embedding** (``--embed``): documents a second of the default encoder by passage length (the
first 300, 600, 1200 and 2400 characters of the same documents, title first), in one process,
alternated per length, so the ratios hold on a busy machine.

Writes ``bench/results/dense.json``; cheap preset ``dense-demo`` (16 k only, no embedding
sample) under results/quick/.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import numpy as np

from bench.common import RESULTS_DIR, ROOT, Help, percentile, write_result
from service.dense.kernels import doc_scores, doc_scores_reference, quantize, top_docs

DIM = 384


@dataclass(frozen=True)
class Params:
    sizes: Annotated[tuple[int, ...], Help("collection sizes (documents)")] = (
        16_455, 100_000, 1_200_000,
    )  # fmt: skip
    queries: Annotated[int, Help("queries per size")] = 30
    depth: Annotated[int, Help("top-k depth")] = 1000
    embed: Annotated[bool, Help("also measure embedding throughput by passage length")] = True
    embed_docs: Annotated[int, Help("documents per length in the embedding sample")] = 24
    out: Annotated[Path, Help("result file")] = RESULTS_DIR / "dense.json"


def _collection(n_docs: int, seed: int) -> tuple[Any, Any, Any]:
    rng = np.random.default_rng(seed)
    counts = rng.integers(1, 5, size=n_docs)
    doc_ptr = np.zeros(n_docs + 1, dtype=np.int64)
    np.cumsum(counts, out=doc_ptr[1:])
    codes = np.empty((int(doc_ptr[-1]), DIM), dtype=np.int8)
    scales = np.empty(len(codes), dtype=np.float32)
    for start in range(0, len(codes), 200_000):  # bounded memory while quantising
        rows = rng.normal(size=(min(200_000, len(codes) - start), DIM)).astype(np.float32)
        codes[start : start + len(rows)], scales[start : start + len(rows)] = quantize(rows)
    return codes, scales, doc_ptr


def search(p: Params) -> dict[str, Any]:
    out: dict[str, Any] = {}
    rng = np.random.default_rng(0)
    small = _collection(300, 1)
    q = rng.normal(size=DIM).astype(np.float32)
    q /= np.linalg.norm(q)
    t0 = time.perf_counter()
    ref = doc_scores_reference(*small, q)
    t1 = time.perf_counter()
    fast = doc_scores(*small, q)
    t2 = time.perf_counter()
    fast = doc_scores(*small, q)
    t3 = time.perf_counter()
    assert np.array_equal(ref, fast)
    out["reference_vs_compiled_300_docs"] = {
        "reference_ms": (t1 - t0) * 1000, "compiled_ms": (t3 - t2) * 1000,
        "speedup": round((t1 - t0) / max(t3 - t2, 1e-9)), "identical": True,
    }  # fmt: skip
    for n in p.sizes:
        codes, scales, doc_ptr = _collection(n, n)
        floats = (codes.astype(np.float32) * scales[:, None]) if n <= 200_000 else None
        ours, blas = [], []
        for _ in range(p.queries):
            q = rng.normal(size=DIM).astype(np.float32)
            q /= np.linalg.norm(q)
            t0 = time.perf_counter()
            top_docs(doc_scores(codes, scales, doc_ptr, q), p.depth)
            t1 = time.perf_counter()
            ours.append((t1 - t0) * 1000)
            if floats is not None:
                t0 = time.perf_counter()
                s = floats @ q
                np.argpartition(s, len(s) - p.depth)[-p.depth :]
                blas.append((time.perf_counter() - t0) * 1000)
        entry: dict[str, Any] = {
            "passages": len(codes), "int8_mb": round(codes.nbytes / 2**20, 1),
            "ours_ms": {"p50": percentile(ours, 50), "p90": percentile(ours, 90)},
        }  # fmt: skip
        if blas:
            entry["float32_blas_ms"] = {"p50": percentile(blas, 50), "p90": percentile(blas, 90)}
            entry["ratio_p50"] = round(percentile(ours, 50) / percentile(blas, 50), 3)
        out[str(n)] = entry
        print(n, entry, flush=True)
        del codes, scales, doc_ptr, floats
    return out


def embed(p: Params) -> dict[str, Any]:
    from service.dense.encoders import get_encoder
    from service.index.inverted import InvertedIndex

    enc = get_encoder()
    index = InvertedIndex.load(ROOT / "indexes" / "demo")
    docs = [index.doc(i) for i in range(0, index.n_docs, max(1, index.n_docs // 400))]
    docs = [d for d in docs if len(d.text) >= 2400][: p.embed_docs]
    lengths = (300, 600, 1200, 2400)
    seconds = dict.fromkeys(lengths, 0.0)
    enc.encode_passages(["warm up"])
    for i in range(0, len(docs), 4):  # alternate the lengths, four documents at a time
        for n in lengths:
            texts = [f"{d.title}\n{d.text[:n]}" for d in docs[i : i + 4]]
            t0 = time.perf_counter()
            enc.encode_passages(texts)
            seconds[n] += time.perf_counter() - t0
    rate = {n: len(docs) / seconds[n] for n in lengths}
    return {
        "encoder": enc.signature(), "documents": len(docs),
        "docs_per_s": {str(n): round(r, 2) for n, r in rate.items()},
        "relative_to_1200": {str(n): round(rate[n] / rate[1200], 2) for n in lengths},
    }  # fmt: skip


def run(p: Params) -> None:
    result: dict[str, Any] = {"search": search(p)}
    if p.embed:
        result["embed"] = embed(p)
        print(result["embed"], flush=True)
    write_result(p.out, result, p)
    print(p.out)
