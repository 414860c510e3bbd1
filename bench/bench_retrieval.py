"""Retrieval quality (issue #5 benchmark; 001 Tables 1 and 2 on our data).

Each dev query of ``lohelp-<src>`` is decoded once with the language model and once without;
DT, PSQ and BOW-FD (a grid of default IR weights v) rank the full document collection from the
same forests (depth 1000). Reports MAP, NDCG, NDCG@10, PRES, MRR, Recall@1000, P@10 per
configuration, paired randomization-test p-values of BOW-FD against DT and PSQ, and timings.

With ``--rsj-index NAME=PATH`` (repeatable) DT, PSQ and BOW-FD at the best ``v`` are also run,
from the same +LM forests, against indexes built with another rsj policy (``clir build-index
--rsj keep|drop``), to measure the choice for terms in more than half the documents on dev.

Writes ``bench/results/retrieval_<src>.json``.
Run: ``.venv/bin/python -m bench.bench_retrieval de [--max-queries N] [--rsj-index keep=PATH]``.
"""

from __future__ import annotations

import argparse
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


def _run(scorer: Any, decoded: list[DecodedQuery]) -> tuple[dict[str, dict[str, float]], float]:
    start = time.perf_counter()
    run = {}
    for q in decoded:
        ranking = scorer.rank(q, 1000)
        run[q.qid] = {h.doc_id: h.score for h in ranking.hits}
    return run, (time.perf_counter() - start) / max(1, len(decoded))


def main(
    src: str = "de", max_queries: int | None = None, rsj_indexes: dict[str, Path] | None = None
) -> None:
    bundle = load_bundle(ROOT / "models" / f"{src}-en")
    index = load_index(ROOT / "indexes" / "docs")
    qdir = DATA / "clir" / f"lohelp-{src}"
    queries = dict(islice(load_queries(qdir / "queries.dev.tsv").items(), max_queries))
    qrels = {q: j for q, j in load_qrels(qdir / "qrels.dev.txt").items() if q in queries}
    result: dict[str, Any] = {"model": f"{src}-en", "weights": bundle.active_weights().version,
                              "queries": len(queries), "configs": {}}  # fmt: skip
    per_query: dict[str, dict[str, float]] = {}
    lm_forests: list[DecodedQuery] = []
    for use_lm in (True, False):
        decoded, decode_s = _decode(bundle, queries, use_lm)
        if use_lm:
            lm_forests = decoded
        tag = "+lm" if use_lm else "-lm"
        result[f"decode_s_per_query{tag}"] = round(decode_s, 3)
        configs: list[tuple[str, str, dict[str, Any]]] = [("dt", "dt", {}), ("psq", "psq", {})]
        if not use_lm:
            configs[1] = ("psq", "psq", {"lam": 1.0})  # 001 §5: no lexical table without LM
        configs += [(f"bowfd_v{v}", "bowfd", {"v": v}) for v in V_GRID]
        for name, method, params in configs:
            scorer = make_scorer(method, index, bundle, **params)
            run, seconds = _run(scorer, decoded)
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
    for name, path in (rsj_indexes or {}).items():
        other_index = load_index(path)
        for label, method, params in (("dt", "dt", {}), ("psq", "psq", {}),
                                      (f"bowfd_v{best_v}", "bowfd", {"v": best_v})):  # fmt: skip
            scorer = make_scorer(method, other_index, bundle, **params)
            run, seconds = _run(scorer, lm_forests)
            ev = evaluate(run, qrels, CLIR_METRICS)
            key = f"{label}+lm@rsj-{name}"
            per_query[key] = ev.per_query["map"]
            base = per_query[f"{label}+lm"]
            result["configs"][key] = {**ev.as_json(), "rank_s_per_query": round(seconds, 3),
                                      "signature": scorer.signature(),
                                      "p_map_vs_floor": randomization_test(
                                          per_query[key], base, 10_000, 0)}  # fmt: skip
            print(key, json.dumps(result["configs"][key]), file=sys.stderr)
    out = ROOT / "bench" / "results" / f"retrieval_{src}.json"
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("src", nargs="?", default="de", choices=("de", "zh"))
    ap.add_argument("--max-queries", type=int)
    ap.add_argument("--rsj-index", action="append", default=[], metavar="NAME=PATH")
    args = ap.parse_args()
    main(args.src, args.max_queries,
         {n: Path(p) for n, _, p in (x.partition("=") for x in args.rsj_index)})  # fmt: skip
