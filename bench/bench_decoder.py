"""Decoder speed and identity: the Python reference decoder against the compiled one.

Both decoders (:class:`service.mt.decoder.reference.ReferenceDecoder`, engine ``"reference"``,
and :class:`service.mt.decoder.compiled.CompiledDecoder`, engine ``"compiled"``) are built from the
same bundle and the active weights; they must give identical forests. Measured, per model:

1. **Speed** (``speed`` rows): for every pop limit (``--pops``) and sentence length
   (``--lengths``), ``--per-length`` source sentences of the translation-retrieval dev set
   ``tr/<src>-en`` (:func:`service.mt.tuning.data.load_dev_pairs`, cut to exactly n tokens)
   are decoded by both decoders alternately in one process (the reference first on even
   sentences, the compiled decoder first on odd ones), so load on the shared machine hits both
   alike. Per decoder: median and p90 ms per sentence, median lookup and cube-pruning ms (the
   compiled decoder's "cube_pruning" is everything after the grammar lookup: rule scores,
   kernel, forest arrays); median nodes and edges (equal for both); on the compiled forest,
   Viterbi (:func:`service.forest.inference.fast_viterbi`), unique 100-best
   (:func:`service.forest.kbest.unique_kbest` as the service calls it, bounded by its time budget:
   when spurious ambiguity hides the 100th string this measures the budget; the number of
   strings found is recorded) and plain 100-best (:func:`service.forest.kbest.kbest`, as in the
   earlier figures) ms; ``ratio_total`` = total reference time / total compiled time over
   the same sentences. Every row also counts sentences whose best scores agree (a cheap
   check; the full one is item 3).
2. **Typical query** (``query``): the ``--query-count`` dev queries of
   ``clir/lohelp-<src>/queries.dev.tsv`` whose token count (all sentences,
   :func:`service.retrieval.query.query_sentences`) is closest to ``--query-tokens``; the time
   to decode all sentences of a query at pop limit ``--query-pop`` with the reference
   (sequential), the compiled decoder (sequential) and the compiled decoder with the sentences
   spread over 2 threads (one persistent ``ThreadPoolExecutor(2)``; the kernel releases the
   GIL). The three are run in rotating order per query. Median and p90 ms per query, ratios
   of totals.
3. **Identity** (``identity``, only with ``--identity N``): N dev sentences of 1–80 tokens
   (target lengths spread evenly, some with the letters of every word shuffled, i.e. mostly
   out-of-vocabulary) at every ``--identity-pops`` limit, with and without the LM: forests
   identical (``forest_difference`` and ``arrays_difference`` of
   ``tests/mt/test_compiled_decoder.py`` both None), Viterbi 1-best tokens and score
   identical, unique 100-best lists of (tokens, score) identical (at most 10,000 derivations
   examined, no time budget: deterministic); pop counts and -LM node counts equal; the first
   3 differences.

Statistics: medians are :func:`statistics.median` (mean of the two middle values for an even
count, as in the earlier figures); p90 is :func:`bench.common.percentile` (numpy's linear
interpolation; figures recorded before it was shared used the nearest rank, the 9th of 10).
Raw per-sentence / per-query times are kept in the JSON.

Output: ``{"models": {model: {"speed": [...], "query": {...}, "identity": {...}}},
"machine_note": ..., "date": ..., "settings": ..., "stamp": ...}`` in ``--out`` (default
``bench/results/decoder.json``); progress goes to stderr.

Run (the reference is slow: the default run takes about 15 min per model)::

    .venv/bin/python -m bench decoder                      # de-en and zh-en, if present
    .venv/bin/python -m bench decoder --model de-en --out bench/results/decoder.json
    .venv/bin/python -m bench decoder --model zh-en --out bench/results/decoder_zh.json
    .venv/bin/python -m bench decoder-demo                 # quick check on the demo bundle
    .venv/bin/python -m bench decoder --model de-en --per-length 0 --query-count 0 \\
        --identity 200 --out bench/results/decoder_identity_de.json     # identity only
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from bench.common import (
    DATA,
    RESULTS_DIR,
    ROOT,
    Help,
    bundle_signature,
    jsonable,
    percentile,
    write_result,
)
from service.data import load_queries
from service.forest.inference import fast_viterbi
from service.forest.kbest import kbest, unique_kbest
from service.mt.bundle import ModelBundle, load_bundle
from service.mt.decoder import Decoder, DecoderConfig, Forest
from service.mt.tuning.data import load_dev_pairs
from service.mt.weights import WeightsVersion
from service.retrieval.query import query_sentences

OUT = RESULTS_DIR / "decoder.json"
DEFAULT_MODELS = ("de-en", "zh-en")
# unique 100-best in the identity check: examine at most this many derivations (with the
# default time budget the list would depend on the machine's speed, not only on the forest)
IDENTITY_DERIVATIONS = 10_000
Sentence = tuple[str, ...]
Weights = dict[str, float]


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def ms(seconds: float, digits: int = 1) -> float:
    return round(1000 * seconds, digits)


def median_ms(xs: Sequence[float], digits: int = 1) -> float:
    return ms(statistics.median(xs), digits) if xs else math.nan


def ratio(num: Sequence[float], den: Sequence[float]) -> float:
    return round(sum(num) / sum(den), 2) if sum(den) > 0 else math.nan


def load_sources(bundle: ModelBundle) -> list[Sentence]:
    """All dev source sentences of ``tr/<src>-en`` (preprocessed), in the loader's order."""
    src = bundle.src
    split = load_dev_pairs(
        DATA / "tr" / f"{src}-en",
        DATA / "tr" / "pool.en.tsv.gz",
        src,
        heldout_share=0.0,
        max_words=10_000,
    )
    return [p.source for p in split.tune]


def decoders(
    bundle: ModelBundle, wv: WeightsVersion, pop: int, use_lm: bool = True
) -> tuple[Decoder, Decoder]:
    """(reference, compiled) decoders of the weights ``wv``."""
    ref = bundle.decoder(DecoderConfig(pop_limit=pop, use_lm=use_lm, engine="reference"), wv)
    fast = bundle.decoder(DecoderConfig(pop_limit=pop, use_lm=use_lm, engine="compiled"), wv)
    return ref, fast


def timed(fn: Callable[..., Any], *args: Any) -> tuple[Any, float]:
    """``fn(*args)`` and its wall time in seconds."""
    t0 = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - t0


# --- 1. speed per length and pop limit ----------------------------------------------------
def bench_speed(
    bundle: ModelBundle,
    wv: WeightsVersion,
    sources: list[Sentence],
    pops: list[int],
    lengths: list[int],
    per_length: int,
) -> list[dict[str, Any]]:
    weights = wv.weights
    by_len = {n: [s[:n] for s in sources if len(s) >= n][:per_length] for n in lengths}
    # one sentence outside every measured set warms each new decoder (per-thread LM memo)
    tens = [s[:10] for s in sources if len(s) >= 10]
    spare = tens[min(per_length + 1, len(tens) - 1)]
    rows: list[dict[str, Any]] = []
    for pop in pops:
        ref, fast = decoders(bundle, wv, pop)
        ref.forest(spare)
        fast.forest(spare)
        for n in lengths:
            t_ref: list[float] = []
            t_fast: list[float] = []
            st: dict[str, list[float]] = {
                k: [] for k in ("rl", "rc", "fl", "fc", "vit", "kb", "kn", "kp", "nodes", "edges")
            }
            same_best = 0
            for i, sent in enumerate(by_len[n]):
                if i % 2 == 0:
                    a, ta = timed(ref.forest, sent)
                    b, tb = timed(fast.forest, sent)
                else:
                    b, tb = timed(fast.forest, sent)
                    a, ta = timed(ref.forest, sent)
                t_ref.append(ta)
                t_fast.append(tb)
                same_best += a.best_score == b.best_score
                _, tv = timed(fast_viterbi, b.hypergraph, weights)
                uniq, tk = timed(unique_kbest, b.hypergraph, weights, 100)
                _, tp = timed(kbest, b.hypergraph, weights, 100)
                st["rl"].append(a.stats.timings["lookup"])
                st["rc"].append(a.stats.timings["cube_pruning"])
                st["fl"].append(b.stats.timings["lookup"])
                st["fc"].append(b.stats.timings["cube_pruning"])
                st["vit"].append(tv)
                st["kb"].append(tk)
                st["kn"].append(len(uniq))
                st["kp"].append(tp)
                st["nodes"].append(b.stats.nodes)
                st["edges"].append(b.stats.edges)
            row = {
                "pop_limit": pop,
                "words": n,
                "sentences": len(t_ref),
                "reference_ms_median": median_ms(t_ref),
                "reference_ms_p90": ms(percentile(t_ref, 90)),
                "compiled_ms_median": median_ms(t_fast, 2),
                "compiled_ms_p90": ms(percentile(t_fast, 90), 2),
                "ratio_total": ratio(t_ref, t_fast),
                "reference_lookup_ms_median": median_ms(st["rl"], 2),
                "reference_cube_pruning_ms_median": median_ms(st["rc"]),
                "compiled_lookup_ms_median": median_ms(st["fl"], 2),
                "compiled_cube_pruning_ms_median": median_ms(st["fc"], 2),
                "viterbi_ms_median": median_ms(st["vit"], 2),
                "unique_kbest100_ms_median": median_ms(st["kb"], 1),
                "unique_kbest100_strings_median": statistics.median(st["kn"]),
                "kbest100_ms_median": median_ms(st["kp"], 1),
                "nodes_median": int(statistics.median(st["nodes"])),
                "edges_median": int(statistics.median(st["edges"])),
                "same_best_score": same_best,
                "reference_ms": [ms(t, 2) for t in t_ref],
                "compiled_ms": [ms(t, 3) for t in t_fast],
            }
            rows.append(row)
            short = {k: v for k, v in row.items() if not k.endswith("_ms")}
            log(f"speed {json.dumps(short)}")
    return rows


# --- 2. the typical query -------------------------------------------------------------------
def bench_query(
    bundle: ModelBundle, wv: WeightsVersion, target_tokens: int, count: int, pop: int
) -> dict[str, Any] | None:
    src = bundle.src
    path = DATA / "clir" / f"lohelp-{src}" / "queries.dev.tsv"
    if not path.exists():
        log(f"query: {path} missing, skipped")
        return None
    ref, fast = decoders(bundle, wv, pop)
    max_words = fast.config.max_words
    queries = load_queries(path)
    split = {qid: query_sentences(text, src, max_words) for qid, text in queries.items()}
    size = {qid: sum(len(s) for s in sents) for qid, sents in split.items()}
    chosen = sorted(split, key=lambda q: (abs(size[q] - target_tokens), q))[:count]
    warm = [s for q in sorted(split) if q not in chosen for s in split[q]][:2]
    pool = ThreadPoolExecutor(2)
    for s in warm:
        ref.forest(s)
        fast.forest(s)
    list(pool.map(fast.forest, warm))

    def run_ref(sents: list[Sentence]) -> list[Forest]:
        return [ref.forest(s) for s in sents]

    def run_fast(sents: list[Sentence]) -> list[Forest]:
        return [fast.forest(s) for s in sents]

    def run_threads(sents: list[Sentence]) -> list[Forest]:
        return list(pool.map(fast.forest, sents))

    runners = {"reference": run_ref, "compiled": run_fast, "compiled_2_threads": run_threads}
    times: dict[str, list[float]] = {k: [] for k in runners}
    same_best = {"compiled": 0, "compiled_2_threads": 0}
    names = list(runners)
    for i, qid in enumerate(chosen):
        sents = split[qid]
        best: dict[str, list[float]] = {}
        for j in range(3):
            name = names[(i + j) % 3]
            forests, t = timed(runners[name], sents)
            times[name].append(t)
            best[name] = [f.best_score for f in forests]
        for name in same_best:
            same_best[name] += best[name] == best["reference"]
        log(
            f"query {i + 1}/{len(chosen)} {qid}: {size[qid]} tokens, {len(sents)} sentences; "
            + ", ".join(f"{k} {ms(v[-1])} ms" for k, v in times.items())
        )
    pool.shutdown()
    out: dict[str, Any] = {
        "pop_limit": pop,
        "target_tokens": target_tokens,
        "queries": len(chosen),
        "qids": chosen,
        "tokens": [size[q] for q in chosen],
        "sentences": [len(split[q]) for q in chosen],
        "tokens_median": statistics.median(size[q] for q in chosen),
        "sentences_median": statistics.median(len(split[q]) for q in chosen),
    }
    for name, ts in times.items():
        out[f"{name}_ms_median"] = median_ms(ts)
        out[f"{name}_ms_p90"] = ms(percentile(ts, 90))
    out["ratio_total_reference_compiled"] = ratio(times["reference"], times["compiled"])
    out["ratio_total_reference_compiled_2_threads"] = ratio(
        times["reference"], times["compiled_2_threads"]
    )
    out["ratio_total_compiled_1_2_threads"] = ratio(times["compiled"], times["compiled_2_threads"])
    out["same_best_scores_as_reference"] = same_best
    out["times_ms"] = {k: [ms(t, 2) for t in v] for k, v in times.items()}
    log(f"query {json.dumps({k: v for k, v in out.items() if k not in ('qids', 'times_ms')})}")
    return out


# --- 3. identity ----------------------------------------------------------------------------
def identity_sentences(
    sources: list[Sentence], count: int, seed: int = 0
) -> list[tuple[Sentence, bool]]:
    """``count`` (sentence, letters shuffled) with target lengths spread evenly over 1–80.

    A sentence of exactly the target length is taken when there is one (at random, without
    repetition), else a longer one is cut. Every 5th sentence (at least one) has the letters
    of each word shuffled: mostly unknown words, pass-through rules and LM OOVs.
    """
    rng = random.Random(seed)
    lengths = [round(1 + i * 79 / max(1, count - 1)) for i in range(count)]
    used: set[Sentence] = set()
    out: list[tuple[Sentence, bool]] = []
    for i, n in enumerate(lengths):
        exact = [s for s in sources if len(s) == n and s not in used]
        pool = exact or [s[:n] for s in sources if len(s) > n and s[:n] not in used]
        if not pool:
            continue
        sent = rng.choice(pool)
        used.add(sent)
        shuffle = i % 5 == 2 or (count < 3 and i == count - 1)
        if shuffle:
            sent = tuple("".join(rng.sample(w, len(w))) for w in sent)
        out.append((sent, shuffle))
    return out


def _kbest_list(forest: Forest, weights: Weights) -> list[tuple[Sentence, float]]:
    # a fixed number of derivations, not the default time budget: deterministic lists
    found = unique_kbest(forest.hypergraph, weights, 100, max_derivations=IDENTITY_DERIVATIONS)
    return [(d.tokens, d.score) for d in found]


def bench_identity(
    bundle: ModelBundle, wv: WeightsVersion, sources: list[Sentence], count: int, pops: list[int]
) -> dict[str, Any]:
    from tests.mt.test_compiled_decoder import arrays_difference, forest_difference

    weights = wv.weights
    picked = identity_sentences(sources, count)
    sents = [t for t, _ in picked]
    log(f"identity: {len(sents)} sentences, lengths {sorted(len(s) for s in sents)}")
    runs: list[dict[str, Any]] = []
    for pop in pops:
        for use_lm in (True, False):
            ref, fast = decoders(bundle, wv, pop, use_lm)
            counts = {"forests": 0, "viterbi": 0, "kbest100": 0, "stats": 0}
            diffs: list[dict[str, Any]] = []
            t_ref = t_fast = 0.0
            started = time.perf_counter()
            for i, toks in enumerate(sents):
                found: dict[str, str] = {}
                try:
                    a, ta = timed(ref.forest, toks)
                    b, tb = timed(fast.forest, toks)
                    t_ref += ta
                    t_fast += tb
                    d = forest_difference(a, b) or arrays_difference(a, b)
                    if d is None:
                        counts["forests"] += 1
                    else:
                        found["forest"] = d
                    va, vb = (
                        fast_viterbi(a.hypergraph, weights),
                        fast_viterbi(b.hypergraph, weights),
                    )
                    if (va.tokens, va.score) == (vb.tokens, vb.score):
                        counts["viterbi"] += 1
                    else:
                        found["viterbi"] = f"{va.tokens} {va.score!r} vs {vb.tokens} {vb.score!r}"
                    ka, kb = _kbest_list(a, weights), _kbest_list(b, weights)
                    if ka == kb:
                        counts["kbest100"] += 1
                    else:
                        pairs = enumerate(zip(ka, kb, strict=False))
                        at = next((j for j, (x, y) in pairs if x != y), None)
                        found["kbest100"] = f"{len(ka)} vs {len(kb)} entries, first difference {at}"
                    sa = (a.stats.pops, a.stats.minus_lm_nodes)
                    if sa == (b.stats.pops, b.stats.minus_lm_nodes):
                        counts["stats"] += 1
                    else:
                        found["stats"] = (
                            f"pops, -LM nodes {sa} vs {b.stats.pops, b.stats.minus_lm_nodes}"
                        )
                except Exception as exc:  # a crash is a difference too: record it, go on
                    found["error"] = repr(exc)
                if found and len(diffs) < 3:
                    diffs.append({"index": i, "words": len(toks), "tokens": " ".join(toks)} | found)
                if (i + 1) % 10 == 0 or i + 1 == len(sents) or found:
                    log(
                        f"identity pop {pop} lm {use_lm}: {i + 1}/{len(sents)} "
                        f"({len(toks)} words) identical {counts}, "
                        f"{time.perf_counter() - started:.0f} s"
                        + (f" DIFF {found}" if found else "")
                    )
            runs.append(
                {
                    "pop_limit": pop,
                    "use_lm": use_lm,
                    "sentences": len(sents),
                    "identical": counts,
                    "reference_s": round(t_ref, 2),
                    "compiled_s": round(t_fast, 3),
                    "ratio_total": round(t_ref / t_fast, 2) if t_fast else math.nan,
                    "differences": diffs,
                }
            )
            # each run on its own line too: a run cut short (the reference is slow at pop
            # 1000) keeps what it measured in the log
            log(f"identity run {json.dumps(runs[-1])}")
    return {
        "sentences": len(sents),
        "lengths": [len(s) for s in sents],
        "shuffled_letters": [i for i, (_, shuffled) in enumerate(picked) if shuffled],
        "runs": runs,
    }


# --- driver ---------------------------------------------------------------------------------
def bench_model(name: str, args: Params) -> dict[str, Any]:
    log(f"{name}: loading the bundle")
    bundle, t_load = timed(load_bundle, ROOT / "models" / name)
    sources = load_sources(bundle)
    log(f"{name}: loaded in {t_load:.1f} s, {len(sources)} dev sentences; LM table")
    _, t_table = timed(getattr, bundle, "lm_table")  # built and cached beside the ARPA once
    log(f"{name}: LM table in {t_table:.1f} s; warming up")
    wv = bundle.active_weights()  # fixed for the whole run (a tuning job may activate others)
    weights = wv.weights
    ref, fast = decoders(bundle, wv, 10)
    warm = next(s for s in sources if len(s) >= 5)[:5]
    _, t_first = timed(fast.forest, warm)  # numba: compile or load from the disk cache
    ref.forest(warm)
    b = fast.forest(warm)
    fast_viterbi(b.hypergraph, weights)
    unique_kbest(b.hypergraph, weights, 100)
    log(f"{name}: first compiled call {t_first:.1f} s")
    result: dict[str, Any] = {
        "weights": wv.version,
        "rules": bundle.manifest.get("counts", {}).get("grammar", {}).get("rules"),
        "lm_order": bundle.lm.order,
        "load_s": round(t_load, 2),
        "lm_table_s": round(t_table, 2),
        "first_compiled_call_s": round(t_first, 2),
    }
    if args.per_length > 0:
        result["speed"] = bench_speed(
            bundle, wv, sources, list(args.pops), list(args.lengths), args.per_length
        )
    if args.query_count > 0:
        result["query"] = bench_query(
            bundle, wv, args.query_tokens, args.query_count, args.query_pop
        )
    if args.identity > 0:
        result["identity"] = bench_identity(
            bundle, wv, sources, args.identity, list(args.identity_pops)
        )
    result["signature"] = bundle_signature(bundle)
    return result


@dataclass(frozen=True)
class Params:
    model: Annotated[
        tuple[str, ...], Help("bundles under models/ (default: de-en and zh-en, if present)")
    ] = ()
    per_length: Annotated[int, Help("sentences per length (0: skip)")] = 10
    pops: Annotated[tuple[int, ...], Help("pop limits")] = (50, 200, 1000)
    lengths: Annotated[tuple[int, ...], Help("sentence lengths")] = (5, 10, 20, 30)
    identity: Annotated[int, Help("identity sentences (0: skip)")] = 0
    identity_pops: Annotated[tuple[int, ...], Help("pop limits of the identity check")] = (
        50,
        200,
        1000,
    )
    query_tokens: Annotated[int, Help("typical query size, tokens")] = 50
    query_count: Annotated[int, Help("typical queries (0: skip)")] = 20
    query_pop: Annotated[int, Help("pop limit for the queries")] = 200
    out: Annotated[Path, Help("JSON output")] = OUT


def run(args: Params) -> None:
    models = list(args.model) or [m for m in DEFAULT_MODELS if (ROOT / "models" / m).is_dir()]
    load_start = os.getloadavg()
    started = time.perf_counter()
    results: dict[str, Any] = {}
    for name in models:
        results[name] = bench_model(name, args)
    load_end = os.getloadavg()
    import numba

    report = {
        "models": results,
        "machine_note": (
            f"{os.cpu_count()} cores, shared; load average {load_start[0]:.2f} at start, "
            f"{load_end[0]:.2f} at end (1 min); reference and compiled alternate per sentence "
            "in one process, so ratios of totals are the robust figure; absolute times are "
            f"noisy. Python {platform.python_version()}, numba {numba.__version__}; "
            f"wall time {time.perf_counter() - started:.0f} s"
        ),
        "date": dt.datetime.now().isoformat(timespec="seconds"),
        "settings": jsonable(args) | {"model": models},
    }
    signatures = {name: r.pop("signature") for name, r in results.items()}
    write_result(args.out, report, args, signatures=signatures)
    log(f"wrote {args.out}")


if __name__ == "__main__":
    from bench.cli import main_for

    main_for("decoder")
