"""Retrieval by path: one query (``clir search``), query sets written as TREC runs (``clir
run``) or evaluated (``clir eval``, ``clir eval-tr``) (Hieber & Riezler 2015, §5; TR paper, §3).

The library side of those commands (docs/cli.md): load a model bundle and
an index or a collection (:func:`service.collection.docstore.open_store`), decode every query
once into its +LM forests and rank it (:mod:`service.retrieval.runner`, at depth 1000: Hieber
& Riezler 2015, §5, evaluate the top 1,000), and write the rankings as a TREC run (``clir run``,
no judgments needed) or evaluate them against TREC qrels with :mod:`service.evaluation`.
``--no-lm`` decodes with ``DecoderConfig(use_lm=False)`` (Hieber & Riezler 2015, §5, Table 2).
Only queries of the query file are evaluated (qrels of other queries are ignored); a query that
cannot be decoded (nothing left after normalisation) is reported and scores 0. What a run draws
on besides its arguments — the weights state, the decoder's search, translation retrieval's
n-best time budget — is a :class:`RunSetup`, which the command line builds from its settings.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from itertools import islice
from pathlib import Path
from typing import Any

from service.collection.docstore import open_store, store_scorer
from service.core.jit import Engine
from service.data import load_qrels, load_queries, rank_entries, write_run
from service.errors import InvalidInputError
from service.evaluation import CLIR_METRICS, TR_METRICS, evaluate
from service.forest.kbest import UNIQUE_KBEST_TIME_BUDGET_S
from service.mt.bundle import ModelBundle, load_bundle
from service.mt.weights import DEFAULT_STATE_DIR
from service.records import QrelsDict
from service.retrieval.base import DecodedQuery, Ranking, Scorer
from service.retrieval.choices import Choices
from service.retrieval.feedback import FeedbackParams
from service.retrieval.query import decode_query
from service.retrieval.runner import DEPTH, QueryRun, decoder_for, run_queries
from service.search.pipeline import (
    DenseParams,
    SearchOptions,
    SearchOutcome,
    SearchPipeline,
)
from service.search.stores import store_pipeline
from service.search.suggestions import SuggestionReader, pool_vectors, rank_suggestions


@dataclass(frozen=True)
class RunSetup:
    """What a run draws on besides its arguments: the weights state root of the bundle (its
    active version), the decoder's search and the seconds translation retrieval's n-best list
    may spend per sentence. The defaults suit a library caller; the command line passes its
    settings (``weights_state_dir``, ``decoder_engine``, ``kbest_time_budget_s``)."""

    state_root: Path = DEFAULT_STATE_DIR
    engine: Engine = "compiled"
    time_budget: float = UNIQUE_KBEST_TIME_BUDGET_S


def scorer_for(
    index_path: str | Path, method: str, bundle: ModelBundle, params: Mapping[str, Any] | None
) -> Scorer:
    """The scorer ``method`` over the index or the collection at ``index_path``."""
    return store_scorer(open_store(index_path), method, bundle, **dict(params or {}))


def _load_first(path: str | Path, limit: int | None, what: str) -> dict[str, str]:
    """The first ``limit`` (all when None) queries of a query file; none is an error."""
    queries = load_queries(path)
    if limit is not None:
        if limit < 1:
            raise InvalidInputError(f"--limit must be at least 1, got {limit}")
        queries = dict(islice(queries.items(), limit))
    if not queries:
        raise InvalidInputError(f"{path}: no {what}")
    return queries


def _select(
    queries_path: str | Path, qrels_path: str | Path, limit: int | None
) -> tuple[dict[str, str], QrelsDict]:
    queries = _load_first(queries_path, limit, "queries")
    qrels = {q: j for q, j in load_qrels(qrels_path).items() if q in queries}
    if not qrels:
        raise InvalidInputError(f"{qrels_path}: no judgments for the queries of {queries_path}")
    return queries, qrels


def _mean(values: Iterable[float]) -> float:
    vals = list(values)
    return sum(vals) / len(vals) if vals else 0.0


def _rank_all(
    model: str | Path,
    index_path: str | Path,
    method: str,
    params: Mapping[str, Any] | None,
    queries: Mapping[str, str],
    *,
    use_lm: bool,
    k: int,
    progress: bool,
    desc: str,
    setup: RunSetup | None,
    feedback: FeedbackParams | None = None,
    dense: DenseParams | None = None,
    reader: SuggestionReader | None = None,
) -> tuple[QueryRun, str]:
    """Load the bundle and the index, and rank ``queries`` with ``method`` (top ``k``):
    documents through the search pipeline (feedback, the dense reader), the sentence pool
    with translation retrieval's scorer. Also the method's signature (for a run of none)."""
    setup = setup or RunSetup()
    bundle = load_bundle(model, state_root=setup.state_root)
    decoder = decoder_for(bundle, use_lm, setup.engine)
    rank: Callable[[DecodedQuery, int], Ranking]
    if method == "tr":  # translator suggestions, reread by ``reader`` when given
        pool = open_store(index_path)
        scorer = store_scorer(pool, method, bundle, **dict(params or {}))
        signature = scorer.signature()

        stored = pool_vectors(pool) if reader is not None else None

        def rank(query: DecodedQuery, depth: int) -> Ranking:
            return rank_suggestions(
                scorer, query, depth, reader, lambda d: pool.doc(d).text, stored=stored
            )[0]

    else:
        pipe = store_pipeline(open_store(index_path), bundle)
        opts = SearchOptions(method, feedback=feedback, dense=dense, params=dict(params or {}))

        def rank(query: DecodedQuery, depth: int) -> Ranking:
            return pipe.search(query, replace(opts, k=depth)).ranking

        signature = f"method:{method}"
    qrun = run_queries(
        rank,
        decoder,
        queries,
        bundle.src,
        k=k,
        weights_version=bundle.active_weights().version,
        progress=progress,
        desc=desc,
        search=method != "tr",
    )
    return qrun, signature


def _payload(
    result_json: dict[str, float | int], qrun: QueryRun, signature: str, start: float
) -> dict[str, Any]:
    payload: dict[str, Any] = dict(result_json)
    payload["seconds"] = round(time.perf_counter() - start, 3)
    payload["decode_seconds_per_query"] = round(_mean(qrun.decode_seconds.values()), 4)
    payload["rank_seconds_per_query"] = round(_mean(qrun.rank_seconds.values()), 4)
    payload["failed_queries"] = len(qrun.failed)
    first = next(iter(qrun.rankings.values()), None)
    payload["signature"] = first.signature if first is not None else signature
    return payload


def evaluate_method(
    model: str | Path,
    index_path: str | Path,
    method: str,
    queries_path: str | Path,
    qrels_path: str | Path,
    *,
    use_lm: bool = True,
    run_out: str | Path | None = None,
    limit: int | None = None,
    depth: int = DEPTH,
    progress: bool = True,
    params: Mapping[str, Any] | None = None,
    feedback: FeedbackParams | None = None,
    dense: DenseParams | None = None,
    setup: RunSetup | None = None,
) -> dict[str, Any]:
    """``clir eval``: the CLIR metrics of ``method`` on a query set (one JSON object)."""
    start = time.perf_counter()
    queries, qrels = _select(queries_path, qrels_path, limit)
    qrun, signature = _rank_all(
        model,
        index_path,
        method,
        params,
        queries,
        use_lm=use_lm,
        k=depth,
        progress=progress,
        desc=f"{method} queries",
        setup=setup,
        feedback=feedback,
        dense=dense,
    )
    if run_out is not None:
        tag = method if use_lm else f"{method}-nolm"
        write_run(run_out, rank_entries(qrun.scored_docs(), tag, depth))
    result = evaluate(qrun.run(), qrels, CLIR_METRICS, depth=depth)
    return _payload(result.as_json(), qrun, signature, start)


def check_run_tag(tag: str) -> str:
    """A TREC run tag is one non-empty word (the last column of every line)."""
    if not tag or any(c.isspace() for c in tag):
        raise InvalidInputError(f"run tag {tag!r} must be one word without spaces")
    return tag


def run_topics(
    model: str | Path,
    index_path: str | Path,
    method: str,
    topics_path: str | Path,
    output: str | Path,
    *,
    tag: str | None = None,
    hits: int = DEPTH,
    use_lm: bool = True,
    limit: int | None = None,
    progress: bool = True,
    params: Mapping[str, Any] | None = None,
    feedback: FeedbackParams | None = None,
    dense: DenseParams | None = None,
    setup: RunSetup | None = None,
) -> dict[str, Any]:
    """``clir run``: rank every topic of a query file with ``method`` and write the top
    ``hits`` per topic as a TREC run (``qid Q0 docid rank score tag``, Anserini's and
    Pyserini's format, ties by document id descending), without judgments. A topic that cannot
    be decoded has no lines in the run and is counted in ``failed_queries``."""
    start = time.perf_counter()
    if hits < 1:
        raise InvalidInputError(f"--hits must be at least 1, got {hits}")
    tag = check_run_tag(tag if tag is not None else (method if use_lm else f"{method}-nolm"))
    topics = _load_first(topics_path, limit, "topics")
    qrun, signature = _rank_all(
        model,
        index_path,
        method,
        params,
        topics,
        use_lm=use_lm,
        k=hits,
        progress=progress,
        desc=f"{method} topics",
        setup=setup,
        feedback=feedback,
        dense=dense,
    )
    lines = write_run(output, rank_entries(qrun.scored_docs(), tag, hits))
    payload: dict[str, Any] = {
        "run": str(output),
        "tag": tag,
        "hits": hits,
        "queries": len(topics),
        "lines": lines,
    }
    payload.update(_payload({}, qrun, signature, start))
    payload["failed"] = dict(qrun.failed)
    return payload


def evaluate_tr(
    model: str | Path,
    pool_path: str | Path,
    queries_path: str | Path,
    qrels_path: str | Path,
    *,
    nbest: int = 5,
    levenshtein: bool = True,
    limit: int | None = None,
    max_candidates: int = 1000,
    levenshtein_unit: str = "char",
    progress: bool = True,
    use_lm: bool = True,
    run_out: str | Path | None = None,
    setup: RunSetup | None = None,
    reader: SuggestionReader | None = None,
) -> dict[str, Any]:
    """``clir eval-tr``: the translation-retrieval measures of the TR paper (f@n, p@n, r@n, MRR)
    of the suggestions (their head reread by ``reader`` when given, as the service does)."""
    start = time.perf_counter()
    queries, qrels = _select(queries_path, qrels_path, limit)
    setup = setup or RunSetup()
    params = {"nbest": nbest, "levenshtein": levenshtein, "max_candidates": max_candidates,
              "levenshtein_unit": levenshtein_unit, "time_budget": setup.time_budget}  # fmt: skip
    qrun, signature = _rank_all(
        model,
        pool_path,
        "tr",
        params,
        queries,
        use_lm=use_lm,
        k=10,
        progress=progress,
        desc=f"tr N={nbest}",
        setup=setup,
        reader=reader,
    )
    if run_out is not None:
        write_run(run_out, rank_entries(qrun.scored_docs(), f"tr-n{nbest}", 10))
    result = evaluate(qrun.run(), qrels, TR_METRICS, depth=None)
    return _payload(result.as_json(), qrun, signature, start)


def search(
    model: str | Path,
    index_path: str | Path,
    method: str,
    text: str,
    k: int = 10,
    *,
    use_lm: bool = True,
    explain: bool = False,
    params: Mapping[str, Any] | None = None,
    feedback: FeedbackParams | None = None,
    dense: DenseParams | None = None,
    setup: RunSetup | None = None,
    choices: Choices | None = None,
) -> tuple[SearchOutcome, SearchPipeline]:
    """``clir search``: one query, ranked by ``method`` over an index or a collection through
    the search pipeline (the API's answer: hits, count, translation, why nothing was found);
    the pipeline's stage resolves a hit's ``docno`` to its document."""
    setup = setup or RunSetup()
    bundle = load_bundle(model, state_root=setup.state_root)
    pipe = store_pipeline(open_store(index_path), bundle)
    decoded = decode_query(
        decoder_for(bundle, use_lm, setup.engine),
        text,
        bundle.src,
        weights_version=bundle.active_weights().version,
    )
    opts = SearchOptions(method, k=k, explain=explain, feedback=feedback, dense=dense,
                         params=dict(params or {}), choices=choices or Choices())  # fmt: skip
    return pipe.search(decoded, opts), pipe
