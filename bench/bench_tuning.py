"""Tuning comparison (Chen et al. 2017, Tables 2–3 on our data): dev and held-out BLEU of the
untuned default weights and of each optimiser (MERT, PRO, ListNet, ListMLE, top-5 ListMLE,
top-rank enhanced ListMLE with instance aggregating, and ListMLE-TE with k-best merging).

Each run starts from the bundle's default weights, decodes the tuning sentences to k-best
lists for a number of outer iterations (Algorithm 1) and keeps the weights with the best dev
BLEU; held-out BLEU is measured once with those weights. Every tuned vector is stored as a
weights version of the bundle (not activated).

Writes ``bench/results/tuning_<src>.json``. Run:
``.venv/bin/python -m bench tuning de [--dev-size N] [--heldout-size N] [--iterations N]
[--methods mert pro ...]``; ``tuning-reevaluate de`` recomputes the recorded runs' BLEU.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from bench.common import DATA, RESULTS_DIR, ROOT, Help, bundle_signature, write_result
from service.mt.bundle import load_bundle
from service.mt.tuning.data import load_dev_pairs
from service.mt.tuning.run import bleu_of, tune_bundle

METHODS = ("mert", "pro", "listnet", "listmle", "listmle-top5", "listmle-te", "listmle-te:merge")


@dataclass(frozen=True)
class Params:
    src: Annotated[Literal["de", "zh"], Help("source language", positional=True)] = "de"
    dev_size: Annotated[int, Help("tuning sentences")] = 200
    heldout_size: Annotated[int, Help("held-out sentences")] = 200
    iterations: Annotated[int, Help("outer iterations (Algorithm 1)")] = 5
    methods: Annotated[tuple[str, ...], Help("optimisers (method[:merge])")] = METHODS
    max_words: Annotated[int, Help("longest dev sentence, words")] = 25
    model: Annotated[Path | None, Help("bundle (default: models/<src>-en)")] = None


def run(p: Params) -> None:
    src, dev_size, heldout_size, iterations, methods, max_words = (
        p.src, p.dev_size, p.heldout_size, p.iterations, p.methods, p.max_words
    )  # fmt: skip
    bundle = load_bundle(p.model or ROOT / "models" / f"{src}-en")
    signatures = {"bundle": bundle_signature(bundle)}
    split = load_dev_pairs(DATA / "tr" / f"{src}-en", DATA / "tr" / "pool.en.tsv.gz", src,
                           max_words=max_words)  # fmt: skip
    tune_pairs, heldout = split.tune[:dev_size], split.heldout[:heldout_size]
    default = bundle.weights_store.load("default")
    out_path = RESULTS_DIR / f"tuning_{src}.json"
    result: dict[str, Any] = json.loads(out_path.read_text()) if out_path.exists() else {"runs": {}}
    result.update({"model": f"{src}-en", "dev_sentences": len(tune_pairs),
                   "heldout_sentences": len(heldout), "iterations": iterations, "k": 20,
                   "max_words": max_words})  # fmt: skip
    if "default" not in result["runs"]:
        start = time.perf_counter()
        result["runs"]["default"] = {
            "dev_bleu": round(bleu_of(bundle, default.weights, tune_pairs), 2),
            "heldout_bleu": round(bleu_of(bundle, default.weights, heldout), 2),
            "seconds": round(time.perf_counter() - start, 1),
        }
        write_result(out_path, result, p, signatures=signatures)
    for spec in methods:
        method, _, merge = spec.partition(":")
        outcome = tune_bundle(bundle, tune_pairs, heldout, method, k=20, iterations=iterations,
                              merge=merge or None, start_version="default")  # fmt: skip
        result["runs"][spec] = {
            "dev_bleu": round(outcome.result.bleu, 2),
            "heldout_bleu": round(outcome.heldout_bleu, 2),
            "best_iteration": outcome.result.best_iteration,
            "version": outcome.version.version,
            "seconds": round(outcome.seconds, 1),
        }
        print(spec, json.dumps(result["runs"][spec]), file=sys.stderr)
        write_result(out_path, result, p, signatures=signatures)


@dataclass(frozen=True)
class ReevaluateParams:
    src: Annotated[Literal["de", "zh"], Help("source language", positional=True)] = "de"
    dev_size: Annotated[int, Help("tuning sentences")] = 200
    heldout_size: Annotated[int, Help("held-out sentences")] = 200
    max_words: Annotated[int, Help("longest dev sentence, words")] = 25
    model: Annotated[Path | None, Help("bundle (default: models/<src>-en)")] = None


def reevaluate(p: ReevaluateParams) -> None:
    """Recompute dev and held-out BLEU of every recorded run from its stored weights."""
    src, dev_size, heldout_size, max_words = p.src, p.dev_size, p.heldout_size, p.max_words
    bundle = load_bundle(p.model or ROOT / "models" / f"{src}-en")
    signatures = {"bundle": bundle_signature(bundle)}
    split = load_dev_pairs(DATA / "tr" / f"{src}-en", DATA / "tr" / "pool.en.tsv.gz", src,
                           max_words=max_words)  # fmt: skip
    tune_pairs, heldout = split.tune[:dev_size], split.heldout[:heldout_size]
    out_path = RESULTS_DIR / f"tuning_{src}.json"
    result = json.loads(out_path.read_text())
    for name, run in result["runs"].items():
        weights = bundle.weights_store.load(run.get("version", "default")).weights
        run["dev_bleu_1best"] = round(bleu_of(bundle, weights, tune_pairs), 2)
        run["heldout_bleu"] = round(bleu_of(bundle, weights, heldout), 2)
        if name == "default":
            run.pop("dev_bleu", None)  # only the loop's own dev BLEU is kept for tuned runs
        print(name, json.dumps(run), file=sys.stderr)
        write_result(out_path, result, p, signatures=signatures)


if __name__ == "__main__":  # python -m bench.bench_tuning [reevaluate] SRC ...
    from bench.cli import run as run_benchmark
    from bench.registry import get

    again = sys.argv[1:2] == ["reevaluate"]
    run_benchmark(get("tuning-reevaluate" if again else "tuning"), sys.argv[2 if again else 1 :])
