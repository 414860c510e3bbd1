"""BOW-FD scoring as the collection grows, and the memory of a serving process.

Growth: the document collection is replicated ×1, ×2, ×4 (copy ``r`` of document ``id`` gets the
id ``id#r``; df and |C| grow together, so rsj hardly moves and every copy is a candidate wherever
its original is) and indexed in memory with the service's own index builder. The first
``--queries`` German dev queries are decoded once (+LM forests); DT and BOW-FD (exact, v = 1)
then rank each index to depth 1000, alternately in the same process. Reported per size:
candidates per query, documents actually scored, median and mean milliseconds per query, and the
ratio to ×1.

Memory: a fresh subprocess loads both model bundles and both indexes as the service does
(:func:`service.api.resources.load_resources`), answers one German and one Chinese query with
each method, and reports its peak resident set size (``VmHWM``) and current RSS.

Writes ``bench/results/growth.json`` (``--out``).
Run: ``nice -n 10 .venv/bin/python -m bench growth``.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from itertools import islice
from pathlib import Path
from typing import Annotated, Any

from bench.common import DATA, RESULTS_DIR, ROOT, Help, bundle_signature, write_result
from service.data import load_queries
from service.data.formats import read_docs
from service.errors import InvalidInputError
from service.index.build import build_arrays
from service.index.inverted import InvertedIndex
from service.index.tokenizers import get_index_tokenizer
from service.mt.bundle import load_bundle
from service.mt.decoder import DecoderConfig
from service.records import Doc
from service.retrieval.base import DecodedQuery
from service.retrieval.query import decode_query
from service.retrieval.runner import make_scorer

MEMORY_PROBE = r"""
import json, resource, sys
from service.api.resources import load_resources
from service.mt.decoder import DecoderConfig
from service.retrieval.query import decode_query
from service.retrieval.runner import make_scorer
from service.core.settings import Settings

def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) / 1024
    return 0.0

s = Settings()
res = load_resources(s)
after_load = status("VmRSS:")
queries = {"de": "Wie füge ich eine Tabelle in ein Textdokument ein?",
           "zh": "如何在文本文档中插入表格？"}
for lang, bundle in res.models.items():
    dec = bundle.decoder(DecoderConfig())
    q = decode_query(dec, queries[lang], lang)
    for method in ("dt", "psq", "bowfd"):
        make_scorer(method, res.doc_index, bundle).rank(q, 1000)
    make_scorer("tr", res.pool_index, bundle).rank(q, 10)
print(json.dumps({
    "models": {k: b.name for k, b in res.models.items()},
    "doc_index": str(res.doc_index.path), "pool_index": str(res.pool_index.path),
    "rss_after_load_mb": round(after_load, 1),
    "rss_after_queries_mb": round(status("VmRSS:"), 1),
    "peak_rss_mb": round(status("VmHWM:"), 1),
}))
"""


def replicated(path: Path, copies: int) -> Iterator[Doc]:
    """Each document followed by its copies (so a small memo tokenizes each line once)."""
    for doc in read_docs(path):
        yield doc
        for r in range(1, copies):
            yield replace(doc, id=f"{doc.id}#{r}")


def build_index(copies: int) -> InvertedIndex:
    tokenize = get_index_tokenizer("en")
    memo: dict[str, list[str]] = {}

    def tokenize_once(line: str) -> list[str]:
        tokens = memo.get(line)
        if tokens is None:
            if len(memo) > 50_000:  # more lines than any document has: the copies are done
                memo.clear()
            tokens = memo[line] = list(tokenize(line))
        return tokens

    arrays, counts = build_arrays(
        replicated(DATA / "clir" / "docs.jsonl.gz", copies), tokenize_once, k1=1.2, b=0.75
    )
    manifest = {
        "build": {"kind": "docs", "k1": 1.2, "b": 0.75, "rsj": "floor", "tokenizer": "en"},
        "counts": counts,
    }
    return InvertedIndex(Path(f"<docs x{copies}>"), manifest, arrays)


def timed_rank(scorer: Any, decoded: list[DecodedQuery]) -> tuple[list[float], list[Any]]:
    times, rankings = [], []
    for q in decoded:
        t0 = time.perf_counter()
        rankings.append(scorer.rank(q, 1000))
        times.append(time.perf_counter() - t0)
    return times, rankings


def growth(n_queries: int, sizes: tuple[int, ...]) -> dict[str, Any]:
    bundle = load_bundle(ROOT / "models" / "de-en")
    dec = bundle.decoder(DecoderConfig())
    queries = load_queries(DATA / "clir" / "lohelp-de" / "queries.dev.tsv")
    decoded = []
    for qid, text in islice(queries.items(), n_queries):
        try:
            decoded.append(decode_query(dec, text, "de", qid=qid))
        except InvalidInputError as exc:
            print(f"{qid}: {exc}", file=sys.stderr)
    out: dict[str, Any] = {"queries": len(decoded), "weights": bundle.active_weights().version,
                           "sizes": {}}  # fmt: skip
    for copies in sizes:
        t0 = time.perf_counter()
        index = build_index(copies)
        build_s = time.perf_counter() - t0
        bowfd = make_scorer("bowfd", index, bundle, v=1.0)
        dt = make_scorer("dt", index, bundle)
        timed_rank(bowfd, decoded[:2])  # compile / warm caches
        b_times, b_rank = timed_rank(bowfd, decoded)
        d_times, _ = timed_rank(dt, decoded)
        per_sentence = [s for r in b_rank for s in r.info.get("per_sentence", [])]
        row = {
            "documents": index.n_docs,
            "index_build_s": round(build_s, 1),
            "bowfd_ms_median": round(1000 * statistics.median(b_times), 1),
            "bowfd_ms_mean": round(1000 * statistics.mean(b_times), 1),
            "dt_ms_median": round(1000 * statistics.median(d_times), 1),
            "candidates_per_sentence": round(
                statistics.mean(s["candidates"] for s in per_sentence), 1
            ),
            "scored_per_sentence": round(statistics.mean(s["scored"] for s in per_sentence), 1),
        }
        out["sizes"][f"x{copies}"] = row
        print(json.dumps({f"x{copies}": row}), file=sys.stderr)
        del index, bowfd, dt
    out["signature"] = bundle_signature(bundle)
    base = out["sizes"][f"x{sizes[0]}"]
    for row in out["sizes"].values():
        row["bowfd_ratio_to_x1"] = round(row["bowfd_ms_mean"] / base["bowfd_ms_mean"], 2)
    return out


def memory() -> dict[str, Any]:
    env_python = sys.executable
    proc = subprocess.run([env_python, "-c", MEMORY_PROBE], capture_output=True, text=True,
                          check=True, cwd=ROOT)  # fmt: skip
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


@dataclass(frozen=True)
class Params:
    queries: Annotated[int, Help("the first N German dev queries")] = 30
    sizes: Annotated[tuple[int, ...], Help("replications of the collection")] = (1, 2, 4)
    skip_memory: Annotated[bool, Help("skip the serving process's memory")] = False
    out: Annotated[Path, Help("JSON output")] = RESULTS_DIR / "growth.json"


def run(args: Params) -> None:
    result: dict[str, Any] = {}
    if not args.skip_memory:
        result["memory"] = memory()
        print(json.dumps(result["memory"]), file=sys.stderr)
    result["growth"] = growth(args.queries, args.sizes)
    signatures = {"bundle": result["growth"].pop("signature")}
    write_result(args.out, result, args, signatures=signatures)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    from bench.cli import main_for

    main_for("growth")
