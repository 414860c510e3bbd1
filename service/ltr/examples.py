"""Training queries and the dev set for learning to rank (Hieber & Riezler 2015, §4, §5).

A training query (:class:`QueryExample`) is decoded once into its +LM forests (pop limit
``settings.pop_limit`` unless told otherwise; training then reranks this fixed forest, see
:mod:`service.ltr.forest`). Its candidates are the top ``candidates`` BOW-FD documents under
the starting weights together with every judged document that is in the index; a
candidate's relevance is its qrels level (0 for unjudged: Hieber & Riezler 2015, §4, take
non-relevant documents "from the current model's candidates"). Per epoch,
:meth:`QueryExample.features` gives the candidates' best-derivation feature vectors under the
current weights; for a query of several sentences they are summed, ``Φ(d) = Σ_s Φ_s(h*_{s,d})``, so
``w · Φ(d)`` is the exact sum of the sentence scores — the ranking itself combines sentences by the
smoothed product of experts (:func:`service.retrieval.bowfd.combine.combine_sentences`), which only
differs for documents missing from a sentence's top list.

:func:`select_queries` reads and checks the training data before anything is decoded:
malformed files raise :class:`~service.errors.DataFormatError` (file:line), qrels of unknown
query ids are counted and ignored, queries without a relevant document in the index are
skipped and counted, and nothing left is an :class:`~service.errors.InvalidInputError`
naming the files.

:class:`DevSet` holds the dev queries decoded once, compactly, and ranks them at depth 1000
with any weights (BOW-FD through :mod:`service.retrieval.bowfd`) for MAP, NDCG@1000 and PRES.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from service.core.jit import Engine
from service.data import load_qrels, load_queries
from service.errors import InvalidInputError, NotFoundError
from service.evaluation import EvalResult, evaluate
from service.index.inverted import InvertedIndex
from service.ltr.forest import CandidateRows, CompactSentence
from service.ltr.space import FeatureSpace
from service.mt.bundle import ModelBundle
from service.mt.decoder import DecoderConfig
from service.records import QrelsDict, RunDict
from service.retrieval.base import DecodedQuery
from service.retrieval.bowfd import BowFdScorer
from service.retrieval.lex import is_lex_feature
from service.retrieval.query import decode_query

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
DEV_DEPTH = 1000
DEV_METRICS = {"map": "map", "ndcg": "ndcg", "pres": "pres"}  # NDCG and PRES at 1000


@dataclass(frozen=True, eq=False)
class QueryExample:
    """One training query: candidates (document numbers, ascending), their relevance levels,
    and per sentence the compact forest and the candidates' term rows."""

    qid: str
    docnos: IntArray
    relevance: IntArray
    sentences: tuple[CompactSentence, ...]
    rows: tuple[CandidateRows, ...]

    def features(self, w: FloatArray, size: int | None = None) -> Any:
        """``[candidates × size]`` sparse matrix of the candidates' ``Φ(h*_d)`` under ``w``."""
        size = len(w) if size is None else size
        total = None
        for cs, rows in zip(self.sentences, self.rows, strict=True):
            phi = cs.candidate_features(rows, w, size)
            total = phi if total is None else total + phi
        assert total is not None
        return total.tocsr()

    def nbytes(self) -> int:
        rows = sum(r.ptr.nbytes + r.terms.nbytes + r.weights.nbytes for r in self.rows)
        return sum(s.nbytes() for s in self.sentences) + rows + 16 * len(self.docnos)


@dataclass
class Selection:
    """Training (or dev) queries that can be used, and what was left out."""

    queries: dict[str, str]
    qrels: QrelsDict
    unknown_qrels_queries: int = 0
    no_relevant_in_index: int = 0
    judged_not_in_index: int = 0

    def subset(self, qids: list[str]) -> Selection:
        """The queries ``qids`` (in that order) with their qrels, and the same counts."""
        return replace(
            self,
            queries={q: self.queries[q] for q in qids},
            qrels={q: self.qrels[q] for q in qids},
        )

    def split(self, n: int) -> tuple[Selection, Selection]:
        """The first ``n`` queries and the rest (file order), each with its qrels."""
        ids = list(self.queries)
        return self.subset(ids[:n]), self.subset(ids[n:])


def _in_index(index: InvertedIndex, doc_id: str) -> int | None:
    try:
        return index.docno(doc_id)
    except NotFoundError:
        return None


def select_queries(
    queries_path: str | Path,
    qrels_path: str | Path,
    index: InvertedIndex,
    limit: int | None = None,
    *,
    require_relevant: bool = True,
) -> Selection:
    """The queries of ``queries_path`` (the first ``limit``) that have a relevant document
    in ``index`` (with ``require_relevant``), with their qrels."""
    queries = load_queries(queries_path)
    if limit is not None:
        if limit < 1:
            raise InvalidInputError(f"the query limit must be at least 1, got {limit}")
        queries = dict(islice(queries.items(), limit))
    qrels_all = load_qrels(qrels_path)
    sel = Selection({}, {})
    sel.unknown_qrels_queries = sum(1 for q in qrels_all if q not in queries)
    for qid, text in queries.items():
        judged = qrels_all.get(qid, {})
        present = {d: r for d, r in judged.items() if _in_index(index, d) is not None}
        sel.judged_not_in_index += len(judged) - len(present)
        if require_relevant and not any(r > 0 for r in present.values()):
            sel.no_relevant_in_index += 1
            continue
        sel.queries[qid] = text
        sel.qrels[qid] = judged
    has_relevant = any(r > 0 for judged in sel.qrels.values() for r in judged.values())
    if not sel.queries or not has_relevant:
        raise InvalidInputError(
            f"no usable query in {queries_path} with {qrels_path}: "
            f"{len(queries)} queries, {sel.no_relevant_in_index} without a relevant document "
            f"in the index {index.path}, {sel.unknown_qrels_queries} qrels query ids not in the "
            "query file; check that the qrels belong to these queries and this index"
        )
    return sel


class Decoding:
    """Decodes queries with a bundle's forests and prepares them for BOW-FD under the starting
    weights (``start``: the SMT weights, ``IR_BM25`` and any LEX weights)."""

    def __init__(
        self,
        bundle: ModelBundle,
        index: InvertedIndex,
        start: Mapping[str, float],
        *,
        pop_limit: int,
        lex: bool,
        engine: Engine = "compiled",
    ) -> None:
        """``engine``: the decoder's search (:class:`~service.mt.decoder.DecoderConfig`)."""
        self.bundle = bundle
        self.index = index
        self.start = dict(start)
        self.decoder = bundle.decoder(DecoderConfig(pop_limit=pop_limit, engine=engine))
        self.use_lex = lex or any(is_lex_feature(n) for n in self.start)
        self.scorer = BowFdScorer(index, bundle=bundle if self.use_lex else None)
        self.v = self.scorer.v_for(self.start)

    def decode(self, qid: str, text: str) -> DecodedQuery:
        dq = decode_query(self.decoder, text, self.bundle.src, qid=qid, weights_version="ltr")
        return replace(dq, weights=self.start)

    def compact(
        self, dq: DecodedQuery, space: FeatureSpace
    ) -> tuple[list[CompactSentence], list[Any]]:
        preps = self.scorer.prepare(dq)
        lex = self.scorer.lex if self.use_lex else None
        return [CompactSentence.of(p, space, self.index, lex) for p in preps], preps


def build_example(
    dec: Decoding,
    space: FeatureSpace,
    qid: str,
    text: str,
    judged: Mapping[str, int],
    candidates: int,
) -> QueryExample | None:
    """The training example of one query (None if no relevant candidate is in the index)."""
    dq = dec.decode(qid, text)
    sentences, preps = dec.compact(dq, space)
    top, _, _ = dec.scorer.rank_prepared(preps, candidates, dec.v)
    levels: dict[int, int] = {int(d): 0 for d in top.tolist()}
    for doc_id, rel in judged.items():
        docno = _in_index(dec.index, doc_id)
        if docno is not None:
            levels[docno] = int(rel)
    docnos = np.array(sorted(levels), dtype=np.int64)
    relevance = np.array([levels[d] for d in docnos.tolist()], dtype=np.int64)
    if not np.any(relevance > 0):
        return None
    rows = tuple(CandidateRows.of(p, docnos) for p in preps)
    return QueryExample(qid, docnos, relevance, tuple(sentences), rows)


@dataclass
class DevSet:
    """Dev queries decoded once (compact forests) and their qrels."""

    index: InvertedIndex
    qrels: QrelsDict
    queries: list[tuple[str, tuple[CompactSentence, ...]]]
    space: FeatureSpace
    failed: dict[str, str] = field(default_factory=dict)
    scorer: BowFdScorer | None = None

    @classmethod
    def build(
        cls,
        dec: Decoding,
        selection: Selection,
        *,
        check: Callable[[], None] | None = None,
        progress: Callable[[int, int], None] | None = None,
        space: FeatureSpace | None = None,
    ) -> DevSet:
        """Decode ``selection``'s queries; ``space``: a feature space to extend (default: a
        new one), so that sets decoded by different bundles can be merged."""
        space = FeatureSpace() if space is None else space
        out: list[tuple[str, tuple[CompactSentence, ...]]] = []
        failed: dict[str, str] = {}
        items = list(selection.queries.items())
        for i, (qid, text) in enumerate(items):
            if check is not None:
                check()
            try:
                sentences, _ = dec.compact(dec.decode(qid, text), space)
            except InvalidInputError as exc:
                failed[qid] = str(exc)
            else:
                out.append((qid, tuple(sentences)))
            if progress is not None:
                progress(i + 1, len(items))
        return cls(dec.index, selection.qrels, out, space, failed, BowFdScorer(dec.index))

    def subset(self, qids: Iterable[str]) -> DevSet:
        """The queries ``qids`` only, with their qrels (so that metrics are over them)."""
        keep = set(qids)
        return replace(
            self,
            qrels={q: r for q, r in self.qrels.items() if q in keep},
            queries=[(q, s) for q, s in self.queries if q in keep],
            failed={q: m for q, m in self.failed.items() if q in keep},
        )

    def run(self, weights: Mapping[str, float], check: Callable[[], None] | None = None) -> RunDict:
        """BOW-FD rankings (depth 1000) of the dev queries under ``weights``."""
        scorer = self.scorer or BowFdScorer(self.index)
        w = self.space.vector(weights)
        v = scorer.v_for(weights)
        run: RunDict = {}
        for qid, sentences in self.queries:
            if check is not None:
                check()
            preps = [s.prepared(w, self.index) for s in sentences]
            docs, scores, _ = scorer.rank_prepared(preps, DEV_DEPTH, v)
            run[qid] = {
                self.index.doc_id(d): s for d, s in zip(docs.tolist(), scores.tolist(), strict=True)
            }
        return run

    def evaluate(
        self, weights: Mapping[str, float], check: Callable[[], None] | None = None
    ) -> tuple[dict[str, float], EvalResult]:
        """``{"map", "ndcg", "pres"}`` of the dev rankings under ``weights`` (queries that
        could not be decoded score 0), and the per-query result."""
        t0 = time.perf_counter()
        result = evaluate(self.run(weights, check), self.qrels, DEV_METRICS, depth=DEV_DEPTH)
        metrics = dict(result.means)
        metrics["seconds"] = time.perf_counter() - t0
        return metrics, result


def cyclic_order(qids: Sequence[str], seed: int) -> list[str]:
    """The fixed sequence in which a shard visits its queries every epoch
    (Hieber & Riezler 2015, §4: cyclic order, no reshuffling after epochs): a seeded
    permutation of the sorted ids."""
    ids = sorted(qids)
    perm = np.random.default_rng(seed).permutation(len(ids))
    return [ids[i] for i in perm.tolist()]


def shard_queries(qids: Sequence[str], shards: int) -> list[list[str]]:
    """Round robin over the sorted query ids (McDonald et al. 2010's shards)."""
    ids = sorted(qids)
    return [ids[i::shards] for i in range(shards)]
