"""Translation retrieval for translators (TR paper, Tables 2–3 on our data).

The first ``--queries`` dev sentences of ``tr/<src>-en`` are decoded once (the bundle's active
weights, +LM forests); the TR scorer then ranks the sentence pool ``indexes/pool`` for every
N ∈ {1, 5, 10} with and without the Levenshtein factor (the scorer's: over characters since
issue 40, over words before), from the same forests.
λ2 (the weight of the Levenshtein similarity, λ1 = 1) is chosen on the first half of the
queries at N = 5 from a small grid and every configuration is reported on the second half
(and on all queries), so the tuned setting is not scored on the sentences it was picked on.
Reports f@1/5/10, p@n, r@n, MRR and the paired randomization p-value of f@5 with against
without Levenshtein.

Writes ``bench/results/tr_<src>.json`` (``--out``).
Run: ``.venv/bin/python -m bench tr de [--queries 400]`` (``tr-demo``: the demo bundle and pool).
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Annotated, Any, Literal

from bench.common import DATA, RESULTS_DIR, ROOT, Help, bundle_signature, write_result
from service.data import load_qrels, load_queries
from service.errors import InvalidInputError
from service.evaluation import TR_METRICS, evaluate, randomization_test
from service.index.inverted import load_index
from service.mt.bundle import load_bundle
from service.mt.decoder import DecoderConfig
from service.retrieval.base import DecodedQuery
from service.retrieval.query import decode_query
from service.retrieval.runner import make_scorer

LAMBDA2_GRID = (0.5, 1.0, 2.0, 4.0)


def _rank(scorer: Any, decoded: list[DecodedQuery]) -> tuple[dict[str, dict[str, float]], float]:
    start = time.perf_counter()
    run = {}
    for q in decoded:
        run[q.qid] = {h.doc_id: h.score for h in scorer.rank(q, 10).hits}
    return run, (time.perf_counter() - start) / max(1, len(decoded))


@dataclass(frozen=True)
class Params:
    src: Annotated[Literal["de", "zh"], Help("source language", positional=True)] = "de"
    queries: Annotated[int, Help("dev sentences (the first N)")] = 400
    model: Annotated[Path | None, Help("bundle (default: models/<src>-en)")] = None
    pool: Annotated[Path, Help("sentence pool index")] = ROOT / "indexes" / "pool"
    out: Annotated[Path | None, Help("result file (default: bench/results/tr_<src>.json)")] = None


def run(p: Params) -> None:
    src, n_queries = p.src, p.queries
    bundle = load_bundle(p.model or ROOT / "models" / f"{src}-en")
    pool = load_index(p.pool)
    qdir = DATA / "tr" / f"{src}-en"
    queries = dict(islice(load_queries(qdir / "queries.dev.tsv").items(), n_queries))
    qrels = {q: j for q, j in load_qrels(qdir / "qrels.dev.txt").items() if q in queries}
    dec = bundle.decoder(DecoderConfig())
    version = bundle.active_weights().version
    decoded: list[DecodedQuery] = []
    start = time.perf_counter()
    for i, (qid, text) in enumerate(queries.items()):
        try:
            decoded.append(
                decode_query(dec, text, src, qid=qid, weights_version=version, search=False)
            )  # a translator's sentence, as asked
        except InvalidInputError as exc:
            print(f"{qid}: {exc}", file=sys.stderr)
        if i % 50 == 0:
            print(f"decoded {i}/{len(queries)}", file=sys.stderr)
    decode_s = (time.perf_counter() - start) / max(1, len(decoded))
    half = len(decoded) // 2
    tune, test = decoded[:half], decoded[half:]
    tune_qrels = {q.qid: qrels[q.qid] for q in tune if q.qid in qrels}
    grid = {}
    for lam in LAMBDA2_GRID:
        scorer = make_scorer("tr", pool, bundle, nbest=5, levenshtein=True, lambda2=lam)
        run, _ = _rank(scorer, tune)
        grid[lam] = evaluate(run, tune_qrels, TR_METRICS, depth=None).as_json()["f@5"]
        print(f"lambda2={lam}: f@5 {grid[lam]:.4f} (tuning half)", file=sys.stderr)
    best = max(LAMBDA2_GRID, key=lambda lam: (grid[lam], -lam))
    result: dict[str, Any] = {
        "model": f"{src}-en",
        "weights": version,
        "queries": len(decoded),
        "heldout_queries": len(test),
        "decode_s_per_query": round(decode_s, 3),
        "lambda2_grid_f5_tuning_half": {str(k): round(v, 4) for k, v in grid.items()},
        "lambda2": best,
        "configs": {},
    }
    per_query: dict[str, dict[str, float]] = {}
    for n in (1, 5, 10):
        for lev in (False, True):
            scorer = make_scorer("tr", pool, bundle, nbest=n, levenshtein=lev, lambda2=best)
            run, seconds = _rank(scorer, decoded)
            key = f"N{n}{'+lev' if lev else ''}"
            test_run = {q.qid: run[q.qid] for q in test}
            test_qrels = {q.qid: qrels[q.qid] for q in test if q.qid in qrels}
            held = evaluate(test_run, test_qrels, TR_METRICS, depth=None)
            every = evaluate(run, qrels, TR_METRICS, depth=None)
            per_query[key] = held.per_query["f@5"]
            result["configs"][key] = {
                "heldout_half": held.as_json(),
                "all": every.as_json(),
                "rank_s_per_query": round(seconds, 4),
                "signature": scorer.signature(),
            }
            print(key, json.dumps(result["configs"][key]["heldout_half"]), file=sys.stderr)
    result["p_f5_lev_vs_plain_heldout"] = {
        f"N{n}": randomization_test(per_query[f"N{n}+lev"], per_query[f"N{n}"], 10_000, 0)
        for n in (1, 5, 10)
    }
    signatures = {"bundle": bundle_signature(bundle), "pool": pool.signature()}
    write_result(p.out or RESULTS_DIR / f"tr_{src}.json", result, p, signatures=signatures)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    from bench.cli import main_for

    main_for("tr")
