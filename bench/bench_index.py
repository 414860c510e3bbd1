"""Benchmark of the inverted BM25 index.

Measures, on the full collection ``clir/docs.jsonl.gz`` and the pool ``tr/pool.en.tsv.gz``:
build time and size of both indexes, open/lookup/first-query time (in a fresh process), the
number of terms with negative rsj, and BM25 top-1000 queries per second against
* bm25s (numba backend, ``method="robertson"`` = the paper's formula with rsj floored at 0,
  one thread) on the full collection, with the same tokenised queries, and
* rank_bm25 ``BM25Okapi`` on the first 2,000 documents (it is far too slow for more),
timed alternately in the same process; ratios are ours / theirs.

Queries (200 each, seeded): ``tr_refs`` = English reference sentences of ``tr/de-en`` dev
(qrels joined with the pool), ``doc30`` = the first 30 words of random documents.
Writes ``bench/results/index.json`` (``--out``). Run with ``nice -n 10 python -m bench index``.
"""

from __future__ import annotations

import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import numpy as np

from bench.common import DATA, RESULTS_DIR, ROOT, Help, write_result
from service.data import load_qrels, read_docs, read_pool
from service.errors import ConfigurationError
from service.index import (
    InvertedIndex,
    build_docs_index,
    build_pool_index,
    get_index_tokenizer,
    index_tokens,
)

RESULTS = RESULTS_DIR / "index.json"
N_QUERIES = 200
K = 1000
ROUNDS = 3


def _dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.iterdir())


def _tokenizer() -> str:
    try:
        get_index_tokenizer("en")
        return "en"
    except ConfigurationError:
        return "regex"


def _queries(tokenize: Callable[[str], list[str]]) -> dict[str, list[list[str]]]:
    rng = random.Random(0)
    qrels = load_qrels(DATA / "tr/de-en/qrels.dev.txt")
    wanted = {d for judged in qrels.values() for d in judged}
    texts = sorted({s.text for s in read_pool(DATA / "tr/pool.en.tsv.gz") if s.id in wanted})
    refs = rng.sample(texts, N_QUERIES)
    docs = [d.text for d in read_docs(DATA / "clir/docs.jsonl.gz")]
    prefixes = [" ".join(docs[i].split()[:30]) for i in rng.sample(range(len(docs)), N_QUERIES)]
    return {"tr_refs": [tokenize(t) for t in refs], "doc30": [tokenize(t) for t in prefixes]}


def _timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _alternate(runs: dict[str, Callable[[], Any]]) -> dict[str, dict[str, float]]:
    """Time each run ROUNDS times, alternating; queries/s of the best and median round."""
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(ROUNDS):
        for name, fn in runs.items():
            times[name].append(_timed(fn))
    return {
        name: {
            "qps_best": round(N_QUERIES / min(ts), 1),
            "qps_median": round(N_QUERIES / statistics.median(ts), 1),
        }
        for name, ts in times.items()
    }


_LOAD_PROBE = """
import json, sys, time
t0 = time.perf_counter()
from service.index import InvertedIndex
t1 = time.perf_counter()
ix = InvertedIndex.load(sys.argv[1])
t2 = time.perf_counter()
ix.vocab.build_lookup()
t3 = time.perf_counter()
ix.docno(ix.doc_id(0))
t4 = time.perf_counter()
ix.bm25_topk(["file"], 10)
t5 = time.perf_counter()
InvertedIndex.load(sys.argv[1], verify=True)
t6 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "open_mmap_s": t2 - t1, "vocab_dict_s": t3 - t2,
                  "docid_dict_s": t4 - t3, "first_query_s": t5 - t4, "open_verify_s": t6 - t5}))
"""


def _load_times(path: Path) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, "-c", _LOAD_PROBE, str(path)],
        capture_output=True, text=True, check=True, cwd=ROOT,
    )  # fmt: skip
    return {k: round(v, 4) for k, v in json.loads(out.stdout).items()}


def _overlap(ours: list[np.ndarray], theirs: list[tuple[np.ndarray, np.ndarray]]) -> float:
    """Mean Jaccard overlap of the result sets (theirs restricted to scores > 0)."""
    vals = []
    for a, (docs, scores) in zip(ours, theirs, strict=True):
        b = set(docs[scores > 0].tolist())
        sa = set(a.tolist())
        vals.append(len(sa & b) / len(sa | b) if sa | b else 1.0)
    return round(float(np.mean(vals)), 5)


@dataclass(frozen=True)
class Params:
    out: Annotated[Path, Help("JSON output")] = RESULTS


def run(p: Params) -> None:
    import bm25s
    from rank_bm25 import BM25Okapi

    name = _tokenizer()
    tokenize = get_index_tokenizer(name)
    result: dict[str, Any] = {"tokenizer": name, "k": K, "queries_per_set": N_QUERIES}
    with tempfile.TemporaryDirectory(prefix="bench_index.") as tmp_name:
        tmp = Path(tmp_name)
        print(f"building the document index ({name} tokenizer)", file=sys.stderr)
        built = build_docs_index(
            DATA / "clir/docs.jsonl.gz", tmp / "docs", tokenizer=name, force=True, progress=True
        )
        counts = built.manifest["counts"]
        result["docs_index"] = {
            "build_s": round(built.seconds, 1),
            "bytes": _dir_bytes(tmp / "docs"),
            "bytes_without_raw_text": _dir_bytes(tmp / "docs")
            - (tmp / "docs/text_blob.npy").stat().st_size,
            **counts,
            "load": _load_times(tmp / "docs"),
        }
        print(json.dumps(result["docs_index"]), file=sys.stderr)
        print("building the pool index", file=sys.stderr)
        pool = build_pool_index(
            DATA / "tr/pool.en.tsv.gz", tmp / "pool", tokenizer=name, force=True, progress=True
        )
        result["pool_index"] = {
            "build_s": round(pool.seconds, 1),
            "bytes": _dir_bytes(tmp / "pool"),
            **pool.manifest["counts"],
            "load": _load_times(tmp / "pool"),
        }
        print(json.dumps(result["pool_index"]), file=sys.stderr)

        index = InvertedIndex.load(tmp / "docs")
        pool_index = InvertedIndex.load(tmp / "pool")
        queries = _queries(tokenize)
        index.bm25_topk(queries["tr_refs"][0], K)  # load the compiled kernel
        pool_index.bm25_topk(queries["tr_refs"][0], K)

        print("tokenising the collection again for bm25s", file=sys.stderr)
        start = time.perf_counter()
        corpus = [index_tokens(tokenize, d) for d in read_docs(DATA / "clir/docs.jsonl.gz")]
        result["retokenise_docs_warm_s"] = round(time.perf_counter() - start, 1)
        retriever = bm25s.BM25(k1=index.k1, b=index.b, method="robertson", backend="numba")
        start = time.perf_counter()
        retriever.index(corpus, show_progress=False)
        result["bm25s_index_from_tokens_s"] = round(time.perf_counter() - start, 1)

        def bm25s_run(qs: list[list[str]]) -> Any:
            return retriever.retrieve(qs, k=K, n_threads=1, show_progress=False)

        bm25s_run(queries["tr_refs"][:2])  # compile
        subset = corpus[:2000]
        okapi = BM25Okapi(subset, k1=index.k1, b=index.b)
        small = build_docs_index(
            DATA / "clir/docs.jsonl.gz", tmp / "docs2k", tokenizer=name, limit=2000
        )
        small_index = InvertedIndex.load(small.path)

        def okapi_run(qs: list[list[str]]) -> None:
            for q in qs:
                scores = okapi.get_scores(q)
                np.argsort(-scores, kind="stable")[:K]

        result["speed"] = {}
        for set_name, qs in queries.items():
            print(f"timing {set_name}", file=sys.stderr)
            ours_full = _alternate(
                {
                    "ours": lambda qs=qs: [index.bm25_topk(q, K) for q in qs],
                    "bm25s_numba": lambda qs=qs: bm25s_run(qs),
                }
            )
            ours_small = _alternate(
                {
                    "ours_2k": lambda qs=qs: [small_index.bm25_topk(q, K) for q in qs],
                    "rank_bm25_2k": lambda qs=qs: okapi_run(qs),
                }
            )
            pool_speed = _alternate(
                {"ours_pool": lambda qs=qs: [pool_index.bm25_topk(q, K) for q in qs]}
            )
            res = bm25s_run(qs)
            ours_hits = [index.bm25_topk(q, K).docs for q in qs]
            result["speed"][set_name] = {
                "mean_query_tokens": round(float(np.mean([len(q) for q in qs])), 1),
                **ours_full,
                **ours_small,
                **pool_speed,
                "ratio_vs_bm25s_median": round(
                    ours_full["ours"]["qps_median"] / ours_full["bm25s_numba"]["qps_median"], 2
                ),
                "ratio_vs_rank_bm25_median": round(
                    ours_small["ours_2k"]["qps_median"] / ours_small["rank_bm25_2k"]["qps_median"],
                    1,
                ),
                "result_overlap_with_bm25s": _overlap(
                    ours_hits,
                    [(res.documents[i], res.scores[i]) for i in range(len(qs))],
                ),
            }
            print(json.dumps(result["speed"][set_name]), file=sys.stderr)
    write_result(p.out, result, p, signatures={"tokenizer": name}, indent=2)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    from bench.cli import main_for

    main_for("index")
