"""Running retrieval methods over query sets: decode, rank, write runs, evaluate
(Hieber & Riezler 2015, §5; TR paper, §3).

The library side of ``clir search``, ``clir run``, ``clir eval`` and ``clir eval-tr``
(README.md, "The `clir` command"): load a model bundle and an index, decode every query once into
its +LM forests (with a progress bar on stderr), rank with a scorer from the registry at depth 1000
(Hieber & Riezler 2015, §5, evaluate the top 1,000), and write the rankings as a TREC run
(``clir run``, no judgments needed) or evaluate them against TREC qrels with
:mod:`service.evaluation`. ``--no-lm`` decodes with ``DecoderConfig(use_lm=False)``
(Hieber & Riezler 2015, §5, Table 2). Only queries of the query file are evaluated (qrels of other
queries are ignored); a query that cannot be decoded (nothing left after normalisation) is reported
and scores 0.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Any

from service.data import load_qrels, load_queries, rank_entries, write_run
from service.errors import ConfigurationError, InvalidInputError
from service.evaluation import CLIR_METRICS, TR_METRICS, evaluate
from service.index.inverted import InvertedIndex
from service.index.tokenize import TOKENIZERS, tokenizer_signature
from service.mt.bundle import ModelBundle, load_bundle
from service.mt.decoder import Decoder, DecoderConfig
from service.records import QrelsDict, RunDict, ScoredDoc
from service.retrieval.base import Ranking, Scorer, get_scorer
from service.retrieval.feedback import FeedbackParams
from service.retrieval.query import decode_query

if TYPE_CHECKING:
    from service.collection import Collection

DEPTH = 1000


def load_index(path: str | Path) -> InvertedIndex:
    """Open an index and refuse one whose tokenizer has changed since it was built."""
    index = InvertedIndex.load(path)
    built = str(index.manifest.get("build", {}).get("tokenizer_signature", ""))
    name = index.tokenizer_name
    if name in TOKENIZERS and built != "custom":
        current = tokenizer_signature(name)
        if built != current:
            raise ConfigurationError(
                f"{path}: the index was built with tokenizer {built!r} but tokenizer {name!r} "
                f"is now {current!r}, so query terms would not match its terms; rebuild it "
                "with clir build-index ... --force"
            )
    return index


def make_scorer(method: str, index: InvertedIndex, bundle: ModelBundle, **params: Any) -> Scorer:
    """The scorer ``method`` over ``index``. Every scorer is constructed the same way: it gets
    the bundle (its grammar, lexical table) and takes from it what it needs, so whatever a
    weights version of the bundle holds (LEX weights need the grammar) can be scored."""
    return get_scorer(method, index, bundle=bundle, **params)


def scorer_for(
    index_path: str | Path, method: str, bundle: ModelBundle, params: Mapping[str, Any] | None
) -> Scorer:
    """The scorer ``method`` over the index or the collection at ``index_path``."""
    from service.collection import Collection, is_collection
    from service.collection.search import CollectionScorer

    if is_collection(index_path):
        return CollectionScorer(Collection(index_path), method, bundle=bundle, **dict(params or {}))
    return make_scorer(method, load_index(index_path), bundle, **dict(params or {}))


def decoder_for(bundle: ModelBundle, use_lm: bool = True) -> Decoder:
    """The bundle's decoder for its active weights, with or without the language model."""
    return bundle.decoder(DecoderConfig(use_lm=use_lm))


def _progress(items: Iterable[Any], total: int, desc: str, enabled: bool) -> Iterator[Any]:
    from tqdm import tqdm

    yield from tqdm(items, total=total, desc=desc, unit=" q", file=sys.stderr, disable=not enabled)


@dataclass
class QueryRun:
    """The rankings of a query set, with per-query timings and the queries that failed."""

    rankings: dict[str, Ranking] = field(default_factory=dict)
    decode_seconds: dict[str, float] = field(default_factory=dict)
    rank_seconds: dict[str, float] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)

    def run(self) -> RunDict:
        """The rankings as a run ``{qid: {doc_id: score}}``."""
        return {q: {h.doc_id: h.score for h in r.hits} for q, r in self.rankings.items()}

    def scored_docs(self) -> list[ScoredDoc]:
        return [ScoredDoc(q, h.doc_id, h.score) for q, r in self.rankings.items() for h in r.hits]


def run_queries(
    scorer: Scorer,
    decoder: Decoder,
    queries: Mapping[str, str],
    lang: str,
    *,
    k: int = DEPTH,
    weights_version: str = "default",
    progress: bool = True,
    desc: str = "queries",
    feedback: FeedbackParams | None = None,
) -> QueryRun:
    """Decode each query and rank it with ``scorer`` (top ``k``); translation retrieval
    decodes a question as asked, document search as the instruction that answers it."""
    out = QueryRun()
    search = scorer.name != "tr"
    for qid, text in _progress(queries.items(), len(queries), desc, progress):
        t0 = time.perf_counter()
        try:
            decoded = decode_query(
                decoder, text, lang, qid=qid, weights_version=weights_version, search=search
            )
        except InvalidInputError as exc:
            out.failed[qid] = str(exc)
            continue
        t1 = time.perf_counter()
        out.rankings[qid] = scorer.rank(decoded, k, feedback=feedback)
        out.decode_seconds[qid] = t1 - t0
        out.rank_seconds[qid] = time.perf_counter() - t1
    return out


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
    feedback: FeedbackParams | None = None,
) -> tuple[QueryRun, Scorer]:
    """Load the bundle and the index, and rank ``queries`` with ``method`` (top ``k``)."""
    bundle = load_bundle(model)
    scorer = scorer_for(index_path, method, bundle, params)
    qrun = run_queries(
        scorer,
        decoder_for(bundle, use_lm),
        queries,
        bundle.src,
        k=k,
        weights_version=bundle.active_weights().version,
        progress=progress,
        desc=desc,
        feedback=feedback,
    )
    return qrun, scorer


def _payload(
    result_json: dict[str, float | int], qrun: QueryRun, scorer: Scorer, start: float
) -> dict[str, Any]:
    payload: dict[str, Any] = dict(result_json)
    payload["seconds"] = round(time.perf_counter() - start, 3)
    payload["decode_seconds_per_query"] = round(_mean(qrun.decode_seconds.values()), 4)
    payload["rank_seconds_per_query"] = round(_mean(qrun.rank_seconds.values()), 4)
    payload["failed_queries"] = len(qrun.failed)
    first = next(iter(qrun.rankings.values()), None)
    payload["signature"] = first.signature if first is not None else scorer.signature()
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
) -> dict[str, Any]:
    """``clir eval``: the CLIR metrics of ``method`` on a query set (one JSON object)."""
    start = time.perf_counter()
    queries, qrels = _select(queries_path, qrels_path, limit)
    qrun, scorer = _rank_all(
        model,
        index_path,
        method,
        params,
        queries,
        use_lm=use_lm,
        k=depth,
        progress=progress,
        desc=f"{method} queries",
        feedback=feedback,
    )
    if run_out is not None:
        tag = method if use_lm else f"{method}-nolm"
        write_run(run_out, rank_entries(qrun.scored_docs(), tag, depth))
    result = evaluate(qrun.run(), qrels, CLIR_METRICS, depth=depth)
    return _payload(result.as_json(), qrun, scorer, start)


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
    qrun, scorer = _rank_all(
        model,
        index_path,
        method,
        params,
        topics,
        use_lm=use_lm,
        k=hits,
        progress=progress,
        desc=f"{method} topics",
        feedback=feedback,
    )
    lines = write_run(output, rank_entries(qrun.scored_docs(), tag, hits))
    payload: dict[str, Any] = {
        "run": str(output),
        "tag": tag,
        "hits": hits,
        "queries": len(topics),
        "lines": lines,
    }
    payload.update(_payload({}, qrun, scorer, start))
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
    progress: bool = True,
    use_lm: bool = True,
    run_out: str | Path | None = None,
) -> dict[str, Any]:
    """``clir eval-tr``: the translation-retrieval measures of the TR paper (f@n, p@n, r@n, MRR)."""
    start = time.perf_counter()
    queries, qrels = _select(queries_path, qrels_path, limit)
    params = {"nbest": nbest, "levenshtein": levenshtein, "max_candidates": max_candidates}
    qrun, scorer = _rank_all(
        model,
        pool_path,
        "tr",
        params,
        queries,
        use_lm=use_lm,
        k=10,
        progress=progress,
        desc=f"tr N={nbest}",
    )
    if run_out is not None:
        write_run(run_out, rank_entries(qrun.scored_docs(), f"tr-n{nbest}", 10))
    result = evaluate(qrun.run(), qrels, TR_METRICS, depth=None)
    return _payload(result.as_json(), qrun, scorer, start)


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
) -> tuple[Ranking, InvertedIndex | Collection]:
    """``clir search``: one query, ranked by ``method`` over an index or a collection
    (a hit's ``docno`` is what the returned store's ``doc`` resolves)."""
    from service.collection.search import CollectionScorer

    bundle = load_bundle(model)
    scorer = scorer_for(index_path, method, bundle, params)
    decoded = decode_query(
        decoder_for(bundle, use_lm),
        text,
        bundle.src,
        weights_version=bundle.active_weights().version,
    )
    store = scorer.collection if isinstance(scorer, CollectionScorer) else scorer.index
    return scorer.rank(decoded, k, explain=explain, feedback=feedback), store
