"""Retrieval on the queries people type: paragraph, short and question dev sets, per index.

For one language, every query of each chosen set is decoded once (+LM, the bundle's active
weights) and ranked, at depth 1000, by each method (DT, PSQ, BOW-FD with the product's
defaults) against each index given with ``--index NAME=PATH`` — indexes that differ only in
their analysis chain (``clir build-index --analysis ...``), the first one being the baseline.
The short and question sets also get a monolingual reference per index ("ceiling"): BM25 with
the first 8 tokens of the English page the short query was made from
(:mod:`service.data.querysets`), and with the English version of each question
(``bench/querysets/*/questions.en.dev.tsv``, translated from the question without the page).

Reports MAP, NDCG, NDCG@10 and MRR per (set, index, method), the paired randomization test
(10,000 permutations) of each index against the baseline per method on AP and RR, and of
BOW-FD against DT and PSQ per index. Writes ``bench/results/querysets_<lang>.json`` (or
``--out``).

Run: ``.venv/bin/python -m bench querysets de --index none=/tmp/ix/none
--index word+min2=indexes/docs [--sets short,question] [--methods dt,bowfd]``
(``querysets-demo``: the demo bundle and index). Queries are
decoded as the service decodes them (compounds the grammar does not know split,
:mod:`service.text.compounds`); ``--compounds`` ranks each index twice instead, ``<index>``
without splitting and ``<index>+compounds`` with it, and tests the second against the first;
``--questions`` does the same for the rewriting of how-to questions
(:mod:`service.text.questions`; compounds split in both).
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from bench.common import DATA, RESULTS_DIR, ROOT, Help, bundle_signature, write_result
from service.data import load_qrels, load_queries, read_docs
from service.data.querysets import ceiling_queries, short_queries
from service.errors import InvalidInputError
from service.evaluation import evaluate, randomization_test
from service.index.inverted import load_index
from service.mt.bundle import load_bundle
from service.mt.decoder import DecoderConfig
from service.retrieval.query import decode_query, decoder_sentences
from service.retrieval.runner import make_scorer

QUERYSETS = ROOT / "bench" / "querysets"
METRICS = ("map", "ndcg", "ndcg@10", "mrr")
PERMUTATIONS = 10_000


def load_set(name: str, lang: str) -> tuple[dict[str, str], dict[str, dict[str, int]]]:
    """Queries and judgments of dev set ``name`` (paragraph, short or question)."""
    qdir = DATA / "clir" / f"lohelp-{lang}"
    if name == "question":
        qs = QUERYSETS / f"lohelp-{lang}"
        return load_queries(qs / "questions.dev.tsv"), load_qrels(qs / "qrels.questions.dev.txt")
    queries = load_queries(qdir / "queries.dev.tsv")
    qrels = load_qrels(qdir / "qrels.dev.txt")
    if name == "short":
        queries = short_queries(queries, lang)
    elif name != "paragraph":
        raise InvalidInputError(f"unknown query set {name!r}")
    return queries, qrels


def write_short_sets() -> list[Path]:
    """Write the short form of the dev and train query sets beside the question sets
    (``bench/querysets/lohelp-<lang>/queries.short.<split>.tsv``; judgments: the paragraph
    set's qrels), so that ``clir eval --queries`` and other tools can use them."""
    written = []
    for lang in ("de", "zh"):
        for split in ("dev", "train"):
            queries = load_queries(DATA / "clir" / f"lohelp-{lang}" / f"queries.{split}.tsv")
            out = QUERYSETS / f"lohelp-{lang}" / f"queries.short.{split}.tsv"
            out.parent.mkdir(parents=True, exist_ok=True)
            lines = [f"{q}\t{t}\n" for q, t in short_queries(queries, lang).items()]
            out.write_text("".join(lines), encoding="utf-8")
            written.append(out)
    return written


def english_pages() -> dict[str, tuple[str, str]]:
    return {d.id: (d.title, d.text) for d in read_docs(DATA / "clir" / "docs.jsonl.gz")
            if d.id.startswith("lo:")}  # fmt: skip


@dataclass(frozen=True)
class Params:
    lang: Annotated[Literal["de", "zh"], Help("query language", positional=True)] = "de"
    index: Annotated[
        tuple[str, ...],
        Help("NAME=PATH of an index to rank against (repeatable; the first is the baseline)"),
    ] = (f"docs={ROOT / 'indexes' / 'docs'}",)
    sets: Annotated[str, Help("dev sets, comma-separated")] = "paragraph,short,question"
    methods: Annotated[str, Help("methods, comma-separated")] = "dt,psq,bowfd"
    max_queries: Annotated[int | None, Help("the first N queries of each set (default: all)")] = (
        None
    )
    out: Annotated[Path | None, Help("result file (default: results/querysets_<lang>.json)")] = None
    compounds: Annotated[
        bool,
        Help(
            "rank every query without and with the bundle's compound splitting ('<index>' and "
            "'<index>+compounds'; the latter is what the service does)"
        ),
    ] = False
    questions: Annotated[
        bool,
        Help(
            "rank every query without and with the bundle's question rewriting ('<index>' and "
            "'<index>+questions'; the latter is what the service does)"
        ),
    ] = False
    model: Annotated[Path | None, Help("bundle (default: models/<lang>-en)")] = None
    write_short: Annotated[
        bool, Help("write the short dev/train query sets to bench/querysets and stop")
    ] = False
    table: Annotated[
        tuple[Path, ...], Help("print the markdown table of these files and stop")
    ] = ()


def run(p: Params) -> None:
    """The command line's entry: the benchmark, or one of the two helpers."""
    if p.write_short:
        print("\n".join(map(str, write_short_sets())))
        return
    if p.table:
        print(markdown([json.loads(path.read_text()) for path in p.table]))
        return
    indexes = {n: Path(x) for n, _, x in (item.partition("=") for item in p.index)}
    out = p.out or RESULTS_DIR / f"querysets_{p.lang}.json"
    rank_sets(p, indexes, p.sets.split(","), p.methods.split(","), out)


def rank_sets(
    p: Params,
    indexes: dict[str, Path],
    sets: list[str],
    methods: list[str],
    out: Path,
) -> dict[str, Any]:
    lang, max_queries, compounds, questions = p.lang, p.max_queries, p.compounds, p.questions
    bundle = load_bundle(p.model or ROOT / "models" / f"{lang}-en")
    loaded = {name: load_index(path) for name, path in indexes.items()}
    base = next(iter(loaded))
    config = DecoderConfig(use_lm=True)
    product = bundle.decoder(config)  # the service's: questions rewritten, compounds split
    decoder = product
    version = bundle.active_weights().version
    scorers = {(ix, m): make_scorer(m, index, bundle) for ix, index in loaded.items()
               for m in methods}  # fmt: skip
    ablated = "compounds" if compounds else "questions" if questions else None
    if ablated:  # every index twice: "<name>" without the step, "<name>+<step>" with it
        decoder = bundle.make_decoder(bundle.active_weights().weights, config)
        if ablated == "questions":
            decoder.splitter = product.splitter
        scorers |= {(f"{ix}+{ablated}", m): scorers[(ix, m)] for ix in loaded for m in methods}
    result: dict[str, Any] = {"lang": lang, "weights": version, "base_index": base,
                              "indexes": {n: loaded[n].signature() for n in loaded},
                              "signatures": {f"{ix}/{m}": s.signature()
                                             for (ix, m), s in scorers.items()},
                              "compounds": compounds, "questions": questions,
                              "sets": {}}  # fmt: skip
    pages = english_pages() if "short" in sets else {}
    for set_name in sets:
        queries, qrels = load_set(set_name, lang)
        queries = {q: t for q, t in list(queries.items())[:max_queries] if q in qrels}
        if max_queries is not None:  # judge the first N queries only, not the rest as misses
            qrels = {q: qrels[q] for q in queries}
        runs: dict[tuple[str, str], dict[str, dict[str, float]]] = {k: {} for k in scorers}
        seconds = dict.fromkeys(scorers, 0.0)
        decode_s = 0.0
        changed = 0  # queries the ablated step changes
        for i, (qid, text) in enumerate(queries.items()):
            t0 = time.perf_counter()
            q = decode_query(decoder, text, bundle.src, qid=qid, weights_version=version)
            decode_s += time.perf_counter() - t0
            q_with = q
            if ablated and tuple(decoder_sentences(product, text, bundle.src)) != q.sentences:
                q_with = decode_query(product, text, bundle.src, qid=qid,
                                      weights_version=version)  # fmt: skip
                changed += 1
            for key, scorer in scorers.items():
                t1 = time.perf_counter()
                ranking = scorer.rank(q_with if key[0].endswith(f"+{ablated}") else q, 1000)
                seconds[key] += time.perf_counter() - t1
                runs[key][qid] = {h.doc_id: h.score for h in ranking.hits}
            del q
            if i % 25 == 0:
                print(f"{lang} {set_name}: query {i}/{len(queries)}", file=sys.stderr)
        n = max(1, len(queries))
        entry: dict[str, Any] = {"queries": len(queries), "decode_s_per_query": decode_s / n,
                                 "configs": {}, "p": {}}  # fmt: skip
        if ablated:
            entry[f"changed_by_{ablated}"] = changed
        per_query: dict[str, dict[str, dict[str, float]]] = {}
        for (ix, m), run in runs.items():
            ev = evaluate(run, qrels, METRICS)
            per_query[f"{ix}/{m}"] = {k: ev.per_query[k] for k in ("map", "mrr")}
            entry["configs"][f"{ix}/{m}"] = {**ev.as_json(),
                                             "rank_s_per_query": seconds[(ix, m)] / n}  # fmt: skip
        english: dict[str, str] = {}
        if set_name == "short":
            english = ceiling_queries(queries, qrels, pages)
        elif set_name == "question":
            qs = QUERYSETS / f"lohelp-{lang}" / "questions.en.dev.tsv"
            english = {q: t for q, t in load_queries(qs).items() if q in queries}
        for ix, index in loaded.items() if english else ():
            run = {}
            for qid, text in english.items():
                hits = index.bm25_topk(index.tokenize(text), 1000)
                run[qid] = dict(zip(map(index.doc_id, hits.docs.tolist()),
                                    hits.scores.tolist(), strict=True))  # fmt: skip
            ev = evaluate(run, qrels, METRICS)
            per_query[f"{ix}/ceiling"] = {k: ev.per_query[k] for k in ("map", "mrr")}
            entry["configs"][f"{ix}/ceiling"] = ev.as_json()
        for key, pq in per_query.items():
            ix, m = key.split("/")
            pairs = []
            if ix != base:
                pairs.append((f"{key} vs {base}/{m}", f"{base}/{m}"))
            if m == "bowfd":
                pairs += [(f"{key} vs {ix}/{o}", f"{ix}/{o}") for o in ("dt", "psq")
                          if f"{ix}/{o}" in per_query]  # fmt: skip
            for label, other in pairs:
                entry["p"][label] = {
                    metric: randomization_test(pq[metric], per_query[other][metric],
                                               PERMUTATIONS, 0)
                    for metric in ("map", "mrr")
                }  # fmt: skip
        result["sets"][set_name] = entry
        for key, cfg in entry["configs"].items():
            print(f"{lang} {set_name:9} {key:28} " + " ".join(
                f"{m} {cfg[m]:.4f}" for m in METRICS), file=sys.stderr)  # fmt: skip
        signatures = {"bundle": bundle_signature(bundle), "indexes": result["indexes"]}
        write_result(out, result, p, signatures=signatures)  # after every set: partial results
    return result


def markdown(results: list[dict[str, Any]]) -> str:
    """The bench/README.md table: per language and set, each method before -> after, with the
    randomization-test p-value of after vs before on AP and RR."""
    lines = ["| lang | set (queries) | method | MAP before → after (p) | NDCG@10 before → after "
             "| MRR before → after (p) |", "|---|---|---|---|---|---|"]  # fmt: skip
    for res in results:
        base = res["base_index"]
        if res.get("compounds") or res.get("questions"):
            after = f"{base}+{'compounds' if res.get('compounds') else 'questions'}"
        else:
            after = next(n for n in res["indexes"] if n != base)
        for set_name, entry in res["sets"].items():
            cfg, p = entry["configs"], entry["p"]
            for m in ("dt", "psq", "bowfd", "ceiling"):
                a, b = cfg.get(f"{base}/{m}"), cfg.get(f"{after}/{m}")
                if a is None or b is None:
                    continue
                pv = p.get(f"{after}/{m} vs {base}/{m}", {"map": float("nan"), "mrr": float("nan")})
                lines.append(
                    f"| {res['lang']} | {set_name} ({entry['queries']}) | {m} "
                    f"| {a['map']:.4f} → {b['map']:.4f} ({pv['map']:.4f}) "
                    f"| {a['ndcg@10']:.4f} → {b['ndcg@10']:.4f} "
                    f"| {a['mrr']:.4f} → {b['mrr']:.4f} ({pv['mrr']:.4f}) |"
                )
    return "\n".join(lines)


if __name__ == "__main__":
    from bench.cli import main_for

    main_for("querysets")
