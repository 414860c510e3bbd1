"""Benchmark of the dense reader's search and of embedding (the two costs of dense retrieval).

**Search** (synthetic int8 vectors, 384 dimensions, 1 to 4 passages per document, seeded): the
exact MaxP top-1000 (:func:`service.dense.kernels.doc_scores` + :func:`top_docs`) at 16 k, 100 k
and 1.2 M documents, p50/p90 over queries, against numpy's float32 matrix–vector product over
the same rows (BLAS; no quantisation, no MaxP: the floor of a plain exact search) timed
alternately in the same process, and the compiled kernel against its Python reference on a
small collection (identical results checked). The 1.2 M case is the scale benchmark's size.

**Sketch** (:mod:`service.dense.sketch`): at the sizes where its first pass applies (more
passages than ``--sketch-above``, fewer than ``oversample`` × depth documents), the two-pass
top-k timed alternately with the exact one in the same process (ratio), and the time and memory
of making the sketch. **Recall** (``--recall``): on real vectors (every index under
``--real``; an index being embedded counts with the chunks written so far), queries embedded
by the default encoder — the dev sets' English questions and the titles of the dev pages —
and, per depth and oversampling, the share of the exact top-k the two passes return.

**The dense stage per query** (``--recall``, the same queries): embedding the query (what a
search adds before the top-k) for short queries (the dev pages' English titles), questions
and paragraphs (the English title and first paragraph of each dev page, cut to 60 words as the
query sets are), p50/p90 with the encoder's default threads; with the exact
top-100 at 16 k documents above making the stage.

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

from bench.common import DATA, RESULTS_DIR, ROOT, Help, percentile, write_result
from service.dense.kernels import doc_scores, doc_scores_reference, quantize
from service.dense.passages import PassageParams
from service.dense.sketch import SketchParams
from service.dense.vectors import PARTIAL_DIR, DenseVectors, open_vectors

DIM = 384


@dataclass(frozen=True)
class Params:
    sizes: Annotated[tuple[int, ...], Help("collection sizes (documents)")] = (
        16_455, 100_000, 1_200_000,
    )  # fmt: skip
    queries: Annotated[int, Help("queries per size")] = 30
    depth: Annotated[int, Help("top-k depth")] = 1000
    sketch_oversample: Annotated[int, Help("the sketch's candidates per result")] = 50
    sketch_above: Annotated[int, Help("the sketch applies above this many passages")] = 500_000
    recall: Annotated[bool, Help("also measure the sketch's recall on real vectors")] = True
    real: Annotated[tuple[str, ...], Help("indexes whose real vectors the recall reads")] = (
        "indexes/demo", "indexes/docs",
    )  # fmt: skip
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
    sketch = SketchParams(p.sketch_above, p.sketch_oversample)
    for n in p.sizes:
        codes, scales, doc_ptr = _collection(n, n)
        floats = (codes.astype(np.float32) * scales[:, None]) if n <= 200_000 else None
        vectors = DenseVectors(Path("."), "synthetic", PassageParams(), codes, scales, doc_ptr)
        two_pass = sketch.applies(len(codes), n, p.depth)
        sketch_s = 0.0
        if two_pass:
            t0 = time.perf_counter()
            made = vectors.sketch
            sketch_s = time.perf_counter() - t0
        ours, blas, sketched = [], [], []
        for _ in range(p.queries):
            q = rng.normal(size=DIM).astype(np.float32)
            q /= np.linalg.norm(q)
            t0 = time.perf_counter()
            vectors.top(q, p.depth)
            t1 = time.perf_counter()
            ours.append((t1 - t0) * 1000)
            if two_pass:
                t0 = time.perf_counter()
                vectors.top(q, p.depth, sketch=sketch)
                sketched.append((time.perf_counter() - t0) * 1000)
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
        if sketched:
            entry["sketch"] = {
                "params": sketch.signature(), "build_s": round(sketch_s, 2),
                "mb": round(made.nbytes / 2**20, 1),
                "two_pass_ms": {"p50": percentile(sketched, 50), "p90": percentile(sketched, 90)},
                "exact_over_two_pass_p50": round(
                    percentile(ours, 50) / percentile(sketched, 50), 2
                ),
            }  # fmt: skip
        out[str(n)] = entry
        print(n, entry, flush=True)
        del codes, scales, doc_ptr, floats, vectors
    return out


def _real_vectors(dirs: tuple[str, ...]) -> tuple[Any, Any, Any, list[str]]:
    """The int8 rows of every index named (its ``dense/``, or the chunks of ``dense.partial/``
    written so far: float rows, quantised here as the build does), one passage table."""
    codes, scales, counts, used = [], [], [], []
    for name in dirs:
        path = ROOT / name
        vectors = open_vectors(path) if (path / "dense").is_dir() else None
        if vectors is not None:
            codes.append(np.asarray(vectors.codes))
            scales.append(np.asarray(vectors.scales))
            counts.append(np.diff(vectors.doc_ptr))
            used.append(f"{name}: {vectors.n_docs} documents")
            continue
        chunks = sorted((path / PARTIAL_DIR).glob("chunk-*.npz"))
        for chunk in chunks:
            with np.load(chunk) as z:
                c, sc = quantize(z["rows"])
                codes.append(c)
                scales.append(sc)
                counts.append(z["counts"])
        if chunks:
            docs = sum(len(c) for c in counts[-len(chunks) :])
            used.append(f"{name}: the first {docs} documents (embedding under way)")
    doc_ptr = np.zeros(sum(len(c) for c in counts) + 1, dtype=np.int64)
    np.cumsum(np.concatenate(counts), out=doc_ptr[1:])
    return np.concatenate(codes), np.concatenate(scales), doc_ptr, used


def query_cost(questions: list[str], pages: set[str]) -> dict[str, Any]:
    """Milliseconds to embed one query, by kind (p50/p90), alternating the kinds."""
    from service.data import read_docs
    from service.dense.encoders import get_encoder

    docs = [d for d in read_docs(DATA / "clir" / "docs.jsonl.gz") if d.id in pages]
    kinds = {
        "short": [d.title for d in docs],
        "question": questions,
        "paragraph": [" ".join(f"{d.title} {d.text}".split()[:60]) for d in docs],
    }
    enc = get_encoder()
    enc.encode_queries(["warm up"])
    times: dict[str, list[float]] = {k: [] for k in kinds}
    for i in range(min(len(v) for v in kinds.values())):
        for kind, texts in kinds.items():
            t0 = time.perf_counter()
            enc.encode_queries([texts[i]])
            times[kind].append((time.perf_counter() - t0) * 1000)
    return {
        k: {"p50": percentile(v, 50), "p90": percentile(v, 90), "n": len(v)}
        for k, v in times.items()
    }


def recall(p: Params) -> dict[str, Any]:
    from service.data import read_docs
    from service.dense.encoders import get_encoder

    codes, scales, doc_ptr, used = _real_vectors(p.real)
    vectors = DenseVectors(Path("."), "real", PassageParams(), codes, scales, doc_ptr)
    questions = ROOT / "bench" / "querysets" / "lohelp-de" / "questions.en.dev.tsv"
    texts = [line.split("\t", 1)[1].strip() for line in questions.open(encoding="utf-8")]
    qrels = DATA / "clir" / "lohelp-de" / "qrels.dev.txt"
    pages = {f.split()[2] for f in qrels.open(encoding="utf-8") if f.split()[3] == "3"}
    asked = list(texts)
    texts += [d.title for d in read_docs(DATA / "clir" / "docs.jsonl.gz") if d.id in pages]
    queries = get_encoder().encode_queries(texts)
    out_cost = query_cost(asked, pages)
    out: dict[str, Any] = {
        "vectors": used, "documents": vectors.n_docs, "passages": vectors.n_passages,
        "queries": len(texts), "query_embedding_ms": out_cost,
    }  # fmt: skip
    for depth in (10, 100):
        exact = [set(vectors.top(q, depth)[0].tolist()) for q in queries]
        for oversample in (10, 20, 50, 100):
            params = SketchParams(above=0, oversample=oversample)
            if not params.applies(vectors.n_passages, vectors.n_docs, depth):
                continue
            got = [
                len(want & set(vectors.top(q, depth, sketch=params)[0].tolist())) / depth
                for q, want in zip(queries, exact, strict=True)
            ]
            out[f"recall@{depth}_x{oversample}"] = round(float(np.mean(got)), 4)
            print(depth, oversample, out[f"recall@{depth}_x{oversample}"], flush=True)
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
    if p.recall:
        result["recall"] = recall(p)
    if p.embed:
        result["embed"] = embed(p)
        print(result["embed"], flush=True)
    write_result(p.out, result, p)
    print(p.out)
