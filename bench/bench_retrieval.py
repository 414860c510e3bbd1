"""Retrieval quality (Hieber & Riezler 2015, Tables 1 and 2 on our data).

Each dev query of ``lohelp-<src>`` is decoded once with the language model and once without;
DT, PSQ and BOW-FD (a grid of default IR weights v) rank the full document collection from the
same forests (depth 1000). Reports MAP, NDCG, NDCG@10, PRES, MRR, Recall@1000, P@10 per
configuration, paired randomization-test p-values of BOW-FD against DT and PSQ, and timings.

With ``--rsj-index NAME=PATH`` (repeatable) DT, PSQ and BOW-FD at the best ``v`` are also run,
from the same +LM forests, against indexes built with another rsj policy (``clir build-index
--rsj keep|drop``), to measure the choice for terms in more than half the documents on dev.

Writes ``bench/results/retrieval_<src>.json`` (``--out``).
Run: ``.venv/bin/python -m bench retrieval de [--max-queries N] [--rsj-index keep=PATH]``
(``retrieval-demo``: the demo bundle and index).
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
from service.evaluation import CLIR_METRICS, evaluate, randomization_test
from service.index.inverted import load_index
from service.mt.bundle import load_bundle
from service.mt.decoder import DecoderConfig
from service.retrieval.base import DecodedQuery
from service.retrieval.query import decode_query
from service.retrieval.runner import make_scorer

V_GRID = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0)
V_GRID_NO_LM = (0.5, 1.0)


def _configs(
    use_lm: bool, rsj_names: list[str], psq_rsj: bool = False, bowfd_rsj: bool = False
) -> list[tuple[str, str, str, dict[str, Any]]]:
    """(key, index name, method, params) of every configuration run on one kind of forest."""
    tag = "+lm" if use_lm else "-lm"
    # Hieber & Riezler 2015, §5: without the LM the n-best list is not a usable source of PSQ
    # probabilities alone, so PSQ -LM keeps only the n-best term translations (λ = 1, no lexical
    # table mixing)
    psq = {} if use_lm else {"lam": 1.0}
    out = [(f"dt{tag}", "floor", "dt", {}), (f"psq{tag}", "floor", "psq", psq)]
    out += [
        (f"bowfd_v{v}{tag}", "floor", "bowfd", {"v": v})
        for v in (V_GRID if use_lm else V_GRID_NO_LM)
    ]
    if use_lm:
        for name in rsj_names:
            # "drop" ranks exactly like "floor" for DT and BOW-FD (a zero weight adds nothing,
            # and BOW-FD never makes a document a candidate through it); only PSQ, which reads
            # postings for its expected tf, can differ
            if psq_rsj:
                out.append((f"psq+lm@rsj-{name}", name, "psq", {}))
            if name != "drop":
                out.append((f"dt+lm@rsj-{name}", name, "dt", {}))
                if bowfd_rsj:  # slow with "keep": negative weights disable the top-k bounds
                    out += [
                        (f"bowfd_v{v}+lm@rsj-{name}", name, "bowfd", {"v": v}) for v in (0.5, 1.0)
                    ]
    return out


@dataclass(frozen=True)
class Params:
    src: Annotated[Literal["de", "zh"], Help("source language", positional=True)] = "de"
    max_queries: Annotated[int | None, Help("the first N dev queries (default: all)")] = None
    rsj_index: Annotated[
        tuple[str, ...], Help("NAME=PATH of an index with another rsj policy")
    ] = ()
    psq_rsj: Annotated[bool, Help("also run PSQ on the --rsj-index indexes")] = False
    bowfd_rsj: Annotated[bool, Help("also BOW-FD on the --rsj-index ones")] = False
    ablation: Annotated[bool, Help("also the runs without the LM")] = True
    model: Annotated[Path | None, Help("bundle (default: models/<src>-en)")] = None
    index: Annotated[Path, Help("document index")] = ROOT / "indexes" / "docs"
    out: Annotated[
        Path | None, Help("result file (default: bench/results/retrieval_<src>.json)")
    ] = None


def run(p: Params) -> None:
    """Stream the queries: decode one (with and without the LM), rank it with every
    configuration, keep only the rankings (a 50-word query's forests hold ~75 MB, so the
    forests of a whole query set do not fit in memory)."""
    src, max_queries, psq_rsj, bowfd_rsj, ablation = (
        p.src, p.max_queries, p.psq_rsj, p.bowfd_rsj, p.ablation
    )  # fmt: skip
    rsj_indexes = {n: Path(x) for n, _, x in (item.partition("=") for item in p.rsj_index)}
    bundle = load_bundle(p.model or ROOT / "models" / f"{src}-en")
    indexes = {"floor": load_index(p.index)}
    indexes.update({name: load_index(path) for name, path in rsj_indexes.items()})
    rsj_names = [n for n in indexes if n != "floor"]
    qdir = DATA / "clir" / f"lohelp-{src}"
    queries = dict(islice(load_queries(qdir / "queries.dev.tsv").items(), max_queries))
    qrels = {q: j for q, j in load_qrels(qdir / "qrels.dev.txt").items() if q in queries}
    version = bundle.active_weights().version
    result: dict[str, Any] = {"model": f"{src}-en", "weights": version,
                              "queries": len(queries), "configs": {}}  # fmt: skip
    kinds = (True, False) if ablation else (True,)
    plans = {u: _configs(u, rsj_names, psq_rsj, bowfd_rsj) for u in kinds}
    decoders = {use_lm: bundle.decoder(DecoderConfig(use_lm=use_lm)) for use_lm in kinds}
    scorers = {
        key: make_scorer(method, indexes[ix], bundle, **params)
        for use_lm in kinds
        for key, ix, method, params in plans[use_lm]
    }
    runs: dict[str, dict[str, dict[str, float]]] = {key: {} for key in scorers}
    seconds: dict[str, float] = dict.fromkeys(scorers, 0.0)
    decode_s = {True: 0.0, False: 0.0}
    decoded_n = {True: 0, False: 0}
    for k, (qid, text) in enumerate(queries.items()):
        for use_lm in kinds:
            t0 = time.perf_counter()
            try:
                q: DecodedQuery = decode_query(decoders[use_lm], text, bundle.src, qid=qid,
                                               weights_version=version)  # fmt: skip
            except InvalidInputError as exc:
                print(f"{qid}: {exc}", file=sys.stderr)
                continue
            decode_s[use_lm] += time.perf_counter() - t0
            decoded_n[use_lm] += 1
            for key, *_ in plans[use_lm]:
                t1 = time.perf_counter()
                ranking = scorers[key].rank(q, 1000)
                seconds[key] += time.perf_counter() - t1
                runs[key][qid] = {h.doc_id: h.score for h in ranking.hits}
            del q
        if k % 10 == 0:
            print(f"query {k}/{len(queries)}", file=sys.stderr)
    for use_lm in kinds:
        tag = "+lm" if use_lm else "-lm"
        result[f"decode_s_per_query{tag}"] = round(decode_s[use_lm] / max(1, decoded_n[use_lm]), 3)
    per_query: dict[str, dict[str, float]] = {}
    for key, scorer in scorers.items():
        ev = evaluate(runs[key], qrels, CLIR_METRICS)
        per_query[key] = ev.per_query["map"]
        n = max(1, len(runs[key]))
        result["configs"][key] = {**ev.as_json(), "rank_s_per_query": round(seconds[key] / n, 3),
                                  "signature": scorer.signature()}  # fmt: skip
        print(key, json.dumps(result["configs"][key]), file=sys.stderr)
    best_v = max(V_GRID, key=lambda v: result["configs"][f"bowfd_v{v}+lm"]["map"])
    result["best_v"] = best_v
    best = per_query[f"bowfd_v{best_v}+lm"]
    result["p_values_map"] = {
        f"bowfd_v{best_v}+lm vs {other}": randomization_test(best, per_query[other], 10_000, 0)
        for other in ("dt+lm", "psq+lm")
    }
    if ablation:
        v_no_lm = min(V_GRID_NO_LM, key=lambda v: abs(v - best_v))
        result["p_values_map"][f"bowfd_v{best_v}+lm vs bowfd_v{v_no_lm}-lm"] = randomization_test(
            best, per_query[f"bowfd_v{v_no_lm}-lm"], 10_000, 0
        )
    for key in runs:
        if "@rsj-" in key:
            base = key.split("@")[0]
            result["configs"][key]["p_map_vs_floor"] = randomization_test(
                per_query[key], per_query[base], 10_000, 0
            )
    # end-to-end (decode + rank) time of BOW-FD against DT, same queries, same run (speed (b))
    dec = result["decode_s_per_query+lm"]
    result["end_to_end_s_per_query"] = {
        "dt": round(dec + result["configs"]["dt+lm"]["rank_s_per_query"], 3),
        "bowfd": round(dec + result["configs"][f"bowfd_v{best_v}+lm"]["rank_s_per_query"], 3),
    }
    signatures = {"bundle": bundle_signature(bundle),
                  "indexes": {n: ix.signature() for n, ix in indexes.items()}}  # fmt: skip
    write_result(p.out or RESULTS_DIR / f"retrieval_{src}.json", result, p, signatures=signatures)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    from bench.cli import main_for

    main_for("retrieval")
