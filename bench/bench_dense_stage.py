"""What the dense reader adds to a search's time, as the API serves it (a page of 10).

For each dev query of each kind (short queries, questions, paragraphs): decode once, then
search the same decoded query three ways, alternated per query in one process so that the
machine's load falls on all three alike — the lexical ranking alone (``dense: false``), the
product's pipeline (the query embedded on its own thread while the first ranking runs), and
the same pipeline with the embedding done first, as it was before (the reference). Reported
per kind: p50/p90 of the whole search in each way, of what each adds over the lexical
search, and of the embedding itself; the rankings of both dense ways are checked identical.

Writes ``bench/results/dense_stage.json``; needs the trained bundles and an index with
vectors (``indexes/demo`` has them; ``indexes/docs`` once ``clir embed`` is done).
"""

from __future__ import annotations

import time
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import service.search.pipeline as pipeline_module
from bench.bench_querysets import load_set
from bench.common import RESULTS_DIR, ROOT, Help, percentile, write_result
from service.collection.reader import Collection
from service.core.settings import Settings
from service.index.inverted import load_index
from service.mt.bundle import load_bundle
from service.retrieval.query import decode_query
from service.retrieval.runner import decoder_for
from service.search.pipeline import SearchOptions, dense_from_settings, feedback_from_settings
from service.search.stores import store_pipeline


class _Inline:
    """An executor that runs what it is given at once (the embedding before the ranking)."""

    def submit(self, fn: Any, *args: Any) -> Future[Any]:
        future: Future[Any] = Future()
        future.set_result(fn(*args))
        return future


@dataclass(frozen=True)
class Params:
    lang: Annotated[str, Help("query language (de or zh)")] = "de"
    index: Annotated[Path, Help("index with dense vectors")] = ROOT / "indexes" / "demo"
    sets: Annotated[tuple[str, ...], Help("query sets")] = ("short", "question", "paragraph")
    limit: Annotated[int, Help("queries per set")] = 40
    method: Annotated[str, Help("retrieval method")] = "bowfd"
    out: Annotated[Path, Help("result file")] = RESULTS_DIR / "dense_stage.json"


def _stats(values: list[float]) -> dict[str, float]:
    return {"p50": round(percentile(values, 50), 2), "p90": round(percentile(values, 90), 2)}


def run(p: Params) -> None:
    bundle = load_bundle(ROOT / "models" / f"{p.lang}-en")
    pipe = store_pipeline(Collection.of_index(load_index(p.index)), bundle)
    settings = Settings.model_validate({})
    feedback = feedback_from_settings(settings)
    dense = dense_from_settings(settings, on=True)
    decoder = decoder_for(bundle)
    lexical_opts = SearchOptions(p.method, k=10, feedback=feedback)
    dense_opts = SearchOptions(p.method, k=10, feedback=feedback, dense=dense)
    overlapped = pipeline_module._embedder()
    result: dict[str, Any] = {"lang": p.lang, "index": str(p.index), "sets": {}}
    for name in p.sets:
        queries, qrels = load_set(name, p.lang)
        qids = [q for q in queries if q in qrels][: p.limit]
        ms: dict[str, list[float]] = {"lexical": [], "overlapped": [], "serial": [], "embed": []}
        for qid in qids:
            decoded = decode_query(decoder, queries[qid], p.lang, qid=qid)
            pipe.search(decoded, dense_opts)  # warm: the first ranking's caches alike
            timed = {}
            for way in ("lexical", "overlapped", "serial"):
                pipeline_module._embedder = (  # type: ignore[assignment]
                    (lambda: _Inline()) if way == "serial" else (lambda: overlapped)
                )
                with pipe._lock:
                    pipe._vectors.clear()  # embed every time, as a new query is
                t0 = time.perf_counter()
                out = pipe.search(decoded, lexical_opts if way == "lexical" else dense_opts)
                ms[way].append((time.perf_counter() - t0) * 1000)
                timed[way] = out
            assert [h.doc_id for h in timed["overlapped"].ranking.hits] == [
                h.doc_id for h in timed["serial"].ranking.hits
            ]
            text = pipeline_module.dense_query_text(timed["serial"].translation)
            source, _ = pipe.stage.dense()
            assert source is not None
            t0 = time.perf_counter()
            pipe.encoder(source).encode_queries([text])
            ms["embed"].append((time.perf_counter() - t0) * 1000)
        pipeline_module._embedder = lambda: overlapped  # type: ignore[assignment]
        entry: dict[str, Any] = {"queries": len(qids)}
        entry.update({k: _stats(v) for k, v in ms.items()})
        for way in ("overlapped", "serial"):
            added = [d - lex for d, lex in zip(ms[way], ms["lexical"], strict=True)]
            entry[f"added_{way}"] = _stats(added)
        result["sets"][name] = entry
        print(name, entry, flush=True)
    write_result(p.out, result, p)
    print(p.out)
