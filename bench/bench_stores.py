"""What searching an index built whole as a collection of one segment costs: the first stage of
the search pipeline (the method's ranking to depth 100, with the default feedback) over
``indexes/docs`` read as :meth:`~service.collection.reader.Collection.of_index` — the per-segment
partial and exact merge every store is searched by — against the index's own scorer (what the
pipeline ran for an index before a store was one type: ``Scorer.rank(..., feedback=)`` and
``Scorer.retrieved``), in one process, alternating per query (the machine is shared: the ratio
of the two is the figure). Queries: the German dev sets of the three kinds people type
(paragraph, short, question), decoded once outside the timing; the two answers are checked
equal (ids and scores) as they are timed.

``python -m bench stores [--limit N] [--methods bowfd ...] [--out FILE]``
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from bench.common import RESULTS_DIR, ROOT, Help, percentile, write_result
from service.collection.reader import Collection
from service.collection.searcher import SnapshotSearcher
from service.core.settings import Settings
from service.data import load_queries
from service.index.inverted import load_index
from service.mt.bundle import load_bundle
from service.retrieval.base import get_scorer
from service.retrieval.query import decode_query
from service.retrieval.runner import decoder_for
from service.search.pipeline import CollectionStage, SearchOptions, feedback_from_settings

SETS = {
    "paragraph": "../shared/data/clir/lohelp-de/queries.dev.tsv",
    "short": "bench/querysets/lohelp-de/queries.short.dev.tsv",
    "question": "bench/querysets/lohelp-de/questions.dev.tsv",
}
DEPTH = 100


def _stats(ms: list[float]) -> dict[str, float]:
    return {"p50": percentile(ms, 50), "p95": percentile(ms, 95), "mean": sum(ms) / len(ms)}


@dataclass(frozen=True)
class Params:
    index: Annotated[Path, Help("an index built whole")] = ROOT / "indexes" / "docs"
    model: Annotated[Path, Help("German bundle")] = ROOT / "models" / "de-en"
    limit: Annotated[int, Help("queries per set")] = 60
    methods: Annotated[tuple[str, ...], Help("methods timed")] = ("bowfd", "dt", "psq")
    out: Annotated[Path, Help("result file")] = RESULTS_DIR / "stores.json"


def staged(stage: CollectionStage, query: Any, opts: SearchOptions) -> Any:
    """The pipeline's first two stages: the method's ranking, then RM3 after it."""
    assert opts.feedback is not None
    first = stage.rank(query, opts, opts.feedback.first_depth(DEPTH))
    return stage.feedback(query, opts, first, DEPTH).ranking


def run(args: Params) -> None:
    index = load_index(args.index)
    bundle = load_bundle(args.model)
    decoder = decoder_for(bundle)
    stage = CollectionStage(Collection.of_index(index), SnapshotSearcher(bundle))
    feedback = feedback_from_settings(Settings.model_validate({}))
    result: dict[str, Any] = {"depth": DEPTH, "sets": {}}
    for name, path in SETS.items():
        queries = list(load_queries(ROOT / path).items())[: args.limit]
        decoded = [decode_query(decoder, text, "de", qid=qid) for qid, text in queries]
        entry: dict[str, Any] = {"queries": len(decoded)}
        for method in args.methods:
            scorer = get_scorer(method, index, bundle=bundle)
            opts = SearchOptions(method, k=DEPTH, feedback=feedback)
            ms: dict[str, list[float]] = {"index": [], "segment": []}
            for i, q in enumerate(decoded):
                staged(stage, q, opts)  # warm both: the scorers' caches alike
                scorer.rank(q, DEPTH, feedback=feedback)
                got: dict[str, Any] = {}
                for way in ("index", "segment") if i % 2 == 0 else ("segment", "index"):
                    t0 = time.perf_counter()
                    if way == "index":
                        ranking = scorer.rank(q, DEPTH, feedback=feedback)
                        scorer.retrieved(ranking, DEPTH, q)
                    else:
                        ranking = staged(stage, q, opts)
                    ms[way].append((time.perf_counter() - t0) * 1000)
                    got[way] = [(h.doc_id, h.score) for h in ranking.hits]
                assert got["index"] == got["segment"], (method, q.qid)
            p50 = {w: percentile(v, 50) for w, v in ms.items()}
            entry[method] = {w: _stats(v) for w, v in ms.items()} | {
                "ratio_p50": p50["segment"] / p50["index"],
                "added_p50_ms": percentile(
                    [s - x for s, x in zip(ms["segment"], ms["index"], strict=True)], 50
                ),
            }
            print(name, method, entry[method], flush=True)
        result["sets"][name] = entry
    write_result(args.out, result, args)
    print(args.out)
