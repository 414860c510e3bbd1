"""Pruning the +LM nodes the goal cannot reach: forest sizes, time, memory and rankings.

The compiled decoder (:class:`service.mt.decoder.compiled.CompiledDecoder`) with
``DecoderConfig.prune_unreachable`` on (the default) and off, built from the same bundle and
its active weights, on the full bundles (``models/de-en``, ``models/zh-en``):

1. **Sentences** (``sentences``): ``--sentences`` dev source sentences of ``tr/<src>-en``
   (``bench_decoder.load_sources``; every k-th of those with 1–80 tokens, so all lengths
   appear) at every ``--pops`` limit, decoded by both decoders alternately in one process
   (pruned first on even sentences). Per sentence: nodes and edges before (the search's
   output, ``DecodeStats.search_nodes``/``search_edges``) and after pruning, decode time of
   both, the pruning pass's own time, the Viterbi pass's time on both forests; and whether the
   Viterbi 1-best (tokens, score, features) and the unique 100-best (tokens, score; at most
   10,000 derivations, deterministic) are identical.
2. **Queries** (``queries``): the first ``--queries`` dev queries of ``clir/lohelp-<src>``
   (title + paragraph), decoded at the default pop limit by both decoders (alternately), then
   ranked to depth 1000 against the full document index (``indexes/docs``) by BOW-FD, DT and
   PSQ (``service.retrieval.runner.make_scorer``). BOW-FD is timed on both forests
   alternately (``rank``: prepare + score); the rankings of every method must be identical
   (document numbers and scores, bit for bit). Also the service's cache estimate
   (``service.api.serving.query_bytes``) per query.
3. **Memory** (``memory``): for the first ``--memory-queries`` of those queries, the bytes a
   decoded query holds after a BOW-FD ranking, measured with :mod:`tracemalloc` (decoded and
   ranked once before, so that caches of the grammar and the decoder are warm), per query and
   per forest edge, pruned and not.

Medians are :func:`statistics.median`. Output: ``bench/results/decoder_prune.json`` (``--out``);
progress on stderr. Run (about 6 min for both full models on 2 shared cores)::

    nice -n 5 .venv/bin/python -m bench decoder-prune
    .venv/bin/python -m bench decoder-prune-demo     # quick check on the demo bundle and index
"""

from __future__ import annotations

import datetime as dt
import gc
import json
import os
import platform
import statistics
import time
import tracemalloc
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from bench.bench_decoder import load_sources, log, ms, timed
from bench.common import DATA, ROOT, Help, bundle_signature, jsonable, percentile, write_result
from service.api.serving import BYTES_PER_ARRAY_EDGE, query_bytes
from service.data import load_queries
from service.forest.inference import fast_viterbi
from service.forest.kbest import unique_kbest
from service.index.inverted import load_index
from service.mt.bundle import ModelBundle, load_bundle
from service.mt.decoder import Decoder, DecoderConfig, Forest
from service.retrieval.base import DecodedQuery, Ranking
from service.retrieval.query import decode_query
from service.retrieval.runner import make_scorer

OUT = ROOT / "bench" / "results" / "decoder_prune.json"
KBEST_DERIVATIONS = 10_000
DEPTH = 1000
METHODS = ("bowfd", "dt", "psq")


def median(xs: Sequence[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def decoder_pair(bundle: ModelBundle, pop: int | None) -> tuple[Decoder, Decoder]:
    """(pruned, unpruned) compiled decoders of the active weights."""
    weights = bundle.active_weights().weights
    base = (
        DecoderConfig(engine="compiled") if pop is None else DecoderConfig(pop, engine="compiled")
    )
    on = bundle.make_decoder(weights, base)
    off_config = DecoderConfig(pop_limit=base.pop_limit, engine="compiled", prune_unreachable=False)
    return on, bundle.make_decoder(weights, off_config)


def pick_sentences(bundle: ModelBundle, count: int) -> list[tuple[str, ...]]:
    sources = [s for s in load_sources(bundle) if 1 <= len(s) <= 80]
    step = max(1, len(sources) // count)
    return sources[::step][:count]


def same_translations(a: Forest, b: Forest, weights: dict[str, float]) -> tuple[bool, bool]:
    """(Viterbi identical, unique 100-best identical) on two forests of one sentence."""
    va, vb = fast_viterbi(a.hypergraph, weights), fast_viterbi(b.hypergraph, weights)
    vit = (va.tokens, va.score, va.features) == (vb.tokens, vb.score, vb.features)
    ka = unique_kbest(a.hypergraph, weights, 100, max_derivations=KBEST_DERIVATIONS)
    kb = unique_kbest(b.hypergraph, weights, 100, max_derivations=KBEST_DERIVATIONS)
    return vit, [(d.tokens, d.score) for d in ka] == [(d.tokens, d.score) for d in kb]


# --- 1. sentences ------------------------------------------------------------------------------
def bench_sentences(
    bundle: ModelBundle, sentences: list[tuple[str, ...]], pops: list[int]
) -> list[dict[str, Any]]:
    weights = bundle.active_weights().weights
    rows = []
    for pop in pops:
        on, off = decoder_pair(bundle, pop)
        for s in sentences[-2:]:  # warm both (kernels, per-thread memos)
            on.forest(s)
            off.forest(s)
        rec: dict[str, list[float]] = {
            k: []
            for k in (
                "search_nodes", "search_edges", "nodes", "edges", "t_on", "t_off", "t_prune",
                "vit_on", "vit_off", "words",
            )
        }  # fmt: skip
        same_vit = same_kbest = 0
        for i, s in enumerate(sentences):
            if i % 2 == 0:
                a, t_on = timed(on.forest, s)
                b, t_off = timed(off.forest, s)
            else:
                b, t_off = timed(off.forest, s)
                a, t_on = timed(on.forest, s)
            assert b.stats.nodes == a.stats.search_nodes and b.stats.edges == a.stats.search_edges
            _, vit_on = timed(fast_viterbi, a.hypergraph, weights)
            _, vit_off = timed(fast_viterbi, b.hypergraph, weights)
            v, k = same_translations(a, b, weights)
            same_vit += v
            same_kbest += k
            for key, x in (
                ("search_nodes", a.stats.search_nodes), ("search_edges", a.stats.search_edges),
                ("nodes", a.stats.nodes), ("edges", a.stats.edges), ("t_on", t_on),
                ("t_off", t_off), ("t_prune", a.stats.timings["prune"]), ("vit_on", vit_on),
                ("vit_off", vit_off), ("words", len(s)),
            ):  # fmt: skip
                rec[key].append(x)
        n = len(sentences)
        row = {
            "pop_limit": pop,
            "sentences": n,
            "words_median": median(rec["words"]),
            "nodes_before_median": median(rec["search_nodes"]),
            "nodes_after_median": median(rec["nodes"]),
            "edges_before_median": median(rec["search_edges"]),
            "edges_after_median": median(rec["edges"]),
            "nodes_kept_share_total": round(sum(rec["nodes"]) / sum(rec["search_nodes"]), 4),
            "edges_kept_share_total": round(sum(rec["edges"]) / sum(rec["search_edges"]), 4),
            "decode_ms_median_unpruned": ms(median(rec["t_off"]), 2),
            "decode_ms_median_pruned": ms(median(rec["t_on"]), 2),
            "decode_ms_p90_unpruned": ms(percentile(rec["t_off"], 90), 2),
            "decode_ms_p90_pruned": ms(percentile(rec["t_on"], 90), 2),
            "decode_ratio_total_unpruned_over_pruned": round(
                sum(rec["t_off"]) / sum(rec["t_on"]), 3
            ),
            "prune_pass_ms_median": ms(median(rec["t_prune"]), 3),
            "viterbi_ms_median_unpruned": ms(median(rec["vit_off"]), 3),
            "viterbi_ms_median_pruned": ms(median(rec["vit_on"]), 3),
            "viterbi_identical": f"{same_vit}/{n}",
            "unique_kbest100_identical": f"{same_kbest}/{n}",
            "per_sentence": {k: [round(x, 6) for x in v] for k, v in rec.items()},
        }
        rows.append(row)
        log(f"sentences {json.dumps({k: v for k, v in row.items() if k != 'per_sentence'})}")
    return rows


# --- 2. queries ---------------------------------------------------------------------------------
def _hits(r: Ranking) -> list[tuple[int, float]]:
    return [(h.docno, h.score) for h in r.hits]


def bench_queries(
    bundle: ModelBundle, index: Any, count: int
) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    src = bundle.src
    queries = list(load_queries(DATA / "clir" / f"lohelp-{src}" / "queries.dev.tsv").items())
    chosen = queries[:count]
    on, off = decoder_pair(bundle, None)
    scorers = {m: make_scorer(m, index, bundle) for m in METHODS}
    warm = decode_query(on, queries[-1][1], src)  # kernels of every method, outside the timings
    for m in METHODS:
        scorers[m].rank(warm, DEPTH)
    rec: dict[str, list[float]] = {
        k: [] for k in ("dec_on", "dec_off", "bowfd_on", "bowfd_off", "edges_on", "edges_off",
                        "est_on", "est_off", "sentences", "prepare_on", "prepare_off")
    }  # fmt: skip
    identical = {m: 0 for m in METHODS}
    differing: dict[str, list[str]] = {m: [] for m in METHODS}
    bowfd = scorers["bowfd"]
    for i, (qid, text) in enumerate(chosen):
        order = (True, False) if i % 2 == 0 else (False, True)
        decoded: dict[bool, DecodedQuery] = {}
        for pruned in order:
            t0 = time.perf_counter()
            decoded[pruned] = decode_query(on if pruned else off, text, src, qid=qid)
            rec["dec_on" if pruned else "dec_off"].append(time.perf_counter() - t0)
        rankings: dict[tuple[str, bool], Ranking] = {}
        for pruned in order:  # BOW-FD timed, alternating
            t0 = time.perf_counter()
            r = bowfd.rank(decoded[pruned], DEPTH)
            rec["bowfd_on" if pruned else "bowfd_off"].append(time.perf_counter() - t0)
            rec["prepare_on" if pruned else "prepare_off"].append(r.info["seconds"]["prepare"])
            rankings[("bowfd", pruned)] = r
        for m in ("dt", "psq"):
            for pruned in order:
                rankings[(m, pruned)] = scorers[m].rank(decoded[pruned], DEPTH)
        for m in METHODS:
            same = _hits(rankings[(m, True)]) == _hits(rankings[(m, False)])
            identical[m] += same
            if not same:
                differing[m].append(qid)
        for pruned in (True, False):
            q = decoded[pruned]
            tag = "on" if pruned else "off"
            rec[f"edges_{tag}"].append(sum(f.hypergraph.num_edges for f in q.forests))
            rec[f"est_{tag}"].append(query_bytes(q))
        rec["sentences"].append(len(decoded[True].forests))
        log(
            f"query {qid}: {len(decoded[True].forests)} sentences, edges "
            f"{rec['edges_off'][-1]} -> {rec['edges_on'][-1]}, BOW-FD "
            f"{ms(rec['bowfd_off'][-1])} -> {ms(rec['bowfd_on'][-1])} ms, identical "
            f"{ {m: _hits(rankings[(m, True)]) == _hits(rankings[(m, False)]) for m in METHODS} }"
        )
    n = len(chosen)
    out = {
        "queries": n,
        "depth": DEPTH,
        "pop_limit": on.config.pop_limit,
        "sentences_median": median(rec["sentences"]),
        "edges_per_query_median_unpruned": median(rec["edges_off"]),
        "edges_per_query_median_pruned": median(rec["edges_on"]),
        "decode_ms_median_unpruned": ms(median(rec["dec_off"])),
        "decode_ms_median_pruned": ms(median(rec["dec_on"])),
        "decode_ratio_total_unpruned_over_pruned": round(
            sum(rec["dec_off"]) / sum(rec["dec_on"]), 3
        ),
        "bowfd_rank_ms_median_unpruned": ms(median(rec["bowfd_off"])),
        "bowfd_rank_ms_median_pruned": ms(median(rec["bowfd_on"])),
        "bowfd_rank_ms_p90_unpruned": ms(percentile(rec["bowfd_off"], 90)),
        "bowfd_rank_ms_p90_pruned": ms(percentile(rec["bowfd_on"], 90)),
        "bowfd_ratio_total_unpruned_over_pruned": round(
            sum(rec["bowfd_off"]) / sum(rec["bowfd_on"]), 3
        ),
        "bowfd_prepare_ms_median_unpruned": ms(median(rec["prepare_off"])),
        "bowfd_prepare_ms_median_pruned": ms(median(rec["prepare_on"])),
        "cache_estimate_bytes_per_query_median_unpruned": median(rec["est_off"]),
        "cache_estimate_bytes_per_query_median_pruned": median(rec["est_on"]),
        "bytes_per_array_edge_constant": BYTES_PER_ARRAY_EDGE,
        "rankings_identical": {m: f"{identical[m]}/{n}" for m in METHODS},
        "rankings_differing_qids": differing,
        "per_query": {k: [round(x, 6) for x in v] for k, v in rec.items()},
    }
    log(f"queries {json.dumps({k: v for k, v in out.items() if k != 'per_query'})}")
    return out, chosen


# --- 3. memory ----------------------------------------------------------------------------------
def held_bytes(decoder: Decoder, scorer: Any, text: str, src: str) -> tuple[int, int]:
    """(bytes a decoded query holds after a BOW-FD ranking, its forests' edges)."""
    scorer.rank(decode_query(decoder, text, src), DEPTH)  # warm the caches it fills
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    q = decode_query(decoder, text, src)
    scorer.rank(q, DEPTH)
    gc.collect()
    held = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    return held, sum(f.hypergraph.num_edges for f in q.forests)


def bench_memory(
    bundle: ModelBundle, index: Any, chosen: list[tuple[str, str]], count: int
) -> dict[str, Any]:
    on, off = decoder_pair(bundle, None)
    scorer = make_scorer("bowfd", index, bundle)
    rows = []
    for qid, text in chosen[:count]:
        row: dict[str, Any] = {"qid": qid}
        for tag, dec in (("pruned", on), ("unpruned", off)):
            held, edges = held_bytes(dec, scorer, text, bundle.src)
            row[f"{tag}_bytes"] = held
            row[f"{tag}_edges"] = edges
            row[f"{tag}_bytes_per_edge"] = round(held / edges, 1)
        rows.append(row)
        log(f"memory {json.dumps(row)}")
    per_edge = [r["pruned_bytes_per_edge"] for r in rows]
    per_edge_off = [r["unpruned_bytes_per_edge"] for r in rows]
    return {
        "queries": len(rows),
        "bytes_per_edge_pruned_min_median_max": [min(per_edge), median(per_edge), max(per_edge)],
        "bytes_per_edge_unpruned_min_median_max": [
            min(per_edge_off),
            median(per_edge_off),
            max(per_edge_off),
        ],
        "bytes_per_query_median_pruned": median([r["pruned_bytes"] for r in rows]),
        "bytes_per_query_median_unpruned": median([r["unpruned_bytes"] for r in rows]),
        "per_query": rows,
    }


def bench_model(name: str, args: Params) -> dict[str, Any]:
    bundle = load_bundle(ROOT / "models" / name)
    log(f"model {name}")
    sentences = pick_sentences(bundle, args.sentences)
    out: dict[str, Any] = {
        "sentences": bench_sentences(bundle, sentences, [int(p) for p in args.pops.split(",")])
    }
    if args.queries:
        index = load_index(ROOT / "indexes" / args.index)
        out["queries"], chosen = bench_queries(bundle, index, args.queries)
        if args.memory_queries:
            out["memory"] = bench_memory(bundle, index, chosen, args.memory_queries)
    out["signature"] = bundle_signature(bundle)
    return out


@dataclass(frozen=True)
class Params:
    models: Annotated[str, Help("bundles under models/, comma-separated")] = "de-en,zh-en"
    pops: Annotated[str, Help("pop limits, comma-separated")] = "200,1000"
    sentences: Annotated[int, Help("dev sentences")] = 60
    queries: Annotated[int, Help("dev queries (0: skip)")] = 50
    memory_queries: Annotated[int, Help("queries measured with tracemalloc (0: skip)")] = 10
    index: Annotated[str, Help("document index under indexes/")] = "docs"
    out: Annotated[Path, Help("JSON output")] = OUT


def run(args: Params) -> None:
    result: dict[str, Any] = {"models": {}}
    for name in args.models.split(","):
        result["models"][name] = bench_model(name, args)
    result["settings"] = {k: str(v) for k, v in jsonable(args).items()}
    result["machine_note"] = (
        f"{platform.machine()}, {os.cpu_count()} shared cores, load "
        f"{os.getloadavg()[0]:.1f} at the end; one process, pruned and unpruned alternating"
    )
    result["date"] = dt.datetime.now().isoformat(timespec="seconds")
    signatures = {name: r.pop("signature") for name, r in result["models"].items()}
    write_result(args.out, result, args, signatures=signatures)
    log(f"wrote {args.out}")


if __name__ == "__main__":
    from bench.cli import main_for

    main_for("decoder-prune")
