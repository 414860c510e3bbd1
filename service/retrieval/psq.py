"""Probabilistic structured queries (PSQ) from n-best derivations (Hieber & Riezler 2015, §5;
Darwish & Oard 2003; Ture, Lin & Oard 2012).

The PSQ baseline of Hieber & Riezler 2015, §5 ("Data and Systems", λ = 0.4, L = 0, C = 1, n = 1000)
turns the query into one *structured* term per source word ``f``: a distribution over English words.

1. **n-best probabilities** (Ture et al. 2012). The ``n`` best derivations of each sentence's
   +LM forest get posteriors ``p_k = softmax(score_k)`` over the list. Each derivation's word
   alignment comes from its rules' alignments (:mod:`service.retrieval.links`). A source
   token aligned to ``m`` target tokens in derivation ``k`` gives each of them ``p_k / m``; a
   token aligned to nothing contributes nothing from that derivation. ``Pr_nbest(e|f)`` is the
   mean of these distributions over the occurrences of ``f`` in the query, so
   ``Σ_e Pr_nbest(e|f) ≤ 1`` (equality when ``f`` is aligned in every derivation).
2. **Interpolation** with the bundle's lexical table (NULL excluded):
   ``Pr(e|f) = λ·Pr_nbest(e|f) + (1 − λ)·Pr_lex(e|f)``. *Our choice:* when only one of the
   two knows ``f`` at all (no n-best link, or no lexical entry), that one is used alone; a
   source word unknown to the grammar is passed through by the decoder and so linked to
   itself, which lets an untranslated name or number match documents that contain it. Words
   known to neither are dropped.
3. **Pruning**: translations with ``Pr < L`` are dropped; of the rest, the most probable are
   kept (ties alphabetical) until their cumulative probability reaches ``C``. The kept
   probabilities are not renormalised, so they still sum to at most 1.
4. **BM25 with expected counts** (Darwish & Oard 2003):
   ``tf(f, d) = Σ_e Pr(e|f)·tf(e, d)``, ``df(f) = Σ_e Pr(e|f)·df(e)`` and
   ``score(d) = Σ_f qtf(f)·rsj(df(f))·tf(f, d)/(k1·((1 − b) + b·dl/avdl) + tf(f, d))``, the
   index's BM25 (:mod:`service.index.bm25`, with its rsj policy) on expected counts; ``qtf``
   is the number of occurrences of ``f`` in the query (like DT, every occurrence counts).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from service.errors import ConfigurationError, InvalidInputError
from service.forest.kbest import LazyKBest
from service.index.bm25 import rsj, tf_bm25
from service.index.inverted import InvertedIndex, top_k
from service.mt.bundle import ModelBundle
from service.mt.lexical import LexicalTable
from service.retrieval.base import DecodedQuery, Hit, Ranking, Relation, Scorer, register
from service.retrieval.explain import FoundTranslations, PsqExplanation
from service.retrieval.links import AlignedDerivation, RuleLinks, aligned_derivation
from service.retrieval.partials import Method

Distribution = dict[str, float]


def posteriors(scores: Sequence[float]) -> list[float]:
    """softmax(scores): each derivation's probability, normalised over the list."""
    if not scores:
        return []
    top = max(scores)
    exps = [math.exp(s - top) for s in scores]
    z = sum(exps)
    return [x / z for x in exps]


def position_distributions(
    n_source: int, derivations: Sequence[AlignedDerivation]
) -> list[Distribution]:
    """For each source position, the derivation-weighted distribution of its aligned words."""
    post = posteriors([d.score for d in derivations])
    out: list[defaultdict[str, float]] = [defaultdict(float) for _ in range(n_source)]
    for p, d in zip(post, derivations, strict=True):
        aligned: defaultdict[int, list[str]] = defaultdict(list)
        for i, j in d.links:
            aligned[i].append(d.target[j])
        for i, words in aligned.items():
            share = p / len(words)
            for e in words:
                out[i][e] += share
    return [dict(x) for x in out]


def nbest_table(
    sentences: Sequence[tuple[Sequence[str], Sequence[AlignedDerivation]]],
) -> tuple[dict[str, Distribution], dict[str, int]]:
    """``Pr_nbest(e|f)`` for every source word of the query, and its query frequency.

    ``sentences`` pairs each sentence's tokens with its n-best derivations. A word's
    distribution is the mean over its occurrences (an occurrence never aligned counts as an
    empty distribution).
    """
    sums: dict[str, defaultdict[str, float]] = {}
    qtf: dict[str, int] = defaultdict(int)
    for tokens, derivations in sentences:
        for f, dist in zip(tokens, position_distributions(len(tokens), derivations), strict=True):
            qtf[f] += 1
            acc = sums.setdefault(f, defaultdict(float))
            for e, p in dist.items():
                acc[e] += p
    table = {f: {e: p / qtf[f] for e, p in acc.items() if p > 0} for f, acc in sums.items()}
    return table, dict(qtf)


def interpolate(
    nbest: Mapping[str, float], lexical: Mapping[str, float], lam: float
) -> Distribution:
    """λ·nbest + (1 − λ)·lexical; either alone when the other is empty."""
    if not nbest:
        return dict(lexical)
    if not lexical:
        return dict(nbest)
    out: defaultdict[str, float] = defaultdict(float)
    for e, p in nbest.items():
        out[e] += lam * p
    for e, p in lexical.items():
        out[e] += (1.0 - lam) * p
    return {e: p for e, p in out.items() if p > 0}


def prune(dist: Mapping[str, float], lower: float, cumulative: float) -> Distribution:
    """Drop ``Pr < lower``; keep the most probable until their sum reaches ``cumulative``."""
    kept: Distribution = {}
    total = 0.0
    for e, p in sorted(dist.items(), key=lambda ep: (-ep[1], ep[0])):
        if p < lower or p <= 0:
            break
        if total >= cumulative:
            break
        kept[e] = p
        total += p
    return kept


def lexical_distribution(lexical: LexicalTable, f: str) -> Distribution:
    """``w(e|f)`` of the lexical table without the NULL word."""
    return {e: p for e, p in lexical.translations_of(f) if e is not None and p > 0}


@dataclass(frozen=True)
class StructuredTerm:
    """One source word of the query: its query frequency and pruned translation table."""

    source: str
    qtf: int
    translations: Distribution


def structured_query(
    table: Mapping[str, Distribution],
    qtf: Mapping[str, int],
    lexical: LexicalTable | None,
    lam: float,
    lower: float,
    cumulative: float,
) -> list[StructuredTerm]:
    """Interpolate, prune and keep the source words that still have a translation."""
    out: list[StructuredTerm] = []
    for f in qtf:
        lex = lexical_distribution(lexical, f) if lexical is not None else {}
        dist = prune(interpolate(table.get(f, {}), lex, lam), lower, cumulative)
        if dist:
            out.append(StructuredTerm(f, qtf[f], dist))
    return out


def psq_scores(
    index: InvertedIndex, terms: Sequence[StructuredTerm]
) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int32]]:
    """Dense PSQ scores over the index and the sorted documents reached by some term."""
    n = index.n_docs
    norms = index.length_norms
    scores = np.zeros(n, dtype=np.float64)
    reached = np.zeros(n, dtype=np.bool_)
    for term in terms:
        etf = np.zeros(n, dtype=np.float64)
        edf = 0.0
        touched: list[npt.NDArray[np.int32]] = []
        for e, p in term.translations.items():
            df = index.collection_df(e)
            if df == 0:
                continue
            edf += p * float(df)
            tid = index.term_id(e)
            if tid is None:  # a segment without the term (the collection has it)
                continue
            post = index.postings(tid)
            if len(post.docs):
                etf[post.docs] += p * post.tfs.astype(np.float64)
                touched.append(post.docs)
        if edf <= 0 or not touched:
            continue
        w = float(rsj(edf, index.collection_docs, index.rsj_policy))
        if w == 0:
            continue
        docs = np.unique(np.concatenate(touched))
        scores[docs] += term.qtf * w * tf_bm25(etf[docs], norms[docs])
        reached[docs] = True
    return scores.astype(np.float32), np.flatnonzero(reached).astype(np.int32)


class PsqMethod(Method["ProbabilisticStructuredQuery"]):
    """PSQ: the structured query is built once, from the n-best list."""

    def plan(self, scorer: ProbabilisticStructuredQuery, query: DecodedQuery) -> Any:
        return scorer.structured(query)

    def ranking(
        self,
        scorer: ProbabilisticStructuredQuery,
        query: DecodedQuery,
        plan: Any,
        depth: int,
        explain: bool,
    ) -> Ranking:
        hits, info = scorer.rank_structured(plan, depth, explain)
        return Ranking(query.qid, hits, scorer.signature(query), info)


@register("psq")
class ProbabilisticStructuredQuery(Scorer):
    """PSQ over the index with n-best derived and lexical translation probabilities."""

    segments = PsqMethod()  # how it runs over a collection's segments

    configured: ClassVar[Mapping[str, str]] = {"nbest": "nbest_psq"}

    def __init__(
        self,
        index: InvertedIndex,
        *,
        bundle: ModelBundle | None = None,
        lam: float = 0.4,
        lower: float = 0.0,
        cumulative: float = 1.0,
        nbest: int = 1000,
        **params: Any,
    ) -> None:
        if bundle is None:
            raise ConfigurationError("PSQ needs the model bundle (its grammar and lexical table)")
        if not 0.0 <= lam <= 1.0:
            raise InvalidInputError(f"PSQ λ must be in [0, 1], got {lam}")
        if not 0.0 <= lower <= 1.0 or not 0.0 < cumulative <= 1.0:
            raise InvalidInputError(
                f"PSQ thresholds need 0 <= L <= 1 and 0 < C <= 1, got L={lower}, C={cumulative}"
            )
        if nbest < 1:
            raise InvalidInputError(f"PSQ n-best size must be at least 1, got {nbest}")
        super().__init__(index, bundle=bundle, **params)
        self._model: ModelBundle = bundle  # required here
        self.lam, self.lower, self.cumulative, self.nbest = lam, lower, cumulative, nbest
        self._rules = RuleLinks(bundle.grammar)

    def signature_parts(self) -> dict[str, Any]:
        return {"n": self.nbest, "lambda": self.lam, "L": self.lower, "C": self.cumulative}

    def nbest_derivations(self, query: DecodedQuery) -> list[list[AlignedDerivation]]:
        """The ``n`` best derivations of each sentence with their word links."""
        out: list[list[AlignedDerivation]] = []
        for forest in query.forests:
            hg = forest.hypergraph
            extractor = LazyKBest(hg, query.weights)
            derivs: list[AlignedDerivation] = []
            for j in range(self.nbest):
                entry = extractor.entry(j)
                if entry is None:
                    break
                tree = extractor.tree(hg.goal, j)
                derivs.append(aligned_derivation(hg, tree, entry[0], self._rules))
            out.append(derivs)
        return out

    def structured(self, query: DecodedQuery) -> list[StructuredTerm]:
        """The query's structured terms (source word, qtf, pruned Pr(e|f))."""
        derivs = self.nbest_derivations(query)
        table, qtf = nbest_table(list(zip(query.sentences, derivs, strict=True)))
        return structured_query(
            table, qtf, self._model.lexical, self.lam, self.lower, self.cumulative
        )

    def _rank(self, query: DecodedQuery, k: int, explain: bool) -> tuple[list[Hit], dict[str, Any]]:
        return self.rank_structured(self.structured(query), k, explain)

    def rank_structured(
        self, terms: Sequence[StructuredTerm], k: int, explain: bool = False
    ) -> tuple[list[Hit], dict[str, Any]]:
        """The top ``k`` for a structured query (:meth:`structured`: it depends on the query
        and the model only, so a collection builds it once for all its segments)."""
        scores, reached = psq_scores(self.index, terms)
        hits = top_k(scores, reached, k)
        out: list[Hit] = []
        for d, s in zip(hits.docs.tolist(), hits.scores.tolist(), strict=True):
            expl = _explain(self.index, terms, d) if explain else None
            out.append(Hit(d, self.index.doc_id(d), float(s), expl))
        info = {"source_terms": len(terms), "candidates": len(reached)}
        return out, info

    def _retrieved(self, ranking: Ranking, depth: int, query: DecodedQuery) -> tuple[int, Relation]:
        """Exact: PSQ scores every document a weighted term reaches (its candidates)."""
        n = len(ranking.hits)
        return (n, "eq") if n < depth else (max(n, int(ranking.info["candidates"])), "eq")


def _explain(index: InvertedIndex, terms: Sequence[StructuredTerm], docno: int) -> PsqExplanation:
    """Per source word: its translations that occur in the document, with Pr(e|f)."""
    out: list[FoundTranslations] = []
    for term in terms:
        found = tuple(
            (e, round(p, 6)) for e, p in term.translations.items() if index.contains(e, docno)
        )
        if found:
            out.append(FoundTranslations(term.source, found))
    return PsqExplanation(tuple(out))
