"""Benchmark of the trained model bundles: per-stage wall time and peak memory
of ``clir train-model`` (from each bundle's manifest), rule counts, grammar size on disk and
load time, rule lookup time for 20-word sentences, KenLM load time, and LM perplexity on the
English side of the dev parallel data (``tr/<src>-en`` dev references).

Writes ``bench/results/models.json`` (``--out``). Run: ``.venv/bin/python -m bench models``.
"""

from __future__ import annotations

import json
import math
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from bench.common import DATA, RESULTS_DIR, ROOT, Help, percentile, write_result
from service.mt.bundle import GRAMMAR_DIR, LM_FILE, read_manifest
from service.mt.grammar import load_grammar
from service.mt.lm import KenLM
from service.mt.tuning.data import load_dev_pairs

OUT = RESULTS_DIR / "models.json"


def _dir_mb(path: Path) -> float:
    return round(sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2**20, 1)


def bench_bundle(path: Path) -> dict[str, Any]:
    manifest = read_manifest(path)
    src = manifest["src"]
    out: dict[str, Any] = {
        "timings": manifest.get("timings"),
        "counts": manifest.get("counts", {}).get("grammar"),
        "lm_ngrams": manifest.get("counts", {}).get("lm"),
        "pairs": manifest.get("counts", {}).get("pairs"),
        "grammar_mb": _dir_mb(path / GRAMMAR_DIR),
        "lm_mb": round((path / LM_FILE).stat().st_size / 2**20, 1),
    }
    t = time.perf_counter()
    load_grammar(path / GRAMMAR_DIR, verify=False)
    out["grammar_load_s"] = round(time.perf_counter() - t, 3)
    t = time.perf_counter()
    grammar = load_grammar(path / GRAMMAR_DIR, verify=True)
    out["grammar_load_verified_s"] = round(time.perf_counter() - t, 3)

    split = load_dev_pairs(DATA / "tr" / f"{src}-en", DATA / "tr" / "pool.en.tsv.gz", src,
                           heldout_share=0.0, max_words=10_000)  # fmt: skip
    pairs = split.tune
    long = [p.source[:20] for p in pairs if len(p.source) >= 20][:100]
    times = []
    for sent in long:
        t = time.perf_counter()
        sg = grammar.filter(sent, 10)
        _ = [sg.rule_matches(i, j) for i, j in sg.spans()]
        times.append(time.perf_counter() - t)
    out["lookup_20_words_ms"] = {
        "sentences": len(times),
        "median": round(1000 * statistics.median(times), 2),
        "p90": round(1000 * percentile(times, 90), 2),
    }
    t = time.perf_counter()
    lm = KenLM(path / LM_FILE)
    out["lm_load_s"] = round(time.perf_counter() - t, 2)
    logprob, tokens, oov = 0.0, 0, 0
    for p in pairs:
        logprob += lm.sentence_score(p.reference)
        tokens += len(p.reference) + 1
        oov += sum(lm.is_oov(w) for w in p.reference)
    out["perplexity_dev_english"] = {
        "sentences": len(pairs),
        "tokens_with_eos": tokens,
        "oov": oov,
        "perplexity": round(math.exp(-logprob / tokens), 3),
    }
    return out


@dataclass(frozen=True)
class Params:
    models: Annotated[tuple[str, ...], Help("bundles under models/ (those present)")] = (
        "de-en",
        "zh-en",
    )
    out: Annotated[Path, Help("JSON output")] = OUT


def run(p: Params) -> None:
    results: dict[str, Any] = {}
    signatures: dict[str, Any] = {}
    for name in p.models:
        path = ROOT / "models" / name
        if (path / "manifest.json").exists():
            print(f"benchmarking {path}")
            results[name] = bench_bundle(path)
            signatures[name] = {"model": name, "build_key": read_manifest(path).get("build_key")}
    write_result(p.out, results, p, signatures=signatures)
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    from bench.cli import main_for

    main_for("models")
