"""Experiment: a page's opening passage preferred over its later ones in the dense reader's
MaxP (Dai & Callan 2019, §3.2), alone and fused with the method as the product searches.

MaxP scores a page by its best passage; FirstP by its first. On the demo collection the first
300 characters read questions best (`exp_passage_chars.py`) while MaxP reads short queries
and paragraphs best. Between the two: every passage after a page's first scores its cosine
minus a penalty ``delta`` (0: MaxP; infinite: FirstP over the same vectors), so a later
passage wins only when it is clearly better than the page's opening.

For each query of each set: decode once and rank with the method and the product's default
feedback (dense off) to depth 1000 — cached on disk, so a second run over the same index and
bundle only embeds and fuses — then embed the 1-best translation as an E5 query, score every
passage exactly as the product's kernel does (int8 query and rows, the dot product in
integers: float32 sums of these products are exact below 2^24), and rank the documents under
each ``delta``; each dense list is fused with the lexical ranking by the product's default
(mix over each reader's top 100, :func:`~service.search.pipeline.fuse_rankings`). With
``delta = 0`` the dense list is checked equal to the product's (``DenseSource.top``) on the
first query of each set. Reported per set (and for the queries whose relevant page is longer
than 5,000 characters): MAP, nDCG@10, MRR of each variant alone and fused, with the paired
randomization test (10,000 permutations) against MaxP (``delta = 0``); and the product's
default (``DenseParams()``) against the lexical ranking alone, with the dense stage's cost per
query (embedding the translation, one query at a time; the top ``depth`` documents).

Run: ``PYTHONPATH=. .venv/bin/python bench/exp_passage_weight.py --lang de [--index I]
[--model M] [--method bowfd] [--sets paragraph,short,question] [--limit N]``; writes
``bench/results/passage_weight_<lang>_<index>[_<method>].json``.
"""

from __future__ import annotations

import argparse
import hashlib
import pickle
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.bench_querysets import load_set
from bench.common import DATA, RESULTS_DIR, ROOT, bundle_signature, percentile, write_result
from service.collection.reader import Collection
from service.core.settings import Settings
from service.data import read_docs
from service.dense.kernels import quantize, top_docs
from service.dense.source import IndexDense
from service.evaluation import evaluate, randomization_test
from service.index.inverted import load_index
from service.mt.bundle import load_bundle
from service.retrieval.base import Hit, Ranking
from service.retrieval.query import decode_query
from service.retrieval.runner import decoder_for
from service.search.pipeline import (
    DenseParams,
    SearchOptions,
    dense_query_text,
    feedback_from_settings,
    fuse_rankings,
)
from service.search.stores import store_pipeline

DEPTH = 1000
PERMUTATIONS = 10_000
LONG_CHARS = 5000
METRICS = ("map", "ndcg@10", "mrr")
#: later passages' penalty (cosine units); inf reads the first passage only (FirstP)
DELTAS = (0.0, 0.005, 0.01, 0.02, 0.03, 0.05, float("inf"))  # includes the default
FUSION = DenseParams()  # the product's default: mix over each reader's top 100


def _lexical_runs(args: argparse.Namespace, set_name: str) -> dict[str, Any]:
    """Each query's lexical ranking (dense off) and 1-best translation, cached on disk."""
    model = args.model or ROOT / "models" / f"{args.lang}-en"
    bundle = load_bundle(model)
    key = hashlib.sha256(
        f"{args.lang}|{set_name}|{args.index.resolve()}|{bundle_signature(bundle)}|{args.limit}"
        f"|{args.method}".encode()
    ).hexdigest()[:16]
    cache = Path("/tmp/clir-exp-cache") / f"lexical-{key}.pkl"
    if cache.exists():
        with cache.open("rb") as f:
            cached: dict[str, Any] = pickle.load(f)
        return cached
    index = load_index(args.index)
    pipe = store_pipeline(Collection.of_index(index), bundle)
    feedback = feedback_from_settings(Settings.model_validate({}))
    decoder = decoder_for(bundle)
    queries, qrels = load_set(set_name, args.lang)
    qids = [q for q in queries if q in qrels][: args.limit]
    runs: dict[str, Any] = {}
    for qid in qids:
        decoded = decode_query(decoder, queries[qid], args.lang, qid=qid)
        out = pipe.search(decoded, SearchOptions(args.method, k=DEPTH, feedback=feedback))
        hits = [(h.docno, h.doc_id, h.score) for h in out.ranking.hits]
        runs[qid] = {
            "hits": hits,
            "signature": out.ranking.signature,
            "total": out.total,
            "relation": out.relation,
            "text": dense_query_text(out.translation),
        }
    result = {"runs": runs, "qrels": {q: qrels[q] for q in qids}}
    cache.parent.mkdir(exist_ok=True)
    with cache.open("wb") as f:
        pickle.dump(result, f)
    return result


def _evaluate(run: dict[str, list[tuple[str, float]]], qrels: Any, ids: list[str]) -> Any:
    sub = {q: {d: s for d, s in run[q]} for q in ids}
    return evaluate(sub, {q: qrels[q] for q in ids}, METRICS, depth=DEPTH)


def _compare(base: Any, other: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for m in METRICS:
        a, b = other.per_query[m], base.per_query[m]
        delta = float(np.mean([a[q] - b[q] for q in a])) if a else 0.0
        p = randomization_test(a, b, PERMUTATIONS, seed=0) if len(a) > 1 else 1.0
        out[m] = {"value": round(other.means[m], 4), "delta": round(delta, 4), "p": round(p, 4)}
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lang", default="de")
    ap.add_argument("--model", type=Path)
    ap.add_argument("--index", type=Path, default=ROOT / "indexes" / "demo")
    ap.add_argument("--sets", default="short,question,paragraph")
    ap.add_argument("--limit", type=int)
    ap.add_argument("--method", default="bowfd")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    index = load_index(args.index)
    bundle = load_bundle(args.model or ROOT / "models" / f"{args.lang}-en")
    pipe = store_pipeline(Collection.of_index(index), bundle)
    source, why = pipe.stage.dense()
    if not isinstance(source, IndexDense):
        raise SystemExit(f"{args.index}: one index with vectors is needed ({why})")
    encoder = pipe.encoder(source)
    vec = source.vectors
    rows = vec.codes.astype(np.float32)  # exact integer dot products in float32 (< 2^24)
    first = np.zeros(vec.n_passages, dtype=bool)
    first[vec.doc_ptr[:-1]] = True
    lengths = {d.id: len(d.text) for d in read_docs(DATA / "clir" / "docs.jsonl.gz")}
    result: dict[str, Any] = {"lang": args.lang, "index": str(args.index), "method": args.method,
                              "dense": source.status(), "sets": {}}  # fmt: skip
    for set_name in args.sets.split(","):
        data = _lexical_runs(args, set_name)
        runs, qrels = data["runs"], data["qrels"]
        qids = list(runs)
        embed_ms, top_ms = [], []
        rows_q = []
        for q in qids:  # one at a time, as a search embeds its query, and the product's top
            t0 = time.perf_counter()
            v = encoder.encode_queries([runs[q]["text"]])[0]
            t1 = time.perf_counter()
            source.top(v, FUSION.depth, FUSION.sketch, FUSION.later)
            top_ms.append((time.perf_counter() - t1) * 1000)
            embed_ms.append((t1 - t0) * 1000)
            rows_q.append(v)
        qvecs = np.stack(rows_q) if rows_q else np.zeros((0, encoder.dim), np.float32)
        alone: dict[float, dict[str, list[tuple[str, float]]]] = {d: {} for d in DELTAS}
        fused: dict[float, dict[str, list[tuple[str, float]]]] = {d: {} for d in DELTAS}
        lexical = {q: [(i, s) for _, i, s in runs[q]["hits"]] for q in qids}
        for n, qid in enumerate(qids):
            qcodes, qscale = quantize(qvecs[n])
            dots = rows @ qcodes[0].astype(np.float32)
            cos = dots.astype(np.float64) * vec.scales.astype(np.float64) * float(qscale[0])
            run = runs[qid]
            ranking = Ranking(qid, [Hit(d, i, s) for d, i, s in run["hits"]], run["signature"])
            for delta in DELTAS:
                if np.isinf(delta):
                    doc = cos[vec.doc_ptr[:-1]]
                else:
                    doc = np.maximum.reduceat(np.where(first, cos, cos - delta), vec.doc_ptr[:-1])
                docs, scores = top_docs(doc.astype(np.float32), DEPTH)
                top = [(d, index.doc_id(d), float(s)) for d, s in zip(docs, scores, strict=True)]
                if delta == 0.0 and n == 0:  # the product's dense list, exactly
                    assert top == source.top(qvecs[n], DEPTH), "MaxP differs from the product"
                alone[delta][qid] = [(i, s) for _, i, s in top]
                out, *_ = fuse_rankings(ranking, top, FUSION, DEPTH, run["total"], run["relation"])
                fused[delta][qid] = [(h.doc_id, h.score) for h in out.hits]
        long_q = [q for q in qids if any(lengths.get(d, 0) > LONG_CHARS for d in qrels[q])]
        entry: dict[str, Any] = {"queries": len(qids), "long_queries": len(long_q)}
        entry["cost_ms"] = {
            "embed": {"p50": percentile(embed_ms, 50), "p90": percentile(embed_ms, 90)},
            f"top{FUSION.depth}": {"p50": percentile(top_ms, 50), "p90": percentile(top_ms, 90)},
        }
        for subset, ids in (("all", qids), ("long", long_q)):
            if not ids:
                continue
            lex = _evaluate(lexical, qrels, ids)
            rows_out: dict[str, Any] = {"lexical": {m: round(lex.means[m], 4) for m in METRICS}}
            for kind, table in (("dense", alone), ("fused", fused)):
                base = _evaluate(table[0.0], qrels, ids)
                rows_out[f"{kind}-maxp"] = {m: round(base.means[m], 4) for m in METRICS}
                for delta in DELTAS[1:]:
                    name = "firstp" if np.isinf(delta) else f"delta{delta}"
                    rows_out[f"{kind}-{name}"] = _compare(base, _evaluate(table[delta], qrels, ids))
            default = _evaluate(fused[FUSION.later], qrels, ids)  # the product, against
            rows_out["fused-default-vs-lexical"] = _compare(lex, default)  # today's lexical
            entry[subset] = rows_out
        result["sets"][set_name] = entry
        print(set_name, entry["all"], flush=True)
    out_path = args.out or RESULTS_DIR / (
        f"passage_weight_{args.lang}_{args.index.name}"
        + ("" if args.method == "bowfd" else f"_{args.method}")
        + ".json"
    )
    write_result(out_path, result, vars(args), signatures={"bundle": bundle_signature(bundle)})
    print(out_path)


if __name__ == "__main__":
    main()
