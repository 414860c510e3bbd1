"""Experiment: the dense reader of the translation fused with the method's ranking, on the dev
sets people's queries look like (paragraphs, short queries, questions; German and Chinese).

For each query of each set: decode once, rank with the method and the product's default
feedback through the search pipeline (dense off) to depth 1000, and take the dense reader's
top 1000 (the 1-best English translation embedded as an E5 query, each document scored by its
best passage; Dai & Callan 2019, §3.2); then every fusion under test is computed from those two
lists with the pipeline's own :func:`~service.search.pipeline.fuse_rankings` — exactly what the
pipeline answers at depth 1000 with that fusion (checked on the first query of each set against
``SearchPipeline.search``). Reported per set: MAP, nDCG@10 and MRR of the lexical ranking, the
dense reader alone and each fusion, with the paired randomization test (10,000 permutations)
of each against the lexical ranking, separately for the queries whose relevant page is longer
than 5,000 characters; and the dense stage's cost per query (embedding the translation, and the
exact top-k over the vectors), p50/p90.

Also the text the dense reader embeds: the 1-best translation (the default) against the 1-best
plus the words feedback added (``expanded``) and the mean vector of the 5 best distinct
translations (``kbest5``).

Run: ``PYTHONPATH=. .venv/bin/python bench/exp_dense.py --lang de [--model M] [--index I]
[--sets paragraph,short,question] [--limit N]``; writes ``bench/results/dense_<lang>.json``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.bench_querysets import load_set
from bench.common import DATA, RESULTS_DIR, ROOT, bundle_signature, percentile, write_result
from service.collection.reader import Collection
from service.core.settings import Settings
from service.data import read_docs
from service.evaluation import evaluate, randomization_test
from service.forest.kbest import unique_kbest
from service.index.inverted import load_index
from service.mt.bundle import load_bundle
from service.retrieval.base import Ranking
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
HEAD = 100  # the product's default: each reader's top 100 fused, the lexical ranking below
FUSIONS: dict[str, DenseParams] = {
    "rrf": DenseParams(depth=HEAD, fusion="rrf"),  # k = 60, equal weights: the reference
    "rrf-w0.5": DenseParams(depth=HEAD, fusion="rrf", weight=0.5),
    "rrf-k20": DenseParams(depth=HEAD, fusion="rrf", k=20.0),
    "mix": DenseParams(depth=HEAD, fusion="mix"),
    "mix-w0.5": DenseParams(depth=HEAD, fusion="mix", weight=0.5),
    "mix-w0.75": DenseParams(depth=HEAD, fusion="mix", weight=0.75),
    "mix-w1.5": DenseParams(depth=HEAD, fusion="mix", weight=1.5),
    "rrf@1000": DenseParams(depth=DEPTH, fusion="rrf"),
    "mix@1000": DenseParams(depth=DEPTH, fusion="mix"),
}
METRICS = ("map", "ndcg@10", "mrr")


def _run(rankings: dict[str, list[tuple[str, float]]]) -> dict[str, dict[str, float]]:
    return {q: {d: s for d, s in hits} for q, hits in rankings.items()}


def _scores(run: dict[str, dict[str, float]], qrels: Any, qids: list[str]) -> dict[str, Any]:
    sub = {q: run.get(q, {}) for q in qids}
    res = evaluate(sub, {q: qrels[q] for q in qids}, ("map", "ndcg@10", "mrr"), depth=DEPTH)
    return {"means": res.means, "per_query": res.per_query}


def _compare(base: dict[str, Any], other: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for m in METRICS:
        a = other["per_query"][m]
        b = base["per_query"][m]
        delta = float(np.mean([a[q] - b[q] for q in a])) if a else 0.0
        p = randomization_test(a, b, PERMUTATIONS, seed=0) if len(a) > 1 else 1.0
        out[m] = {"value": other["means"][m], "delta": round(delta, 4), "p": round(float(p), 4)}
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lang", default="de")
    ap.add_argument("--model", type=Path)
    ap.add_argument("--index", type=Path, default=ROOT / "indexes" / "docs")
    ap.add_argument("--sets", default="paragraph,short,question")
    ap.add_argument("--method", default="bowfd")
    ap.add_argument("--limit", type=int)
    ap.add_argument("--out", type=Path)
    ap.add_argument(
        "--no-variants",
        action="store_true",
        help="only the 1-best translation (no k-best or expanded query texts)",
    )
    args = ap.parse_args()
    model = args.model or ROOT / "models" / f"{args.lang}-en"
    bundle = load_bundle(model)
    index = load_index(args.index)
    pipe = store_pipeline(Collection.of_index(index), bundle)
    source, why = pipe.stage.dense()
    if source is None:
        raise SystemExit(f"{args.index}: {why}")
    encoder = pipe.encoder(source)
    settings = Settings.model_validate({})
    feedback = feedback_from_settings(settings)
    lengths = {d.id: len(d.text) for d in read_docs(DATA / "clir" / "docs.jsonl.gz")
               if d.id.startswith("lo:")}  # fmt: skip
    decoder = decoder_for(bundle)
    result: dict[str, Any] = {"lang": args.lang, "method": args.method, "index": str(args.index),
                              "dense": source.status(), "sets": {}}  # fmt: skip
    for set_name in args.sets.split(","):
        queries, qrels = load_set(set_name, args.lang)
        qids = [q for q in queries if q in qrels][: args.limit]
        lexical: dict[str, list[tuple[str, float]]] = {}
        dense_alone: dict[str, list[tuple[str, float]]] = {}
        expanded_alone: dict[str, list[tuple[str, float]]] = {}
        fused: dict[str, dict[str, list[tuple[str, float]]]] = {n: {} for n in FUSIONS}
        fused_expanded: dict[str, list[tuple[str, float]]] = {}
        kbest_alone: dict[str, list[tuple[str, float]]] = {}
        fused_kbest: dict[str, list[tuple[str, float]]] = {}
        embed_ms: list[float] = []
        top_ms: list[float] = []
        for i, qid in enumerate(qids):
            decoded = decode_query(decoder, queries[qid], args.lang, qid=qid)
            opts = SearchOptions(args.method, k=DEPTH, feedback=feedback)
            out = pipe.search(decoded, opts)
            first: Ranking = out.ranking
            lexical[qid] = [(h.doc_id, h.score) for h in first.hits]
            text = dense_query_text(out.translation)
            t0 = time.perf_counter()
            vec = encoder.encode_queries([text])[0]
            t1 = time.perf_counter()
            top = source.top(vec, DEPTH)
            t2 = time.perf_counter()
            embed_ms.append((t1 - t0) * 1000)
            top_ms.append((t2 - t1) * 1000)
            dense_alone[qid] = [(d, s) for _, d, s in top]
            for name, params in FUSIONS.items():
                ranking, *_ = fuse_rankings(first, top, params, DEPTH, out.total, out.relation)
                fused[name][qid] = [(h.doc_id, h.score) for h in ranking.hits]
            if i == 0:  # the pipeline answers what is computed here
                check = pipe.search(decoded, SearchOptions(args.method, k=DEPTH, feedback=feedback,
                                                           dense=FUSIONS["rrf"]))  # fmt: skip
                assert [(h.doc_id, h.score) for h in check.ranking.hits] == fused["rrf"][qid]
            if args.no_variants:
                continue
            # the 5 best distinct translations, each sentence's i-th joined, vectors averaged
            lists = [
                [d.tokens for d in unique_kbest(f.hypergraph, decoded.weights, 5, time_budget=0.5)]
                for f in decoded.forests
            ]
            texts = [" ".join(" ".join(ls[min(i, len(ls) - 1)]) for ls in lists if ls)
                     for i in range(5)]  # fmt: skip
            kvec = encoder.encode_queries(texts).mean(axis=0)
            ktop = source.top((kvec / np.linalg.norm(kvec)).astype(np.float32), DEPTH)
            kbest_alone[qid] = [(d, s) for _, d, s in ktop]
            ranking, *_ = fuse_rankings(first, ktop, FUSIONS["rrf"], DEPTH, out.total, out.relation)
            fused_kbest[qid] = [(h.doc_id, h.score) for h in ranking.hits]
            added = (first.info.get("expansion") or {}).get("added", [])
            etop = source.top(encoder.encode_queries([text + " " + " ".join(added)])[0], DEPTH)
            expanded_alone[qid] = [(d, s) for _, d, s in etop]
            ranking, *_ = fuse_rankings(first, etop, FUSIONS["rrf"], DEPTH, out.total, out.relation)
            fused_expanded[qid] = [(h.doc_id, h.score) for h in ranking.hits]
        long_q = [q for q in qids if any(lengths.get(d, 0) > LONG_CHARS for d in qrels[q])]
        entry: dict[str, Any] = {"queries": len(qids), "long_queries": len(long_q)}
        variants = not args.no_variants
        runs = {"lexical": lexical, "dense": dense_alone,
                **({"dense-expanded": expanded_alone} if variants else {}),
                **{f"fused-{n}": r for n, r in fused.items()},
                **({"fused-rrf-expanded": fused_expanded, "dense-kbest5": kbest_alone,
                    "fused-rrf-kbest5": fused_kbest} if variants else {})}  # fmt: skip
        for subset, ids in (("all", qids), ("long", long_q)):
            if not ids:
                continue
            base = _scores(_run(lexical), qrels, ids)
            entry[subset] = {"lexical": {m: base["means"][m] for m in METRICS}}
            for name, r in runs.items():
                if name != "lexical":
                    entry[subset][name] = _compare(base, _scores(_run(r), qrels, ids))
        entry["cost_ms"] = {
            "embed": {"p50": percentile(embed_ms, 50), "p90": percentile(embed_ms, 90)},
            "top1000": {"p50": percentile(top_ms, 50), "p90": percentile(top_ms, 90)},
        }
        result["sets"][set_name] = entry
        print(set_name, {k: v for k, v in entry.items() if k != "long"}, flush=True)
    out_path = args.out or RESULTS_DIR / f"dense_{args.lang}.json"
    write_result(out_path, result, vars(args), signatures={"bundle": bundle_signature(bundle)})
    print(out_path)


if __name__ == "__main__":
    main()
