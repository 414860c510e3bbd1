"""LM state minimisation: search quality against cdec, speed and forest size.

The compiled decoder with ``DecoderConfig.minimise_lm_states`` on (the default: left and
right LM states minimised as KenLM's chart states, :mod:`service.mt.lm.states`) and off (the
first and last ``n-1`` words), alternating per sentence in one process:

1. **cdec peer** (``cdec``): cdec's de-en example (``../shared/peers/cdec-nc-wmt11``: its
   grammar, the demo bundle's 3-gram LM, 100 news sentences, cdec's weights converted to the
   project's scales as that folder's ``compare.py`` does) at each ``--pops`` limit. Per
   sentence: the Viterbi model score of both settings against cdec's recorded one (better /
   equal / worse, equal within ``1e-5`` relative as ``compare.py``), decode ms (kernel and
   arrays, Viterbi included), +LM nodes and edges after pruning; cdec's recorded medians.
2. **Full bundles** (``bundles``): ``--sentences`` dev sentences of ``tr/<src>-en``
   (``bench_decoder.load_sources``, every k-th of those with 1–80 tokens) with each bundle's
   active weights at each pop limit: the same per-sentence figures, and how often the
   default search's 1-best scores better or worse under the model than each other one's.
3. **BLEU** (``bleu``): corpus BLEU of the 1-best on the dev pairs as ``clir tune`` splits
   them (tuning part and held-out part), the new default search against the one before it
   (``full+lazy``), and how often each finds the better model score.
4. **Retrieval** (``retrieval``): the dev queries of ``clir/lohelp-<src>`` decoded by both
   searches and ranked by DT, PSQ and BOW-FD (``indexes/docs``, depth 1000): MAP of each and
   the paired randomization test.

Output ``bench/results/lm_states.json`` (``--out``); progress on stderr. Run::

    nice -n 5 .venv/bin/python -m bench lm-states              # about 10 min
    .venv/bin/python -m bench lm-states --parts cdec --pops 200  # one part
"""

from __future__ import annotations

import datetime as dt
import gzip
import json
import math
import platform
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from bench.bench_decoder import load_sources
from bench.common import DATA, RESULTS_DIR, ROOT, Help, percentile, write_result
from service.data import load_qrels, load_queries
from service.evaluation import evaluate, randomization_test
from service.forest.inference import fast_viterbi
from service.index.inverted import load_index
from service.mt.bundle import load_bundle, read_manifest
from service.mt.cdec_format import import_cdec
from service.mt.decoder import DecoderConfig
from service.mt.decoder.compiled import CompiledDecoder
from service.mt.grammar import load_grammar
from service.mt.lm import KenLM, load_lm_table
from service.mt.tuning.bleu import sacrebleu_corpus_bleu
from service.mt.tuning.data import load_dev_pairs
from service.retrieval.query import decode_query
from service.retrieval.runner import make_scorer

PEER = DATA.parent / "peers" / "cdec-nc-wmt11"
# name: (DecoderConfig.minimise_lm_states, DecoderConfig.cube_rules); the first is the default
SETTINGS = {
    "minimised+all": (True, "all"),
    "full+all": (False, "all"),
    "minimised+lazy": (True, "lazy"),
    "full+lazy": (False, "lazy"),
}
RULE_PASS = "PassThroughRule"


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _peer_inputs(work: Path) -> tuple[Any, KenLM, Any, dict[str, float], list[list[str]]]:
    work.mkdir(parents=True, exist_ok=True)  # the imported grammar is kept for reruns
    lm_path = work / "lm.arpa"
    if not lm_path.exists():
        lm_path.write_bytes(gzip.decompress((PEER / "lm.arpa.gz").read_bytes()))
    gdir = work / "grammar"
    if not (gdir / "manifest.json").exists():
        txt = work / "grammar.txt"
        text = gzip.decompress((PEER / "grammar.txt.gz").read_bytes())
        # the peer's pass-through rules carry a grammar feature named as the decoder's own
        # pass-through feature, which the compiled decoder refuses: rename it (same weight)
        txt.write_bytes(text.replace(b"PassThrough=", RULE_PASS.encode() + b"="))
        import_cdec(txt, gdir)
    ln10 = math.log(10)
    raw = {}
    for line in (PEER / "weights.cdec").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, value = line.split()
            raw[name] = float(value)
    weights = dict(raw)
    weights["LanguageModel"] = raw["LanguageModel"] / ln10  # cdec: log10; here: ln
    weights["WordPenalty"] = raw["WordPenalty"] * (-1.0 / ln10)  # cdec: -1/ln10 per word
    weights["RulePenalty"] = 0.0
    weights[RULE_PASS] = raw["PassThrough"]
    sents = [line.split() for line in (PEER / "input.de").read_text("utf-8").splitlines()]
    return load_grammar(gdir), KenLM(lm_path), load_lm_table(lm_path), weights, sents


def _decode_all(
    decoders: dict[str, CompiledDecoder], sents: list[list[str]]
) -> dict[str, dict[str, list[Any]]]:
    """Both settings on every sentence, alternating which goes first."""
    out: dict[str, dict[str, list[Any]]] = {
        name: {"ms": [], "score": [], "nodes": [], "edges": [], "search_nodes": []}
        for name in decoders
    }
    for dec in decoders.values():  # warm-up (compilation, memo)
        fast_viterbi(dec.forest(sents[0]).hypergraph, dec.weights)
    names = list(decoders)
    for k, sent in enumerate(sents):
        for name in names if k % 2 == 0 else names[::-1]:
            dec = decoders[name]
            t = time.perf_counter()
            forest = dec.forest(sent)
            best = fast_viterbi(forest.hypergraph, dec.weights)
            rec = out[name]
            rec["ms"].append(1000 * (time.perf_counter() - t))
            rec["score"].append(best.score)
            rec["nodes"].append(forest.stats.nodes)
            rec["edges"].append(forest.stats.edges)
            rec["search_nodes"].append(forest.stats.search_nodes)
    return out


def _summary(rec: dict[str, list[Any]]) -> dict[str, Any]:
    return {
        "median_ms": round(statistics.median(rec["ms"]), 2),
        "p90_ms": round(percentile(rec["ms"], 90), 2),
        "total_ms": round(sum(rec["ms"]), 1),
        "mean_score": round(statistics.fmean(rec["score"]), 3),
        "median_nodes": statistics.median(rec["nodes"]),
        "median_edges": statistics.median(rec["edges"]),
        "median_search_nodes": statistics.median(rec["search_nodes"]),
    }


def _versus(ours: list[float], theirs: list[float]) -> dict[str, int]:
    tol = [1e-5 * abs(c) + 1e-3 for c in theirs]
    better = sum(a > c + e for a, c, e in zip(ours, theirs, tol, strict=True))
    worse = sum(a < c - e for a, c, e in zip(ours, theirs, tol, strict=True))
    return {"better": better, "equal": len(ours) - better - worse, "worse": worse}


def run_cdec(pops: list[int]) -> dict[str, Any]:
    grammar, lm, table, weights, sents = _peer_inputs(Path(tempfile.gettempdir()) / "cdec-peer")
    result: dict[str, Any] = {"sentences": len(sents), "pops": {}}
    for pop in pops:
        ref = json.loads((PEER / f"cdec_p{pop}.json").read_text())
        decoders = {
            name: CompiledDecoder(
                grammar,
                lm,
                weights,
                DecoderConfig(
                    pop_limit=pop, max_span=10, minimise_lm_states=flag, cube_rules=rules
                ),
                table,
            )
            for name, (flag, rules) in SETTINGS.items()
        }
        out = _decode_all(decoders, sents)
        entry: dict[str, Any] = {
            "cdec": {
                "median_ms": round(statistics.median(ref["ms_round1"]), 2),
                "p90_ms": round(percentile(ref["ms_round1"], 90), 2),
                "mean_score": round(statistics.fmean(ref["score"]), 3),
                "median_nodes": statistics.median(n for n, _ in ref["lm_forest_nodes_edges"]),
            }
        }
        for name, rec in out.items():
            entry[name] = {**_summary(rec), "vs_cdec": _versus(rec["score"], ref["score"])}
            entry[name]["per_sentence"] = {k: rec[k] for k in ("ms", "score", "nodes", "edges")}
        result["pops"][str(pop)] = entry
        log(
            f"cdec peer pop {pop}: "
            + "; ".join(
                f"{n}: median {entry[n]['median_ms']} ms, vs cdec {entry[n]['vs_cdec']}, "
                f"median nodes {entry[n]['median_nodes']}"
                for n in SETTINGS
            )
            + f"; cdec median {entry['cdec']['median_ms']} ms"
        )
    return result


def run_bundles(models: list[str], pops: list[int], sentences: int) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for name in models:
        bundle = load_bundle(ROOT / "models" / name)
        usable = [list(s) for s in load_sources(bundle) if 1 <= len(s) <= 80]
        step = max(1, len(usable) // sentences)
        sents = usable[::step][:sentences]
        weights = bundle.active_weights().weights
        entry: dict[str, Any] = {"sentences": len(sents), "pops": {}}
        for pop in pops:
            decoders = {
                setting: CompiledDecoder(
                    bundle.grammar,
                    bundle.lm,
                    weights,
                    DecoderConfig(pop_limit=pop, minimise_lm_states=flag, cube_rules=rules),
                    bundle.lm_table,
                )
                for setting, (flag, rules) in SETTINGS.items()
            }
            out = _decode_all(decoders, sents)
            per = {setting: _summary(rec) for setting, rec in out.items()}
            first, *others = SETTINGS
            for other in others:
                per[f"{first}_vs_{other}"] = {
                    **_versus(out[first]["score"], out[other]["score"]),
                    "time_ratio": round(sum(out[first]["ms"]) / sum(out[other]["ms"]), 3),
                }
            entry["pops"][str(pop)] = per
            log(f"{name} pop {pop}: {json.dumps(per)}")
        result[name] = entry
    return result


def _bundle_decoders(bundle: Any, names: tuple[str, ...]) -> dict[str, Any]:
    weights = bundle.active_weights().weights
    return {
        name: CompiledDecoder(
            bundle.grammar,
            bundle.lm,
            weights,
            DecoderConfig(minimise_lm_states=SETTINGS[name][0], cube_rules=SETTINGS[name][1]),
            bundle.lm_table,
        )
        for name in names
    }


COMPARED = ("minimised+all", "full+lazy")  # the new default and the search before it


def run_bleu(models: list[str]) -> dict[str, Any]:
    """Corpus BLEU of the 1-best on the dev pairs (the tuning and the held-out part, as
    ``clir tune`` splits them: at most 40 source words, a fifth held out), both searches."""
    result: dict[str, Any] = {}
    for name in models:
        bundle = load_bundle(ROOT / "models" / name)
        src = bundle.src
        split = load_dev_pairs(DATA / "tr" / f"{src}-en", DATA / "tr" / "pool.en.tsv.gz", src)
        decoders = _bundle_decoders(bundle, COMPARED)
        entry: dict[str, Any] = {"weights": bundle.active_weights().version}
        for part, pairs in (("tune", split.tune), ("heldout", split.heldout)):
            hyps: dict[str, list[tuple[str, ...]]] = {n: [] for n in COMPARED}
            scores: dict[str, list[float]] = {n: [] for n in COMPARED}
            for pair in pairs:
                for n, dec in decoders.items():
                    best = fast_viterbi(dec.forest(pair.source).hypergraph, dec.weights)
                    hyps[n].append(best.tokens)
                    scores[n].append(best.score)
            refs = [p.reference for p in pairs]
            entry[part] = {
                "pairs": len(pairs),
                **{n: round(sacrebleu_corpus_bleu(hyps[n], refs), 2) for n in COMPARED},
                "model_score": _versus(scores[COMPARED[0]], scores[COMPARED[1]]),
            }
            log(f"{name} {part}: {entry[part]}")
        result[name] = entry
    return result


def run_retrieval(models: list[str], max_queries: int | None) -> dict[str, Any]:
    """The dev retrieval table's methods on forests of both searches: MAP and the paired
    randomization test (new search against the one before)."""
    result: dict[str, Any] = {}
    index = load_index(ROOT / "indexes" / "docs")
    for name in models:
        bundle = load_bundle(ROOT / "models" / name)
        src = bundle.src
        qdir = DATA / "clir" / f"lohelp-{src}"
        queries = list(load_queries(qdir / "queries.dev.tsv").items())[:max_queries]
        qrels = load_qrels(qdir / "qrels.dev.txt")
        decoders = _bundle_decoders(bundle, COMPARED)
        methods = {m: make_scorer(m, index, bundle) for m in ("dt", "psq", "bowfd")}
        runs: dict[tuple[str, str], dict[str, dict[str, float]]] = {
            (n, m): {} for n in COMPARED for m in methods
        }
        decode_s: dict[str, list[float]] = {n: [] for n in COMPARED}
        for k, (qid, text) in enumerate(queries):
            for n in COMPARED if k % 2 == 0 else COMPARED[::-1]:
                t = time.perf_counter()
                decoded = decode_query(decoders[n], text, src, qid=qid)
                decode_s[n].append(time.perf_counter() - t)
                for m, scorer in methods.items():
                    ranking = scorer.rank(decoded, 1000)
                    runs[(n, m)][qid] = {h.doc_id: h.score for h in ranking.hits}
        entry: dict[str, Any] = {
            "queries": len(queries),
            "decode_s_median": {n: round(statistics.median(v), 4) for n, v in decode_s.items()},
        }
        for m in methods:
            per = {n: evaluate(runs[(n, m)], qrels, ["map"]) for n in COMPARED}
            new, old = (per[n].per_query["map"] for n in COMPARED)
            entry[m] = {
                **{n: round(per[n].means["map"], 4) for n in COMPARED},
                "p": round(randomization_test(new, old), 4),
            }
        log(f"{name} retrieval: {entry}")
        result[name] = entry
    return result


Part = Literal["cdec", "bundles", "bleu", "retrieval"]


@dataclass(frozen=True)
class Params:
    parts: Annotated[tuple[Part, ...], Help("parts to run")] = (
        "cdec",
        "bundles",
        "bleu",
        "retrieval",
    )
    max_queries: Annotated[int | None, Help("the first N dev queries (default: all)")] = None
    pops: Annotated[tuple[int, ...], Help("pop limits")] = (50, 200, 1000)
    models: Annotated[tuple[str, ...], Help("bundles under models/")] = ("de-en", "zh-en")
    sentences: Annotated[int, Help("dev sentences per bundle")] = 60
    out: Annotated[Path, Help("JSON output")] = RESULTS_DIR / "lm_states.json"


def run(args: Params) -> None:
    result: dict[str, Any] = {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": platform.platform(),
    }
    if "cdec" in args.parts:
        result["cdec"] = run_cdec(list(args.pops))
    if "bundles" in args.parts:
        result["bundles"] = run_bundles(list(args.models), list(args.pops), args.sentences)
    if "bleu" in args.parts:
        result["bleu"] = run_bleu(list(args.models))
    if "retrieval" in args.parts:
        result["retrieval"] = run_retrieval(list(args.models), args.max_queries)
    signatures = {
        name: {"model": name, "build_key": read_manifest(ROOT / "models" / name).get("build_key")}
        for name in args.models
        if (ROOT / "models" / name / "manifest.json").exists()
    }
    write_result(args.out, result, args, signatures=signatures)
    log(f"wrote {args.out}")


if __name__ == "__main__":
    from bench.cli import main_for

    main_for("lm-states")
