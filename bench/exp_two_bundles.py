"""Experiment: a grammar built another way, on retrieval.

Two bundles trained from the same cleaned corpus and word alignment — the base, and the same
with one extraction setting changed, each with its own tuned weights — rank every dev set with
DT and BOW-FD, BOW-FD also with the service's feedback (the ``rerank`` form, 1000 deep),
against the monolingual ceiling (BM25 on the English mate's text, as
:mod:`bench.bench_feedback`). p: paired randomization test of per-query AP (MRR: RR), the new
bundle against the base, for each method. Measured with it:

* ``--in-domain lohelp:``: two more rule features, the in-domain translation probabilities
  (:mod:`service.mt.training.domain`; Koehn & Schroeder 2007, §3) → ``results/domain_<lang>.json``;
* ``--tight-target``: no rule with an unaligned English word at a phrase edge
  (``ExtractionConfig.tight_target``) → ``results/tight_<lang>.json``.

Run: ``PYTHONPATH=. .venv/bin/python bench/exp_two_bundles.py de --new models/de-en-dom``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from bench.bench_feedback import english_queries, hits_of
from bench.bench_querysets import load_set
from bench.common import RESULTS_DIR, ROOT, bundle_signature, write_result
from service.evaluation import evaluate, randomization_test
from service.index.inverted import load_index
from service.mt.bundle import load_bundle
from service.mt.decoder import DecoderConfig
from service.retrieval.base import one_best
from service.retrieval.feedback import FeedbackParams
from service.retrieval.query import decode_query
from service.retrieval.runner import make_scorer

DEPTH = 1000
METRICS = ("map", "ndcg@10", "mrr")
PERMUTATIONS = 10_000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("lang", choices=("de", "zh"))
    ap.add_argument("--base", type=Path, default=None, help="default: models/<lang>-en")
    ap.add_argument("--new", type=Path, required=True)
    ap.add_argument("--sets", default="short,question,paragraph")
    ap.add_argument("--max-queries", type=int, default=None)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    index = load_index(ROOT / "indexes" / "docs")
    paths = {"base": args.base or ROOT / "models" / f"{args.lang}-en", "new": args.new}
    bundles = {name: load_bundle(path) for name, path in paths.items()}
    decoders = {n: b.decoder(DecoderConfig(use_lm=True)) for n, b in bundles.items()}
    scorers = {
        n: {m: make_scorer(m, index, b) for m in ("dt", "bowfd")} for n, b in bundles.items()
    }
    feedback = FeedbackParams(pool=DEPTH)
    out = args.out or RESULTS_DIR / f"domain_{args.lang}.json"
    result: dict[str, Any] = {
        "lang": args.lang,
        "bundles": {n: str(p) for n, p in paths.items()},
        "weights": {n: b.active_weights().version for n, b in bundles.items()},
        "feedback": feedback.signature(),
        "sets": {},
    }
    for set_name in args.sets.split(","):
        queries, qrels = load_set(set_name, args.lang)
        queries = {q: t for q, t in list(queries.items())[: args.max_queries] if q in qrels}
        runs: dict[str, dict[str, dict[str, float]]] = {}
        translations: dict[str, dict[str, str]] = {}
        seconds: dict[str, float] = {}
        for i, (qid, text) in enumerate(queries.items()):
            for name, bundle in bundles.items():
                version = bundle.active_weights().version
                t0 = time.perf_counter()
                q = decode_query(decoders[name], text, bundle.src, qid=qid, weights_version=version)
                seconds[f"{name} decode"] = seconds.get(f"{name} decode", 0.0) + (
                    time.perf_counter() - t0
                )
                translations.setdefault(qid, {})[name] = " ".join(" ".join(s) for s in one_best(q))
                for method, scorer in scorers[name].items():
                    configs = [(method, None)]
                    if scorer.reranks:
                        configs.append((f"{method}+rerank", feedback))
                    for key, fb in configs:
                        hits = hits_of(scorer.rank(q, DEPTH, feedback=fb))
                        ids = map(index.doc_id, hits.docs.tolist())
                        runs.setdefault(f"{name} {key}", {})[qid] = dict(
                            zip(ids, hits.scores.tolist(), strict=True)
                        )
            if i % 25 == 0:
                print(f"{args.lang} {set_name}: {i}/{len(queries)}", file=sys.stderr)
        for qid, english in english_queries(set_name, args.lang, queries, qrels).items():
            h = index.bm25_topk(index.tokenize(english), DEPTH)
            ids = map(index.doc_id, h.docs.tolist())
            runs.setdefault("ceiling", {})[qid] = dict(zip(ids, h.scores.tolist(), strict=True))
        per_query, configs_out = {}, {}
        for key, run in runs.items():
            ev = evaluate(run, {q: qrels[q] for q in run}, METRICS)
            per_query[key] = ev.per_query
            configs_out[key] = ev.as_json()
        ceiling = configs_out["ceiling"]["map"]
        p = {}
        for key in runs:
            if key.startswith("new "):
                base = "base " + key.removeprefix("new ")
                p[key] = {
                    m: randomization_test(per_query[key][m], per_query[base][m], PERMUTATIONS, 0)
                    for m in ("map", "mrr")
                }
        changed = sum(t["base"] != t["new"] for t in translations.values())
        result["sets"][set_name] = {
            "queries": len(queries),
            "configs": configs_out,
            "of_ceiling": {k: c["map"] / ceiling for k, c in configs_out.items()},
            "p_new_vs_base": p,
            "translations_changed": changed,
            "decode_ms": {k: 1000 * s / len(queries) for k, s in seconds.items()},
            "examples": dict(list(translations.items())[:40]),
        }
        print(f"{args.lang} {set_name} ({len(queries)}; {changed} translations changed)",
              file=sys.stderr)  # fmt: skip
        for key, cfg in configs_out.items():
            pm = p.get(key, {}).get("map")
            print(f"  {key:20} MAP {cfg['map']:.4f} nDCG@10 {cfg['ndcg@10']:.4f} "
                  f"MRR {cfg['mrr']:.4f} ({100 * cfg['map'] / ceiling:.1f} %)"
                  f"{'' if pm is None else f' p {pm:.4f}'}", file=sys.stderr)  # fmt: skip
        write_result(out, result, vars(args),
                     signatures={n: bundle_signature(b) for n, b in bundles.items()})  # fmt: skip


if __name__ == "__main__":
    main()
