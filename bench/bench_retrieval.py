"""Retrieval quality (issue #5 benchmark; 001 Tables 1 and 2 on our data).

Each dev query of ``lohelp-<src>`` is decoded once with the language model and once without;
DT, PSQ and BOW-FD (a grid of default IR weights v) rank the full document collection from the
same forests (depth 1000). Reports MAP, NDCG, NDCG@10, PRES, MRR, Recall@1000, P@10 per
configuration, paired randomization-test p-values of BOW-FD against DT and PSQ, and timings.

Writes ``bench/results/retrieval_<src>.json``.
Run: ``.venv/bin/python -m bench.bench_retrieval [de|zh] [max_queries]``.
"""

from __future__ import annotations

import json
import sys
import time
from itertools import islice
from pathlib import Path
from typing import Any

from service.data import load_qrels, load_queries
from service.errors import InvalidInputError
from service.evaluation import CLIR_METRICS, evaluate, randomization_test
from service.mt.bundle import load_bundle
from service.mt.decoder import DecoderConfig
from service.retrieval.base import DecodedQuery
from service.retrieval.query import decode_query
from service.retrieval.runner import load_index, make_scorer

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data"
V_GRID = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0)


def _decode(bundle: Any, queries: dict[str, str], use_lm: bool) -> tuple[list[DecodedQuery], float]:
    dec = bundle.decoder(DecoderConfig(use_lm=use_lm))
    version = bundle.active_weights().version
    out, start = [], time.perf_counter()
    for k, (qid, text) in enumerate(queries.items()):
        try:
            out.append(decode_query(dec, text, bundle.src, qid=qid, weights_version=version))
        except InvalidInputError as exc:
            print(f"{qid}: {exc}", file=sys.stderr)
        if k % 20 == 0:
            print(f"decoded {k}/{len(queries)} (lm={use_lm})", file=sys.stderr)
    return out, (time.perf_counter() - start) / max(1, len(out))


def main(src: str = "de", max_queries: int | None = None) -> None:
    bundle = load_bundle(ROOT / "models" / f"{src}-en")
    index = load_index(ROOT / "indexes" / "docs")
    qdir = DATA / "clir" / f"lohelp-{src}"
    queries = dict(islice(load_queries(qdir / "queries.dev.tsv").items(), max_queries))
    qrels = {q: j for q, j in load_qrels(qdir / "qrels.dev.txt").items() if q in queries}
    result: dict[str, Any] = {"model": f"{src}-en", "weights": bundle.active_weights().version,
                              "queries": len(queries), "configs": {}}  # fmt: skip
    per_query: dict[str, dict[str, float]] = {}
    for use_lm in (True, False):
        decoded, decode_s = _decode(bundle, queries, use_lm)
        tag = "+lm" if use_lm else "-lm"
        result[f"decode_s_per_query{tag}"] = round(decode_s, 3)
        configs: list[tuple[str, str, dict[str, Any]]] = [("dt", "dt", {}), ("psq", "psq", {})]
        if not use_lm:
            configs[1] = ("psq", "psq", {"lam": 1.0})  # 001 §5: no lexical table without LM
        configs += [(f"bowfd_v{v}", "bowfd", {"v": v}) for v in V_GRID]
        for name, method, params in configs:
            scorer = make_scorer(method, index, bundle, **params)
            start = time.perf_counter()
            run = {}
            for q in decoded:
                ranking = scorer.rank(q, 1000)
                run[q.qid] = {h.doc_id: h.score for h in ranking.hits}
            seconds = (time.perf_counter() - start) / max(1, len(decoded))
            ev = evaluate(run, qrels, CLIR_METRICS)
            key = f"{name}{tag}"
            per_query[key] = ev.per_query["map"]
            result["configs"][key] = {**ev.as_json(), "rank_s_per_query": round(seconds, 3),
                                      "signature": scorer.signature()}  # fmt: skip
            print(key, json.dumps(result["configs"][key]), file=sys.stderr)
    best_v = max(V_GRID, key=lambda v: result["configs"][f"bowfd_v{v}+lm"]["map"])
    result["best_v"] = best_v
    best = per_query[f"bowfd_v{best_v}+lm"]
    result["p_values_map"] = {
        f"bowfd_v{best_v}+lm vs {other}": randomization_test(best, per_query[other], 10_000, 0)
        for other in ("dt+lm", "psq+lm")
    }
    out = ROOT / "bench" / "results" / f"retrieval_{src}.json"
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main(
        sys.argv[1] if len(sys.argv) > 1 else "de", int(sys.argv[2]) if len(sys.argv) > 2 else None
    )
