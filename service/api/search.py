"""``POST /v1/search``: cross-lingual search of the English documents
(Hieber & Riezler 2015, §3, §5).

The query is decoded once into its +LM forests (through the cache of
:mod:`service.api.serving`), ranked by BOW-FD, DT or PSQ to depth ``offset + k``, and the page
``[offset, offset + k)`` is returned with snippets. The terms marked in a snippet are the
English terms that earned the document BM25 weight: with ``explain``, the ones the hit's
explanation lists (BOW-FD: its best derivation's matched words; DT: the 1-best's words in the
document; PSQ: the translations found in it); without, the method's query terms (DT: the
1-best translation; BOW-FD and PSQ: every target word of the forests). Only terms with a
positive RSJ weight in the index count (the others add nothing to any score).

``total`` counts the documents the method retrieved (what it would rank with no limit on
``k``; :func:`count_retrieved`). A ranking shorter than ``offset + k`` holds all of them. A
full one is cut at ``offset + k``: DT and PSQ scored every candidate on the way, so their
count is recovered exactly (DT: the documents holding a weighted term of the translation, the
documents its BM25 pass reaches; PSQ: the candidates it reports); BOW-FD scores documents only
until no other can enter the top ``offset + k`` (Hieber & Riezler 2015, §3, with bounds), so it
reports that many as a lower bound (``total_relation`` "gte", as Elasticsearch's
``hits.total.relation``) unless its candidates are no more than that.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal

from fastapi import APIRouter

from service.api.deps import DocIndexDep, ResourcesDep, ServiceDep, SettingsDep
from service.api.schemas import SearchHit, SearchRequest, SearchResponse
from service.api.serving import QueryService
from service.api.snippets import make_snippet
from service.errors import InvalidInputError
from service.index.inverted import InvertedIndex
from service.mt.bundle import ModelBundle
from service.retrieval.base import DecodedQuery, Ranking
from service.retrieval.dt import one_best
from service.settings import Settings

router = APIRouter(prefix="/v1", tags=["search"])


def weighted_terms(index: InvertedIndex, terms: Iterable[str]) -> set[str]:
    """The ``terms`` that are in the index with a positive RSJ weight."""
    out: set[str] = set()
    for t in terms:
        tid = index.term_id(t)
        if tid is not None and float(index.rsj[tid]) > 0:
            out.add(t)
    return out


def explanation_terms(explanation: dict[str, Any]) -> list[str]:
    """The English terms a hit's explanation says matched the document (any method)."""
    if "matched" in explanation:  # DT
        return [str(t) for t in explanation["matched"]]
    if "sentences" in explanation:  # BOW-FD
        return [str(m["term"]) for s in explanation["sentences"] for m in s["matched"]]
    if "terms" in explanation:  # PSQ: source word -> {english: Pr(e|f)}
        return [str(e) for found in explanation["terms"].values() for e in found]
    return []


def forest_terms(query: DecodedQuery) -> set[str]:
    """Every target word of the query's forests."""
    return {t for f in query.forests for t in f.hypergraph.arrays().vocabulary}


Relation = Literal["eq", "gte"]


def _dt_retrieved(ranking: Ranking, index: InvertedIndex, tokens: Sequence[str]) -> int:
    # the documents BM25 reaches: those holding a query term of non-zero weight (rsj ≠ 0)
    return len(index.docs_containing_any(index.term_ids(tokens)))


def _psq_retrieved(ranking: Ranking, index: InvertedIndex, tokens: Sequence[str]) -> int:
    return int(ranking.info["candidates"])  # the documents reached by a weighted term


# methods whose scorer scores every candidate, so that a cut ranking's total is still known
EXACT_COUNTS: dict[str, Callable[[Ranking, InvertedIndex, Sequence[str]], int]] = {
    "dt": _dt_retrieved,
    "psq": _psq_retrieved,
}


def count_retrieved(
    method: str, ranking: Ranking, depth: int, index: InvertedIndex, tokens: Sequence[str]
) -> tuple[int, Relation]:
    """How many documents ``method`` retrieved, for a ranking cut at ``depth``, and whether
    that is exact (``"eq"``) or a lower bound (``"gte"``). ``tokens``: DT's translation."""
    n = len(ranking.hits)
    if n < depth:  # not cut: the ranking holds every document retrieved
        return n, "eq"
    exact = EXACT_COUNTS.get(method)
    if exact is not None:
        return max(n, exact(ranking, index, tokens)), "eq"
    # BOW-FD: every retrieved document is a candidate of some sentence
    candidates = ranking.info.get("candidates")
    if isinstance(candidates, list) and sum(candidates) <= n:
        return n, "eq"
    return n, "gte"


def run_search(
    req: SearchRequest,
    service: QueryService,
    bundle: ModelBundle,
    index: InvertedIndex,
    settings: Settings,
) -> SearchResponse:
    t0 = time.perf_counter()
    decoded = service.decode(bundle, req.query)
    params: dict[str, Any] = {"nbest": settings.nbest_psq} if req.method == "psq" else {}
    scorer = service.scorer(req.method, index, bundle, **params)
    depth = req.offset + req.k
    t1 = time.perf_counter()
    with decoded.lock:
        ranking = scorer.rank(decoded.query, depth, explain=req.explain)
        translation = one_best(decoded.query)
        tokens = [t for s in translation for t in s]
        query_terms: Iterable[str] = tokens if req.method == "dt" else forest_terms(decoded.query)
    total, relation = count_retrieved(req.method, ranking, depth, index, tokens)
    default_terms = weighted_terms(index, query_terms)
    results: list[SearchHit] = []
    for hit in ranking.hits[req.offset : depth]:
        doc = index.doc(hit.docno)
        terms = default_terms
        if hit.explanation is not None:
            terms = weighted_terms(index, explanation_terms(hit.explanation))
        results.append(
            SearchHit(
                id=hit.doc_id,
                title=doc.title,
                score=hit.score,
                snippet=make_snippet(doc.text, terms),
                explanation=hit.explanation,
            )
        )
    t2 = time.perf_counter()
    return SearchResponse(
        results=results,
        total=total,
        total_relation=relation,
        translation=" ".join(" ".join(s) for s in translation),
        signature=ranking.signature,
        **decoded.response_fields(t0, t1, t2),
    )


@router.post("/search", response_model=SearchResponse)
def search(
    req: SearchRequest,
    service: ServiceDep,
    resources: ResourcesDep,
    index: DocIndexDep,
    settings: SettingsDep,
) -> SearchResponse:
    """Search the English documents with a German or Chinese query."""
    service.check_text(req.query, "query")
    bundle = service.bundle(resources.models, req.lang)
    if req.k > settings.max_k or req.offset + req.k > settings.ranking_depth:
        raise InvalidInputError(
            f"k={req.k}, offset={req.offset}: k must be at most {settings.max_k} and "
            f"offset + k at most {settings.ranking_depth}"
        )
    result: SearchResponse = service.run(lambda: run_search(req, service, bundle, index, settings))
    return result
