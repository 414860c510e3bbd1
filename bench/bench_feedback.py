"""Pseudo-relevance feedback (RM3) on the dev query sets, against the monolingual ceilings.

For one language, every query of each set (paragraph, short, question) is decoded once (+LM,
the bundle's active weights, as the service decodes) and ranked at depth 1000 by each method
(DT, PSQ, BOW-FD with the product's defaults). From each first ranking, without decoding or
ranking it again, the feedback forms of :mod:`service.retrieval.feedback`:

* ``+rm3``: the RM3-expanded query (the 1-best translation plus the top documents' relevance
  model, the documents weighted by the method's posterior) ranked by BM25 on the same index
  (the form ``replace``);
* ``+rm3u``: the same with uniform document weights;
* ``+mix``: the first ranking and ``+rm3``'s mixed (the form ``interpolate``, the service's
  default: CombSUM of min-max normalised scores, :func:`service.retrieval.feedback.interpolate`),
  both 1000 deep, as ``clir eval --feedback`` ranks;
* ``+mix@N``: the same mix of both rankings' top N (``pool``, 100), what the service mixes for
  a page of up to N results (its MAP is cut at N; its NDCG@10 and MRR are the page's).

For a method that ranks again (BOW-FD), through ``Scorer.rank(..., feedback=)`` itself:

* ``+rerank``: the ``rerank`` form, the first ranking's 1000 documents ranked again with the
  relevance model as extra IR weight on the forest's words;
* ``+rerank+mix``: the ``rerank+interpolate`` form, that ranking mixed with ``+rm3``'s, 1000 deep;
* ``+rerank@N``: the ``rerank`` form as the service runs it for a page of up to N results
  (``pool``: the first ranking's top N ranked again; MAP cut at N).

With ``--grid``, BOW-FD's ``+mix`` is also measured for every point of a grid of RM3's
parameters (documents, terms, λ, mix) from the same first rankings.

The ceiling is the English side through the same index: BM25 with the English mate's first 50
tokens (paragraph) or first 8 (short), the English version of each question; with and without
RM3 (documents weighted by the softmax of their BM25 scores).

Reports MAP, NDCG@10 and MRR per (set, configuration), the share of the ceiling, and the paired
randomization test (10,000 permutations) of each feedback form against its method on AP and
RR. Writes ``bench/results/feedback_<lang>.json``.

Run: ``.venv/bin/python -m bench feedback de [--sets paragraph,short,question]
[--methods dt,psq,bowfd] [--max-queries N] [--docs 10 --terms 10 --weight 0.5]``.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import replace as replace_params
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np

from bench.bench_querysets import QUERYSETS, english_pages, load_set
from bench.common import RESULTS_DIR, ROOT, Help, bundle_signature, write_result
from service.data import load_queries
from service.data.querysets import ceiling_queries, english_text, mate
from service.evaluation import evaluate, randomization_test
from service.index.inverted import Hits, InvertedIndex, load_index
from service.mt.bundle import load_bundle
from service.mt.decoder import DecoderConfig
from service.retrieval.dt import one_best
from service.retrieval.feedback import FeedbackParams, expand, interpolate, rank_expanded
from service.retrieval.query import decode_query
from service.retrieval.runner import make_scorer

METRICS = ("map", "ndcg@10", "mrr")
PERMUTATIONS = 10_000
DEPTH = 1000
PARAGRAPH_CEILING_TOKENS = 50


def feedback_forms(
    index: InvertedIndex, tokens: list[str], first: Hits, params: FeedbackParams
) -> dict[str, Hits]:
    """The feedback rankings derived from one first ranking (see the module docstring)."""
    replace = replace_params(params, form="replace")
    rm3 = rank_expanded(index, expand(index, tokens, first, replace), DEPTH)
    uniform = replace_params(replace, weighting="uniform")
    rm3u = rank_expanded(index, expand(index, tokens, first, uniform), DEPTH)
    top = params.pool  # what the service mixes for a page of up to `pool` results
    head = Hits(first.docs[:top], first.scores[:top])
    return {
        "+rm3": rm3,
        "+rm3u": rm3u,
        "+mix": interpolate(first, rm3, params.mix, DEPTH),
        f"+mix@{top}": interpolate(head, Hits(rm3.docs[:top], rm3.scores[:top]), params.mix, top),
    }


def rerank_forms(params: FeedbackParams) -> list[tuple[str, FeedbackParams, int]]:
    """The rerank forms measured (name, parameters, depth): see the module docstring."""
    deep = replace_params(params, pool=DEPTH)
    return [
        ("+rerank", replace_params(deep, form="rerank"), DEPTH),
        ("+rerank+mix", replace_params(deep, form="rerank+interpolate"), DEPTH),
        (f"+rerank@{params.pool}", replace_params(params, form="rerank"), params.pool),
    ]


def hits_of(ranking: Any) -> Hits:
    return Hits(
        np.array([h.docno for h in ranking.hits], dtype=np.int32),
        np.array([h.score for h in ranking.hits], dtype=np.float32),
    )


def grid_maps(
    index: InvertedIndex,
    firsts: Mapping[str, tuple[list[str], Hits]],
    qrels: Mapping[str, Mapping[str, int]],
) -> list[dict[str, Any]]:
    """MAP and nDCG@10 of BOW-FD with mixed feedback (at depth 1000) for each point of a grid
    of RM3's parameters, from the first rankings of one set (no decoding again)."""
    rows = []
    for docs in GRID["docs"]:
        for terms in GRID["terms"]:
            for weight in GRID["weight"]:
                params = FeedbackParams(docs, terms, weight, form="replace")
                expanded = {
                    qid: rank_expanded(index, expand(index, tokens, first, params), DEPTH)
                    for qid, (tokens, first) in firsts.items()
                }
                for mix in GRID["mix"]:
                    run = {}
                    for qid, (_, first) in firsts.items():
                        h = interpolate(first, expanded[qid], mix, DEPTH)
                        ids = map(index.doc_id, h.docs.tolist())
                        run[qid] = dict(zip(ids, h.scores.tolist(), strict=True))
                    ev = evaluate(run, {q: qrels[q] for q in run}, ("map", "ndcg@10"))
                    rows.append({"docs": docs, "terms": terms, "weight": weight, "mix": mix,
                                 **ev.as_json()})  # fmt: skip
    return rows


GRID: dict[str, tuple[Any, ...]] = {
    "docs": (5, 10, 20),
    "terms": (10, 20, 40),
    "weight": (0.3, 0.5, 0.7),
    "mix": (0.3, 0.5, 0.7),
}


def english_queries(
    set_name: str, lang: str, queries: Mapping[str, str], qrels: Mapping[str, Mapping[str, int]]
) -> dict[str, str]:
    """The monolingual ceiling's English queries of a set."""
    if set_name == "question":
        qs = QUERYSETS / f"lohelp-{lang}" / "questions.en.dev.tsv"
        return {q: t for q, t in load_queries(qs).items() if q in queries}
    pages = english_pages()
    if set_name == "short":
        return ceiling_queries(queries, qrels, pages)
    out = {}
    for qid in queries:
        text = english_text(*pages[mate(qrels[qid])])
        out[qid] = " ".join(text.split()[:PARAGRAPH_CEILING_TOKENS])
    return out


def rank_sets(
    p: Params,
    sets: list[str],
    methods: list[str],
    params: FeedbackParams,
    out: Path,
) -> dict[str, Any]:
    lang, max_queries = p.lang, p.max_queries
    bundle = load_bundle(ROOT / "models" / f"{lang}-en")
    index = load_index(ROOT / "indexes" / "docs")
    decoder = bundle.decoder(DecoderConfig(use_lm=True))
    version = bundle.active_weights().version
    scorers = {m: make_scorer(m, index, bundle) for m in methods}
    result: dict[str, Any] = {
        "lang": lang, "weights": version, "feedback": params.signature(),
        "index": index.signature(), "signatures": {m: s.signature() for m, s in scorers.items()},
        "sets": {},
    }  # fmt: skip
    for set_name in sets:
        queries, qrels = load_set(set_name, lang)
        queries = {q: t for q, t in list(queries.items())[:max_queries] if q in qrels}
        runs = Runs(index)
        firsts: dict[str, tuple[list[str], Hits]] = {}
        for i, (qid, text) in enumerate(queries.items()):
            q = decode_query(decoder, text, bundle.src, qid=qid, weights_version=version)
            tokens = [t for s in one_best(q) for t in s]
            for m, scorer in scorers.items():
                t0 = time.perf_counter()
                ranking = scorer.rank(q, DEPTH)
                t1 = time.perf_counter()
                first = hits_of(ranking)
                runs.record(m, qid, first, t1 - t0)
                if p.grid and m == "bowfd":
                    firsts[qid] = (tokens, first)
                t0 = time.perf_counter()
                forms = feedback_forms(index, tokens, first, params)
                share = (time.perf_counter() - t0) / len(forms)
                for form, hits in forms.items():
                    runs.record(m + form, qid, hits, share)
                if scorer.reranks:
                    for key, fb, depth in rerank_forms(params):
                        t0 = time.perf_counter()
                        again = scorer.rank(q, depth, feedback=fb)
                        runs.record(m + key, qid, hits_of(again), time.perf_counter() - t0)
            if i % 25 == 0:
                print(f"{lang} {set_name}: query {i}/{len(queries)}", file=sys.stderr)
        english = english_queries(set_name, lang, queries, qrels)
        for qid, text in english.items():
            tokens = index.tokenize(text)
            t0 = time.perf_counter()
            first = index.bm25_topk(tokens, DEPTH)
            runs.record("ceiling", qid, first, time.perf_counter() - t0)
            t0 = time.perf_counter()
            hits = rank_expanded(index, expand(index, tokens, first, params), DEPTH)
            runs.record("ceiling+rm3", qid, hits, time.perf_counter() - t0)
        runs.n = len(queries)
        result["sets"][set_name] = summarise(runs, qrels)
        if firsts:
            result["sets"][set_name]["grid"] = grid_maps(index, firsts, qrels)
        print(markdown_set(lang, set_name, result["sets"][set_name]), file=sys.stderr)
        signatures = {"bundle": bundle_signature(bundle), "index": result["index"],
                      "scorers": result["signatures"], "feedback": result["feedback"]}  # fmt: skip
        write_result(out, result, p, signatures=signatures)  # after every set: partial results
    return result


class Runs:
    """Runs by configuration, and the ranking time each took."""

    def __init__(self, index: InvertedIndex) -> None:
        self.index = index
        self.runs: dict[str, dict[str, dict[str, float]]] = {}
        self.seconds: dict[str, float] = {}
        self.n = 0

    def record(self, key: str, qid: str, hits: Hits, seconds: float) -> None:
        ids = map(self.index.doc_id, hits.docs.tolist())
        self.runs.setdefault(key, {})[qid] = dict(zip(ids, hits.scores.tolist(), strict=True))
        self.seconds[key] = self.seconds.get(key, 0.0) + seconds


def summarise(runs: Runs, qrels: Mapping[str, Mapping[str, int]]) -> dict[str, Any]:
    n = runs.n
    seconds = runs.seconds
    entry: dict[str, Any] = {"queries": n, "configs": {}, "p": {}}
    per_query: dict[str, dict[str, dict[str, float]]] = {}
    for key, run in runs.runs.items():
        judged = {q: qrels[q] for q in run}
        ev = evaluate(dict(run), judged, ("map", "ndcg@10", "mrr"))
        per_query[key] = {m: ev.per_query[m] for m in ("map", "mrr")}
        entry["configs"][key] = {**ev.as_json(), "ms_per_query": 1000 * seconds[key] / max(1, n)}
    ceiling = entry["configs"].get("ceiling", {}).get("map")
    for key, cfg in entry["configs"].items():
        if ceiling:
            cfg["of_ceiling"] = cfg["map"] / ceiling
        if "+" in key:
            base = key.split("+")[0]
            entry["p"][f"{key} vs {base}"] = {
                metric: randomization_test(per_query[key][metric], per_query[base][metric],
                                           PERMUTATIONS, 0)
                for metric in ("map", "mrr")
            }  # fmt: skip
    return entry


def markdown_set(lang: str, set_name: str, entry: Mapping[str, Any]) -> str:
    lines = [f"{lang} {set_name} ({entry['queries']} queries)"]
    for key, cfg in entry["configs"].items():
        p = entry["p"].get(f"{key} vs {key.split('+')[0]}", {}).get("map")
        lines.append(
            f"  {key:14} MAP {cfg['map']:.4f} nDCG@10 {cfg['ndcg@10']:.4f} MRR {cfg['mrr']:.4f}"
            + (f" of-ceiling {cfg['of_ceiling']:.3f}" if "of_ceiling" in cfg else "")
            + (f" p {p:.4f}" if p is not None else "")
            + f" {cfg['ms_per_query']:.1f} ms"
        )
    return "\n".join(lines)


@dataclass(frozen=True)
class Params:
    lang: Annotated[Literal["de", "zh"], Help("query language", positional=True)] = "de"
    sets: Annotated[str, Help("dev sets, comma-separated")] = "paragraph,short,question"
    methods: Annotated[str, Help("methods, comma-separated")] = "dt,psq,bowfd"
    max_queries: Annotated[int | None, Help("the first N queries of each set (default: all)")] = (
        None
    )
    docs: Annotated[int, Help("feedback documents")] = 10
    terms: Annotated[int, Help("expansion terms")] = 10
    weight: Annotated[float, Help("the original query's weight")] = 0.7
    mix: Annotated[float, Help("the expanded ranking's share when mixed")] = 0.5
    pool: Annotated[int, Help("how deep the service mixes (the +mix@N form)")] = 100
    grid: Annotated[bool, Help("also scan RM3's parameters for BOW-FD (+mix, depth 1000)")] = False
    out: Annotated[Path | None, Help("result file (default: results/feedback_<lang>.json)")] = None
    table: Annotated[
        str | None, Help("only print the summary table of these result files (comma-separated)")
    ] = None


#: Per method, the feedback form the service runs by default (BOW-FD ranks again; DT and PSQ
#: interpolate), as measured 1000 deep.
DEFAULT_FORMS = {"dt": "+mix", "psq": "+mix", "bowfd": "+rerank", "ceiling": "+rm3"}


def summary_table(paths: list[Path]) -> str:
    """MAP, nDCG@10 and MRR of every method without → with its default feedback, per result
    file (a language) and set, with p against the method without feedback and the share of
    the monolingual ceiling (the table the feedback issue asks for)."""
    rows = [
        "| lang | set | method | MAP (p) | nDCG@10 | MRR (p) | of the ceiling |",
        "|---|---|---|---|---|---|---|",
    ]
    for path in paths:
        result = json.loads(path.read_text(encoding="utf-8"))
        for set_name, entry in result["sets"].items():
            configs = entry["configs"]
            for method, form in DEFAULT_FORMS.items():
                if method not in configs or method + form not in configs:
                    continue
                a, b = configs[method], configs[method + form]
                p = entry["p"][f"{method}{form} vs {method}"]
                name = "ceiling (English, BM25)" if method == "ceiling" else method
                rows.append(
                    f"| {result['lang']} | {set_name} ({entry['queries']}) | {name} {form} | "
                    f"{a['map']:.4f} → **{b['map']:.4f}** ({p['map']:.4f}) | "
                    f"{a['ndcg@10']:.4f} → {b['ndcg@10']:.4f} | "
                    f"{a['mrr']:.4f} → {b['mrr']:.4f} ({p['mrr']:.4f}) | "
                    f"{100 * a['of_ceiling']:.1f} → {100 * b['of_ceiling']:.1f} % |"
                )
    return "\n".join(rows)


def run(p: Params) -> None:
    if p.table:
        print(summary_table([Path(x) for x in p.table.split(",")]))
        return
    out = p.out or RESULTS_DIR / f"feedback_{p.lang}.json"
    feedback = FeedbackParams(p.docs, p.terms, p.weight, mix=p.mix, pool=p.pool)
    rank_sets(p, p.sets.split(","), p.methods.split(","), feedback, out)


if __name__ == "__main__":
    from bench.cli import main_for

    main_for("feedback")


@dataclass(frozen=True)
class LatencyParams:
    lang: Annotated[Literal["de", "zh"], Help("query language", positional=True)] = "de"
    sets: Annotated[str, Help("dev sets, comma-separated")] = "paragraph,short,question"
    method: Annotated[str, Help("the method searched with")] = "bowfd"
    queries: Annotated[int, Help("queries per set")] = 40
    k: Annotated[int, Help("results per page")] = 10
    out: Annotated[Path | None, Help("result file (default: feedback_latency_<lang>.json)")] = None


def latency(p: LatencyParams) -> None:
    """What feedback adds to a search as the service runs it: the method's page (top ``k``,
    explained, as the page asks) with and without the default feedback, timed alternately on
    the same decoded query (decoding is shared and not counted); the per-query ratio's median
    and the added milliseconds."""
    bundle = load_bundle(ROOT / "models" / f"{p.lang}-en")
    index = load_index(ROOT / "indexes" / "docs")
    decoder = bundle.decoder(DecoderConfig(use_lm=True))
    version = bundle.active_weights().version
    scorer = make_scorer(p.method, index, bundle)
    params = FeedbackParams()
    index.doc_vectors([0])  # the term vectors, once per process (the service's warm-up)
    result: dict[str, Any] = {"lang": p.lang, "method": p.method, "feedback": params.signature(),
                              "k": p.k, "sets": {}}  # fmt: skip
    for set_name in p.sets.split(","):
        queries, qrels = load_set(set_name, p.lang)
        chosen = [(q, t) for q, t in queries.items() if q in qrels][: p.queries]
        plain_ms, fb_ms = [], []
        for qid, text in chosen:
            q = decode_query(decoder, text, bundle.src, qid=qid, weights_version=version)
            for feedback in (None, params, None, params):  # alternately, twice
                t0 = time.perf_counter()
                scorer.rank(q, p.k, explain=True, feedback=feedback)
                ms = 1000 * (time.perf_counter() - t0)
                (plain_ms if feedback is None else fb_ms).append(ms)
        plain = [min(a, b) for a, b in zip(plain_ms[::2], plain_ms[1::2], strict=True)]
        fb = [min(a, b) for a, b in zip(fb_ms[::2], fb_ms[1::2], strict=True)]
        added = sorted(f - b for f, b in zip(fb, plain, strict=True))
        ratios = sorted(f / b for f, b in zip(fb, plain, strict=True) if b > 0)
        entry = {
            "queries": len(chosen),
            "plain_ms_p50": float(np.median(plain)),
            "feedback_ms_p50": float(np.median(fb)),
            "added_ms_p50": float(np.median(added)),
            "added_ms_p90": float(np.percentile(added, 90)),
            "ratio_p50": float(np.median(ratios)),
        }
        result["sets"][set_name] = entry
        print(f"{p.lang} {set_name}: " + ", ".join(f"{k} {v:.2f}" for k, v in entry.items()),
              file=sys.stderr)  # fmt: skip
    out = p.out or RESULTS_DIR / f"feedback_latency_{p.lang}.json"
    write_result(out, result, p, signatures={"bundle": bundle_signature(bundle),
                                             "scorer": scorer.signature()})  # fmt: skip
