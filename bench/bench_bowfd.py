"""Benchmark of bag-of-words forced decoding: fast vs reference.

On the first ``N_QUERIES`` German dev queries of ``clir/lohelp-de`` against the full document
index (``indexes/docs``), each query is decoded once (``decode_query``: one +LM forest per
sentence) and then ranked to depth ``K`` = 1000 twice, in the same process, alternately:

* **reference** — the procedure of Hieber & Riezler 2015, §3: per sentence, for every candidate
  document one Viterbi pass over the whole forest with W'(e, d)
  (:func:`service.retrieval.bowfd.reference_scores`), top K' per sentence, then the multi-sentence
  combination;
* **fast** — ``BowFdScorer(engine="compiled").rank`` (live forest, bounds, block inside passes).

Recorded per query: sentences, forest sizes (nodes/edges, live part), candidates and documents
actually scored, decode time, reference and fast time and their ratio, and whether the two
top-1000 lists are identical (same documents in the same order, same scores). A block-size
sweep, the fast search without bounds and with a per-term IR weight on every term
(``per_term_weights``) are timed on the same forests. ``v`` = 1.0.

The model: ``--model``, else ``models/de-en`` if it exists, else ``/tmp/bowfd-model`` (train
one with ``clir train-model ... --out /tmp/bowfd-model --limit 100000``); ``--queries`` the
first N dev queries (20). Writes ``bench/results/bowfd_speed.json`` (``--out``). Run with
``nice -n 10 python -m bench bowfd``.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import numpy as np

from bench.common import DATA, RESULTS_DIR, ROOT, Help, bundle_signature, write_result
from service.errors import MissingResourceError
from service.forest.inference import viterbi_scores
from service.index.inverted import InvertedIndex
from service.mt.bundle import load_bundle
from service.retrieval.base import DecodedQuery
from service.retrieval.bowfd import (
    DEFAULT_PER_SENTENCE_K,
    BowFdScorer,
    SentenceRanking,
    combine_sentences,
    ir_term_feature,
    rank_sentence,
    reference_scores,
    smt_edge_weights,
    top_k_order,
    with_term_weights,
)
from service.retrieval.query import decode_query

RESULTS = RESULTS_DIR / "bowfd_speed.json"
K = 1000
V = 1.0
BLOCKS = (8, 16, 32, 64)


def _model_path(given: Path | None) -> Path:
    if given is not None:
        return given
    for cand in (ROOT / "models/de-en", Path("/tmp/bowfd-model")):
        if (cand / "manifest.json").exists():
            return cand
    raise MissingResourceError(
        "no de-en model: build models/de-en, or train one with `clir train-model --parallel "
        "../shared/data/parallel/de-en.tsv.gz --lm-text ../shared/data/lm/en.txt.gz --src de "
        "--out /tmp/bowfd-model --limit 100000 --lm-limit 300000`"
    )


def reference_rank(query: DecodedQuery, index: InvertedIndex, k: int) -> tuple[Any, Any]:
    """The reference ranking: per-document Viterbi per sentence, then the combination."""
    depth = k if len(query.forests) == 1 else max(k, DEFAULT_PER_SENTENCE_K)
    lists = []
    for forest in query.forests:
        hg = forest.hypergraph
        smt = smt_edge_weights(hg, query.weights)
        docs, scores = reference_scores(hg, smt, index, V)
        best, _ = viterbi_scores(hg, smt)
        vit = float(best[hg.goal])
        pos = top_k_order(docs, scores, depth)
        lists.append(SentenceRanking(docs[pos], scores[pos], vit, len(docs) <= depth, {}))
    if len(lists) == 1:
        return lists[0].docs, lists[0].scores
    docs, scores = combine_sentences(lists)
    return docs[:k], scores[:k]


@dataclass(frozen=True)
class Params:
    queries: Annotated[int, Help("the first N German dev queries")] = 20
    model: Annotated[Path | None, Help("bundle (default: models/de-en, else /tmp/bowfd-model)")] = (
        None
    )
    out: Annotated[Path, Help("JSON output")] = RESULTS


def run(params: Params) -> None:
    model = _model_path(params.model)
    print(f"model {model}", file=sys.stderr)
    bundle = load_bundle(model)
    index = InvertedIndex.load(ROOT / "indexes/docs")
    decoder = bundle.decoder()
    rows = [
        line.rstrip("\n").split("\t")
        for line in (DATA / "clir/lohelp-de/queries.dev.tsv").read_text().splitlines()
    ][: params.queries]
    fast = BowFdScorer(index, v=V)
    # warm up: compile/load the numba kernels outside the timings
    warm = decode_query(decoder, rows[0][1].split(".")[0] or "Haus", "de")
    fast.rank(warm, k=10)
    reference_rank(warm, index, 10)

    per_query: list[dict[str, Any]] = []
    sweep: dict[str, list[float]] = {f"block_{b}": [] for b in BLOCKS}
    sweep["no_bounds"] = []
    sweep["per_term_weights"] = []
    for qid, text in rows:
        t0 = time.perf_counter()
        query = decode_query(decoder, text, "de", qid=qid)
        for f in query.forests:
            f.hypergraph.arrays()  # the numpy view: built once per forest, shared by both
        decode_s = time.perf_counter() - t0

        t0 = time.perf_counter()
        ranking = fast.rank(query, k=K)
        fast_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        ref_docs, ref_scores = reference_rank(query, index, K)
        ref_s = time.perf_counter() - t0

        fast_docs = np.array([h.docno for h in ranking.hits], dtype=np.int64)
        fast_scores = np.array([h.score for h in ranking.hits])
        identical = fast_docs.tolist() == ref_docs.tolist() and (
            fast_scores.tolist() == ref_scores.tolist()
        )
        max_diff = (
            float(np.max(np.abs(fast_scores - ref_scores)))
            if len(fast_scores) == len(ref_scores) and len(ref_scores)
            else None
        )
        preps = fast.prepare(query)
        for b in BLOCKS:
            t0 = time.perf_counter()
            for p in preps:
                rank_sentence(p, V, K, block=b)
            sweep[f"block_{b}"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        for p in preps:
            rank_sentence(p, V, K, bounds=False)
        sweep["no_bounds"].append(time.perf_counter() - t0)
        # per-term IR weights (ir:<t>) on every term of the forests, the worst case for the
        # extra work: reading the term names and reweighting the candidates' rows
        per_term = {ir_term_feature(index.term(int(t))): 0.25 for p in preps for t in p.terms}
        t0 = time.perf_counter()
        for p in preps:
            rank_sentence(with_term_weights(p, per_term), V, K)
        sweep["per_term_weights"].append(time.perf_counter() - t0)
        info = ranking.info
        row = {
            "qid": qid,
            "sentences": len(query.forests),
            "words": [len(f.tokens) for f in query.forests],
            "nodes": [f.hypergraph.num_nodes for f in query.forests],
            "edges": [f.hypergraph.num_edges for f in query.forests],
            "live_nodes": [len(p.live.nodes) for p in preps],
            "live_edges": [len(p.live.edges) for p in preps],
            "candidates": info["candidates"],
            "scored": [s["scored"] for s in info["per_sentence"]],
            "decode_s": round(decode_s, 3),
            "reference_s": round(ref_s, 3),
            "fast_s": round(fast_s, 4),
            "fast_prepare_s": round(info["seconds"]["prepare"], 4),
            "speedup": round(ref_s / fast_s, 1),
            "hits": len(ranking.hits),
            "identical_top_k": identical,
            "max_abs_score_diff": max_diff,
        }
        per_query.append(row)
        print(json.dumps(row), file=sys.stderr)

    ref_total = sum(r["reference_s"] for r in per_query)
    fast_total = sum(r["fast_s"] for r in per_query)
    result: dict[str, Any] = {
        "model": str(model),
        "model_counts": bundle.manifest.get("counts", {}),
        "index_docs": index.n_docs,
        "queries": len(per_query),
        "k": K,
        "v": V,
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "load_avg_start": os.getloadavg()[0],
        },
        "summary": {
            "reference_s_total": round(ref_total, 2),
            "fast_s_total": round(fast_total, 3),
            "speedup_total": round(ref_total / fast_total, 1),
            "speedup_median": statistics.median(r["speedup"] for r in per_query),
            "speedup_min": min(r["speedup"] for r in per_query),
            "all_identical_top_k": all(r["identical_top_k"] for r in per_query),
            "sentences": sum(r["sentences"] for r in per_query),
            "mean_candidates_per_sentence": round(
                statistics.mean(c for r in per_query for c in r["candidates"]), 1
            ),
            "mean_scored_per_sentence": round(
                statistics.mean(c for r in per_query for c in r["scored"]), 1
            ),
            "mean_edges": round(statistics.mean(e for r in per_query for e in r["edges"]), 1),
            "mean_live_edges": round(
                statistics.mean(e for r in per_query for e in r["live_edges"]), 1
            ),
            "decode_s_total": round(sum(r["decode_s"] for r in per_query), 2),
        },
        "scoring_s_total_by_variant": {name: round(sum(times), 3) for name, times in sweep.items()},
        "per_query": per_query,
    }
    signatures = {"bundle": bundle_signature(bundle), "index": index.signature(),
                  "scorer": fast.signature()}  # fmt: skip
    write_result(params.out, result, params, signatures=signatures, indent=2)
    print(json.dumps(result["summary"], indent=2))
    print(json.dumps(result["scoring_s_total_by_variant"], indent=2))


if __name__ == "__main__":
    from bench.cli import main_for

    main_for("bowfd")
