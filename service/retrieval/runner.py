"""Running a retrieval method over a query set: decode every query once into its +LM forests
(with a progress bar on stderr) and rank it with a scorer from the registry, by default at depth
1000 (Hieber & Riezler 2015, §5, evaluate the top 1,000); a query that cannot be decoded (nothing
left after normalisation) is reported, not ranked.

Also: a scorer over one index (:func:`make_scorer`; an index is opened by
:func:`service.index.inverted.load_index`, which refuses one whose tokenizer changed). Runs by
path over a store, written as TREC runs or evaluated (``clir search``, ``run``, ``eval``,
``eval-tr``), are :mod:`service.runs`.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from service.core.jit import Engine
from service.errors import InvalidInputError
from service.index.inverted import InvertedIndex
from service.mt.bundle import ModelBundle
from service.mt.decoder import Decoder, DecoderConfig
from service.records import RunDict, ScoredDoc
from service.retrieval.base import DecodedQuery, Ranking, Scorer, get_scorer
from service.retrieval.query import decode_query

DEPTH = 1000


def make_scorer(method: str, index: InvertedIndex, bundle: ModelBundle, **params: Any) -> Scorer:
    """The scorer ``method`` over ``index``. Every scorer is constructed the same way: it gets
    the bundle (its grammar, lexical table) and takes from it what it needs, so whatever a
    weights version of the bundle holds (LEX weights need the grammar) can be scored."""
    return get_scorer(method, index, bundle=bundle, **params)


def decoder_for(bundle: ModelBundle, use_lm: bool = True, engine: Engine = "compiled") -> Decoder:
    """The bundle's decoder for its active weights, with or without the language model
    (``engine``: its search, :class:`~service.mt.decoder.DecoderConfig`)."""
    return bundle.decoder(DecoderConfig(use_lm=use_lm, engine=engine))


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
    rank: Callable[[DecodedQuery, int], Ranking],
    decoder: Decoder,
    queries: Mapping[str, str],
    lang: str,
    *,
    k: int = DEPTH,
    weights_version: str = "default",
    progress: bool = True,
    desc: str = "queries",
    search: bool = True,
) -> QueryRun:
    """Decode each query and rank it with ``rank(query, k)`` (a scorer's ``rank``, or the
    search pipeline's); ``search``: decode a how-to question as the instruction that answers
    it (document search), else as asked (translation retrieval)."""
    out = QueryRun()
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
        out.rankings[qid] = rank(decoded, k)
        out.decode_seconds[qid] = t1 - t0
        out.rank_seconds[qid] = time.perf_counter() - t1
    return out
